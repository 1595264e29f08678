"""The reverse path against an MCP server nobody here wrote: the Python `mcp` 2.3.0 `MCPServer`
over Streamable HTTP (dual-era, on 127.0.0.1), with `portico facade` in front of it as a child
process. REST in, MCP tools out; the facade must pick the 2026-07-28 era on its own.

A missing binary, a server or facade that does not come up, is a failure, never a skip.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import tempfile
import textwrap
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from conftest import log_with, portico_bin

SERVER = textwrap.dedent(
    '''
    import sys
    from mcp.server.mcpserver import MCPServer

    app = MCPServer("facade-e2e")

    @app.tool()
    def echo(booking_id: str, reason: str = "", party_size: int = 1) -> dict:
        """Echoes its arguments."""
        return {"booking_id": booking_id, "reason": reason, "party_size": party_size}

    @app.tool()
    def fail() -> dict:
        """Always fails."""
        raise ValueError("the tool fell over")

    app.run(transport="streamable-http", host="127.0.0.1", port=int(sys.argv[1]))
    '''
)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_listening(port: int, proc: subprocess.Popen, what: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"{what} exited with status {proc.returncode}", pytrace=False)
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.1)
    pytest.fail(f"{what} did not listen on 127.0.0.1:{port} within {timeout:.0f}s", pytrace=False)


def rest(method: str, url: str, body: object | None = None) -> tuple[int, dict, object]:
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method=method)
    if data is not None:
        req.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, dict(r.headers), json.loads(r.read() or b"null")
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers), json.loads(e.read() or b"null")


@pytest.fixture
def facade_on_python_server():
    work = Path(tempfile.mkdtemp(prefix="portico-facade-py-"))
    (work / "server.py").write_text(SERVER)
    mcp_port, rest_port = free_port(), free_port()
    server = subprocess.Popen(
        [sys.executable, str(work / "server.py"), str(mcp_port)],
        stdout=subprocess.DEVNULL,
        stderr=open(work / "server.err", "w"),  # noqa: SIM115 - the child keeps it
    )
    facade = None
    try:
        wait_listening(mcp_port, server, "the Python MCP server")
        mapping = work / "facade.yaml"
        mapping.write_text(
            textwrap.dedent(
                f"""\
                facade: python
                binding: plain
                upstream:
                  url: http://127.0.0.1:{mcp_port}/mcp
                  timeout: 10s
                tool_error_status: 422
                routes:
                  POST /echo/{{booking_id}}: echo
                  POST /fail: fail
                  POST /missing: no_such_tool
                """
            )
        )
        err = open(work / "facade.err", "w")  # noqa: SIM115 - the child keeps it
        facade = subprocess.Popen(
            [str(portico_bin()), "facade", str(mapping), "--listen", f"127.0.0.1:{rest_port}"],
            stdout=subprocess.DEVNULL,
            stderr=err,
        )
        wait_listening(rest_port, facade, "portico facade")
        yield f"http://127.0.0.1:{rest_port}", work / "facade.err"
    finally:
        for p in (facade, server):
            if p is not None and p.poll() is None:
                p.terminate()
                try:
                    p.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    p.kill()


def test_rest_reaches_python_mcp_tools_at_2026_07_28(facade_on_python_server):
    url, facade_err = facade_on_python_server
    status, headers, body = rest("POST", f"{url}/echo/b%2F1?party_size=3", {"reason": "ill"})
    assert status == 200, body
    assert headers["content-type"] == "application/json"
    # Path id percent-decoded, body flattened; the query stays a string on an explicit route,
    # and the Python server's own validation coerces it.
    assert body == {"booking_id": "b/1", "reason": "ill", "party_size": 3}
    # The facade chose the stateless era with this dual-era server.
    log = log_with(facade_err, '"version":"2026-07-28"')
    assert '"version":"2026-07-28"' in log, log[-2000:]

    # A tool that raises: an isError result, answered with the configured status.
    status, headers, body = rest("POST", f"{url}/fail", {})
    assert status == 422, body
    assert headers["content-type"] == "application/problem+json"
    # `detail` is the tool result's text (the SDK hides the exception's own message).
    assert body["detail"] == "Error executing tool fail", body

    # The Python SDK answers an unknown tool with an isError result too (not -32602).
    status, _, body = rest("POST", f"{url}/missing", {})
    assert status == 422, body
    assert "no_such_tool" in body["detail"]

    # The facade keeps serving; a route it does not have is a 404 problem.
    status, _, body = rest("POST", f"{url}/echo/b2", {})
    assert status == 200 and body["booking_id"] == "b2", body
    status, headers, body = rest("GET", f"{url}/elsewhere")
    assert status == 404 and headers["content-type"] == "application/problem+json", body
