"""portico's demo driven through the real Python MCP client (`mcp` 2.3.0, `mcp.Client`).

Every test runs twice: `mode="auto"` (server/discover probe, must settle on the stateless
2026-07-28 era) and `mode="legacy"` (initialize handshake, 2025-11-25). All tests in this module
share one `portico demo` process (see conftest.py); the demo backend keeps state, so every test
and every mode books its own services / dates / rooms, and no test depends on another's effects.

Every successful tool result (`is_error` false, business outcomes included) is validated against
the tool's `outputSchema` from tools/list with `jsonschema.Draft202012Validator`.
"""

from __future__ import annotations

import json
import re
import sys
import urllib.request
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
from jsonschema import Draft202012Validator
from jsonschema.exceptions import best_match
from mcp import Client
from mcp.shared.exceptions import MCPError

if sys.version_info < (3, 11):  # pragma: no cover - anyio pulls in the backport there
    from exceptiongroup import BaseExceptionGroup

pytestmark = pytest.mark.anyio

MODES = ["auto", "legacy"]
NEGOTIATED = {"auto": "2026-07-28", "legacy": "2025-11-25"}

USP_PROFILE = "https://agent.example/profiles/a.json"
UCP_PROFILE = "https://platform.example/p.json"
USP_VERSION = "2026-08-20"

EXPECTED_TOOLS = {
    "usp_services_list",
    "usp_services_get",
    "usp_availability_query",
    "usp_bookings_create",
    "usp_bookings_get",
    "usp_bookings_cancel",
    "usp_bookings_reschedule",
    "create_booking_session",
    "get_booking_session",
    "update_booking_session",
    "complete_booking_session",
    "cancel_booking_session",
    "ask_business",
    "export_bookings_report",
}

SPA_SERVICES = {
    # id: (name, minutes, price in minor units)
    "MASSAGE-60": ("Deep tissue massage", 60, 9000),
    "FACIAL-45": (None, 45, 7000),
    "SAUNA-30": (None, 30, 2500),
}
DAILY_TIMES = ["09:00", "11:00", "14:00", "16:00"]
PRE_TAKEN_SLOT = "MASSAGE-60@2026-12-01T11:00"


# --------------------------------------------------------------------------------------------
# helpers


def _sole_exception(group: BaseException) -> BaseException | None:
    """The one leaf exception inside (nested) single-member exception groups, else None."""
    while isinstance(group, BaseExceptionGroup):
        if len(group.exceptions) != 1:
            return None
        group = group.exceptions[0]
    return group


@asynccontextmanager
async def connect(url: str, mode: str) -> AsyncIterator[Client]:
    """A connected `mcp.Client`, with the negotiated protocol version checked.

    The client's task group wraps anything raised in the `async with` body (a failed assert, an
    MCPError) in an ExceptionGroup; a lone exception is re-raised bare so failures read plainly."""
    try:
        async with Client(url, mode=mode, read_timeout_seconds=30) as client:
            assert client.protocol_version == NEGOTIATED[mode], (
                f"mode={mode!r} negotiated {client.protocol_version!r}, expected {NEGOTIATED[mode]!r}"
            )
            yield client
    except BaseExceptionGroup as group:
        inner = _sole_exception(group)
        if inner is None:
            raise
        raise inner from None


async def list_all_tools(client: Client) -> dict[str, Any]:
    """tools/list, following next_cursor to the end; returns the tools by name."""
    tools: dict[str, Any] = {}
    cursor: str | None = None
    for _ in range(50):
        page = await client.list_tools(cursor=cursor)
        for tool in page.tools:
            assert tool.name not in tools, f"tool {tool.name!r} listed twice"
            tools[tool.name] = tool
        cursor = page.next_cursor
        if cursor is None:
            return tools
    pytest.fail("tools/list kept returning next_cursor after 50 pages")


def assert_valid(schema: dict[str, Any], instance: Any, what: str) -> None:
    Draft202012Validator.check_schema(schema)
    error = best_match(Draft202012Validator(schema).iter_errors(instance))
    if error is not None:
        pytest.fail(f"{what} does not match its outputSchema: {error.message} at {list(error.absolute_path)}")


