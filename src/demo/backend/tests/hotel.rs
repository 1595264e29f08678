//! Tests of Harbour Hotel quotes, inventory and the concierge over real HTTP on 127.0.0.1.
//! Test-only code.

use super::super::hotel::confirmation_code;
use super::*;

#[tokio::test]
async fn quote_create_read_replace() {
    let d = start().await;
    let (s, v) = d
        .call(
            Method::POST,
            "/hotel/api/quotes",
            None,
            Some(stay("DBL", "FLEX", "2026-12-10", "2026-12-12", 2)),
        )
        .await;
    assert_eq!((s, v), (401, json!({"error": "NO_AUTH"})));

    let mut body = stay("DBL", "FLEX", "2026-12-10", "2026-12-12", 2);
    body["guest"] = json!({"first": "Rui", "last": "Costa", "mail": "rui@example.org"});
    let (s, v) = d.post("/hotel/api/quotes", body).await;
    assert_eq!(s, 201);
    assert_eq!(
        v["quote"],
        json!({
            "qid": "Q-5001", "state": "OPEN",
            "hotel": {"code": "HH-LIS", "name": "Harbour Hotel Lisbon", "street": "Rua do Cais 1",
                      "city": "Lisboa", "country": "PT", "zip": "1100-001", "tz": "Europe/Lisbon"},
            "room": {"code": "DBL", "label": "Double room, harbour view", "max_adults": 2, "max_kids": 1},
            "rate": {"code": "FLEX", "label": "Flexible rate"},
            "arrive": "2026-12-10", "depart": "2026-12-12", "nights": 2, "adults": 2, "kids": 0,
            "guest": {"first": "Rui", "last": "Costa", "mail": "rui@example.org"},
            "price": {"net_cents": 28000, "tax_cents": 1680, "gross_cents": 29680, "ccy": "EUR"},
            "confirmation": null, "valid_until": "2026-12-10T12:00",
        })
    );

    // Non-refundable rate over a month boundary, kids default to 0, no guest.
    let (s, v) = d
        .post(
            "/hotel/api/quotes",
            json!({"hotel": "HH-LIS", "room": "STE", "rate": "NRF",
                   "arrive": "2027-02-27", "depart": "2027-03-02", "adults": 3}),
        )
        .await;
    assert_eq!(s, 201);
    let q = &v["quote"];
    assert_eq!(q["qid"], "Q-5002");
    assert_eq!(q["nights"], 3);
    assert_eq!(q["kids"], 0);
    assert_eq!(q["guest"], Value::Null);
    // 32000 * 3 * 0.85 = 81600; tax 6% = 4896.
    assert_eq!(
        q["price"],
        json!({"net_cents": 81600, "tax_cents": 4896, "gross_cents": 86496, "ccy": "EUR"})
    );
    // Tax rounds down: DBL NRF one night = 11900 net, 714 tax; 3 nights = 35700 -> 2142.
    let (_, v) = d
        .post(
            "/hotel/api/quotes",
            stay("DBL", "NRF", "2026-12-01", "2026-12-02", 1),
        )
        .await;
    assert_eq!(v["quote"]["price"]["tax_cents"], 714);
    let (_, v) = d
        .post(
            "/hotel/api/quotes",
            json!({"hotel": "HH-LIS", "room": "SGL", "rate": "FLEX",
                   "arrive": "2026-12-01", "depart": "2026-12-02", "adults": 1}),
        )
        .await;
    assert_eq!(v["error"], "SOLD_OUT");

    let (s, v) = d.get("/hotel/api/quotes/Q-5001").await;
    assert_eq!(s, 200);
    assert_eq!(v["quote"]["guest"]["first"], "Rui");
    let (s, v) = d.get("/hotel/api/quotes/Q-404").await;
    assert_eq!((s, v["error"].clone()), (404, json!("NOT_FOUND")));
    let (s, _) = d
        .call(Method::GET, "/hotel/api/quotes/Q-5001", None, None)
        .await;
    assert_eq!(s, 401);

    // Full replacement.
    let (s, v) = d
        .put("/hotel/api/quotes/Q-5001", {
            let mut b = stay("STE", "FLEX", "2026-12-20", "2026-12-21", 4);
            b["guest"] = Value::Null;
            b
        })
        .await;
    assert_eq!(s, 200);
    assert_eq!(v["quote"]["qid"], "Q-5001");
    assert_eq!(v["quote"]["state"], "OPEN");
    assert_eq!(v["quote"]["room"]["code"], "STE");
    assert_eq!(v["quote"]["guest"], Value::Null);
    assert_eq!(v["quote"]["price"]["gross_cents"], 33920);
    let (s, v) = d
        .put(
            "/hotel/api/quotes/Q-5001",
            stay("STE", "FLEX", "2026-12-21", "2026-12-21", 4),
        )
        .await;
    assert_eq!(s, 200);
    assert_eq!(fields(&v), ["depart"]);
    let (s, _) = d
        .put(
            "/hotel/api/quotes/Q-9",
            stay("STE", "FLEX", "2026-12-20", "2026-12-21", 4),
        )
        .await;
    assert_eq!(s, 404);
    let (_, v) = d.get("/hotel/api/quotes/Q-5001").await;
    assert_eq!(
        v["quote"]["arrive"], "2026-12-20",
        "failed PUT changes nothing"
    );
}

