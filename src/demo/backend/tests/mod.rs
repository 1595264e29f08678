//! End-to-end tests of the demo backend over real HTTP on 127.0.0.1: catalogue, protocol errors,
//! statistics, listener. Test-only code.

mod hotel;
mod spa;

use super::calendar::*;
use super::handler::{API_KEY, MAX_BODY};
use super::spa::{SEASON_FIRST, SEASON_LAST};
use super::*;
use crate::clock::civil_from_days;
use ::http::{Method, header};
use reqwest::Client as Http;
use serde_json::json;

struct Demo {
    base: String,
    http: Http,
    task: JoinHandle<io::Result<()>>,
}

impl Drop for Demo {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn start() -> Demo {
    let addr: SocketAddr = "127.0.0.1:0".parse().unwrap();
    let (bound, task) = spawn(addr).await.unwrap();
    assert_ne!(bound.port(), 0);
    Demo {
        base: format!("http://{bound}"),
        http: Http::new(),
        task,
    }
}

impl Demo {
    async fn call(
        &self,
        method: Method,
        path: &str,
        key: Option<&str>,
        body: Option<Value>,
    ) -> (u16, Value) {
        let mut req = self.http.request(method, format!("{}{path}", self.base));
        if let Some(k) = key {
            req = req.header("X-Api-Key", k);
        }
        if let Some(b) = body {
            req = req.json(&b);
        }
        let resp = req.send().await.unwrap();
        let status = resp.status().as_u16();
        let ct = resp.headers()[header::CONTENT_TYPE]
            .to_str()
            .unwrap()
            .to_owned();
        assert_eq!(ct, "application/json", "{path}");
        (status, resp.json().await.unwrap())
    }

    async fn get(&self, path: &str) -> (u16, Value) {
        self.call(Method::GET, path, Some(API_KEY), None).await
    }

    async fn post(&self, path: &str, body: Value) -> (u16, Value) {
        self.call(Method::POST, path, Some(API_KEY), Some(body))
            .await
    }

    async fn put(&self, path: &str, body: Value) -> (u16, Value) {
        self.call(Method::PUT, path, Some(API_KEY), Some(body))
            .await
    }

