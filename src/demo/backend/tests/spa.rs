//! Tests of the Seaside Spa appointment lifecycle over real HTTP on 127.0.0.1.
//! Test-only code.

use super::*;

#[tokio::test]
async fn appointment_lifecycle() {
    let d = start().await;
    let free = "MASSAGE-60@2026-12-01T09:00";

    // Auth.
    let (s, v) = d
        .call(
            Method::POST,
            "/spa/v1/appointments",
            None,
            Some(booking("MASSAGE-60", free)),
        )
        .await;
    assert_eq!((s, v), (401, json!({"error": "NO_AUTH"})));
    let (s, _) = d
        .call(
            Method::POST,
            "/spa/v1/appointments",
            Some("wrong"),
            Some(booking("MASSAGE-60", free)),
        )
        .await;
    assert_eq!(s, 401);

    // Create.
    let mut body = booking("MASSAGE-60", free);
    body["client"]["phone"] = json!("+351 900 000 000");
    body["note"] = json!("first visit");
    let (s, v) = d.post("/spa/v1/appointments", body).await;
    assert_eq!(s, 201);
    assert_eq!(
        v["appointment"],
        json!({
            "number": "A-1001", "treatment": "MASSAGE-60", "opening": free,
            "begins": "2026-12-01T09:00", "ends": "2026-12-01T10:00",
            "client": {"name": "Ana Silva", "email": "ana@example.org", "phone": "+351 900 000 000"},
            "status": "BOOKED", "moves": 0,
            "price": {"amount_cents": 9000, "ccy": "EUR"}, "created": "1",
            "booked_at": "2026-11-30T08:01:00Z", "changed_at": "2026-11-30T08:01:00Z",
        })
    );
    let (_, v) = d
        .get("/spa/v1/treatments/MASSAGE-60/openings?from=2026-12-01&to=2026-12-01")
        .await;
    assert_eq!(v["openings"][0]["free"], false);

    // Taken slots.
    let (s, v) = d
        .post("/spa/v1/appointments", booking("MASSAGE-60", free))
        .await;
    assert_eq!(s, 409);
    assert_eq!(v["error"], "SLOT_TAKEN");
    assert!(v["detail"].as_str().unwrap().contains(free));
    let (s, v) = d
        .post(
            "/spa/v1/appointments",
            booking("MASSAGE-60", "MASSAGE-60@2026-12-01T11:00"),
        )
        .await;
    assert_eq!((s, v["error"].clone()), (409, json!("SLOT_TAKEN")));

    // Validation: 200 with errors.
    let (s, v) = d
        .post(
            "/spa/v1/appointments",
            json!({"treatment": "FACIAL-45", "opening": "FACIAL-45@2026-12-01T09:00",
                   "client": {"email": "nobody.example.org"}}),
        )
        .await;
    assert_eq!(s, 200);
    assert_eq!(fields(&v), ["client.name", "client.email"]);
    assert_eq!(v["errors"][1]["msg"], "must contain @");
    let (s, v) = d
        .post(
            "/spa/v1/appointments",
            json!({"treatment": "FACIAL-45", "opening": "FACIAL-45@2026-12-01T09:00"}),
        )
        .await;
    assert_eq!(s, 200);
    assert_eq!(fields(&v), ["client.name", "client.email"]);
    let (_, v) = d
        .post(
            "/spa/v1/appointments",
            booking("FACIAL-45", "MASSAGE-60@2026-12-03T09:00"),
        )
        .await;
    assert_eq!(fields(&v), ["opening"]);

    // Unknown treatment / opening: 404.
    for (t, o) in [
        ("YOGA-90", "YOGA-90@2026-12-01T09:00"),
        ("FACIAL-45", "FACIAL-45@2026-12-01T10:00"),
        ("FACIAL-45", "FACIAL-45@2027-04-01T09:00"),
        ("FACIAL-45", "FACIAL-45@2026-12-01 09:00"),
        ("FACIAL-45", "FACIAL-45"),
    ] {
        let (s, v) = d.post("/spa/v1/appointments", booking(t, o)).await;
        assert_eq!((s, v["error"].clone()), (404, json!("NOT_FOUND")), "{o}");
    }

    // Read, also via a percent-encoded number.
    let (s, v) = d.get("/spa/v1/appointments/A%2D1001").await;
    assert_eq!(s, 200);
    assert_eq!(v["appointment"]["opening"], free);
    let (s, v) = d.get("/spa/v1/appointments/A-9999").await;
    assert_eq!((s, v["error"].clone()), (404, json!("NOT_FOUND")));
    let (s, _) = d
        .call(Method::GET, "/spa/v1/appointments/A-1001", None, None)
        .await;
    assert_eq!(s, 401);

    // Move.
    let (s, v) = d
        .post(
            "/spa/v1/appointments/A-1001/move",
            json!({"opening": "MASSAGE-60@2026-12-01T11:00"}),
        )
        .await;
    assert_eq!((s, v["error"].clone()), (409, json!("SLOT_TAKEN")));
    let (s, v) = d
        .post(
            "/spa/v1/appointments/A-1001/move",
            json!({"opening": "MASSAGE-60@2026-12-02T14:00"}),
        )
        .await;
    assert_eq!(s, 200);
    let a = &v["appointment"];
    assert_eq!(a["status"], "BOOKED");
    assert_eq!(a["moves"], 1);
    assert_eq!(a["opening"], "MASSAGE-60@2026-12-02T14:00");
    assert_eq!(a["begins"], "2026-12-02T14:00");
    assert_eq!(a["ends"], "2026-12-02T15:00");
    let (_, v) = d
        .get("/spa/v1/treatments/MASSAGE-60/openings?from=2026-12-01&to=2026-12-02")
        .await;
    assert_eq!(v["openings"][0]["free"], true, "old opening freed");
    assert_eq!(v["openings"][6]["free"], false, "new opening taken");
    let (_, v) = d.post("/spa/v1/appointments/A-1001/move", json!({})).await;
    assert_eq!(fields(&v), ["opening"]);
    let (s, _) = d
        .post(
            "/spa/v1/appointments/A-1001/move",
            json!({"opening": "MASSAGE-60@2026-12-02T15:00"}),
        )
        .await;
    assert_eq!(s, 404);
    let (s, _) = d
        .post(
            "/spa/v1/appointments/A-7/move",
            json!({"opening": "MASSAGE-60@2026-12-02T09:00"}),
        )
        .await;
    assert_eq!(s, 404);

    // Another booking gets the next number.
    let (s, v) = d
        .post("/spa/v1/appointments", booking("MASSAGE-60", free))
        .await;
    assert_eq!(s, 201);
    assert_eq!(v["appointment"]["number"], "A-1002");
    assert_eq!(v["appointment"]["created"], "2");
    assert_eq!(v["appointment"]["client"]["phone"], Value::Null);

    // Cancel (empty body allowed), frees the opening; twice is a conflict.
    let (s, v) = d
        .raw_post("/spa/v1/appointments/A-1001/cancellation", Vec::new())
        .await;
    assert_eq!(s, 200);
    assert_eq!(v["appointment"]["status"], "CANCELLED");
    assert_eq!(v["appointment"]["moves"], 1);
    let (_, v) = d
        .get("/spa/v1/treatments/MASSAGE-60/openings?from=2026-12-02&to=2026-12-02")
        .await;
    assert_eq!(v["openings"][2]["free"], true);
    let (s, v) = d
        .post(
            "/spa/v1/appointments/A-1001/cancellation",
            json!({"reason": "again"}),
        )
        .await;
    assert_eq!((s, v["error"].clone()), (409, json!("ALREADY_CANCELLED")));
    let (s, v) = d
        .post(
            "/spa/v1/appointments/A-1001/move",
            json!({"opening": "MASSAGE-60@2026-12-03T09:00"}),
        )
        .await;
    assert_eq!((s, v["error"].clone()), (409, json!("ALREADY_CANCELLED")));
    let (s, _) = d
        .post("/spa/v1/appointments/A-5/cancellation", json!({}))
        .await;
    assert_eq!(s, 404);
    let (_, v) = d.get("/spa/v1/appointments/A-1001").await;
    assert_eq!(v["appointment"]["status"], "CANCELLED");
}

