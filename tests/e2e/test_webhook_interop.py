"""Webhook signatures against an independent RFC 9421 implementation, and the demo's webhook loop.

* Signatures made by `portico webhook-sign` verify with the `http-message-signatures` package.
* Signatures made by that package verify with `portico webhook-verify`, and a webhook it signs
  with the demo key is accepted by `portico demo` and delivered to a 2025-era GET SSE stream as a
  `usp_webhook` notification whose params validate against USP's webhook_event.json (read in
  place, `data` booking included).
* The unmodified `mcp` 2.3.0 client subscribes to its booking's resource (2025 session:
  `resources/subscribe`; 2026-07-28: `Client.listen()`) and is told when the demo backend's
  webhook cancels it.

Both algorithms portico implements are covered: ecdsa-p256-sha256 and ed25519.
"""

from __future__ import annotations

import base64
import hashlib
import http.client
import json
import subprocess
import time
import urllib.request
import uuid
from datetime import timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from cryptography.hazmat.primitives.asymmetric import ec, ed25519
from http_message_signatures import (
    HTTPMessageSigner,
    HTTPMessageVerifier,
    InvalidSignature,
    MappingKeyResolver,
    algorithms,
)
from jsonschema import Draft202012Validator
from referencing import Registry, Resource

from conftest import Demo, portico_bin, upstream

ROOT = Path(__file__).resolve().parents[2]
USP = ("@method", "@authority", "@path", "content-digest", "content-type")
ALGS = {"ecdsa": algorithms.ECDSA_P256_SHA256, "ed25519": algorithms.ED25519}


