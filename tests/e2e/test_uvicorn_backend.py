"""A real FastAPI app on uvicorn as portico's backend, driven through the Python MCP client.

An unhandled exception in a FastAPI route is answered 500 by Starlette's error middleware, which
re-raises it; uvicorn then closes that keep-alive connection without having said `Connection:
close`. Here an outer ASGI layer holds the exception 30 ms before uvicorn sees it (as an error
reporter flushing its event does), and each order takes 100 ms to write: a write portico sends
on the 500's connection is cut off by that close before its answer. 20 rounds of (500, write)
must give 20 successful writes, each seen once by the backend.
"""

from __future__ import annotations

import asyncio
import socket
import threading
from collections import Counter
from pathlib import Path

import pytest
import uvicorn
from fastapi import FastAPI, Request
from mcp import Client

from conftest import _stop, serve

pytestmark = pytest.mark.anyio

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "gateway"
ROUNDS = 20


def shop(hits: Counter[str]):  # noqa: ANN201 - an ASGI callable
    app = FastAPI()

    @app.post("/t/echo/items")
    async def create(request: Request) -> dict[str, str]:
        body = await request.json()
        name = str(body.get("name"))
        hits[name] += 1
        if name == "boom":
            raise RuntimeError("an unhandled bug in the shop")
        await asyncio.sleep(0.1)  # the order's database write
        return {"name": name, "signature": "sig-ok"}

    async def slow_error_reporter(scope, receive, send) -> None:  # noqa: ANN001 - ASGI
        try:
            await app(scope, receive, send)
        except Exception:
            await asyncio.sleep(0.03)
            raise

    return slow_error_reporter


class Backend:
    """uvicorn on a socket bound to 127.0.0.1, in a thread of its own."""

    def __init__(self, app):  # noqa: ANN001 - an ASGI callable
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.bind(("127.0.0.1", 0))
        self.address = f"127.0.0.1:{self.sock.getsockname()[1]}"
        config = uvicorn.Config(app, log_level="critical", http="h11", lifespan="off")
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=lambda: asyncio.run(self.server.serve(sockets=[self.sock])), daemon=True)

    def __enter__(self) -> Backend:
        self.thread.start()
        for _ in range(300):
            if self.server.started:
                return self
            threading.Event().wait(0.05)
        pytest.fail("uvicorn did not start", pytrace=False)

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)
        self.sock.close()


async def test_writes_after_an_unhandled_exception_500_all_succeed(tmp_path: Path) -> None:
    hits: Counter[str] = Counter()
    with Backend(shop(hits)) as backend:
        mapping = (FIXTURES / "plain.yaml").read_text().replace("127.0.0.1:9101", backend.address)
        mapping = mapping.replace("  timeout: 400ms\n", "  timeout: 10s\n", 1)
        (tmp_path / "plain.yaml").write_text(mapping)
        (tmp_path / "test.openrpc.json").write_text((FIXTURES / "test.openrpc.json").read_text())
        proc, mcp_url = serve(tmp_path, tmp_path / "plain.yaml")
        try:
            failed = []
            async with Client(mcp_url, mode="auto", read_timeout_seconds=30) as client:
                for i in range(ROUNDS):
                    boom = await client.call_tool("echo_post", {"name": "boom"})
                    assert boom.is_error, f"round {i}: the backend's 500 is a tool error"
                    write = await client.call_tool("echo_post", {"name": f"order-{i}"})
                    if write.is_error:
                        failed.append((i, write.content))
            assert failed == [], f"{len(failed)} of {ROUNDS} writes failed: {failed[:3]}"
            assert hits["boom"] == ROUNDS
            for i in range(ROUNDS):
                assert hits[f"order-{i}"] == 1, f"order-{i} reached the backend {hits[f'order-{i}']} times"
        finally:
            _stop(proc)
