"""A USP `_meta` mistake as the Python SDK (`mcp` 2.3.0) shows it: the exception's text is the
JSON-RPC error message, so the message itself must say where the metadata was expected, while
the code (-32600) and `data` (`code: invalid_request`, `content`) stay as USP's MCP binding
prescribes. Against `portico demo` (the USP spa), in both protocol eras.
"""

from __future__ import annotations

import sys
import uuid
from typing import Any

import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError

if sys.version_info < (3, 11):  # pragma: no cover - anyio pulls in the backport there
    from exceptiongroup import BaseExceptionGroup

pytestmark = pytest.mark.anyio

PROFILE = "https://agent.example/profiles/meta.json"
WHERE = (
    "(USP metadata is a tool argument, not the request's params._meta, which an SDK's `meta=` option fills)"
)
BOOKING = {
    "service_id": "SAUNA-30",
    "slot_id": "SAUNA-30@2026-12-09T14:00",
    "buyer": {"first_name": "Ann", "email": "ann@example.com"},
}


async def refused(url: str, mode: str, arguments: dict[str, Any], meta: dict[str, Any] | None = None) -> MCPError:
    """The MCPError `usp_bookings_create` raises with these arguments (and request `meta`)."""
    try:
        async with Client(url, mode=mode, read_timeout_seconds=30) as client:
            with pytest.raises(MCPError) as excinfo:
                await client.call_tool("usp_bookings_create", arguments, meta=meta)
            return excinfo.value
    except BaseExceptionGroup as group:  # the client's task group wraps a failed assert
        raise group.exceptions[0] from None


def assert_usp_error(e: MCPError, why: str) -> None:
    assert e.code == -32600, e.error
    assert str(e) == f"invalid_request: {why}", str(e)
    assert e.data == {"code": "invalid_request", "content": why}, e.data


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_metadata_in_the_requests_meta_is_explained_in_the_exception(mcp_url: str, mode: str) -> None:
    usp = {"usp": {"profile": PROFILE, "idempotency_key": str(uuid.uuid4())}}
    e = await refused(mcp_url, mode, BOOKING, meta=usp)
    assert_usp_error(
        e, f"`_meta.usp` is required for `usp_bookings_create`; expected at params.arguments._meta.usp {WHERE}"
    )


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_a_misspelt_member_gets_a_did_you_mean(mcp_url: str, mode: str) -> None:
    args = {**BOOKING, "_meta": {"usp": {"profile": PROFILE, "idempotencyKey": str(uuid.uuid4())}}}
    e = await refused(mcp_url, mode, args)
    assert_usp_error(
        e,
        "`_meta.usp` of `usp_bookings_create` has no member `idempotencyKey`; did you mean `idempotency_key`? "
        f"expected at params.arguments._meta.usp {WHERE}",
    )


async def test_a_missing_profile_names_its_place(mcp_url: str) -> None:
    e = await refused(mcp_url, "auto", {**BOOKING, "_meta": {"usp": {}}})
    assert_usp_error(
        e,
        f"`_meta.usp.profile` is required for `usp_bookings_create`; expected at params.arguments._meta.usp.profile {WHERE}",
    )
