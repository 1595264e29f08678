"""Fuzzes the REST facade with schemathesis (PyPI) against its own generated OpenAPI document.

`portico facade mappings/usp-facade.yaml` (USP's 27 REST routes, derived from USP's OpenRPC and
OpenAPI, from the folder scripts/fetch-upstream fills) runs in front of `portico demo`'s MCP endpoint;
schemathesis reads `GET /openapi.json` and sends generated requests. The checks: no 5xx,
every status documented, every content type documented, every body valid against its schema.
Whether the upstream tool accepts a schema-valid request is the upstream's business (the demo
serves 7 of the 27 tools), so `positive_data_acceptance` / `negative_data_rejection` are not run.

schemathesis lives in its own virtualenv (it needs a newer pytest than the e2e suite pins):
`scripts/test` installs it into `$PORTICO_CACHE/fuzz` and passes `PORTICO_ST`. A missing `st` or
binary is a failure, never a skip.
"""

from __future__ import annotations

import os
import socket
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from conftest import portico_bin, upstream

ROOT = Path(__file__).resolve().parents[2]
CHECKS = "not_a_server_error,status_code_conformance,content_type_conformance,response_schema_conformance"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_schemathesis_finds_nothing_against_the_usp_facade(demo):
    cache = Path(os.environ.get("PORTICO_CACHE", Path.home() / ".cache" / "portico"))
    st = Path(os.environ.get("PORTICO_ST", cache / "fuzz" / "bin" / "st"))
    if not st.is_file():
        pytest.fail(
            f"schemathesis (st) not found at {st}: run scripts/test, or set PORTICO_ST", pytrace=False
        )
    fetched = upstream("usp").parent
    work = Path(tempfile.mkdtemp(prefix="portico-fuzz-"))
    mapping = work / "usp-facade.yaml"
    mapping.write_text(
        (ROOT / "mappings" / "usp-facade.yaml")
        .read_text()
        .replace("http://127.0.0.1:9100/mcp", demo.mcp_url)
        .replace("../.upstream", str(fetched))
    )
    port = free_port()
    facade = subprocess.Popen(
        [str(portico_bin()), "facade", str(mapping), "--listen", f"127.0.0.1:{port}"],
        stdout=subprocess.DEVNULL,
        stderr=open(work / "facade.err", "w"),  # noqa: SIM115 - the child keeps it
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            if facade.poll() is not None:
                pytest.fail(f"portico facade exited: {(work / 'facade.err').read_text()[-2000:]}")
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                    break
            except OSError:
                if time.monotonic() > deadline:
                    pytest.fail("portico facade did not listen within 30s")
                time.sleep(0.1)
        run = subprocess.run(
            [
                str(st), "run", f"http://127.0.0.1:{port}/openapi.json",
                "--checks", CHECKS,
                "--phases", "examples,coverage,fuzzing",
                "--max-examples", "25",
                "--seed", "20261130",
                "--generation-database", "none",
            ],
            capture_output=True,
            text=True,
            timeout=600,
            cwd=work,
        )
        assert run.returncode == 0, run.stdout[-6000:] + run.stderr[-2000:]
        assert "27/27" in run.stdout, run.stdout[-3000:]
    finally:
        facade.terminate()
        try:
            facade.wait(timeout=10)
        except subprocess.TimeoutExpired:
            facade.kill()