class Session:
    """A connected client plus the tool listing, so every result can be schema-checked."""

    def __init__(self, client: Client, tools: dict[str, Any]):
        self.client = client
        self.tools = tools

    async def call(self, name: str, arguments: dict[str, Any]) -> Any:
        """Calls a tool expecting a result (not a JSON-RPC error) with is_error false; validates
        structured_content against the tool's outputSchema and returns it."""
        result = await self.client.call_tool(name, arguments)
        assert result.is_error is False, f"{name} returned is_error=true: {result.content}"
        sc = result.structured_content
        assert isinstance(sc, dict), f"{name} returned no structured content: {result}"
        schema = self.tools[name].output_schema
        assert schema is not None, f"{name} has no outputSchema"
        assert_valid(schema, sc, f"{name} structured_content")
        # Both bindings want a human-readable text block next to the structured content.
        assert result.content, f"{name} returned no content blocks"
        assert result.content[0].type == "text" and result.content[0].text.strip()
        return sc


@asynccontextmanager
async def session(url: str, mode: str) -> AsyncIterator[Session]:
    async with connect(url, mode) as client:
        yield Session(client, await list_all_tools(client))


def usp_meta(*, idempotent: bool = False) -> dict[str, Any]:
    """USP `_meta` tool argument: the profile, plus an idempotency key for state-modifying calls
    (read tools' schemas do not allow one)."""
    usp: dict[str, Any] = {"profile": USP_PROFILE}
    if idempotent:
        usp["idempotency_key"] = str(uuid.uuid4())
    return {"usp": usp}


def ucp_meta(*, idempotent: bool = False) -> dict[str, Any]:
    meta: dict[str, Any] = {"ucp-agent": {"profile": UCP_PROFILE}}
    if idempotent:
        meta["idempotency-key"] = str(uuid.uuid4())
    return meta


def assert_usp_envelope(sc: dict[str, Any]) -> None:
    assert sc["usp"]["version"] == USP_VERSION


def lisbon_offset(date: str) -> str:
    """Europe/Lisbon's UTC offset inside the demo's calendar (DST starts 2027-03-28)."""
    return "+01:00" if date >= "2027-03-28" else "+00:00"


# --------------------------------------------------------------------------------------------
# discovery


@pytest.mark.parametrize("mode", MODES)
async def test_negotiates_expected_protocol_version(mcp_url: str, mode: str) -> None:
    async with connect(mcp_url, mode) as client:
        assert client.protocol_version == NEGOTIATED[mode]
        assert client.server_capabilities.tools is not None


@pytest.mark.parametrize("mode", MODES)
async def test_lists_all_tools_with_descriptions_and_schemas(mcp_url: str, mode: str) -> None:
    async with connect(mcp_url, mode) as client:
        tools = await list_all_tools(client)
    assert set(tools) == EXPECTED_TOOLS, f"missing: {EXPECTED_TOOLS - set(tools)}, extra: {set(tools) - EXPECTED_TOOLS}"
    for name, tool in tools.items():
        assert isinstance(tool.description, str) and tool.description.strip(), f"{name} has no description"
        assert tool.input_schema.get("type") == "object", f"{name} inputSchema root is not type object"
        Draft202012Validator.check_schema(tool.input_schema)
        assert isinstance(tool.output_schema, dict), f"{name} has no outputSchema"
        Draft202012Validator.check_schema(tool.output_schema)


# --------------------------------------------------------------------------------------------
# USP (Seaside Spa)

# Per mode: (service, date). Distinct per mode and from every other test, so the flow always sees
# all four daily openings free. 2027-03-29 lies after Lisbon's switch to summer time.
USP_FLOW = {"auto": ("FACIAL-45", "2027-03-29"), "legacy": ("MASSAGE-60", "2026-12-02")}


