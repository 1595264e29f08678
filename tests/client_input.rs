//! Tools that ask the MCP client (`ask:` in mappings): 2026-07-28 MRTR rounds with a sealed
//! `requestState`, 2025-era server->client requests on the call's SSE stream, and the
//! per-tool client-capability check. Real HTTP: portico in front of the recording test backend.

mod common;

use common::*;
use serde_json::{Value, json};
use std::sync::Arc;

struct Setup {
    gw: portico::app::Running,
    seen: Arc<Seen>,
    client: reqwest::Client,
    url: String,
}

async fn setup() -> Setup {
    let (backend, seen) = test_backend().await;
    let dir = fixture_with_backend("ask", &backend.to_string());
    let gw = gateway(&[dir.join("ask.yaml")]).await;
    let url = gw.mcp_url();
    Setup {
        gw,
        seen,
        client: reqwest::Client::new(),
        url,
    }
}

impl Setup {
    /// The first round of `cancel_booking` by a client that declared elicitation.
    async fn ask_to_cancel(&self, booking: &str) -> Answer {
        let caps = json!({"elicitation": {}});
        self.call(
            "cancel_booking",
            json!({"booking_id": booking}),
            caps,
            json!({}),
        )
        .await
    }

    fn backend_calls(&self) -> Vec<Value> {
        self.seen.requests.lock().expect("lock").clone()
    }

    /// A 2026-07-28 `tools/call` declaring `caps`, with `extra` params (`inputResponses`,
    /// `requestState`).
    async fn call(&self, name: &str, args: Value, caps: Value, extra: Value) -> Answer {
        self.stateless("tools/call", name, args, caps, extra).await
    }

    /// A 2026-07-28 request for `name` (`tools/call`, `prompts/get`) with `arguments`.
    async fn stateless(
        &self,
        method: &str,
        name: &str,
        args: Value,
        caps: Value,
        extra: Value,
    ) -> Answer {
        let mut params = json!({
            "name": name,
            "arguments": args,
            "_meta": {
                "io.modelcontextprotocol/protocolVersion": MODERN,
                "io.modelcontextprotocol/clientCapabilities": caps,
            }
        });
        if let Value::Object(e) = extra {
            for (k, v) in e {
                params[k] = v;
            }
        }
        send(
            self.client
                .post(&self.url)
                .header("content-type", "application/json")
                .header("accept", "application/json, text/event-stream")
                .header("mcp-protocol-version", MODERN)
                .header("mcp-method", method)
                .header("mcp-name", name)
                .body(
                    json!({"jsonrpc": "2.0", "id": 7, "method": method, "params": params})
                        .to_string(),
                ),
        )
        .await
    }
}

fn accept(content: Value) -> Value {
    json!({"action": "accept", "content": content})
}

/// Asserts a -32602 whose message names `what`.
fn refused_naming(a: &Answer, what: &str) {
    assert_eq!(a.error_code(), Some(-32602), "{}", a.text);
    let message = a.body["error"]["message"].as_str().unwrap_or("");
    assert!(message.contains(what), "{message}");
}

fn text(a: &Answer) -> &str {
    a.result()["content"][0]["text"].as_str().unwrap_or("")
}

#[tokio::test]
async fn mrtr_asks_first_then_calls_the_backend_once_with_the_answer() {
    let s = setup().await;
    let caps = json!({"elicitation": {}});
    let a = s.ask_to_cancel("B1").await;
    assert_eq!(a.status, 200, "{}", a.text);
    let r = a.result();
    assert_eq!(r["resultType"], "input_required", "{}", a.text);
    let q = &r["inputRequests"]["confirm"];
    assert_eq!(q["method"], "elicitation/create");
    assert_eq!(
        q["params"]["message"],
        "Cancel booking B1? This cannot be undone."
    );
    assert_eq!(
        q["params"]["requestedSchema"]["required"],
        json!(["confirm"])
    );
    let state = r["requestState"]
        .as_str()
        .expect("requestState")
        .to_string();
    assert!(
        s.backend_calls().is_empty(),
        "nothing reaches the backend before the answer"
    );

    let a = s
        .call(
            "cancel_booking",
            json!({"booking_id": "B1"}),
            caps,
            json!({"inputResponses": {"confirm": accept(json!({"confirm": true}))}, "requestState": state}),
        )
        .await;
    let r = a.result();
    assert_eq!(r["resultType"], "complete", "{}", a.text);
    assert_ne!(r["isError"], true, "{}", a.text);
    let calls = s.backend_calls();
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0]["path"], "/t/echo/cancel/B1");
    assert_eq!(calls[0]["body"], json!({"confirmation": {"confirm": true}}));
    s.gw.stop().await.expect("stopped");
}

