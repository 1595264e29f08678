"""Tools that ask the MCP client (`ask:` steps in mappings/conformance.yaml), answered by the Python
`mcp` 2.3.0 client's own callbacks (elicitation, sampling, roots).

`mode="legacy"` (2025-11-25): portico sends `elicitation/create`, `sampling/createMessage` and
`roots/list` as requests on the call's SSE stream and the client POSTs its answers back.
`mode="auto"` (2026-07-28): portico answers `input_required` with a signed `requestState` and the
client retries with `inputResponses` (MRTR), possibly over several rounds. Either way the answers
must reach the REST fixture backend (`POST /v1/echo` answers what it received).
"""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import mcp_types as types
import pytest
from mcp import Client

from conftest import start_demo, stop_demo

if sys.version_info < (3, 11):  # pragma: no cover - anyio pulls in the backport there
    from exceptiongroup import BaseExceptionGroup

pytestmark = pytest.mark.anyio

MODES = ["auto", "legacy"]
NEGOTIATED = {"auto": "2026-07-28", "legacy": "2025-11-25"}


@pytest.fixture(scope="module")
def fixtures_url():
    """`portico demo --fixtures`: the conformance fixtures over their REST fixture backend."""
    d = start_demo("--fixtures")
    try:
        yield d.mcp_url
    finally:
        stop_demo(d)


class Answers:
    """The client side: what it was asked, and what it answers."""

    def __init__(self, decline: bool = False) -> None:
        self.decline = decline
        self.asked: list[str] = []

    async def elicit(self, ctx: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        self.asked.append(f"elicit:{params.message}")
        if self.decline:
            return types.ElicitResult(action="decline")
        props = params.requested_schema["properties"]
        if "name" in props:
            return types.ElicitResult(action="accept", content={"name": "Alice"})
        if "color" in props:
            return types.ElicitResult(action="accept", content={"color": "blue"})
        return types.ElicitResult(action="accept", content={"username": "alice", "email": "alice@example.test"})

    async def sample(self, ctx: Any, params: types.CreateMessageRequestParams) -> types.CreateMessageResult:
        self.asked.append("sample")
        return types.CreateMessageResult(
            role="assistant",
            content=types.TextContent(type="text", text="Bonjour!"),
            model="test-model",
            stop_reason="endTurn",
        )

    async def roots(self, ctx: Any) -> types.ListRootsResult:
        self.asked.append("roots")
        return types.ListRootsResult(roots=[types.Root(uri="file:///srv/data", name="data")])


@asynccontextmanager
async def connect(url: str, mode: str, answers: Answers) -> AsyncIterator[Client]:
    try:
        async with Client(
            url,
            mode=mode,
            read_timeout_seconds=30,
            elicitation_callback=answers.elicit,
            sampling_callback=answers.sample,
            list_roots_callback=answers.roots,
        ) as client:
            assert client.protocol_version == NEGOTIATED[mode]
            yield client
    except BaseExceptionGroup as group:
        while isinstance(group, BaseExceptionGroup) and len(group.exceptions) == 1:
            group = group.exceptions[0]
        raise group from None


@pytest.mark.parametrize("mode", MODES)
async def test_elicitation_answer_reaches_the_backend(fixtures_url: str, mode: str) -> None:
    answers = Answers()
    async with connect(fixtures_url, mode, answers) as client:
        result = await client.call_tool("test_elicitation", {"message": "Who are you?"})
    assert answers.asked == ["elicit:Who are you?"]
    assert result.is_error is False, result.content
    received = result.structured_content["received"]
    assert received == {"message": "Who are you?", "user": {"username": "alice", "email": "alice@example.test"}}


@pytest.mark.parametrize("mode", MODES)
async def test_three_kinds_of_question_in_one_round(fixtures_url: str, mode: str) -> None:
    answers = Answers()
    async with connect(fixtures_url, mode, answers) as client:
        result = await client.call_tool("test_input_required_result_multiple_inputs", {})
    assert sorted(answers.asked) == ["elicit:What is your name?", "roots", "sample"]
    assert result.is_error is False, result.content
    received = result.structured_content["received"]
    assert received["name"] == "Alice"
    assert received["greeting"] == "Bonjour!"
    assert received["roots"] == [{"uri": "file:///srv/data", "name": "data"}]
    assert result.content[0].text == "Bonjour! Alice (1 roots)"


@pytest.mark.parametrize("mode", MODES)
async def test_two_rounds_the_second_sees_the_first_answer(fixtures_url: str, mode: str) -> None:
    answers = Answers()
    async with connect(fixtures_url, mode, answers) as client:
        result = await client.call_tool("test_input_required_result_multi_round", {})
    assert answers.asked == [
        "elicit:Step 1: What is your name?",
        "elicit:Step 2: What is your favorite color, Alice?",
    ]
    assert result.is_error is False, result.content
    assert result.content[0].text == "Alice likes blue"


@pytest.mark.parametrize("mode", MODES)
async def test_a_declined_question_ends_the_call_as_a_tool_error(fixtures_url: str, mode: str) -> None:
    answers = Answers(decline=True)
    async with connect(fixtures_url, mode, answers) as client:
        result = await client.call_tool("test_input_required_result_request_state", {})
    assert answers.asked == ["elicit:Please confirm"]
    assert result.is_error is True
    assert "decline" in result.content[0].text
