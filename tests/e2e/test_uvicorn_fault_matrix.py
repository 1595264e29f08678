"""The fault matrix's proxy rows with a FastAPI app on uvicorn as the backend.

A fault-injecting TCP proxy (asyncio, in a thread) sits between `portico serve` and uvicorn and
alters uvicorn's answers; the Python MCP client makes reads, unkeyed writes and keyed writes.
Each cell checks what the client sees and how many times uvicorn saw the request, against the
same table as tests/fault_matrix.rs (docs/reliability.md, "The fault matrix").
"""

from __future__ import annotations

import asyncio
import socket
import threading
from collections import Counter
from pathlib import Path

import pytest
from fastapi import FastAPI, Request
from mcp import Client
from mcp.shared.exceptions import MCPError

from conftest import _stop, serve
from test_uvicorn_backend import Backend

pytestmark = pytest.mark.anyio

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "gateway"


def echo_app(hits: Counter[str]) -> FastAPI:
    app = FastAPI()

    @app.get("/t/echo/items/{item}")
    async def read(item: str) -> dict[str, str]:
        hits[item] += 1
        return {"path": f"/t/echo/items/{item}", "signature": "sig-ok"}

    @app.post("/t/echo/items")
    async def write(request: Request) -> dict[str, str]:
        name = str((await request.json()).get("name"))
        hits[name] += 1
        return {"path": "/t/echo/items", "name": name, "signature": "sig-ok"}

    return app


class Proxy:
    """Passes portico's bytes to uvicorn; alters uvicorn's answers by `self.fault`."""

    def __init__(self, upstream: str):
        self.upstream = upstream.split(":")
        self.fault = "none"
        self.loop = asyncio.new_event_loop()
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.bind(("127.0.0.1", 0))
        self.address = f"127.0.0.1:{self.sock.getsockname()[1]}"
        threading.Thread(target=self._run, daemon=True).start()

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        server = self.loop.run_until_complete(asyncio.start_server(self._conn, sock=self.sock))
        self.loop.run_until_complete(server.serve_forever())

    async def _conn(self, cr: asyncio.StreamReader, cw: asyncio.StreamWriter) -> None:
        sr, sw = await asyncio.open_connection(self.upstream[0], int(self.upstream[1]))

        async def up() -> None:
            while data := await cr.read(65536):
                sw.write(data)
                await sw.drain()

        pump = asyncio.ensure_future(up())
        try:
            while data := await sr.read(65536):
                fault = self.fault
                if fault == "reset_after_answer":
                    # uvicorn writes the head and the body separately: pass the whole answer.
                    try:
                        while more := await asyncio.wait_for(sr.read(65536), 0.05):
                            data += more
                    except asyncio.TimeoutError:
                        pass
                if fault in ("reset_after_answer", "cut"):
                    cw.write(data if fault == "reset_after_answer" else data[:40])
                    await cw.drain()
                    if fault == "reset_after_answer":
                        await asyncio.sleep(0.03)
                    sock = cw.get_extra_info("socket")
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
                    cw.transport.abort()
                    return
                if fault == "stall":
                    await asyncio.sleep(3)
                    return
                cw.write(data)
                await cw.drain()
        finally:
            pump.cancel()
            sw.close()
            cw.close()


# (fault, kind) -> (what the client sees: None for success or a text in the error, hits)
def expected(fault: str, kind: str) -> tuple[str | None, int]:
    if fault == "none":
        return None, 1
    if fault == "cut":
        return "connection failed", 1
    if fault == "stall":
        return "did not answer within 400 ms", 1
    # reset_after_answer: the next request goes out on the kept-alive connection, this proxy
    # passes it to uvicorn (which applies it), and the reset then loses the answer. Reads and
    # keyed writes are sent once more on a fresh connection (two hits: the key is what lets a
    # real backend deduplicate the second); an unkeyed write is reported as unknown, and it was
    # in fact applied once.
    if kind == "write":
        return "may or may not have been applied", 1
    return None, 2


async def one_call(client: Client, kind: str, name: str) -> tuple[bool, str]:
    """(failed, text): a tool error or a JSON-RPC error (usp's `service_unavailable` and
    `server_error` are JSON-RPC errors, with portico's text in `data.content`)."""
    try:
        if kind == "read":
            result = await client.call_tool("echo_get", {"id": name})
        else:
            args: dict = {"name": name}
            if kind == "keyed":
                args["_meta"] = {"usp": {"profile": "https://agent.example/p.json", "idempotency_key": f"key-{name}"}}
            result = await client.call_tool("echo_post", args)
    except MCPError as e:
        return True, f"{e} {e.data}"
    return result.is_error, " ".join(getattr(b, "text", "") for b in result.content)


async def test_the_fault_matrix_with_uvicorn_behind_the_proxy(tmp_path: Path) -> None:
    hits: Counter[str] = Counter()
    with Backend(echo_app(hits)) as backend:
        proxy = Proxy(backend.address)
        mapping = (FIXTURES / "usp.yaml").read_text().replace("127.0.0.1:9101", proxy.address)
        (tmp_path / "usp.yaml").write_text(mapping)
        (tmp_path / "test.openrpc.json").write_text((FIXTURES / "test.openrpc.json").read_text())
        proc, mcp_url = serve(tmp_path, tmp_path / "usp.yaml")
        problems = []
        try:
            async with Client(mcp_url, mode="auto", read_timeout_seconds=30) as client:
                for i, fault in enumerate(["none", "cut", "stall", "reset_after_answer"]):
                    for kind in ["read", "write", "keyed"]:
                        failed, text = await one_call(client, "read", f"warm-{i}-{kind}")
                        assert not failed, text
                        name = f"cell-{i}-{kind}"
                        if fault == "reset_after_answer":
                            proxy.fault = fault
                            failed, text = await one_call(client, "read", f"before-{i}-{kind}")
                            proxy.fault = "none"
                            assert not failed, text
                            failed, text = await one_call(client, kind, name)
                        else:
                            proxy.fault = fault
                            failed, text = await one_call(client, kind, name)
                            proxy.fault = "none"
                        want_error, want_hits = expected(fault, kind)
                        ok = not failed if want_error is None else failed and want_error in text
                        if not ok or hits[name] != want_hits:
                            problems.append(
                                f"{fault} {kind}: failed={failed} {text[:160]!r}, "
                                f"{hits[name]} hit(s); expected {want_error or 'success'} with {want_hits}"
                            )
        finally:
            _stop(proc)
        assert problems == [], "\n".join(problems)