#[tokio::test]
async fn a_declined_question_ends_the_call_with_its_text_and_no_backend_request() {
    let s = setup().await;
    let caps = json!({"elicitation": {}});
    for action in ["decline", "cancel"] {
        let a = s
            .call(
                "cancel_booking",
                json!({"booking_id": "B7"}),
                caps.clone(),
                json!({"inputResponses": {"confirm": {"action": action}}}),
            )
            .await;
        assert_eq!(a.result()["isError"], true, "{}", a.text);
        assert_eq!(a.result()["resultType"], "complete");
        assert_eq!(text(&a), "Booking B7 was not cancelled.");
    }
    assert!(s.backend_calls().is_empty());
    s.gw.stop().await.expect("stopped");
}

#[tokio::test]
async fn tampered_foreign_or_malformed_request_state_is_refused() {
    let s = setup().await;
    let caps = json!({"elicitation": {}, "sampling": {}});
    let first = s
        .call("pick_room", json!({}), caps.clone(), json!({}))
        .await;
    let state = first.result()["requestState"]
        .as_str()
        .expect("requestState")
        .to_string();
    let room = json!({"room": accept(json!({"room_type": "suite"}))});
    let mut flipped = state.clone().into_bytes();
    let last = flipped.len() - 1;
    flipped[last] = if flipped[last] == b'A' { b'B' } else { b'A' };
    let cases = [
        ("pick_room", json!({}), json!(format!("{state}-TAMPERED"))),
        (
            "pick_room",
            json!({}),
            json!(String::from_utf8(flipped).expect("ascii")),
        ),
        ("pick_room", json!({}), json!("no-dot-at-all")),
        ("pick_room", json!({}), json!(42)),
        // A state minted for one tool is no key to another.
        (
            "cancel_booking",
            json!({"booking_id": "B1"}),
            json!(state.clone()),
        ),
    ];
    for (tool, args, bad) in cases {
        let a = s
            .call(
                tool,
                args,
                caps.clone(),
                json!({"inputResponses": room, "requestState": bad}),
            )
            .await;
        assert_eq!(a.error_code(), Some(-32602), "{tool} {bad}: {}", a.text);
    }
    let a = s
        .call(
            "pick_room",
            json!({}),
            caps.clone(),
            json!({"inputResponses": null}),
        )
        .await;
    assert_eq!(a.error_code(), Some(-32602), "{}", a.text);
    let a = s
        .call(
            "pick_room",
            json!({}),
            caps,
            json!({"inputResponses": {"room": 12345}}),
        )
        .await;
    assert_eq!(a.error_code(), Some(-32602), "{}", a.text);
    assert!(s.backend_calls().is_empty());
    s.gw.stop().await.expect("stopped");
}

#[tokio::test]
async fn a_state_is_bound_to_the_arguments_it_was_minted_for() {
    let s = setup().await;
    let caps = json!({"elicitation": {}});
    let first = s.ask_to_cancel("B1").await;
    let state = first.result()["requestState"].clone();
    let a = s
        .call(
            "cancel_booking",
            json!({"booking_id": "B2"}),
            caps,
            json!({"inputResponses": {"confirm": accept(json!({"confirm": true}))}, "requestState": state}),
        )
        .await;
    assert_eq!(a.error_code(), Some(-32602), "{}", a.text);
    assert!(s.backend_calls().is_empty());
    s.gw.stop().await.expect("stopped");
}

#[tokio::test]
async fn a_tool_refuses_clients_without_the_capabilities_its_steps_need() {
    let s = setup().await;
    let a = s
        .call(
            "cancel_booking",
            json!({"booking_id": "B1"}),
            json!({}),
            json!({}),
        )
        .await;
    assert_eq!(a.status, 400, "{}", a.text);
    assert_eq!(a.error_code(), Some(-32021));
    assert_eq!(a.body["id"], 7);
    assert_eq!(
        a.body["error"]["data"]["requiredCapabilities"],
        json!({"elicitation": {}})
    );
    let a = s
        .call(
            "pick_room",
            json!({}),
            json!({"elicitation": {}}),
            json!({}),
        )
        .await;
    assert_eq!(a.error_code(), Some(-32021));
    assert_eq!(
        a.body["error"]["data"]["requiredCapabilities"],
        json!({"sampling": {}})
    );
    assert!(s.backend_calls().is_empty());
    s.gw.stop().await.expect("stopped");
}