#[tokio::test]
async fn quote_validation() {
    let d = start().await;
    let cases = [
        (
            stay("DBL", "FLEX", "2026-12-10", "2026-12-10", 2),
            vec!["depart"],
        ),
        (
            stay("DBL", "FLEX", "2026-12-10", "2026-12-09", 2),
            vec!["depart"],
        ),
        (
            stay("DBL", "FLEX", "2026-12-10", "2026-12-12", 0),
            vec!["adults"],
        ),
        (
            stay("DBL", "FLEX", "2026-12-10", "2026-12-12", 3),
            vec!["adults"],
        ),
        (
            stay("DBL", "FLEX", "2026-12-10", "2026-12-32", 2),
            vec!["depart"],
        ),
        (
            json!({}),
            vec!["hotel", "room", "rate", "arrive", "depart", "adults"],
        ),
        (
            json!({"hotel": "HH-LIS", "room": "DBL", "rate": "FLEX", "arrive": "2026-12-10",
                   "depart": "2026-12-12", "adults": "two", "kids": -1, "guest": "me"}),
            vec!["adults", "kids", "guest"],
        ),
        (
            json!({"hotel": "HH-LIS", "room": "DBL", "rate": "FLEX", "arrive": "2026-12-10",
                   "depart": "2026-12-12", "adults": 2, "kids": 2}),
            vec!["kids"],
        ),
        (
            json!({"hotel": "HH-LIS", "room": "DBL", "rate": "FLEX", "arrive": "2026-12-10",
                   "depart": "2026-12-12", "adults": 1, "guest": {"mail": "no-at-sign"}}),
            vec!["guest.first", "guest.last", "guest.mail"],
        ),
    ];
    for (body, want) in cases {
        let (s, v) = d.post("/hotel/api/quotes", body.clone()).await;
        assert_eq!(s, 200, "{body}");
        assert_eq!(fields(&v), want, "{body}");
    }
    // Suite takes 4 adults + 2 kids.
    let mut big = stay("STE", "FLEX", "2026-12-10", "2026-12-12", 4);
    big["kids"] = json!(2);
    let (s, _) = d.post("/hotel/api/quotes", big).await;
    assert_eq!(s, 201);

    for (hotel, room, rate) in [
        ("HH-OPO", "DBL", "FLEX"),
        ("HH-LIS", "PENTHOUSE", "FLEX"),
        ("HH-LIS", "DBL", "CORP"),
    ] {
        let mut body = stay(room, rate, "2026-12-10", "2026-12-12", 1);
        body["hotel"] = json!(hotel);
        let (s, v) = d.post("/hotel/api/quotes", body).await;
        assert_eq!((s, v["error"].clone()), (404, json!("NOT_FOUND")));
    }
    let (s, v) = d
        .post(
            "/hotel/api/quotes",
            stay("SGL", "FLEX", "2026-12-10", "2026-12-11", 1),
        )
        .await;
    assert_eq!((s, v["error"].clone()), (409, json!("SOLD_OUT")));
    let (_, v) = d.get("/hotel/api/quotes/Q-5002").await;
    assert_eq!(v["error"], "NOT_FOUND", "failed creates allocate no id");
}