#[tokio::test]
async fn a_bookings_report_is_accepted_then_ready_after_two_reads_or_cancelled() {
    let d = start().await;
    let (s, _) = d
        .post(
            "/spa/v1/appointments",
            booking("MASSAGE-60", "MASSAGE-60@2026-12-03T09:00"),
        )
        .await;
    assert_eq!(s, 201);
    let range = json!({"from": "2026-12-01", "to": "2026-12-31"});
    let (s, v) = d.post("/spa/v1/reports", range.clone()).await;
    assert_eq!(s, 202, "{v}");
    assert_eq!(v["report"]["state"], "QUEUED");
    assert_eq!(v["report"]["links"]["status"], "/spa/v1/reports/R-3001");
    let (_, v) = d.get("/spa/v1/reports/R-3001").await;
    assert_eq!(v["report"]["state"], "RUNNING", "{v}");
    let (_, v) = d.get("/spa/v1/reports/R-3001").await;
    assert_eq!(v["report"]["state"], "READY", "{v}");
    let out = &v["report"]["output"];
    assert_eq!(
        (out["booked"].as_u64(), out["cancelled"].as_u64()),
        (Some(1), Some(0))
    );
    assert_eq!(out["revenue"], json!({"amount_cents": 9000, "ccy": "EUR"}));
    assert_eq!(out["lines"][0]["number"], "A-1001");
    let (s, v) = d
        .call(
            Method::DELETE,
            "/spa/v1/reports/R-3001",
            Some(API_KEY),
            None,
        )
        .await;
    assert_eq!((s, v["error"].as_str()), (409, Some("ALREADY_READY")));
    // A second report, cancelled before it is ready, stays cancelled.
    let (_, _) = d.post("/spa/v1/reports", range).await;
    let (s, v) = d
        .call(
            Method::DELETE,
            "/spa/v1/reports/R-3002",
            Some(API_KEY),
            None,
        )
        .await;
    assert_eq!((s, v["report"]["state"].as_str()), (200, Some("CANCELLED")));
    let (_, v) = d.get("/spa/v1/reports/R-3002").await;
    assert_eq!(v["report"]["state"], "CANCELLED");
    // Bad ranges are the legacy validation answer; unknown reports are 404.
    let (s, v) = d
        .post(
            "/spa/v1/reports",
            json!({"from": "2026-12-31", "to": "2026-12-01"}),
        )
        .await;
    assert_eq!((s, v["errors"][0]["field"].as_str()), (200, Some("to")));
    let (s, _) = d.get("/spa/v1/reports/R-9999").await;
    assert_eq!(s, 404);
}