@pytest.mark.parametrize("mode", MODES)
async def test_usp_booking_flow(mcp_url: str, mode: str) -> None:
    service_id, date = USP_FLOW[mode]
    name, minutes, price = SPA_SERVICES[service_id]
    offset = lisbon_offset(date)
    all_slots = [f"{service_id}@{date}T{t}" for t in DAILY_TIMES]
    slot_id = all_slots[2]  # 14:00

    async with session(mcp_url, mode) as s:
        # services list
        sc = await s.call("usp_services_list", {"_meta": usp_meta()})
        assert_usp_envelope(sc)
        assert sc["messages"] == []
        services = {svc["id"]: svc for svc in sc["services"]}
        assert set(services) == set(SPA_SERVICES)
        for sid, (sname, smin, sprice) in SPA_SERVICES.items():
            if sname is not None:
                assert services[sid]["name"] == sname
            assert services[sid]["duration"]["fixed"] == f"PT{smin}M"
            assert services[sid]["pricing"]["amount"] == sprice
            assert services[sid]["pricing"]["currency"] == "EUR"

        # availability: all four openings of the day are free
        query = {"service_id": service_id, "start_date": date, "end_date": date, "_meta": usp_meta()}
        sc = await s.call("usp_availability_query", query)
        assert_usp_envelope(sc)
        assert sc["messages"] == []
        assert sc["service_id"] == service_id
        assert [slot["id"] for slot in sc["slots"]] == all_slots
        slot = sc["slots"][2]
        assert slot["service_id"] == service_id
        assert slot["state"] == "available"
        assert slot["start"] == f"{date}T14:00:00{offset}"
        end_minute = 14 * 60 + minutes
        assert slot["end"] == f"{date}T{end_minute // 60:02d}:{end_minute % 60:02d}:00{offset}"
        assert slot["duration"] == f"PT{minutes}M"

        # create
        buyer = {"first_name": "Ana", "last_name": f"Silva {mode}", "email": f"ana.{mode}@example.com"}
        sc = await s.call(
            "usp_bookings_create",
            {"service_id": service_id, "slot_id": slot_id, "buyer": buyer, "_meta": usp_meta(idempotent=True)},
        )
        assert_usp_envelope(sc)
        assert sc["messages"] == []
        booking = sc["booking"]
        booking_id = booking["id"]
        assert re.fullmatch(r"A-\d{4,}", booking_id), booking_id
        assert booking["service_id"] == service_id
        assert booking["slot"]["id"] == slot_id
        assert booking["slot"]["start"] == slot["start"]
        assert booking["slot"]["end"] == slot["end"]
        assert booking["status"] == "confirmed"
        assert booking["buyer"]["first_name"] == "Ana"
        assert booking["buyer"]["last_name"] == f"Silva {mode}"
        assert booking["buyer"]["email"] == f"ana.{mode}@example.com"
        if name is not None:
            assert booking["service_name"] == name

        # the booked opening is no longer offered
        sc = await s.call("usp_availability_query", query)
        assert [slot["id"] for slot in sc["slots"]] == [x for x in all_slots if x != slot_id]

        # get
        sc = await s.call("usp_bookings_get", {"booking_id": booking_id, "_meta": usp_meta()})
        assert_usp_envelope(sc)
        assert sc["messages"] == []
        assert sc["booking"]["id"] == booking_id
        assert sc["booking"]["slot"]["id"] == slot_id
        assert sc["booking"]["status"] == "confirmed"

        # cancel
        sc = await s.call(
            "usp_bookings_cancel",
            {"booking_id": booking_id, "reason": "plans changed", "_meta": usp_meta(idempotent=True)},
        )
        assert_usp_envelope(sc)
        assert sc["messages"] == []
        assert sc["booking"]["id"] == booking_id
        assert sc["booking"]["status"] == "canceled"

        # get shows canceled
        sc = await s.call("usp_bookings_get", {"booking_id": booking_id, "_meta": usp_meta()})
        assert sc["messages"] == []
        assert sc["booking"]["id"] == booking_id
        assert sc["booking"]["status"] == "canceled"

        # canceling frees the opening again
        sc = await s.call("usp_availability_query", query)
        assert [slot["id"] for slot in sc["slots"]] == all_slots