#[tokio::test]
async fn confirm_void_and_inventory() {
    let d = start().await;
    // Two open quotes for the only suite, overlapping on the night of 12-11.
    let (_, a) = d
        .post(
            "/hotel/api/quotes",
            stay("STE", "FLEX", "2026-12-10", "2026-12-12", 2),
        )
        .await;
    let (_, b) = d
        .post(
            "/hotel/api/quotes",
            stay("STE", "NRF", "2026-12-11", "2026-12-13", 2),
        )
        .await;
    assert_eq!(a["quote"]["qid"], "Q-5001");
    assert_eq!(b["quote"]["qid"], "Q-5002");

    let confirm = "/hotel/api/quotes/Q-5001/confirm";
    let (s, v) = d.post(confirm, json!({"card_token": "card_123"})).await;
    assert_eq!(s, 200);
    assert_eq!(fields(&v), ["card_token"]);
    let (_, v) = d.post(confirm, json!({})).await;
    assert_eq!(fields(&v), ["card_token"]);
    let (s, v) = d.post(confirm, json!({"card_token": "tok_declined"})).await;
    assert_eq!((s, v["error"].clone()), (402, json!("CARD_DECLINED")));
    let (s, _) = d
        .call(
            Method::POST,
            confirm,
            None,
            Some(json!({"card_token": "tok_visa"})),
        )
        .await;
    assert_eq!(s, 401);
    let (s, _) = d
        .post(
            "/hotel/api/quotes/Q-1/confirm",
            json!({"card_token": "tok_visa"}),
        )
        .await;
    assert_eq!(s, 404);

    let (s, v) = d.post(confirm, json!({"card_token": "tok_visa"})).await;
    assert_eq!(s, 200);
    assert_eq!(v["quote"]["state"], "CONFIRMED");
    let code = v["quote"]["confirmation"].as_str().unwrap().to_owned();
    assert_eq!(code, confirmation_code("Q-5001"));
    assert!(code.starts_with("HH-") && code.len() == 11, "{code}");
    assert_ne!(code, confirmation_code("Q-5002"));

    // Confirmed quotes are locked.
    let (s, v) = d.post(confirm, json!({"card_token": "tok_visa"})).await;
    assert_eq!((s, v["error"].clone()), (409, json!("LOCKED")));
    let (s, v) = d
        .put(
            "/hotel/api/quotes/Q-5001",
            stay("DBL", "FLEX", "2026-12-10", "2026-12-12", 2),
        )
        .await;
    assert_eq!((s, v["error"].clone()), (409, json!("LOCKED")));

    // Inventory consumed: the overlapping quote cannot be confirmed or newly created,
    // a stay starting on the departure day can.
    let (s, v) = d
        .post(
            "/hotel/api/quotes/Q-5002/confirm",
            json!({"card_token": "tok_visa"}),
        )
        .await;
    assert_eq!((s, v["error"].clone()), (409, json!("SOLD_OUT")));
    let (_, v) = d.get("/hotel/api/quotes/Q-5002").await;
    assert_eq!(v["quote"]["state"], "OPEN");
    let (s, v) = d
        .post(
            "/hotel/api/quotes",
            stay("STE", "FLEX", "2026-12-05", "2026-12-11", 2),
        )
        .await;
    assert_eq!((s, v["error"].clone()), (409, json!("SOLD_OUT")));
    let (s, v) = d
        .post(
            "/hotel/api/quotes",
            stay("STE", "FLEX", "2026-12-12", "2026-12-14", 2),
        )
        .await;
    assert_eq!(s, 201);
    assert_eq!(v["quote"]["qid"], "Q-5003");
    // Another room type is unaffected.
    let (s, _) = d
        .post(
            "/hotel/api/quotes",
            stay("DBL", "FLEX", "2026-12-10", "2026-12-12", 2),
        )
        .await;
    assert_eq!(s, 201);

    // Void gives the inventory back.
    let (s, v) = d.post("/hotel/api/quotes/Q-5001/void", json!({})).await;
    assert_eq!(s, 200);
    assert_eq!(v["quote"]["state"], "VOID");
    assert_eq!(v["quote"]["confirmation"], code.as_str());
    let (s, v) = d.post("/hotel/api/quotes/Q-5001/void", json!({})).await;
    assert_eq!((s, v["error"].clone()), (409, json!("LOCKED")));
    let (s, v) = d
        .post(
            "/hotel/api/quotes/Q-5001/confirm",
            json!({"card_token": "tok_visa"}),
        )
        .await;
    assert_eq!((s, v["error"].clone()), (409, json!("LOCKED")));
    let (s, v) = d
        .put(
            "/hotel/api/quotes/Q-5001",
            stay("STE", "FLEX", "2026-12-10", "2026-12-12", 2),
        )
        .await;
    assert_eq!((s, v["error"].clone()), (409, json!("LOCKED")));
    let (s, v) = d
        .post(
            "/hotel/api/quotes/Q-5002/confirm",
            json!({"card_token": "tok_amex"}),
        )
        .await;
    assert_eq!(s, 200);
    assert_eq!(v["quote"]["state"], "CONFIRMED");
    assert_eq!(
        v["quote"]["confirmation"],
        confirmation_code("Q-5002").as_str()
    );
    // Voiding an open quote is allowed too (empty body).
    let (s, v) = d
        .raw_post("/hotel/api/quotes/Q-5003/void", Vec::new())
        .await;
    assert_eq!(s, 200);
    assert_eq!(v["quote"]["state"], "VOID");
    assert_eq!(v["quote"]["confirmation"], Value::Null);
    let (s, _) = d.post("/hotel/api/quotes/Q-77/void", json!({})).await;
    assert_eq!(s, 404);
}

