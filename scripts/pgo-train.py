#!/usr/bin/env python3
"""The training workload of scripts/build-pgo, against a portico serving the demo mappings.

Usage: pgo-train.py <port> <seconds>. Loopback only. Rounds of scripts/soak's workload (its
client and its `one_round`: every demo tool at both eras, 2026-07-28 stateless and 2025-11-25
with a session, plus refused calls) with `tools/list`, an `ask_business` question, malformed JSON and a batch
in each,
then the USP availability query from 32 keep-alive connections for <seconds>. Exits non-zero
when a call failed unexpectedly (soak's accounting) or a tool never succeeded, so a mapping
change cannot leave the profile trained on error paths; tests/e2e/test_pgo_train.py runs it.
"""
import http.client, importlib.machinery, importlib.util, json, random, sys, threading, time
from pathlib import Path

loader = importlib.machinery.SourceFileLoader("soak", str(Path(__file__).with_name("soak")))
spec = importlib.util.spec_from_loader("soak", loader)
soak = importlib.util.module_from_spec(spec)
loader.exec_module(soak)

port, seconds = int(sys.argv[1]), float(sys.argv[2])
ROUNDS = 28
# Tools whose success the workload must see at least once (a result, not an error).
MUST = ["usp_services_list", "usp_services_get", "usp_availability_query", "usp_bookings_create",
        "usp_bookings_get", "usp_bookings_cancel", "create_booking_session", "get_booking_session",
        "update_booking_session", "complete_booking_session", "cancel_booking_session", "ask_business"]
succeeded = {name: 0 for name in MUST}


class Client(soak.Client):
    """soak's client, counting each tool's successes."""

    def tool(self, name, args, expect="ok"):
        sc = super().tool(name, args, expect)
        business_error = any(m.get("type") == "error" for m in sc.get("messages", []) if
                             isinstance(m, dict)) if sc else True
        if sc and name in succeeded and not business_error and sc.get("ucp", {}).get("status") != "error":
            succeeded[name] += 1
        return sc


rnd = random.Random(7)
tools = 0
for i in range(ROUNDS):
    for era in (soak.MODERN, soak.LEGACY):
        c = Client(port, era)
        if era == soak.LEGACY:
            c.initialize()
        else:
            c.send("server/discover", {})
        status, body = c.send("tools/list", {})
        tools = max(tools, len(((body or {}).get("result") or {}).get("tools", [])))
        soak.one_round(c, rnd, ["MASSAGE-60", "FACIAL-45", "SAUNA-30"])
        c.tool("ask_business", soak.ucp({"ask": {"query": "Can I bring my dog?"}}))
        c.close()
    # Malformed JSON and a batch: refused with a 4xx, never an answer.
    for bad in (b'{"jsonrpc":"2.0","id":1,"method":', b'[{"jsonrpc":"2.0","id":1,"method":"ping"}]'):
        status, _, _ = soak.request(port, "POST", "/mcp", bad, soak.Client(port, soak.MODERN).headers("ping"))
        soak.STATS.call(400 <= status < 500, f"bad input: HTTP {status}")

stop = time.time() + seconds
load = [0]
failures = []


def hot():
    conn = http.client.HTTPConnection("127.0.0.1", port)
    c = soak.Client(port, soak.MODERN)
    msg = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
        "name": "usp_availability_query",
        "arguments": {"service_id": "MASSAGE-60", "start_date": "2026-12-01", "end_date": "2026-12-02"},
        "_meta": {"io.modelcontextprotocol/protocolVersion": soak.MODERN,
                  "io.modelcontextprotocol/clientCapabilities": {}}}}
    body = json.dumps(msg)
    headers = c.headers("tools/call", "usp_availability_query")
    try:
        while time.time() < stop:
            conn.request("POST", "/mcp", body, headers)
            r = conn.getresponse()
            answer = soak.rpc_body(r.read(), r.getheader("Content-Type"))
            assert (answer or {}).get("result", {}).get("structuredContent", {}).get("slots"), answer
            load[0] += 1
    except Exception as e:  # reported below: a thread's exception would not fail the run
        failures.append(repr(e))


threads = [threading.Thread(target=hot) for _ in range(32)]
for t in threads:
    t.start()
for t in threads:
    t.join()

calls, errors, _ = soak.STATS.snapshot()
done = {"tools": tools, "calls": calls, "errors": errors, "load": load[0], "succeeded": succeeded}
print("pgo-train:", json.dumps(done), file=sys.stderr)
if errors:
    sys.exit(f"pgo-train: {errors} unexpected errors: {soak.STATS.last_errors[:3]}")
if failures:
    sys.exit(f"pgo-train: the load failed: {failures[0]}")
missing = [k for k, v in succeeded.items() if v == 0] + (["load"] if not load[0] else [])
if missing or not tools:
    sys.exit(f"pgo-train: the workload never succeeded at: {', '.join(missing) or 'tools/list'}")