    async fn raw_post(&self, path: &str, body: Vec<u8>) -> (u16, Value) {
        let resp = self
            .http
            .post(format!("{}{path}", self.base))
            .header("X-Api-Key", API_KEY)
            .header("content-type", "application/json")
            .body(body)
            .send()
            .await
            .unwrap();
        (resp.status().as_u16(), resp.json().await.unwrap())
    }
}

fn booking(treatment: &str, opening: &str) -> Value {
    json!({
        "treatment": treatment,
        "opening": opening,
        "client": {"name": "Ana Silva", "email": "ana@example.org"},
    })
}

fn stay(room: &str, rate: &str, arrive: &str, depart: &str, adults: i64) -> Value {
    json!({
        "hotel": "HH-LIS", "room": room, "rate": rate,
        "arrive": arrive, "depart": depart, "adults": adults, "kids": 0,
        "guest": {"first": "Ines", "last": "Sousa", "mail": "ines@example.org"},
    })
}

fn fields(v: &Value) -> Vec<String> {
    v["errors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["field"].as_str().unwrap().to_owned())
        .collect()
}

#[test]
fn civil_dates_round_trip() {
    assert_eq!(days_from_civil(1970, 1, 1), 0);
    assert_eq!(days_from_civil(2000, 3, 1), 11_017);
    assert_eq!(civil_from_days(-1), (1969, 12, 31));
    for day in [-800_000, -1, 0, 59, 60, 11_016, 20_788, 2_932_896] {
        let (y, m, d) = civil_from_days(day);
        assert_eq!(days_from_civil(y, m, d), day);
    }
    assert_eq!(parse_date("2028-02-29"), Some(days_from_civil(2028, 2, 29)));
    assert_eq!(parse_date("2027-02-29"), None);
    assert_eq!(parse_date("2026-13-01"), None);
    assert_eq!(parse_date("2026-1-011"), None);
    assert_eq!(parse_date("2026-é-01"), None);
    assert_eq!(format_date(SEASON_LAST), "2027-03-31");
    assert_eq!(SEASON_LAST - SEASON_FIRST + 1, 121);
}

#[tokio::test]
async fn treatments_catalogue() {
    let d = start().await;
    let (s, v) = d.call(Method::GET, "/spa/v1/treatments", None, None).await;
    assert_eq!(s, 200);
    let codes: Vec<&str> = v["treatments"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["code"].as_str().unwrap())
        .collect();
    assert_eq!(codes, ["MASSAGE-60", "FACIAL-45", "SAUNA-30"]);
    assert_eq!(v["treatments"][0]["title"], "Deep tissue massage");
    assert_eq!(v["treatments"][0]["minutes"], 60);
    assert_eq!(
        v["treatments"][0]["price"],
        json!({"amount_cents": 9000, "ccy": "EUR"})
    );
    assert_eq!(v["treatments"][2]["category"], "wellness");

    let (s, v) = d
        .call(
            Method::GET,
            "/spa/v1/treatments?category=massage",
            None,
            None,
        )
        .await;
    assert_eq!(s, 200);
    assert_eq!(v["treatments"].as_array().unwrap().len(), 1);
    assert_eq!(v["treatments"][0]["code"], "MASSAGE-60");
    let (_, v) = d.get("/spa/v1/treatments?category=nails").await;
    assert_eq!(v["treatments"], json!([]));

    let (s, v) = d
        .call(Method::GET, "/spa/v1/treatments/FACIAL-45", None, None)
        .await;
    assert_eq!(s, 200);
    assert_eq!(v["treatment"]["code"], "FACIAL-45");
    assert_eq!(v["treatment"]["price"]["amount_cents"], 7000);
    // Percent-encoded path segment.
    let (s, v) = d.get("/spa/v1/treatments/SAUNA%2D30").await;
    assert_eq!(s, 200);
    assert_eq!(v["treatment"]["minutes"], 30);
    let (s, v) = d.get("/spa/v1/treatments/YOGA-90").await;
    assert_eq!(s, 404);
    assert_eq!(v["error"], "NOT_FOUND");
    assert!(v["detail"].as_str().unwrap().contains("YOGA-90"));
}

#[tokio::test]
async fn openings_listing_and_validation() {
    let d = start().await;
    let (s, v) = d
        .call(
            Method::GET,
            "/spa/v1/treatments/MASSAGE-60/openings?from=2026-12-01&to=2026-12-02",
            None,
            None,
        )
        .await;
    assert_eq!(s, 200);
    assert_eq!(v["treatment"], "MASSAGE-60");
    let list = v["openings"].as_array().unwrap();
    assert_eq!(list.len(), 8);
    assert_eq!(
        list[0],
        json!({"ref": "MASSAGE-60@2026-12-01T09:00", "begins": "2026-12-01T09:00",
               "ends": "2026-12-01T10:00", "free": true})
    );
    assert_eq!(list[1]["ref"], "MASSAGE-60@2026-12-01T11:00");
    assert_eq!(list[1]["free"], false);
    assert_eq!(list[3]["begins"], "2026-12-01T16:00");
    assert_eq!(list[4]["ref"], "MASSAGE-60@2026-12-02T09:00");
    assert_eq!(list[7]["ends"], "2026-12-02T17:00");
    assert!(list[2..].iter().all(|o| o["free"] == true));

    let (_, v) = d
        .get("/spa/v1/treatments/FACIAL-45/openings?from=2026-12-01&to=2026-12-01")
        .await;
    assert_eq!(v["openings"][0]["ends"], "2026-12-01T09:45");
    assert_eq!(
        v["openings"][1]["free"], true,
        "the seeded slot is massage only"
    );

    // Season edges: only in-season days appear.
    let (_, v) = d
        .get("/spa/v1/treatments/SAUNA-30/openings?from=2027-03-30&to=2027-04-05")
        .await;
    let list = v["openings"].as_array().unwrap();
    assert_eq!(list.len(), 8);
    assert_eq!(list[7]["ref"], "SAUNA-30@2027-03-31T16:00");
    assert_eq!(list[7]["ends"], "2027-03-31T16:30");
    let (s, v) = d
        .get("/spa/v1/treatments/SAUNA-30/openings?from=2026-11-01&to=2026-11-14")
        .await;
    assert_eq!(s, 200);
    assert_eq!(v["openings"], json!([]));

    // 14 days inclusive is the maximum.
    let (s, v) = d
        .get("/spa/v1/treatments/SAUNA-30/openings?from=2026-12-01&to=2026-12-14")
        .await;
    assert_eq!(s, 200);
    assert_eq!(v["openings"].as_array().unwrap().len(), 56);
    let (s, v) = d
        .get("/spa/v1/treatments/SAUNA-30/openings?from=2026-12-01&to=2026-12-15")
        .await;
    assert_eq!(s, 200);
    assert_eq!(fields(&v), ["to"]);

    let (s, v) = d
        .get("/spa/v1/treatments/SAUNA-30/openings?from=2026-12-05&to=2026-12-01")
        .await;
    assert_eq!(s, 200);
    assert_eq!(fields(&v), ["to"]);
    let (_, v) = d.get("/spa/v1/treatments/SAUNA-30/openings").await;
    assert_eq!(fields(&v), ["from", "to"]);
    let (_, v) = d
        .get("/spa/v1/treatments/SAUNA-30/openings?from=2026-02-30&to=%ZZ")
        .await;
    assert_eq!(fields(&v), ["from", "to"]);
    assert_eq!(v["errors"][0]["msg"], "must be a date YYYY-MM-DD");
    // Percent-encoded query values are decoded.
    let (_, v) = d
        .get("/spa/v1/treatments/SAUNA-30/openings?from=2026%2D12%2D01&to=2026-12-01")
        .await;
    assert_eq!(v["openings"].as_array().unwrap().len(), 4);

    let (s, v) = d
        .get("/spa/v1/treatments/NOPE/openings?from=2026-12-01&to=2026-12-01")
        .await;
    assert_eq!(s, 404);
    assert_eq!(v["error"], "NOT_FOUND");
}

#[tokio::test]
async fn protocol_errors() {
    let d = start().await;
    let (s, v) = d.get("/spa/v2/treatments").await;
    assert_eq!((s, v), (404, json!({"error": "NO_ROUTE"})));
    let (s, v) = d.get("/spa/v1/treatments/").await;
    assert_eq!((s, v), (404, json!({"error": "NO_ROUTE"})));
    let (s, v) = d.post("/spa/v1/treatments", json!({})).await;
    assert_eq!((s, v), (405, json!({"error": "METHOD"})));
    let resp = d
        .http
        .delete(format!("{}/hotel/api/quotes/Q-5001", d.base))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 405);
    assert_eq!(resp.headers()[header::ALLOW], "GET, PUT");
    assert_eq!(
        resp.json::<Value>().await.unwrap(),
        json!({"error": "METHOD"})
    );

    let (s, v) = d
        .raw_post("/spa/v1/appointments", b"{\"treatment\": ".to_vec())
        .await;
    assert_eq!(s, 400);
    assert_eq!(v["error"], "BAD_JSON");
    assert!(v["detail"].as_str().unwrap().contains("EOF"));
    let (s, v) = d.raw_post("/hotel/api/quotes", b"[1, 2]".to_vec()).await;
    assert_eq!((s, v["error"].clone()), (400, json!("BAD_JSON")));
    let (s, v) = d.raw_post("/hotel/api/concierge", vec![0xff, 0xfe]).await;
    assert_eq!((s, v["error"].clone()), (400, json!("BAD_JSON")));

    let (s, v) = d
        .raw_post("/hotel/api/quotes", vec![b' '; MAX_BODY + 1])
        .await;
    assert_eq!((s, v), (413, json!({"error": "TOO_BIG"})));
    // Exactly the limit is accepted (and is then just an empty object).
    let (s, v) = d
        .raw_post("/hotel/api/concierge", vec![b' '; MAX_BODY])
        .await;
    assert_eq!(s, 200);
    assert_eq!(fields(&v), ["question"]);
    // Chunked body without a length is limited too.
    let chunks: Vec<Result<Vec<u8>, io::Error>> =
        (0..3).map(|_| Ok(vec![b' '; MAX_BODY / 2])).collect();
    let resp = d
        .http
        .post(format!("{}/hotel/api/concierge", d.base))
        .body(reqwest::Body::wrap_stream(futures_util::stream::iter(
            chunks,
        )))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 413);
}