@pytest.mark.parametrize("mode", MODES)
async def test_usp_taken_slot_is_a_business_outcome(mcp_url: str, mode: str) -> None:
    async with session(mcp_url, mode) as s:
        # the seeded taken opening is not offered ...
        sc = await s.call(
            "usp_availability_query",
            {"service_id": "MASSAGE-60", "start_date": "2026-12-01", "end_date": "2026-12-01", "_meta": usp_meta()},
        )
        assert PRE_TAKEN_SLOT not in [slot["id"] for slot in sc["slots"]]

        # ... and booking it is a result with messages[], not a JSON-RPC error
        result = await s.client.call_tool(
            "usp_bookings_create",
            {
                "service_id": "MASSAGE-60",
                "slot_id": PRE_TAKEN_SLOT,
                "buyer": {"first_name": "Bruno", "email": f"bruno.{mode}@example.com"},
                "_meta": usp_meta(idempotent=True),
            },
        )
        assert result.is_error is False
        sc = result.structured_content
        assert isinstance(sc, dict)
        assert_valid(s.tools["usp_bookings_create"].output_schema, sc, "usp_bookings_create business outcome")
        assert_usp_envelope(sc)
        assert "booking" not in sc
        assert sc["messages"][0]["code"] == "slot_unavailable"
        assert sc["messages"][0]["type"] == "error"
        assert sc["messages"][0]["content"]
        assert result.content and result.content[0].type == "text"


@pytest.mark.parametrize("mode", MODES)
async def test_usp_create_without_buyer_is_a_protocol_error(mcp_url: str, mode: str) -> None:
    # A slot no other test touches; the failed call must not book it.
    date = {"auto": "2027-02-03", "legacy": "2027-02-04"}[mode]
    slot_id = f"SAUNA-30@{date}T09:00"
    async with session(mcp_url, mode) as s:
        with pytest.raises(MCPError) as excinfo:
            await s.client.call_tool(
                "usp_bookings_create",
                {"service_id": "SAUNA-30", "slot_id": slot_id, "_meta": usp_meta(idempotent=True)},
            )
        assert excinfo.value.code == -32600, f"{excinfo.value.code} {excinfo.value.message} {excinfo.value.data}"
        assert "buyer" in str(excinfo.value.data)

        sc = await s.call(
            "usp_availability_query",
            {"service_id": "SAUNA-30", "start_date": date, "end_date": date, "_meta": usp_meta()},
        )
        assert slot_id in [slot["id"] for slot in sc["slots"]]


# --------------------------------------------------------------------------------------------
# UCP lodging (Harbour Hotel)

# Per mode: (room, rate, arrive, depart, adults, nightly net after the rate factor).
UCP_FLOW = {
    "auto": ("DBL", "FLEX", "2027-01-20", "2027-01-23", 2, 14000),
    "legacy": ("STE", "NRF", "2027-02-10", "2027-02-12", 4, 27200),
}


def lodging_booking(room: str, rate: str, arrive: str, depart: str, adults: int, **extra: Any) -> dict[str, Any]:
    return {
        "property": {"id": "HH-LIS"},
        "stays": [
            {
                "accommodation_type": {"id": room},
                "rate_plan": {"id": rate},
                "occupancy": {"adults": adults, "children": 0},
                "stay_dates": {"start_date": arrive, "end_date": depart},
            }
        ],
        **extra,
    }


def totals_by_type(totals: list[dict[str, Any]]) -> dict[str, int]:
    return {t["type"]: t["amount"] for t in totals}


def assert_ucp_ok(sc: dict[str, Any], capability: str) -> None:
    assert sc["ucp"]["version"] == "draft"
    assert sc["ucp"].get("status", "success") == "success"
    assert capability in sc["ucp"]["capabilities"]
    assert not [m for m in sc.get("messages", []) if m.get("type") == "error"]


