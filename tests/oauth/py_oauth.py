"""The Python SDK's own OAuth client providers against `portico demo --oauth-issuer`, unmodified:
401 with `resource_metadata`, discovery, dynamic registration (or client credentials), a token for
the MCP endpoint (RFC 8707 `resource`), then a tool call through to the demo backend.

Usage: python py_oauth.py <legacy|auto> <code|cc> <mcp-url> <issuer>
`legacy` is a 2025-11-25 session, `auto` negotiates 2026-07-28. `code`: authorization code +
PKCE, the "browser" follows the redirects (the authorization server answers login and consent
itself); `cc`: client credentials.
"""

from __future__ import annotations

import asyncio
import base64
import json
import sys
import urllib.parse

import httpx2
from mcp import Client
from mcp.client.auth import OAuthClientProvider
from mcp.client.auth.extensions.client_credentials import ClientCredentialsOAuthProvider
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import AuthorizationCodeResult, OAuthClientMetadata

CALLBACK = "http://127.0.0.1:9/callback"


def fail(tag: str, what: str) -> None:
    print(f"{tag}: FAILED: {what}")
    sys.exit(1)


class Memory:
    def __init__(self) -> None:
        self.tokens = None
        self.info = None

    async def get_tokens(self):
        return self.tokens

    async def set_tokens(self, tokens) -> None:
        self.tokens = tokens

    async def get_client_info(self):
        return self.info

    async def set_client_info(self, info) -> None:
        self.info = info


async def main(mode: str, flow: str, url: str, issuer: str) -> None:
    tag = f"python-{mode}/{flow}"
    async with httpx2.AsyncClient() as plain:
        first = await plain.post(
            url,
            json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
            headers={"accept": "application/json, text/event-stream"},
        )
    challenge = first.headers.get("www-authenticate", "")
    if first.status_code != 401 or 'resource_metadata="' not in challenge:
        fail(tag, f"401 with resource_metadata (got {first.status_code} {challenge})")

    storage = Memory()
    seen: dict[str, object] = {}
    if flow == "cc":
        provider = ClientCredentialsOAuthProvider(
            server_url=url,
            storage=storage,
            client_id="backoffice",
            client_secret="backoffice-secret-0123456789abcdef",
            scope="demo:call demo:book",
            issuer=issuer,
        )
    else:

        async def redirect_handler(auth_url: str) -> None:
            q = urllib.parse.parse_qs(urllib.parse.urlsplit(auth_url).query)
            seen["resource"] = q.get("resource", [None])[0]
            seen["pkce"] = q.get("code_challenge_method", [None])[0]
            jar: dict[str, str] = {}
            at = auth_url
            async with httpx2.AsyncClient() as browser:
                for _ in range(20):
                    cookie = "; ".join(f"{k}={v}" for k, v in jar.items())
                    r = await browser.get(at, headers={"cookie": cookie} if cookie else {})
                    for c in r.headers.get_list("set-cookie"):
                        k, _, v = c.split(";", 1)[0].partition("=")
                        jar[k] = v
                    loc = r.headers.get("location")
                    if not loc:
                        fail(tag, f"a redirect at {at} (got {r.status_code})")
                    at = urllib.parse.urljoin(at, loc)
                    if at.startswith(CALLBACK):
                        seen["callback"] = dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(at).query))
                        return
            fail(tag, "the authorization finished within 20 redirects")

        async def callback_handler() -> AuthorizationCodeResult:
            p = seen["callback"]
            if "error" in p:
                fail(tag, f"no error at the callback: {p}")
            return AuthorizationCodeResult(code=p["code"], state=p.get("state"), iss=p.get("iss"))

        provider = OAuthClientProvider(
            server_url=url,
            client_metadata=OAuthClientMetadata(
                client_name=f"portico oauth interop {tag}",
                redirect_uris=[CALLBACK],
                grant_types=["authorization_code", "refresh_token"],
                response_types=["code"],
                token_endpoint_auth_method="none",
            ),
            storage=storage,
            redirect_handler=redirect_handler,
            callback_handler=callback_handler,
        )

    async with httpx2.AsyncClient(auth=provider, timeout=30) as http:
        transport = streamable_http_client(url, http_client=http)
        async with Client(transport, mode=mode, read_timeout_seconds=30) as client:
            want = {"auto": "2026-07-28", "legacy": "2025-11-25"}[mode]
            if client.protocol_version != want:
                fail(tag, f"{want} negotiated (got {client.protocol_version})")
            tools = (await client.list_tools()).tools
            names = [t.name for t in tools]
            if "usp_services_list" not in names:
                fail(tag, f"usp_services_list is listed ({names})")
            result = await client.call_tool("usp_services_list", {})
            if result.is_error:
                fail(tag, f"the call succeeds: {result}")
            services = (result.structured_content or {}).get("services", [])
            if not any(s.get("id") == "MASSAGE-60" for s in services):
                fail(tag, f"the backend answered: {services}")
    if storage.tokens is None:
        fail(tag, "an access token was obtained")
    payload = storage.tokens.access_token.split(".")[1]
    claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    if claims.get("iss") != issuer:
        fail(tag, f"iss {claims.get('iss')}")
    aud = claims.get("aud")
    if url not in (aud if isinstance(aud, list) else [aud]):
        fail(tag, f"aud {aud}")
    if flow == "code":
        if claims.get("sub") != "alice":
            fail(tag, f"sub {claims.get('sub')}")
        if seen.get("resource") != url or seen.get("pkce") != "S256":
            fail(tag, f"resource indicator and PKCE S256 in the authorization request ({seen})")
        if storage.info is None or not storage.info.client_id:
            fail(tag, "the client registered dynamically")
    elif claims.get("client_id") != "backoffice":
        fail(tag, f"client_id {claims.get('client_id')}")
    print(f"{tag}: ok (401 -> discovery -> token for {aud} -> {len(names)} tools; usp_services_list -> {len(services)} services)")


if __name__ == "__main__":
    if len(sys.argv) != 5 or sys.argv[1] not in ("legacy", "auto") or sys.argv[2] not in ("code", "cc"):
        print(__doc__)
        sys.exit(2)
    asyncio.run(main(*sys.argv[1:]))