#[tokio::test]
async fn later_rounds_see_earlier_answers_and_carry_a_new_state() {
    let s = setup().await;
    let caps = json!({"elicitation": {}, "sampling": {}});
    let r1 = s
        .call("pick_room", json!({}), caps.clone(), json!({}))
        .await;
    let s1 = r1.result()["requestState"].clone();
    assert!(
        r1.result()["inputRequests"].get("blurb").is_none(),
        "one round at a time"
    );
    let r2 = s
        .call(
            "pick_room",
            json!({}),
            caps.clone(),
            // A field nobody asked for does not become an argument.
            json!({"inputResponses": {"room": accept(json!({"room_type": "suite", "booking_id": "X"}))}, "requestState": s1}),
        )
        .await;
    let q = &r2.result()["inputRequests"]["blurb"];
    assert_eq!(q["method"], "sampling/createMessage", "{}", r2.text);
    assert_eq!(
        q["params"]["messages"][0]["content"]["text"],
        "Describe a suite room in one line"
    );
    assert_eq!(q["params"]["maxTokens"], 40);
    let s2 = r2.result()["requestState"].clone();
    assert_ne!(s1, s2);
    // A retry without the answer is asked again, with the same round.
    let again = s
        .call(
            "pick_room",
            json!({}),
            caps.clone(),
            json!({"requestState": s2}),
        )
        .await;
    assert_eq!(again.result()["resultType"], "input_required");
    assert!(again.result()["inputRequests"].get("blurb").is_some());
    let sample = json!({"role": "assistant", "content": {"type": "text", "text": "Sea view, two rooms."},
                        "model": "m", "stopReason": "endTurn"});
    let done = s
        .call(
            "pick_room",
            json!({}),
            caps,
            json!({"inputResponses": {"blurb": sample}, "requestState": s2}),
        )
        .await;
    assert_eq!(done.result()["resultType"], "complete", "{}", done.text);
    let calls = s.backend_calls();
    assert_eq!(calls.len(), 1);
    assert_eq!(
        calls[0]["body"],
        json!({"room_type": "suite", "blurb": "Sea view, two rooms."})
    );
    s.gw.stop().await.expect("stopped");
}

#[tokio::test]
async fn answers_must_fit_the_question_and_callers_cannot_skip_it() {
    let s = setup().await;
    let caps = json!({"elicitation": {}, "roots": {}});
    let a = s
        .call(
            "cancel_booking",
            json!({"booking_id": "B1"}),
            caps.clone(),
            json!({"inputResponses": {"confirm": accept(json!({"confirm": "yes"}))}}),
        )
        .await;
    refused_naming(&a, "confirm");
    // The answer's argument sent by the caller: refused, the user must be asked.
    let a = s
        .call(
            "cancel_booking",
            json!({"booking_id": "B1", "confirmation": {"confirm": true}}),
            caps.clone(),
            json!({}),
        )
        .await;
    assert_eq!(a.error_code(), Some(-32602), "{}", a.text);
    let a = s
        .call(
            "where_am_i",
            json!({}),
            caps.clone(),
            json!({"inputResponses": {"where": {"roots": "not a list"}}}),
        )
        .await;
    assert_eq!(a.error_code(), Some(-32602), "{}", a.text);
    assert!(s.backend_calls().is_empty());
    let a = s
        .call(
            "where_am_i",
            json!({}),
            caps,
            json!({"inputResponses": {"where": {"roots": [{"uri": "file:///srv", "name": "srv"}]}}}),
        )
        .await;
    assert_eq!(a.result()["resultType"], "complete", "{}", a.text);
    assert_eq!(
        s.backend_calls()[0]["body"]["roots"],
        json!([{"uri": "file:///srv", "name": "srv"}])
    );
    s.gw.stop().await.expect("stopped");
}

/// A 2025 session's SSE response, read event by event.
struct Sse {
    resp: reqwest::Response,
    buf: String,
}