#[tokio::test]
async fn stats_and_reset() {
    let d = start().await;
    let (_, v) = d.get("/__demo/stats").await;
    assert_eq!(v["total"], 0);
    assert_eq!(v["calls"].as_object().unwrap().len(), 16);
    assert_eq!(v["calls"]["GET /spa/v1/treatments"], 0);

    d.get("/spa/v1/treatments").await;
    d.get("/spa/v1/treatments/MASSAGE-60").await;
    d.get("/spa/v1/treatments/NOPE").await;
    d.call(Method::POST, "/spa/v1/appointments", None, Some(json!({})))
        .await;
    let (s, _) = d
        .post(
            "/spa/v1/appointments",
            booking("SAUNA-30", "SAUNA-30@2026-12-24T16:00"),
        )
        .await;
    assert_eq!(s, 201);
    d.post(
        "/hotel/api/quotes",
        stay("DBL", "FLEX", "2026-12-24", "2026-12-26", 2),
    )
    .await;
    d.put(
        "/hotel/api/quotes/Q-5001",
        stay("DBL", "NRF", "2026-12-24", "2026-12-26", 2),
    )
    .await;
    d.get("/nowhere").await;
    d.post("/spa/v1/treatments", json!({})).await;

    let (s, v) = d.call(Method::GET, "/__demo/stats", None, None).await;
    assert_eq!(s, 200);
    assert_eq!(v["calls"]["GET /spa/v1/treatments"], 1);
    assert_eq!(v["calls"]["GET /spa/v1/treatments/{code}"], 2);
    assert_eq!(v["calls"]["POST /spa/v1/appointments"], 2, "401s count");
    assert_eq!(v["calls"]["POST /hotel/api/quotes"], 1);
    assert_eq!(v["calls"]["PUT /hotel/api/quotes/{qid}"], 1);
    assert_eq!(v["calls"]["GET /hotel/api/quotes/{qid}"], 0);
    assert_eq!(v["calls"]["POST /hotel/api/concierge"], 0);
    assert_eq!(
        v["total"], 7,
        "no-route, wrong-method and /__demo calls are not counted"
    );

    let (s, v) = d.call(Method::POST, "/__demo/reset", None, None).await;
    assert_eq!((s, v), (200, json!({"ok": true})));
    let (_, v) = d.get("/__demo/stats").await;
    assert_eq!(v["total"], 0);
    let (s, _) = d.get("/spa/v1/appointments/A-1001").await;
    assert_eq!(s, 404);
    let (s, _) = d.get("/hotel/api/quotes/Q-5001").await;
    assert_eq!(s, 404);
    let (_, v) = d
        .get("/spa/v1/treatments/MASSAGE-60/openings?from=2026-12-01&to=2026-12-01")
        .await;
    assert_eq!(
        v["openings"][1]["free"], false,
        "seeded slot is taken again"
    );
    let (_, v) = d
        .get("/spa/v1/treatments/SAUNA-30/openings?from=2026-12-24&to=2026-12-24")
        .await;
    assert_eq!(v["openings"][3]["free"], true);
    let (_, v) = d
        .post(
            "/spa/v1/appointments",
            booking("SAUNA-30", "SAUNA-30@2026-12-24T16:00"),
        )
        .await;
    assert_eq!(v["appointment"]["number"], "A-1001");
    let (_, v) = d
        .call(
            Method::POST,
            "/hotel/api/concierge",
            None,
            Some(json!({"question": "pet"})),
        )
        .await;
    assert_eq!(v["thread"], "t-1");
    let (_, v) = d.get("/__demo/stats").await;
    assert_eq!(
        v["total"], 6,
        "two 404 reads, two openings, one booking, one question"
    );
    assert_eq!(v["calls"]["GET /spa/v1/treatments/{code}/openings"], 2);
}

#[tokio::test]
async fn serves_h2_prior_knowledge_and_stops_on_abort() {
    let d = start().await;
    let h2 = Http::builder().http2_prior_knowledge().build().unwrap();
    let resp = h2
        .get(format!("{}/spa/v1/treatments/MASSAGE-60", d.base))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.version(), http::Version::HTTP_2);
    assert_eq!(resp.status().as_u16(), 200);
    let v: Value = resp.json().await.unwrap();
    assert_eq!(v["treatment"]["code"], "MASSAGE-60");

    let base = d.base.clone();
    d.task.abort();
    let stopped = tokio::time::timeout(Duration::from_secs(5), async {
        loop {
            let fresh = Http::new();
            if fresh
                .get(format!("{base}/__demo/stats"))
                .send()
                .await
                .is_err()
            {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
    assert!(stopped.is_ok(), "listener still answering after abort");
}

#[tokio::test]
async fn backend_serve_on_own_listener() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let task = tokio::spawn(Backend::default().serve(listener));
    let v: Value = Http::new()
        .get(format!("http://{addr}/__demo/stats"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(v["total"], 0);
    task.abort();
}