def b64u(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def unb64u(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def new_key(kind: str, kid: str) -> tuple[Any, dict[str, str]]:
    """A fresh private key and its private JWK."""
    if kind == "ecdsa":
        key = ec.generate_private_key(ec.SECP256R1())
        nums = key.private_numbers()
        pub = nums.public_numbers
        jwk = {"kid": kid, "kty": "EC", "crv": "P-256", "x": b64u(pub.x.to_bytes(32, "big")),
               "y": b64u(pub.y.to_bytes(32, "big")), "d": b64u(nums.private_value.to_bytes(32, "big"))}
        return key, jwk
    key = ed25519.Ed25519PrivateKey.generate()
    from cryptography.hazmat.primitives import serialization as s

    raw_pub = key.public_key().public_bytes(s.Encoding.Raw, s.PublicFormat.Raw)
    raw_priv = key.private_bytes(s.Encoding.Raw, s.PrivateFormat.Raw, s.NoEncryption())
    return key, {"kid": kid, "kty": "OKP", "crv": "Ed25519", "x": b64u(raw_pub), "d": b64u(raw_priv)}


def public(jwk: dict[str, str]) -> dict[str, str]:
    return {k: v for k, v in jwk.items() if k != "d"}


def demo_key() -> tuple[Any, dict[str, str]]:
    jwk = json.loads((ROOT / "src/demo/webhook-sender.jwk.json").read_text())
    key = ec.derive_private_key(int.from_bytes(unb64u(jwk["d"]), "big"), ec.SECP256R1())
    return key, jwk


class Message:
    """The request view http-message-signatures reads: method, absolute URL, headers."""

    def __init__(self, url: str, headers: dict[str, str]):
        self.method = "POST"
        self.url = url
        self.headers = headers


def content_digest(body: bytes) -> str:
    return "sha-256=:" + base64.b64encode(hashlib.sha256(body).digest()).decode() + ":"


def python_sign(kind: str, key: Any, kid: str, url: str, body: bytes) -> dict[str, str]:
    """The package's own signature and Content-Digest (sha-256) over `body`."""
    headers = {"content-type": "application/json"}
    signer = HTTPMessageSigner(
        signature_algorithm=ALGS[kind],
        key_resolver=MappingKeyResolver(public_keys={}, private_keys={kid: key}),
    )
    signer.sign(Message(url, headers), key_id=kid, covered_component_ids=USP, label="sig1", body=body)
    headers = {k.lower(): v for k, v in headers.items()}
    assert headers["content-digest"] == content_digest(body)
    return headers


def run(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(portico_bin()), *args], cwd=cwd, capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize("kind", ["ecdsa", "ed25519"])
def test_portico_signatures_verify_with_http_message_signatures(kind: str, tmp_path: Path) -> None:
    key, jwk = new_key(kind, f"portico-{kind}")
    (tmp_path / "key.json").write_text(json.dumps(jwk))
    body = json.dumps({"event": "booking.confirmed", "event_id": str(uuid.uuid4())}).encode()
    (tmp_path / "body.json").write_bytes(body)
    url = "https://platform.example:8443/webhooks/usp"
    out = run("webhook-sign", "--key", "key.json", "--url", url, "--body-file", "body.json", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    headers = {}
    for line in out.stdout.splitlines():
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    assert set(headers) == {"content-type", "content-digest", "signature-input", "signature"}
    verifier = HTTPMessageVerifier(
        signature_algorithm=ALGS[kind],
        key_resolver=MappingKeyResolver(public_keys={jwk["kid"]: key.public_key()}, private_keys={}),
    )
    results = verifier.verify(Message(url, dict(headers)), max_age=timedelta(minutes=5),
                              require_components=USP, body=body)
    assert len(results) == 1
    assert results[0].parameters["keyid"] == jwk["kid"]
    assert results[0].parameters["alg"] == ALGS[kind].algorithm_id
    with pytest.raises(InvalidSignature):
        verifier.verify(Message(url.replace("/usp", "/other"), dict(headers)),
                        max_age=timedelta(minutes=5), require_components=USP, body=body)


@pytest.mark.parametrize("kind", ["ecdsa", "ed25519"])
def test_http_message_signatures_verify_in_portico(kind: str, tmp_path: Path) -> None:
    key, jwk = new_key(kind, f"python-{kind}")
    (tmp_path / "jwks.json").write_text(json.dumps({"keys": [public(jwk)]}))
    body = json.dumps({"event_id": str(uuid.uuid4())}).encode()
    (tmp_path / "body.json").write_bytes(body)
    url = "http://gw.example:8080/webhooks/spa"
    headers = python_sign(kind, key, jwk["kid"], url, body)
    (tmp_path / "headers.txt").write_text("".join(f"{k}: {v}\n" for k, v in headers.items()))
    args = ["webhook-verify", "--jwks", "jwks.json", "--headers", "headers.txt", "--body-file", "body.json"]
    ok = run(*args, "--url", url, cwd=tmp_path)
    assert ok.returncode == 0, ok.stderr
    assert ok.stdout.startswith(f"ok: label sig1 keyid {jwk['kid']}"), ok.stdout
    forged = run(*args, "--url", url.replace("gw.example", "evil.example"), cwd=tmp_path)
    assert forged.returncode != 0
    assert "does not verify" in forged.stderr
    (tmp_path / "body.json").write_bytes(body + b" ")
    tampered = run(*args, "--url", url, cwd=tmp_path)
    assert tampered.returncode != 0
    assert "Content-Digest" in tampered.stderr


def booking_event_validator() -> Draft202012Validator:
    """USP's BookingEvent, with every sibling schema registered under its $id (no network)."""
    resources = []
    for path in upstream("usp/schemas").glob("*.json"):
        doc = json.loads(path.read_text())
        if "$id" in doc:
            resources.append((doc["$id"], Resource.from_contents(doc)))
    registry = Registry().with_resources(resources)
    schema = {"$ref": "https://usp-protocol.dev/schemas/services/webhook_event.json#/$defs/BookingEvent"}
    return Draft202012Validator(schema, registry=registry)


def post_json(url: str, body: Any, headers: dict[str, str] | None = None) -> tuple[int, dict[str, Any], Any]:
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method="POST",
                                 headers={"Content-Type": "application/json",
                                          "Accept": "application/json, text/event-stream", **(headers or {})})
    try:
        with urllib.request.urlopen(req, timeout=20) as r:
            return r.status, dict(r.headers), json.loads(r.read() or b"null")
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers), json.loads(e.read() or b"null")


def open_stream(mcp_url: str) -> http.client.HTTPResponse:
    """A 2025-11-25 session and its GET SSE stream."""
    _, headers, _ = post_json(mcp_url, {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "e2e", "version": "1"}}})
    sid = next(v for k, v in headers.items() if k.lower() == "mcp-session-id")
    u = urlsplit(mcp_url)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=20)
    conn.request("GET", u.path, headers={"Accept": "text/event-stream", "Mcp-Session-Id": sid})
    resp = conn.getresponse()
    assert resp.status == 200
    return resp