impl Sse {
    async fn next(&mut self) -> Option<Value> {
        loop {
            if let Some(i) = self.buf.find("\n\n") {
                let event: String = self.buf.drain(..i + 2).collect();
                if let Some(v) = event
                    .lines()
                    .filter_map(|l| l.strip_prefix("data:"))
                    .find_map(|d| serde_json::from_str(d.trim()).ok())
                {
                    return Some(v);
                }
                continue;
            }
            let chunk = self.resp.chunk().await.ok()??;
            self.buf.push_str(&String::from_utf8_lossy(&chunk));
        }
    }
}

impl Setup {
    async fn session(&self, caps: Value) -> String {
        let a = send(
            self.client
                .post(&self.url)
                .header("content-type", "application/json")
                .header("accept", "application/json, text/event-stream")
                .body(
                    json!({"jsonrpc":"2.0","id":0,"method":"initialize","params":{
                    "protocolVersion":"2025-11-25","capabilities":caps,
                    "clientInfo":{"name":"it","version":"1"}}})
                    .to_string(),
                ),
        )
        .await;
        a.headers
            .get("mcp-session-id")
            .and_then(|v| v.to_str().ok())
            .expect("session id")
            .to_string()
    }

    async fn session_call(&self, sid: &str, name: &str, args: Value) -> Sse {
        let resp = legacy(
            &self.client,
            &self.url,
            sid,
            json!({"jsonrpc":"2.0","id":"c1","method":"tools/call","params":{"name":name,"arguments":args}}),
        )
        .send()
        .await
        .expect("sent");
        assert_eq!(
            resp.headers()
                .get("content-type")
                .and_then(|v| v.to_str().ok()),
            Some("text/event-stream")
        );
        Sse {
            resp,
            buf: String::new(),
        }
    }

    async fn answer(&self, sid: &str, message: Value) -> Answer {
        send(legacy(&self.client, &self.url, sid, message)).await
    }
}

#[tokio::test]
async fn session_calls_ask_on_their_stream_and_get_the_answer_routed_back() {
    let s = setup().await;
    let sid = s.session(json!({"elicitation": {}})).await;
    let mut stream = s
        .session_call(&sid, "cancel_booking", json!({"booking_id": "B3"}))
        .await;
    let q = stream.next().await.expect("a request");
    assert_eq!(q["method"], "elicitation/create");
    assert_eq!(
        q["params"]["message"],
        "Cancel booking B3? This cannot be undone."
    );
    assert!(s.backend_calls().is_empty());
    let a = s
        .answer(
            &sid,
            json!({"jsonrpc":"2.0","id":q["id"],"result":accept(json!({"confirm": true}))}),
        )
        .await;
    assert_eq!(a.status, 202, "{}", a.text);
    let done = stream.next().await.expect("the response");
    assert_eq!(done["id"], "c1");
    assert_ne!(done["result"]["isError"], true, "{done}");
    let calls = s.backend_calls();
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0]["body"], json!({"confirmation": {"confirm": true}}));
    // The same answer again: nobody waits for it any more.
    let a = s
        .answer(
            &sid,
            json!({"jsonrpc":"2.0","id":q["id"],"result":accept(json!({"confirm": true}))}),
        )
        .await;
    assert_eq!(a.status, 400);
    s.gw.stop().await.expect("stopped");
}

#[tokio::test]
async fn session_answers_for_unknown_ids_or_other_sessions_are_refused() {
    let s = setup().await;
    let sid = s.session(json!({"elicitation": {}})).await;
    let other = s.session(json!({"elicitation": {}})).await;
    let mut stream = s
        .session_call(&sid, "cancel_booking", json!({"booking_id": "B4"}))
        .await;
    let q = stream.next().await.expect("a request");
    let reply = json!({"jsonrpc":"2.0","id":q["id"],"result":accept(json!({"confirm": true}))});
    let a = s.answer(&other, reply.clone()).await;
    assert_eq!(
        (a.status, a.error_code()),
        (400, Some(-32600)),
        "{}",
        a.text
    );
    let a = s
        .answer(
            &sid,
            json!({"jsonrpc":"2.0","id":"never-asked","result":{}}),
        )
        .await;
    assert_eq!(
        (a.status, a.error_code()),
        (400, Some(-32600)),
        "{}",
        a.text
    );
    // The real answer still gets through.
    assert_eq!(s.answer(&sid, reply).await.status, 202);
    let done = stream.next().await.expect("the response");
    assert_eq!(done["id"], "c1");
    s.gw.stop().await.expect("stopped");
}

