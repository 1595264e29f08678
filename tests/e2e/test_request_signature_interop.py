"""RFC 9421 request signatures between `portico serve` and an independent implementation (the
`http-message-signatures` package), over real HTTP on 127.0.0.1:

* An MCP `tools/call` the package signs (key published in a platform profile served here) is
  accepted by a business accepting `http_message_signature`; the same bytes sent again (a replay)
  and a body changed after signing are refused.
* The backend request portico signs for that call (`backend.sign_requests`) verifies with the
  package against the key portico publishes at `/.well-known/jwks.json`.
"""

from __future__ import annotations

import base64
import json
import threading
import urllib.error
import urllib.request
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric import ec
from http_message_signatures import HTTPMessageSigner, HTTPMessageVerifier, MappingKeyResolver, algorithms

from conftest import _stop, serve

ROOT = Path(__file__).resolve().parents[2]
MODERN = "2026-07-28"


def b64u(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def unb64u(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


class Recorder(BaseHTTPRequestHandler):
    """The platform profile at /profile.json; any other request is recorded (the backend)."""

    profile = b"{}"
    seen: list[dict[str, Any]] = []

    def _answer(self, body: bytes) -> None:
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _record(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        body = self.rfile.read(length) if length else b""
        path, _, query = self.path.partition("?")
        self.seen.append({"method": self.command, "path": path, "query": query,
                          "headers": {k.lower(): v for k, v in self.headers.items()}, "body": body})
        self._answer(b'{"ok": true}')

    def do_GET(self) -> None:  # noqa: N802 - http.server's naming
        if self.path == "/profile.json":
            self._answer(self.profile)
        else:
            self._record()

    def do_POST(self) -> None:  # noqa: N802
        self._record()

    def log_message(self, *args: Any) -> None:
        pass




class Message:
    """The request view http-message-signatures reads: method, absolute URL, headers."""

    def __init__(self, method: str, url: str, headers: dict[str, str]):
        self.method = method
        self.url = url
        self.headers = headers


def post(url: str, headers: dict[str, str], body: bytes) -> tuple[int, Any]:
    req = urllib.request.Request(url, data=body, headers=headers, method="POST")
    try:
        with urllib.request.urlopen(req, timeout=20) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"null")


def test_signed_mcp_requests_and_signed_backend_requests_interoperate(tmp_path: Path) -> None:
    key = ec.generate_private_key(ec.SECP256R1())
    pub = key.public_key().public_numbers()
    jwk = {"kid": "python-platform", "kty": "EC", "crv": "P-256", "use": "sig", "alg": "ES256",
           "x": b64u(pub.x.to_bytes(32, "big")), "y": b64u(pub.y.to_bytes(32, "big"))}
    Recorder.profile = json.dumps({"name": "python agent", "keys": [jwk]}).encode()
    Recorder.seen = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), Recorder)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    here = f"127.0.0.1:{server.server_address[1]}"
    fixtures = ROOT / "tests/fixtures/gateway"
    (tmp_path / "test.openrpc.json").write_text((fixtures / "test.openrpc.json").read_text())
    mapping = (fixtures / "plain.yaml").read_text().replace("127.0.0.1:9101", here)
    mapping = mapping.replace("  timeout: 400ms\n", "  timeout: 5s\n  sign_requests: true\n", 1)
    mapping += ("\nauthorization:\n  accepted_mechanisms: [http_message_signature]\n"
                "  http_message_signature:\n    allow_hosts: [127.0.0.1]\n")
    (tmp_path / "plain.yaml").write_text(mapping)
    proc, mcp_url = serve(tmp_path, tmp_path / "plain.yaml")
    try:
        body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
            "name": "echo_post", "arguments": {"name": "signed by python"}, "_meta": {
                "io.modelcontextprotocol/protocolVersion": MODERN,
                "io.modelcontextprotocol/clientCapabilities": {},
                "io.modelcontextprotocol/clientInfo": {"name": "py", "version": "1"}}}}).encode()
        headers = {"content-type": "application/json", "accept": "application/json, text/event-stream",
                   "mcp-protocol-version": MODERN, "mcp-method": "tools/call", "mcp-name": "echo_post",
                   "ucp-agent": f'profile="http://{here}/profile.json"'}
        signer = HTTPMessageSigner(
            signature_algorithm=algorithms.ECDSA_P256_SHA256,
            key_resolver=MappingKeyResolver(public_keys={}, private_keys={jwk["kid"]: key}),
        )
        covered = ("@method", "@authority", "@path", "content-digest", "content-type", "ucp-agent")
        signer.sign(Message("POST", mcp_url, headers), key_id=jwk["kid"], covered_component_ids=covered,
                    label="sig1", body=body)
        status, answer = post(mcp_url, headers, body)
        assert status == 200, answer
        assert "result" in answer and not answer["result"].get("isError"), answer

        # The same signed bytes again: a replay, refused as unauthenticated.
        status, answer = post(mcp_url, headers, body)
        assert status == 401, answer
        assert answer["error"]["code"] == -32001, answer
        # A body changed after signing: the digest no longer matches.
        status, answer = post(mcp_url, headers, body.replace(b"signed by python", b"changed in flight"))
        assert answer["error"]["data"]["code"] == "digest_mismatch", answer

        # The backend saw one request (the refused ones never reached it), signed by portico.
        backend = [r for r in Recorder.seen if r["path"].startswith("/t/")]
        assert len(backend) == 1, backend
        r = backend[0]
        with urllib.request.urlopen(mcp_url.replace("/mcp", "/.well-known/jwks.json"), timeout=20) as resp:
            portico_jwk = json.loads(resp.read())["keys"][0]
        assert portico_jwk["kty"] == "EC", portico_jwk
        portico_key = ec.EllipticCurvePublicNumbers(
            int.from_bytes(unb64u(portico_jwk["x"]), "big"), int.from_bytes(unb64u(portico_jwk["y"]), "big"),
            ec.SECP256R1(),
        ).public_key()
        verifier = HTTPMessageVerifier(
            signature_algorithm=algorithms.ECDSA_P256_SHA256,
            key_resolver=MappingKeyResolver(public_keys={portico_jwk["kid"]: portico_key}, private_keys={}),
        )
        url = f"http://{r['headers']['host']}{r['path']}"
        required = ("@method", "@authority", "@path", "content-digest", "content-type")
        results = verifier.verify(Message(r["method"], url, dict(r["headers"])), max_age=timedelta(minutes=5),
                                  require_components=required, body=r["body"])
        assert len(results) == 1
        assert results[0].parameters["keyid"] == portico_jwk["kid"]
        with pytest.raises(Exception):
            verifier.verify(Message(r["method"], url + "/elsewhere", dict(r["headers"])),
                            max_age=timedelta(minutes=5), require_components=required, body=r["body"])
    finally:
        _stop(proc)
        server.shutdown()