def next_message(stream: http.client.HTTPResponse) -> dict[str, Any]:
    """The next SSE event's JSON data (keep-alive comments skipped)."""
    data = None
    while True:
        line = stream.readline().decode().rstrip("\n")
        if line.startswith("data: "):
            data = json.loads(line[6:])
        elif line == "" and data is not None:
            return data


def test_webhook_signed_by_http_message_signatures_reaches_an_mcp_stream(demo: Demo) -> None:
    hooks = next(line.split(": ", 1)[1] for line in demo.stdout_lines if line.startswith("webhooks:"))
    assert hooks == demo.mcp_url.replace("/mcp", "/webhooks/seaside-spa")
    assert demo.backend_url is not None
    api = {"X-Api-Key": "demo-key"}
    with urllib.request.urlopen(urllib.request.Request(
            f"{demo.backend_url}/spa/v1/treatments/FACIAL-45/openings?from=2026-12-03&to=2026-12-03",
            headers=api), timeout=20) as r:
        opening = next(o["ref"] for o in json.loads(r.read())["openings"] if o["free"])
    status, _, created = post_json(f"{demo.backend_url}/spa/v1/appointments", {
        "treatment": "FACIAL-45", "opening": opening,
        "client": {"name": "Pat Python", "email": "pat@example.com"}}, api)
    assert status == 201, created
    appointment = created["appointment"]

    stream = open_stream(demo.mcp_url)
    key, jwk = demo_key()
    webhook_id = f"py-{uuid.uuid4()}"
    body = json.dumps({"webhook_id": webhook_id, "kind": "appointment.moved",
                       "occurred_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                       "appointment": appointment}).encode()
    headers = python_sign("ecdsa", key, jwk["kid"], hooks, body)
    status, _, reply = post_json(hooks, body, headers)
    assert status == 202, reply
    assert reply == {"status": "queued", "event_id": webhook_id}
    # The same event again, signed afresh (a new `created`: the same signature base within one
    # second is a replay, docs/limits.md): acknowledged, not delivered twice.
    time.sleep(1.1)
    status, _, reply = post_json(hooks, body, python_sign("ecdsa", key, jwk["kid"], hooks, body))
    assert (status, reply["status"]) == (200, "duplicate")

    validator = booking_event_validator()
    seen = 0
    while True:
        msg = next_message(stream)
        assert msg["method"] == "usp_webhook" and "id" not in msg, msg
        errors = sorted(validator.iter_errors(msg["params"]), key=str)
        assert not errors, f"{msg['params']}: {errors[0].message}"
        if msg["params"]["event_id"] == webhook_id:
            seen += 1
            assert msg["params"]["event"] == "booking.rescheduled"
            assert msg["params"]["booking_id"] == appointment["number"]
            assert msg["params"]["data"]["id"] == appointment["number"]
            break
    assert seen == 1
    stream.close()


@pytest.mark.anyio
@pytest.mark.filterwarnings("ignore:resources/subscribe is removed")
async def test_python_mcp_client_sees_booking_resource_updates(demo: Demo) -> None:
    """The unmodified `mcp` 2.3.0 client (legacy mode: a 2025-11-25 session with its GET stream)
    subscribes to its booking's resource and is told when the backend's webhook changes it."""
    import anyio
    from mcp import Client

    updates: list[str] = []
    changed = anyio.Event()

    async def on_message(message: Any) -> None:
        m = getattr(message, "root", message)
        if getattr(m, "method", None) == "notifications/resources/updated":
            updates.append(str(m.params.uri))
            changed.set()

    meta = {"usp": {"profile": "https://agent.example/profiles/e2e.json"}}
    async with Client(demo.mcp_url, mode="legacy", message_handler=on_message, read_timeout_seconds=30) as client:
        query = {"service_id": "SAUNA-30", "start_date": "2026-12-05", "end_date": "2026-12-05", "_meta": meta}
        slots = (await client.call_tool("usp_availability_query", query)).structured_content["slots"]
        slot = next(s["id"] for s in slots if s["state"] == "available")
        booked = await client.call_tool("usp_bookings_create", {
            "service_id": "SAUNA-30", "slot_id": slot,
            "buyer": {"first_name": "Rae", "last_name": "Sub", "email": "rae@example.com"},
            "_meta": {"usp": meta["usp"] | {"idempotency_key": str(uuid.uuid4())}}})
        booking_id = booked.structured_content["booking"]["id"]
        uri = f"usp://bookings/{booking_id}"
        await client.subscribe_resource(uri)
        await client.call_tool("usp_bookings_cancel", {"booking_id": booking_id, "_meta": meta})
        # The booking's confirmation webhook may still be on its way too: each update is a
        # level trigger, so re-read until the cancellation shows.
        with anyio.fail_after(20):
            while True:
                while uri not in updates:
                    await changed.wait()
                    changed = anyio.Event()
                updates.clear()
                latest = json.loads((await client.read_resource(uri)).contents[0].text)
                assert latest["booking_id"] == booking_id
                if latest["event"] == "booking.canceled":
                    break


@pytest.mark.anyio
async def test_python_mcp_client_listens_for_booking_updates_at_2026(demo: Demo) -> None:
    """The `mcp` 2.3.0 client in `auto` mode (stateless 2026-07-28) opens `Client.listen()` for
    its booking's resource and gets the update when the demo backend's webhook cancels it."""
    import anyio
    from mcp import Client

    meta = {"usp": {"profile": "https://agent.example/profiles/e2e.json"}}
    async with Client(demo.mcp_url, mode="auto", read_timeout_seconds=30) as client:
        assert client.protocol_version == "2026-07-28"
        query = {"service_id": "SAUNA-30", "start_date": "2026-12-06", "end_date": "2026-12-06", "_meta": meta}
        slots = (await client.call_tool("usp_availability_query", query)).structured_content["slots"]
        slot = next(s["id"] for s in slots if s["state"] == "available")
        booked = await client.call_tool("usp_bookings_create", {
            "service_id": "SAUNA-30", "slot_id": slot,
            "buyer": {"first_name": "Lee", "last_name": "Listen", "email": "lee@example.com"},
            "_meta": {"usp": meta["usp"] | {"idempotency_key": str(uuid.uuid4())}}})
        booking_id = booked.structured_content["booking"]["id"]
        uri = f"usp://bookings/{booking_id}"
        async with client.listen(resource_subscriptions=[uri], tools_list_changed=True) as sub:
            assert list(sub.honored.resource_subscriptions or []) == [uri]
            assert not sub.honored.tools_list_changed, "portico never sends tools/list_changed"
            await client.call_tool("usp_bookings_cancel", {"booking_id": booking_id, "_meta": meta})
            # Each update is a level trigger (the confirmation may land first): re-read on each.
            with anyio.fail_after(20):
                async for event in sub:
                    assert getattr(event, "uri", None) == uri, event
                    latest = json.loads((await client.read_resource(uri)).contents[0].text)
                    assert latest["booking_id"] == booking_id
                    if latest["event"] == "booking.canceled":
                        break