#[tokio::test]
async fn an_unanswered_session_question_times_out_and_is_cancelled() {
    let s = setup().await;
    let sid = s.session(json!({"elicitation": {}})).await;
    let mut stream = s
        .session_call(&sid, "cancel_booking", json!({"booking_id": "B5"}))
        .await;
    let q = stream.next().await.expect("a request");
    let cancelled = stream.next().await.expect("a cancellation");
    assert_eq!(cancelled["method"], "notifications/cancelled");
    assert_eq!(cancelled["params"]["requestId"], q["id"]);
    let done = stream.next().await.expect("the response");
    assert_eq!(done["result"]["isError"], true, "{done}");
    assert!(
        done["result"]["content"][0]["text"]
            .as_str()
            .unwrap_or("")
            .contains("did not answer `confirm`"),
        "{done}"
    );
    let late = s
        .answer(
            &sid,
            json!({"jsonrpc":"2.0","id":q["id"],"result":accept(json!({"confirm": true}))}),
        )
        .await;
    assert_eq!(late.status, 400, "a late answer finds nobody waiting");
    assert!(s.backend_calls().is_empty());
    s.gw.stop().await.expect("stopped");
}

#[tokio::test]
async fn session_clients_without_the_capability_or_refusing_get_errors() {
    let s = setup().await;
    let sid = s.session(json!({})).await;
    let a = send(legacy(
        &s.client,
        &s.url,
        &sid,
        json!({"jsonrpc":"2.0","id":"c1","method":"tools/call","params":{"name":"cancel_booking","arguments":{"booking_id":"B1"}}}),
    ))
    .await;
    assert_eq!(a.error_code(), Some(-32021), "{}", a.text);
    assert_eq!(
        a.body["error"]["data"]["requiredCapabilities"],
        json!({"elicitation": {}})
    );

    let sid = s.session(json!({"elicitation": {}, "sampling": {}})).await;
    let mut stream = s.session_call(&sid, "pick_room", json!({})).await;
    let q = stream.next().await.expect("a request");
    assert_eq!(q["method"], "elicitation/create");
    s.answer(
        &sid,
        json!({"jsonrpc":"2.0","id":q["id"],"result":accept(json!({"room_type": "double"}))}),
    )
    .await;
    let q = stream.next().await.expect("the second round");
    assert_eq!(q["method"], "sampling/createMessage");
    assert_eq!(
        q["params"]["messages"][0]["content"]["text"],
        "Describe a double room in one line"
    );
    let a = s
        .answer(
            &sid,
            json!({"jsonrpc":"2.0","id":q["id"],"error":{"code":-1,"message":"User rejected sampling"}}),
        )
        .await;
    assert_eq!(a.status, 202);
    let done = stream.next().await.expect("the response");
    assert_eq!(done["result"]["isError"], true, "{done}");
    assert!(
        done["result"]["content"][0]["text"]
            .as_str()
            .unwrap_or("")
            .contains("User rejected sampling")
    );
    assert!(s.backend_calls().is_empty());
    s.gw.stop().await.expect("stopped");
}

