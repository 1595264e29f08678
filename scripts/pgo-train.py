#!/usr/bin/env python3
"""The training workload of scripts/build-pgo, against a portico serving the demo mappings.

Usage: pgo-train.py <port> <seconds>. Every demo tool in both protocol eras (sessions for
2025-11-25, stateless for 2026-07-28), a few bad requests, then the USP availability query from
32 connections for <seconds>. Loopback only. Exits non-zero when the workload stops exercising
what it should (no tools listed, no booking made, no session completed, a failed hot call), so
a mapping change cannot leave the profile trained on errors; tests/e2e/test_pgo_train.py runs it.
"""
import http.client, json, sys, threading, time
port, seconds = int(sys.argv[1]), float(sys.argv[2])
done = {"tools": 0, "bookings": 0, "sessions": 0, "asks": 0, "load": 0}
failures = []
NEW, OLD = "2026-07-28", "2025-11-25"
USP_META = {"usp": {"profile": "https://agent.example/profiles/usp.json"}}
UCP_META = {"ucp-agent": {"profile": "https://platform.example/p.json"}}

class Client:
    def __init__(self, era):
        self.c = http.client.HTTPConnection("127.0.0.1", port)
        self.era, self.session, self.n = era, None, 0
        if era == OLD:
            r = self.rpc("initialize", {"protocolVersion": OLD, "capabilities": {},
                                        "clientInfo": {"name": "pgo-train", "version": "1"}})
            assert "result" in r, r
            self.post({"jsonrpc": "2.0", "method": "notifications/initialized"})
    def post(self, msg, extra=None):
        h = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
             "MCP-Protocol-Version": self.era}
        if self.session:
            h["Mcp-Session-Id"] = self.session
        if self.era == NEW and isinstance(msg, dict) and "method" in msg and "id" in msg:
            h["Mcp-Method"] = msg["method"]
            name = msg.get("params", {}).get("name")
            if name:
                h["Mcp-Name"] = name
        h.update(extra or {})
        body = msg if isinstance(msg, bytes) else json.dumps(msg).encode()
        self.c.request("POST", "/mcp", body, h)
        r = self.c.getresponse()
        sid = r.getheader("Mcp-Session-Id")
        if sid:
            self.session = sid
        return r.status, r.read()
    def rpc(self, method, params):
        self.n += 1
        params = dict(params)
        if self.era == NEW:
            params["_meta"] = {"io.modelcontextprotocol/protocolVersion": NEW,
                               "io.modelcontextprotocol/clientCapabilities": {}}
        status, data = self.post({"jsonrpc": "2.0", "id": self.n, "method": method, "params": params})
        if data.startswith(b"event:") or data.startswith(b"data:"):
            data = [l[5:] for l in data.split(b"\n") if l.startswith(b"data:")][-1]
        return json.loads(data)
    def call(self, name, args):
        r = self.rpc("tools/call", {"name": name, "arguments": args})
        assert "result" in r or "error" in r, r
        return r.get("result") or {}
    def close(self):
        if self.session:
            self.c.request("DELETE", "/mcp", headers={"Mcp-Session-Id": self.session,
                                                      "MCP-Protocol-Version": self.era})
            self.c.getresponse().read()
        self.c.close()

def flows(era, day):
    c = Client(era)
    if era == NEW:
        c.rpc("server/discover", {})
    tools = c.rpc("tools/list", {}).get("result", {}).get("tools", [])
    done["tools"] = max(done["tools"], len(tools))
    c.call("usp_services_list", {})
    for sid in ["MASSAGE-60", "FACIAL-45", "NOPE"]:
        c.call("usp_services_get", {"service_id": sid})
    r = c.call("usp_availability_query", {"service_id": "SAUNA-30", "start_date": day, "end_date": day})
    slots = (r.get("structuredContent") or {}).get("slots") or []
    if slots:
        create = {"service_id": "SAUNA-30", "slot_id": slots[0]["id"],
                  "buyer": {"first_name": "Ana", "last_name": "Silva", "email": "ana@example.com"},
                  "_meta": {"usp": dict(USP_META["usp"], idempotency_key=f"k-{era}-{day}")}}
        b = (c.call("usp_bookings_create", create).get("structuredContent") or {}).get("booking") or {}
        if b.get("id"):
            done["bookings"] += 1
            c.call("usp_bookings_get", {"booking_id": b["id"], "_meta": USP_META})
            c.call("usp_bookings_cancel", {"booking_id": b["id"], "reason": "training", "_meta": USP_META})
    stay = {"property": {"id": "HH-LIS"}, "stays": [{"accommodation_type": {"id": "DBL"},
            "rate_plan": {"id": "FLEX"}, "occupancy": {"adults": 2, "children": 0},
            "stay_dates": {"start_date": "2027-01-20", "end_date": "2027-01-23"}}]}
    s = c.call("create_booking_session", {"booking": stay, "meta": UCP_META}).get("structuredContent") or {}
    if s.get("id"):
        booker = dict(stay, booker={"first_name": "Carla", "last_name": "Mendes", "email": "c@example.com"})
        c.call("update_booking_session", {"id": s["id"], "booking": booker, "meta": UCP_META})
        pay = {"payment": {"instruments": [{"id": "pi_1", "type": "card",
               "credential": {"type": "PAYMENT_GATEWAY", "token": "tok_visa_4242"}}]}}
        r = c.call("complete_booking_session", {"id": s["id"], "booking": pay,
                   "meta": dict(UCP_META, **{"idempotency-key": f"c-{era}-{day}"})})
        if not r.get("isError") and (r.get("structuredContent") or {}).get("id") == s["id"]:
            done["sessions"] += 1
        c.call("get_booking_session", {"id": s["id"], "meta": UCP_META})
        c.call("cancel_booking_session", {"id": s["id"], "meta": dict(UCP_META, **{"idempotency-key": f"x-{era}-{day}"})})
    r = c.call("ask_business", {"ask": {"query": "Can I bring my dog?"}, "meta": UCP_META})
    if not r.get("isError") and r.get("structuredContent"):
        done["asks"] += 1
    # Bad input: schema violations, an unknown tool, malformed JSON, a batch.
    c.call("usp_availability_query", {"service_id": 7})
    c.rpc("tools/call", {"name": "no_such_tool", "arguments": {}})
    c.post(b'{"jsonrpc":"2.0","id":1,"method":')
    c.post(b'[{"jsonrpc":"2.0","id":1,"method":"ping"}]')
    c.close()

for i in range(28):
    day = f"2026-12-{i + 1:02d}"
    flows(NEW, day)
    flows(OLD, day)

stop = time.time() + seconds
def load():
    c = Client(NEW)
    args = {"service_id": "MASSAGE-60", "start_date": "2026-12-01", "end_date": "2026-12-02"}
    try:
        while time.time() < stop:
            r = c.call("usp_availability_query", args)
            assert r.get("structuredContent", {}).get("slots"), r
            done["load"] += 1
    except Exception as e:  # reported below: a thread's exception would not fail the run
        failures.append(repr(e))
threads = [threading.Thread(target=load) for _ in range(32)]
for t in threads: t.start()
for t in threads: t.join()

print("pgo-train:", json.dumps(done), file=sys.stderr)
if failures:
    sys.exit(f"pgo-train: the load failed: {failures[0]}")
missing = [k for k, v in done.items() if v == 0]
if missing:
    sys.exit(f"pgo-train: the workload exercised nothing of: {', '.join(missing)} ({done})")