@pytest.mark.parametrize("mode", MODES)
async def test_ucp_lodging_flow(mcp_url: str, mode: str) -> None:
    room, rate, arrive, depart, adults, nightly = UCP_FLOW[mode]
    nights = int(depart[-2:]) - int(arrive[-2:])
    net = nightly * nights
    tax = net * 6 // 100
    booking = lodging_booking(room, rate, arrive, depart, adults)
    booker = {"first_name": "Carla", "last_name": f"Mendes {mode}", "email": f"carla.{mode}@example.com"}
    cap = "dev.ucp.lodging.booking"

    async with session(mcp_url, mode) as s:
        # create
        sc = await s.call("create_booking_session", {"meta": ucp_meta(), "booking": booking})
        assert_ucp_ok(sc, cap)
        session_id = sc["id"]
        assert re.fullmatch(r"Q-\d{4,}", session_id), session_id
        assert sc["status"] == "incomplete"
        assert sc["property"]["id"] == "HH-LIS"
        assert sc["currency"] == "EUR"
        (stay,) = sc["stays"]
        assert stay["accommodation_type"]["id"] == room
        assert stay["rate_plan"]["id"] == rate
        assert stay["occupancy"]["adults"] == adults
        assert stay["stay_dates"] == {"start_date": arrive, "end_date": depart}
        assert totals_by_type(sc["totals"]) == {"subtotal": net, "tax": tax, "total": net + tax}
        assert "confirmation" not in sc
        assert {link["type"] for link in sc["links"]} >= {"privacy_policy", "terms_of_service"}

        # update with the booker
        sc = await s.call(
            "update_booking_session",
            {"meta": ucp_meta(), "id": session_id, "booking": {**booking, "booker": booker}},
        )
        assert_ucp_ok(sc, cap)
        assert sc["id"] == session_id
        assert sc["status"] == "ready_for_complete"
        assert sc["booker"] == booker

        # complete
        card = {"id": "pi_1", "type": "card", "credential": {"type": "PAYMENT_GATEWAY", "token": "tok_visa_4242"}}
        payment = {"instruments": [card]}
        sc = await s.call(
            "complete_booking_session",
            {"meta": ucp_meta(idempotent=True), "id": session_id, "booking": {"payment": payment}},
        )
        assert_ucp_ok(sc, cap)
        assert sc["id"] == session_id
        assert sc["status"] == "completed"
        confirmation = sc["confirmation"]["id"]
        assert isinstance(confirmation, str) and confirmation.startswith("HH-"), confirmation

        # get shows completed, with the same confirmation
        sc = await s.call("get_booking_session", {"meta": ucp_meta(), "id": session_id})
        assert_ucp_ok(sc, cap)
        assert sc["id"] == session_id
        assert sc["status"] == "completed"
        assert sc["confirmation"]["id"] == confirmation
        assert sc["booker"] == booker
        assert totals_by_type(sc["totals"])["total"] == net + tax

        # cancel
        sc = await s.call("cancel_booking_session", {"meta": ucp_meta(idempotent=True), "id": session_id})
        assert_ucp_ok(sc, cap)
        assert sc["id"] == session_id
        assert sc["status"] == "canceled"

        sc = await s.call("get_booking_session", {"meta": ucp_meta(), "id": session_id})
        assert sc["status"] == "canceled"


@pytest.mark.parametrize("mode", MODES)
async def test_ucp_sold_out_room_is_a_business_outcome(mcp_url: str, mode: str) -> None:
    arrive, depart = {"auto": ("2027-01-05", "2027-01-06"), "legacy": ("2027-01-07", "2027-01-09")}[mode]
    async with session(mcp_url, mode) as s:
        result = await s.client.call_tool(
            "create_booking_session",
            {"meta": ucp_meta(), "booking": lodging_booking("SGL", "FLEX", arrive, depart, 1)},
        )
        assert result.is_error is False
        sc = result.structured_content
        assert isinstance(sc, dict)
        assert_valid(s.tools["create_booking_session"].output_schema, sc, "create_booking_session business outcome")
        assert sc["ucp"]["status"] == "error"
        assert sc["messages"][0]["type"] == "error"
        assert sc["messages"][0]["code"] == "inventory_exhausted"
        assert "id" not in sc