#[tokio::test]
async fn bad_ask_steps_fail_the_load_with_file_line_and_fix() {
    let dir =
        std::env::temp_dir().join(format!("portico-ask-bad-{}", uuid::Uuid::new_v4().simple()));
    std::fs::create_dir_all(&dir).expect("dir");
    std::fs::copy(
        fixtures().join("ask/ask.openrpc.json"),
        dir.join("ask.openrpc.json"),
    )
    .expect("copy");
    let yaml = r#"business: bad
binding: plain
openrpc: ask.openrpc.json
backend: { url: "http://127.0.0.1:9/t" }
tools:
  cancel_booking:
    http: POST /echo/{booking_id}
    ask:
      - both:
          elicit: hi
          sample: ho
      - deep:
          elicit: "{{ unclosed"
          schema: { type: object, properties: { a: { type: object } } }
      - nowhere: { sample: say it }
      - sneaky:
          elicit: id?
          schema: { type: object, properties: { booking_id: { type: string } } }
  pick_room:
    http: POST /echo
    ask:
      - r: { roots: true, into: roots, max_tokens: 5, timeout: soon }
"#;
    std::fs::write(dir.join("bad.yaml"), yaml).expect("write");
    let Err(diags) = portico::config::load(&[dir.join("bad.yaml")]) else {
        panic!("the load fails");
    };
    let all: Vec<String> = diags.iter().map(ToString::to_string).collect();
    let find = |needle: &str| {
        diags
            .iter()
            .find(|d| d.message.contains(needle))
            .unwrap_or_else(|| panic!("no diagnostic with `{needle}` in {all:#?}"))
    };
    let d = find("exactly one of `elicit`, `sample`, `roots: true`");
    assert_eq!(d.line, Some(9), "{d}");
    assert!(d.hint.is_some());
    let d = find("elicit template");
    assert_eq!(d.line, Some(13), "{d}");
    find("needs `into`");
    let d = find("is a param of `cancel_booking`");
    assert!(d.hint.as_deref().unwrap_or("").contains("does not declare"));
    find("`max_tokens` only applies to `sample` steps");
    find("`soon` is not a positive duration");
    for d in &diags {
        assert!(d.file.ends_with("bad.yaml"), "{d}");
        assert!(d.line.is_some(), "every diagnostic has a line: {d}");
    }
}

#[tokio::test]
async fn prompts_ask_at_2026_and_are_hidden_from_2025_sessions() {
    let s = setup().await;
    let caps = json!({"elicitation": {}});
    let style = json!({"style": "cheerful"});
    let get = |extra: Value| {
        s.stateless(
            "prompts/get",
            "trip_brief",
            style.clone(),
            caps.clone(),
            extra,
        )
    };
    let first = get(json!({})).await;
    let r = first.result();
    assert_eq!(r["resultType"], "input_required", "{}", first.text);
    assert_eq!(
        r["inputRequests"]["where"]["params"]["message"],
        "Where are you travelling to?"
    );
    let done = get(json!({
        "inputResponses": {"where": accept(json!({"city": "Lisbon"}))},
        "requestState": r["requestState"],
    }))
    .await;
    assert_eq!(done.result()["resultType"], "complete", "{}", done.text);
    assert_eq!(
        done.result()["messages"][0]["content"]["text"],
        "Write a cheerful brief for a trip to Lisbon."
    );
    // The caller cannot answer for the user through the arguments.
    let a = s
        .stateless(
            "prompts/get",
            "trip_brief",
            json!({"city": "Nowhere"}),
            caps.clone(),
            json!({}),
        )
        .await;
    refused_naming(&a, "city");

    // A 2025 session has no stream for prompts/get to ask on: the prompt is not served there.
    let sid = s.session(json!({"elicitation": {}})).await;
    let list = s
        .answer(
            &sid,
            json!({"jsonrpc":"2.0","id":5,"method":"prompts/list"}),
        )
        .await;
    assert!(
        list.result()["prompts"]
            .as_array()
            .expect("prompts")
            .iter()
            .all(|p| p["name"] != "trip_brief"),
        "{}",
        list.text
    );
    let a = s
        .answer(
            &sid,
            json!({"jsonrpc":"2.0","id":6,"method":"prompts/get","params":{"name":"trip_brief"}}),
        )
        .await;
    assert_eq!(a.error_code(), Some(-32602), "{}", a.text);
    s.gw.stop().await.expect("stopped");
}

#[tokio::test]
async fn cancelling_a_session_call_abandons_its_question() {
    let s = setup().await;
    let sid = s.session(json!({"elicitation": {}})).await;
    let mut stream = s
        .session_call(&sid, "cancel_booking", json!({"booking_id": "B6"}))
        .await;
    let q = stream.next().await.expect("a request");
    let a = s
        .answer(
            &sid,
            json!({"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"c1"}}),
        )
        .await;
    assert_eq!(a.status, 202);
    assert!(
        stream.next().await.is_none(),
        "the stream ends without a response"
    );
    let late = s
        .answer(
            &sid,
            json!({"jsonrpc":"2.0","id":q["id"],"result":accept(json!({"confirm": true}))}),
        )
        .await;
    assert_eq!(late.status, 400, "the abandoned question waits for nothing");
    assert!(s.backend_calls().is_empty());
    s.gw.stop().await.expect("stopped");
}