#[tokio::test]
async fn double_room_inventory_is_five() {
    let d = start().await;
    for i in 0..5 {
        let (s, v) = d
            .post(
                "/hotel/api/quotes",
                stay("DBL", "FLEX", "2027-01-01", "2027-01-03", 2),
            )
            .await;
        assert_eq!(s, 201);
        let qid = v["quote"]["qid"].as_str().unwrap().to_owned();
        assert_eq!(qid, format!("Q-{}", 5001 + i));
        let (s, _) = d
            .post(
                &format!("/hotel/api/quotes/{qid}/confirm"),
                json!({"card_token": "tok_visa"}),
            )
            .await;
        assert_eq!(s, 200);
    }
    let (s, v) = d
        .post(
            "/hotel/api/quotes",
            stay("DBL", "FLEX", "2027-01-02", "2027-01-04", 2),
        )
        .await;
    assert_eq!((s, v["error"].clone()), (409, json!("SOLD_OUT")));
    let (s, _) = d
        .post(
            "/hotel/api/quotes",
            stay("DBL", "FLEX", "2027-01-03", "2027-01-04", 2),
        )
        .await;
    assert_eq!(s, 201);
}

#[tokio::test]
async fn concierge_answers() {
    let d = start().await;
    let ask = |body: Value| d.call(Method::POST, "/hotel/api/concierge", None, Some(body));

    let (s, v) = ask(json!({"question": "Can I bring my Dog?"})).await;
    assert_eq!(s, 200);
    assert!(v["reply"].as_str().unwrap().contains("pets"));
    assert_eq!(v["thread"], "t-1");
    assert_eq!(
        v["see_also"],
        json!([{"label": "Pet policy", "href": "https://harbour-hotel.example/policies/pets"}])
    );
    let (_, v) = ask(json!({"question": "When is breakfast?"})).await;
    assert!(v["reply"].as_str().unwrap().contains("07:00"));
    assert_eq!(v["thread"], "t-2");
    let (_, v) =
        ask(json!({"question": "How do I cancel?", "thread": "t-1", "refs": ["Q-5001"]})).await;
    assert_eq!(v["thread"], "t-1");
    assert_eq!(
        v["see_also"][0]["href"],
        "https://harbour-hotel.example/policies/cancellation"
    );
    let (_, v) = ask(json!({"question": "Is there parking?"})).await;
    assert_eq!(v["see_also"][0]["label"], "Parking");
    assert_eq!(v["thread"], "t-3");
    for q in ["What time is check-in?", "when can I check in"] {
        let (_, v) = ask(json!({"question": q})).await;
        assert!(v["reply"].as_str().unwrap().contains("15:00"), "{q}");
    }
    let (_, v) = ask(json!({"question": "Parking for my dog?"})).await;
    let labels: Vec<&str> = v["see_also"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["label"].as_str().unwrap())
        .collect();
    assert_eq!(labels, ["Pet policy", "Parking"]);
    let (s, v) = ask(json!({"question": "What is the meaning of life?"})).await;
    assert_eq!(s, 200);
    assert!(v["reply"].as_str().unwrap().contains("can't answer"));
    assert_eq!(
        v["see_also"][0]["href"],
        "https://harbour-hotel.example/contact"
    );

    let (s, v) = ask(json!({"thread": "t-1"})).await;
    assert_eq!(s, 200);
    assert_eq!(fields(&v), ["question"]);
    let (_, v) = ask(json!({"question": "pets?", "refs": "Q-1", "thread": 7})).await;
    assert_eq!(fields(&v), ["thread", "refs"]);
}