@pytest.mark.parametrize("mode", MODES)
async def test_ucp_declined_card_is_a_business_outcome(mcp_url: str, mode: str) -> None:
    arrive, depart = {"auto": ("2027-01-26", "2027-01-27"), "legacy": ("2027-01-28", "2027-01-29")}[mode]
    booker = {"first_name": "Dora", "last_name": "Lima", "email": f"dora.{mode}@example.com"}
    async with session(mcp_url, mode) as s:
        sc = await s.call(
            "create_booking_session",
            {"meta": ucp_meta(), "booking": lodging_booking("DBL", "FLEX", arrive, depart, 1, booker=booker)},
        )
        session_id = sc["id"]
        assert sc["status"] == "ready_for_complete"

        payment = {"instruments": [{"type": "card", "credential": {"token": "tok_declined"}}]}
        result = await s.client.call_tool(
            "complete_booking_session",
            {"meta": ucp_meta(idempotent=True), "id": session_id, "booking": {"payment": payment}},
        )
        assert result.is_error is False
        sc = result.structured_content
        assert_valid(s.tools["complete_booking_session"].output_schema, sc, "complete_booking_session business outcome")
        assert sc["ucp"]["status"] == "error"
        assert sc["messages"][0]["code"] == "payment_failed"

        sc = await s.call("get_booking_session", {"meta": ucp_meta(), "id": session_id})
        assert sc["status"] == "ready_for_complete"
        assert "confirmation" not in sc


@pytest.mark.parametrize("mode", MODES)
async def test_ucp_complete_without_idempotency_key_is_a_protocol_error(mcp_url: str, mode: str) -> None:
    arrive, depart = {"auto": ("2027-03-01", "2027-03-02"), "legacy": ("2027-03-03", "2027-03-04")}[mode]
    booker = {"first_name": "Eva", "last_name": "Costa", "email": f"eva.{mode}@example.com"}
    async with session(mcp_url, mode) as s:
        sc = await s.call(
            "create_booking_session",
            {"meta": ucp_meta(), "booking": lodging_booking("DBL", "FLEX", arrive, depart, 2, booker=booker)},
        )
        session_id = sc["id"]
        assert sc["status"] == "ready_for_complete"

        payment = {"instruments": [{"type": "card", "credential": {"token": "tok_visa_4242"}}]}
        with pytest.raises(MCPError) as excinfo:
            await s.client.call_tool(
                "complete_booking_session",
                {"meta": ucp_meta(idempotent=False), "id": session_id, "booking": {"payment": payment}},
            )
        assert excinfo.value.code == -32602, f"{excinfo.value.code} {excinfo.value.message} {excinfo.value.data}"

        # the rejected call reached nothing: the session is still open
        sc = await s.call("get_booking_session", {"meta": ucp_meta(), "id": session_id})
        assert sc["status"] == "ready_for_complete"
        assert "confirmation" not in sc


# --------------------------------------------------------------------------------------------
# UCP ask (Harbour Hotel concierge)


@pytest.mark.parametrize("mode", MODES)
async def test_ask_business_about_dogs(mcp_url: str, mode: str) -> None:
    async with session(mcp_url, mode) as s:
        sc = await s.call("ask_business", {"meta": ucp_meta(), "ask": {"query": "Can I bring my dog?"}})
        assert_ucp_ok(sc, "dev.ucp.common.ask")
        assert "pet" in sc["answer"]["plain"].lower()
        assert sc["links"], "expected at least one link"
        assert all(link["url"].startswith("https://") for link in sc["links"])
        assert any("pet" in link["url"] or "pet" in link.get("title", "").lower() for link in sc["links"])
        conversation = sc["conversation"]["id"]
        assert conversation

        # a follow-up in the same conversation keeps its id
        sc = await s.call(
            "ask_business",
            {
                "meta": ucp_meta(idempotent=True),
                "ask": {"query": "And what time is breakfast?", "conversation": {"id": conversation}},
            },
        )
        assert sc["conversation"]["id"] == conversation
        assert "breakfast" in sc["answer"]["plain"].lower()


# --------------------------------------------------------------------------------------------
# Regression tests for bugs found by this suite: a booking must never be committed behind an
# internal error, partial bookers are refused by the backend as a business outcome, and the text
# of a business outcome reports the error rather than a success summary.


