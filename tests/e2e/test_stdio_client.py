"""`portico stdio` spawned by the real Python `mcp` 2.3.0 stdio client, in `auto` (2026-07-28)
and `legacy` (2025-11-25) modes, over the spa mapping pointed at a running demo's backend.

The client reads every stdout line as JSON-RPC, so any stray output there fails the test; logs
must go to stderr. The mapping is copied to a temporary folder with the demo backend's address
(the repository files are never modified).
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters

from conftest import Demo, portico_bin

if sys.version_info < (3, 11):  # pragma: no cover - anyio pulls in the backport there
    from exceptiongroup import BaseExceptionGroup

pytestmark = pytest.mark.anyio

ROOT = Path(__file__).resolve().parents[2]
NEGOTIATED = {"auto": "2026-07-28", "legacy": "2025-11-25"}
SPA_TOOLS = {
    "usp_services_list",
    "usp_services_get",
    "usp_availability_query",
    "usp_bookings_create",
    "usp_bookings_get",
    "usp_bookings_cancel",
    "usp_bookings_reschedule",
}


def spa_mapping(backend_url: str, folder: Path) -> Path:
    """demo-spa.yaml with the demo backend's address and absolute OpenRPC and webhook-key paths."""
    text = (ROOT / "mappings" / "demo-spa.yaml").read_text()
    host = backend_url.removeprefix("http://").rstrip("/")
    text = (
        text.replace("127.0.0.1:9101", host)
        .replace("openrpc: ../openrpc/usp.openrpc.json", f"openrpc: {ROOT / 'openrpc' / 'usp.openrpc.json'}")
        .replace("jwks: demo-webhook-keys.json", f"jwks: {ROOT / 'mappings' / 'demo-webhook-keys.json'}")
    )
    path = folder / "spa.yaml"
    path.write_text(text)
    return path


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_stdio_lists_tools_and_calls_through_to_the_backend(demo: Demo, mode: str) -> None:
    assert demo.backend_url, "the demo printed no backend: line"
    with tempfile.TemporaryDirectory() as tmp:
        mapping = spa_mapping(demo.backend_url, Path(tmp))
        params = StdioServerParameters(command=str(portico_bin()), args=["stdio", str(mapping)])
        try:
            async with Client(params, mode=mode, read_timeout_seconds=30) as client:
                assert client.protocol_version == NEGOTIATED[mode]
                tools = {t.name for t in (await client.list_tools()).tools}
                assert tools == SPA_TOOLS
                result = await client.call_tool("usp_services_list", {})
                assert not result.is_error, result
                services = [s["id"] for s in result.structured_content["services"]]
                assert services == ["MASSAGE-60", "FACIAL-45", "SAUNA-30"]
                assert result.content[0].text.startswith("3 services:")
        except BaseExceptionGroup as group:  # the client's task group wraps assertion errors
            if len(group.exceptions) == 1:
                raise group.exceptions[0] from None
            raise
