//! The gateway idempotency store over a real gateway and backend: replays, conflicts, concurrent
//! duplicates and transient failures (USP §9.1.1: same key + same parameters -> same result).

mod common;
use common::*;
use serde_json::json;

async fn setup() -> (
    portico::app::Running,
    std::sync::Arc<Seen>,
    reqwest::Client,
    String,
) {
    gateway_on_test_backend("usp").await
}

#[tokio::test]
async fn a_replay_gets_the_stored_answer_and_a_reuse_with_other_arguments_conflicts() {
    let (g, seen, c, url) = setup().await;
    let before = hits(&seen);
    let first = call(
        &c,
        &url,
        "echo_post",
        keyed(json!({"name": "x"}), "idem-replay"),
    )
    .await;
    assert!(first.body.get("result").is_some(), "{}", first.text);
    let again = call(
        &c,
        &url,
        "echo_post",
        keyed(json!({"name": "x"}), "idem-replay"),
    )
    .await;
    assert_eq!(
        again.body["result"], first.body["result"],
        "the stored answer"
    );
    assert_eq!(
        hits(&seen),
        before + 1,
        "the replay never reached the backend"
    );

    // Same key, other arguments: USP's idempotency_conflict (409 in REST), no backend call.
    let other = call(
        &c,
        &url,
        "echo_post",
        keyed(json!({"name": "y"}), "idem-replay"),
    )
    .await;
    assert_eq!(other.error_code(), Some(-32600), "{}", other.text);
    assert_eq!(other.body["error"]["data"]["code"], "idempotency_conflict");
    assert_eq!(hits(&seen), before + 1);

    // Another key is another operation.
    call(
        &c,
        &url,
        "echo_post",
        keyed(json!({"name": "x"}), "idem-other"),
    )
    .await;
    assert_eq!(hits(&seen), before + 2);
    g.stop().await.unwrap();
}

#[tokio::test]
async fn a_key_names_one_operation_of_the_business_not_one_per_tool() {
    let (g, seen, c, url) = setup().await;
    let first = call(
        &c,
        &url,
        "echo_post",
        keyed(json!({"name": "x"}), "idem-cross"),
    )
    .await;
    assert!(first.body.get("result").is_some(), "{}", first.text);
    let before = hits(&seen);
    // The same key on another tool of the business, even with fitting arguments: a conflict,
    // and no backend call.
    let other = call(
        &c,
        &url,
        "echo_get",
        keyed(json!({"id": "x"}), "idem-cross"),
    )
    .await;
    assert_eq!(other.error_code(), Some(-32600), "{}", other.text);
    assert_eq!(other.body["error"]["data"]["code"], "idempotency_conflict");
    assert!(
        other.text.contains("another tool"),
        "the message says why: {}",
        other.text
    );
    assert_eq!(hits(&seen), before);
    g.stop().await.unwrap();
}

#[tokio::test]
async fn concurrent_duplicates_reach_the_backend_once() {
    let (g, seen, c, url) = setup().await;
    let before = hits(&seen);
    let args = keyed(json!({"ms": 300}), "idem-concurrent");
    let (a, b) = tokio::join!(
        call(&c, &url, "slow", args.clone()),
        call(&c, &url, "slow", args.clone())
    );
    assert!(a.body.get("result").is_some(), "{}", a.text);
    assert_eq!(
        a.body["result"], b.body["result"],
        "the duplicate got the first call's answer"
    );
    assert_eq!(hits(&seen), before + 1, "one backend call for both");
    g.stop().await.unwrap();
}

#[tokio::test]
async fn transient_failures_are_not_remembered() {
    let (g, seen, c, url) = setup().await;
    let before = hits(&seen);
    for _ in 0..2 {
        let a = call(&c, &url, "status", keyed(json!({"code": 503}), "idem-503")).await;
        assert!(a.error_code().is_some(), "{}", a.text);
    }
    assert_eq!(
        hits(&seen),
        before + 2,
        "a retry after a 503 reaches the backend"
    );
    // A definitive answer (here a 404) is remembered.
    for _ in 0..2 {
        call(&c, &url, "status", keyed(json!({"code": 404}), "idem-404")).await;
    }
    assert_eq!(hits(&seen), before + 3);
    g.stop().await.unwrap();
}