def backend_writes(backend_url: str) -> int:
    """Number of state-changing calls the demo backend has served (GET /__demo/stats)."""
    with urllib.request.urlopen(f"{backend_url}/__demo/stats", timeout=10) as resp:
        calls = json.load(resp)["calls"]
    return sum(n for route, n in calls.items() if not route.startswith("GET "))


async def assert_readable(s: Session, session_id: str) -> dict[str, Any]:
    """get_booking_session must answer a schema-valid result, never a JSON-RPC error."""
    try:
        return await s.call("get_booking_session", {"meta": ucp_meta(), "id": session_id})
    except MCPError as e:
        pytest.fail(f"get_booking_session({session_id}) raised {e.code} {e.message}: {str(e.data)[:300]}")


@pytest.mark.parametrize("mode", MODES)
async def test_ucp_complete_without_booker_keeps_the_session_consistent(mcp_url: str, mode: str) -> None:
    arrive, depart = {"auto": ("2027-03-08", "2027-03-09"), "legacy": ("2027-03-10", "2027-03-11")}[mode]
    async with session(mcp_url, mode) as s:
        booking = lodging_booking("DBL", "FLEX", arrive, depart, 1)
        sc = await s.call("create_booking_session", {"meta": ucp_meta(), "booking": booking})
        session_id = sc["id"]
        assert sc["status"] == "incomplete"
        payment = {"instruments": [{"type": "card", "credential": {"token": "tok_visa_4242"}}]}
        try:
            result = await s.client.call_tool(
                "complete_booking_session",
                {"meta": ucp_meta(idempotent=True), "id": session_id, "booking": {"payment": payment}},
            )
        except MCPError as e:
            assert e.code != -32603, f"internal error after the backend was called: {str(e.data)[:300]}"
        else:
            assert result.is_error is False
            assert_valid(s.tools["complete_booking_session"].output_schema, result.structured_content, "complete")
        await assert_readable(s, session_id)


@pytest.mark.parametrize("mode", MODES)
async def test_ucp_booker_without_last_name_is_refused_or_served(mcp_url: str, demo: Any, mode: str) -> None:
    arrive, depart = {"auto": ("2027-03-15", "2027-03-16"), "legacy": ("2027-03-17", "2027-03-18")}[mode]
    booker = {"first_name": "Solo", "email": f"solo.{mode}@example.com"}
    booking = lodging_booking("DBL", "FLEX", arrive, depart, 1, booker=booker)
    async with session(mcp_url, mode) as s:
        writes = backend_writes(demo.backend_url)
        try:
            sc = await s.call("create_booking_session", {"meta": ucp_meta(), "booking": booking})
        except MCPError as e:
            # refusing the input is fine, but only before anything reached the backend
            assert e.code != -32603, f"internal error: {str(e.data)[:300]}"
            assert backend_writes(demo.backend_url) == writes
        else:
            if "id" in sc:
                await assert_readable(s, sc["id"])
            else:
                # The backend refused the partial guest: a UCP error response, nothing stored.
                assert_valid(s.tools["create_booking_session"].output_schema, sc, "create outcome")
                assert sc["ucp"]["status"] == "error"
                assert sc["messages"][0]["code"] == "invalid_booking"
                assert "guest.last" in sc["messages"][0]["content"] or "required" in sc["messages"][0]["content"]


@pytest.mark.parametrize("mode", MODES)
async def test_usp_validation_outcome_text_reports_the_error(mcp_url: str, mode: str) -> None:
    async with session(mcp_url, mode) as s:
        result = await s.client.call_tool(
            "usp_availability_query",
            {"service_id": "MASSAGE-60", "start_date": "2027-01-01", "end_date": "2027-01-20", "_meta": usp_meta()},
        )
        assert result.is_error is False
        sc = result.structured_content
        assert_valid(s.tools["usp_availability_query"].output_schema, sc, "usp_availability_query outcome")
        assert "slots" not in sc
        assert sc["messages"][0]["code"] == "validation_error"
        text = result.content[0].text
        assert sc["messages"][0]["content"] in text, text
