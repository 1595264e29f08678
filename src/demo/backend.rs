//! The embedded demo "legacy booking API" (Seaside Spa, Harbour Hotel): owns its seeded state and listener.
//! Must never read the wall clock or randomness, depend on the gateway, or panic on request input.

use crate::clock::civil_from_days;
use std::collections::BTreeSet;
use std::convert::Infallible;
use std::io;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderMap, HeaderValue, Method, Request, Response, StatusCode, header};
use http_body_util::{BodyExt, Full, LengthLimitError, Limited};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use percent_encoding::percent_decode_str;
use serde_json::{Map, Value, json};
use tokio::net::TcpListener;
use tokio::sync::mpsc;
use tokio::task::{JoinHandle, JoinSet};

const API_KEY: &str = "demo-key";
const MAX_BODY: usize = 1024 * 1024;
const TZ: &str = "Europe/Lisbon";
const CCY: &str = "EUR";

// ---------------------------------------------------------------------------------------------
// Public API
// ---------------------------------------------------------------------------------------------

/// The demo backend: shared, seeded state plus the accept loop that serves it.
pub struct Backend {
    shared: Arc<Mutex<State>>,
    /// Legacy webhook events (`{kind, appointment}`), in change order, when someone listens.
    outbox: Option<mpsc::Sender<Value>>,
}

impl Backend {
    /// A backend holding the fixed seed data.
    pub fn new() -> Self {
        Self {
            shared: Arc::new(Mutex::new(State::seeded())),
            outbox: None,
        }
    }

    /// Also emits a legacy webhook event on `outbox` for every appointment booked, cancelled or
    /// moved (dropped when the outbox is full; signing and sending is the caller's job).
    pub fn with_outbox(mut self, outbox: mpsc::Sender<Value>) -> Self {
        self.outbox = Some(outbox);
        self
    }

    /// Accepts connections until this future is dropped or its task aborted; one task per
    /// connection (HTTP/1.1 or h2), all of them ended when the loop is dropped.
    pub async fn serve(self, listener: TcpListener) -> io::Result<()> {
        let mut conns = JoinSet::new();
        loop {
            tokio::select! {
                accepted = listener.accept() => match accepted {
                    Ok((stream, _peer)) => {
                        let shared = Arc::clone(&self.shared);
                        let outbox = self.outbox.clone();
                        conns.spawn(async move {
                            let _ = stream.set_nodelay(true);
                            let svc = service_fn(move |req| handle(Arc::clone(&shared), outbox.clone(), req));
                            let _ = auto::Builder::new(TokioExecutor::new())
                                .serve_connection(TokioIo::new(stream), svc)
                                .await;
                        });
                    }
                    Err(e) if is_transient(&e) => {}
                    // e.g. out of file descriptors: back off instead of spinning.
                    Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
                },
                Some(_) = conns.join_next(), if !conns.is_empty() => {}
            }
        }
    }
}

impl Default for Backend {
    fn default() -> Self {
        Self::new()
    }
}

/// Binds `addr` (port 0 allowed), starts a seeded backend on it and returns the bound address.
pub async fn spawn(addr: SocketAddr) -> io::Result<(SocketAddr, JoinHandle<io::Result<()>>)> {
    let listener = TcpListener::bind(addr).await?;
    let local = listener.local_addr()?;
    Ok((local, tokio::spawn(Backend::new().serve(listener))))
}

fn is_transient(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::ConnectionAborted
            | io::ErrorKind::ConnectionReset
            | io::ErrorKind::Interrupted
            | io::ErrorKind::WouldBlock
    )
}

// ---------------------------------------------------------------------------------------------
// Routing
// ---------------------------------------------------------------------------------------------

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum RouteId {
    Treatments,
    Treatment,
    Openings,
    CreateAppointment,
    GetAppointment,
    CancelAppointment,
    MoveAppointment,
    CreateQuote,
    GetQuote,
    PutQuote,
    ConfirmQuote,
    VoidQuote,
    Concierge,
    Stats,
    Reset,
}

struct RouteDef {
    id: RouteId,
    method: Method,
    pattern: &'static str,
    /// Requires `X-Api-Key: demo-key`.
    keyed: bool,
    /// Counted in `/__demo/stats`.
    counted: bool,
}

const fn route(
    id: RouteId,
    method: Method,
    pattern: &'static str,
    keyed: bool,
    counted: bool,
) -> RouteDef {
    RouteDef {
        id,
        method,
        pattern,
        keyed,
        counted,
    }
}

const ROUTE_COUNT: usize = 15;

static ROUTES: [RouteDef; ROUTE_COUNT] = [
    route(
        RouteId::Treatments,
        Method::GET,
        "/spa/v1/treatments",
        false,
        true,
    ),
    route(
        RouteId::Treatment,
        Method::GET,
        "/spa/v1/treatments/{code}",
        false,
        true,
    ),
    route(
        RouteId::Openings,
        Method::GET,
        "/spa/v1/treatments/{code}/openings",
        false,
        true,
    ),
    route(
        RouteId::CreateAppointment,
        Method::POST,
        "/spa/v1/appointments",
        true,
        true,
    ),
    route(
        RouteId::GetAppointment,
        Method::GET,
        "/spa/v1/appointments/{number}",
        true,
        true,
    ),
    route(
        RouteId::CancelAppointment,
        Method::POST,
        "/spa/v1/appointments/{number}/cancellation",
        true,
        true,
    ),
    route(
        RouteId::MoveAppointment,
        Method::POST,
        "/spa/v1/appointments/{number}/move",
        true,
        true,
    ),
    route(
        RouteId::CreateQuote,
        Method::POST,
        "/hotel/api/quotes",
        true,
        true,
    ),
    route(
        RouteId::GetQuote,
        Method::GET,
        "/hotel/api/quotes/{qid}",
        true,
        true,
    ),
    route(
        RouteId::PutQuote,
        Method::PUT,
        "/hotel/api/quotes/{qid}",
        true,
        true,
    ),
    route(
        RouteId::ConfirmQuote,
        Method::POST,
        "/hotel/api/quotes/{qid}/confirm",
        true,
        true,
    ),
    route(
        RouteId::VoidQuote,
        Method::POST,
        "/hotel/api/quotes/{qid}/void",
        true,
        true,
    ),
    route(
        RouteId::Concierge,
        Method::POST,
        "/hotel/api/concierge",
        false,
        true,
    ),
    route(RouteId::Stats, Method::GET, "/__demo/stats", false, false),
    route(RouteId::Reset, Method::POST, "/__demo/reset", false, false),
];

enum Resolved {
    Found(usize, Vec<String>),
    WrongMethod(Vec<&'static str>),
    NoRoute,
}

/// Matches decoded path segments (leading empty segment included) against a pattern.
fn match_pattern(pattern: &str, segs: &[String]) -> Option<Vec<String>> {
    let pat: Vec<&str> = pattern.split('/').collect();
    if pat.len() != segs.len() {
        return None;
    }
    let mut params = Vec::new();
    for (p, s) in pat.iter().zip(segs) {
        if p.starts_with('{') && p.ends_with('}') {
            if s.is_empty() {
                return None;
            }
            params.push(s.clone());
        } else if p != s {
            return None;
        }
    }
    Some(params)
}

fn resolve(method: &Method, raw_path: &str) -> Resolved {
    let segs: Vec<String> = raw_path
        .split('/')
        .map(|s| percent_decode_str(s).decode_utf8_lossy().into_owned())
        .collect();
    let mut allowed = Vec::new();
    for (idx, def) in ROUTES.iter().enumerate() {
        if let Some(params) = match_pattern(def.pattern, &segs) {
            if def.method == *method {
                return Resolved::Found(idx, params);
            }
            allowed.push(def.method.as_str());
        }
    }
    if allowed.is_empty() {
        Resolved::NoRoute
    } else {
        Resolved::WrongMethod(allowed)
    }
}

// ---------------------------------------------------------------------------------------------
// HTTP plumbing
// ---------------------------------------------------------------------------------------------

type Reply = (StatusCode, Value);

fn lock(shared: &Mutex<State>) -> MutexGuard<'_, State> {
    shared
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn json_response(status: StatusCode, value: &Value) -> Response<Full<Bytes>> {
    let bytes = serde_json::to_vec(value).unwrap_or_else(|_| b"{}".to_vec());
    let mut resp = Response::new(Full::new(Bytes::from(bytes)));
    *resp.status_mut() = status;
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    resp
}

fn has_key(headers: &HeaderMap) -> bool {
    headers
        .get("x-api-key")
        .is_some_and(|v| v.as_bytes() == API_KEY.as_bytes())
}

async fn handle(
    shared: Arc<Mutex<State>>,
    outbox: Option<mpsc::Sender<Value>>,
    req: Request<Incoming>,
) -> Result<Response<Full<Bytes>>, Infallible> {
    Ok(handle_inner(&shared, outbox.as_ref(), req).await)
}

/// The legacy webhook kind a successful appointment change emits.
fn webhook_kind(id: RouteId, status: StatusCode) -> Option<&'static str> {
    match (id, status) {
        (RouteId::CreateAppointment, StatusCode::CREATED) => Some("appointment.booked"),
        (RouteId::CancelAppointment, StatusCode::OK) => Some("appointment.cancelled"),
        (RouteId::MoveAppointment, StatusCode::OK) => Some("appointment.moved"),
        _ => None,
    }
}

async fn handle_inner(
    shared: &Mutex<State>,
    outbox: Option<&mpsc::Sender<Value>>,
    req: Request<Incoming>,
) -> Response<Full<Bytes>> {
    let (idx, params) = match resolve(req.method(), req.uri().path()) {
        Resolved::Found(idx, params) => (idx, params),
        Resolved::NoRoute => {
            return json_response(StatusCode::NOT_FOUND, &json!({"error": "NO_ROUTE"}));
        }
        Resolved::WrongMethod(allowed) => {
            let mut resp =
                json_response(StatusCode::METHOD_NOT_ALLOWED, &json!({"error": "METHOD"}));
            if let Ok(v) = HeaderValue::from_str(&allowed.join(", ")) {
                resp.headers_mut().insert(header::ALLOW, v);
            }
            return resp;
        }
    };
    let def = &ROUTES[idx];
    if def.counted {
        lock(shared).calls[idx] += 1;
    }
    if def.keyed && !has_key(req.headers()) {
        return json_response(StatusCode::UNAUTHORIZED, &json!({"error": "NO_AUTH"}));
    }
    let query = req.uri().query().map(str::to_owned);

    let body = if def.method == Method::POST || def.method == Method::PUT {
        match read_json_object(req).await {
            Ok(obj) => obj,
            Err(resp) => return resp,
        }
    } else {
        Map::new()
    };

    let (status, value) = {
        let mut state = lock(shared);
        let reply = dispatch(&mut state, def.id, &params, query.as_deref(), &body);
        // Emitted under the state lock, so events leave in the order the changes happened.
        if let (Some(tx), Some(kind), Some(a)) = (
            outbox,
            webhook_kind(def.id, reply.0),
            reply.1.get("appointment"),
        ) {
            let _ = tx.try_send(json!({"kind": kind, "appointment": a}));
        }
        reply
    };
    json_response(status, &value)
}

fn too_big() -> Response<Full<Bytes>> {
    json_response(StatusCode::PAYLOAD_TOO_LARGE, &json!({"error": "TOO_BIG"}))
}

fn bad_json(detail: &str) -> Response<Full<Bytes>> {
    json_response(
        StatusCode::BAD_REQUEST,
        &json!({"error": "BAD_JSON", "detail": detail}),
    )
}

/// Reads a body of at most [`MAX_BODY`] bytes as a JSON object; an empty body counts as `{}`.
async fn read_json_object(
    req: Request<Incoming>,
) -> Result<Map<String, Value>, Response<Full<Bytes>>> {
    let declared = req
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok());
    if declared.is_some_and(|n| n > MAX_BODY as u64) {
        return Err(too_big());
    }
    let bytes = match Limited::new(req.into_body(), MAX_BODY).collect().await {
        Ok(collected) => collected.to_bytes(),
        Err(e) if e.downcast_ref::<LengthLimitError>().is_some() => return Err(too_big()),
        Err(e) => return Err(bad_json(&format!("could not read the body: {e}"))),
    };
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Ok(Map::new());
    }
    match serde_json::from_slice::<Value>(&bytes) {
        Ok(Value::Object(obj)) => Ok(obj),
        Ok(_) => Err(bad_json("the body must be a JSON object")),
        Err(e) => Err(bad_json(&e.to_string())),
    }
}

fn dispatch(
    state: &mut State,
    id: RouteId,
    params: &[String],
    query: Option<&str>,
    body: &Map<String, Value>,
) -> Reply {
    let param = params.first().map(String::as_str).unwrap_or_default();
    match id {
        RouteId::Treatments => list_treatments(query),
        RouteId::Treatment => get_treatment(param),
        RouteId::Openings => state.openings(param, query),
        RouteId::CreateAppointment => state.create_appointment(body),
        RouteId::GetAppointment => state.get_appointment(param),
        RouteId::CancelAppointment => state.cancel_appointment(param, body),
        RouteId::MoveAppointment => state.move_appointment(param, body),
        RouteId::CreateQuote => state.create_quote(body),
        RouteId::GetQuote => state.get_quote(param),
        RouteId::PutQuote => state.put_quote(param, body),
        RouteId::ConfirmQuote => state.confirm_quote(param, body),
        RouteId::VoidQuote => state.void_quote(param),
        RouteId::Concierge => state.concierge(body),
        RouteId::Stats => state.stats(),
        RouteId::Reset => {
            *state = State::seeded();
            (StatusCode::OK, json!({"ok": true}))
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Answers and request-field helpers
// ---------------------------------------------------------------------------------------------

fn ok(value: Value) -> Reply {
    (StatusCode::OK, value)
}

fn not_found(detail: String) -> Reply {
    (
        StatusCode::NOT_FOUND,
        json!({"error": "NOT_FOUND", "detail": detail}),
    )
}

fn conflict(code: &str, detail: String) -> Reply {
    (
        StatusCode::CONFLICT,
        json!({"error": code, "detail": detail}),
    )
}

/// Validation failures: 200 with `{"errors":[{"field","msg"}...]}`.
#[derive(Default)]
struct Errors(Vec<Value>);

impl Errors {
    fn push(&mut self, field: &str, msg: &str) {
        self.0.push(json!({"field": field, "msg": msg}));
    }

    fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    fn reply(self) -> Reply {
        (StatusCode::OK, json!({"errors": self.0}))
    }

    /// A required, non-blank string.
    fn required_str<'a>(
        &mut self,
        obj: &'a Map<String, Value>,
        key: &str,
        field: &str,
    ) -> Option<&'a str> {
        match obj.get(key) {
            None | Some(Value::Null) => {
                self.push(field, "is required");
                None
            }
            Some(Value::String(s)) if s.trim().is_empty() => {
                self.push(field, "must not be empty");
                None
            }
            Some(Value::String(s)) => Some(s),
            Some(_) => {
                self.push(field, "must be a string");
                None
            }
        }
    }

    /// An optional string (absent and `null` both mean "not given").
    fn optional_str<'a>(
        &mut self,
        obj: &'a Map<String, Value>,
        key: &str,
        field: &str,
    ) -> Option<&'a str> {
        match obj.get(key) {
            None | Some(Value::Null) => None,
            Some(Value::String(s)) => Some(s),
            Some(_) => {
                self.push(field, "must be a string");
                None
            }
        }
    }

    /// An integer; `default` when absent or `null`, `None` (with an error) when malformed.
    fn integer(
        &mut self,
        obj: &Map<String, Value>,
        key: &str,
        default: Option<i64>,
    ) -> Option<i64> {
        match obj.get(key) {
            None | Some(Value::Null) => {
                if default.is_none() {
                    self.push(key, "is required");
                }
                default
            }
            Some(v) => match v.as_i64() {
                Some(n) => Some(n),
                None => {
                    self.push(key, "must be an integer");
                    None
                }
            },
        }
    }

    /// A required `YYYY-MM-DD` date, as a day number.
    fn date(&mut self, obj: &Map<String, Value>, key: &str) -> Option<i64> {
        let s = self.required_str(obj, key, key)?;
        let day = parse_date(s);
        if day.is_none() {
            self.push(key, "must be a date YYYY-MM-DD");
        }
        day
    }
}

fn query_param(query: Option<&str>, name: &str) -> Option<String> {
    query?.split('&').find_map(|pair| {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        (decode_query(k) == name).then(|| decode_query(v))
    })
}

fn decode_query(s: &str) -> String {
    let s = s.replace('+', " ");
    percent_decode_str(&s).decode_utf8_lossy().into_owned()
}

// ---------------------------------------------------------------------------------------------
// Civil dates (days since 1970-01-01, proleptic Gregorian)
// ---------------------------------------------------------------------------------------------

const fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = if y >= 0 { y } else { y - 399 } / 400;
    let yoe = y - era * 400;
    let mp = if m > 2 { m - 3 } else { m + 9 };
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

fn is_leap(y: i64) -> bool {
    (y % 4 == 0 && y % 100 != 0) || y % 400 == 0
}

fn days_in_month(y: i64, m: i64) -> i64 {
    match m {
        4 | 6 | 9 | 11 => 30,
        2 if is_leap(y) => 29,
        2 => 28,
        _ => 31,
    }
}

/// Strict `YYYY-MM-DD`.
fn parse_date(s: &str) -> Option<i64> {
    let b = s.as_bytes();
    if b.len() != 10 || b[4] != b'-' || b[7] != b'-' {
        return None;
    }
    let num = |range: std::ops::Range<usize>| -> Option<i64> {
        b[range].iter().try_fold(0i64, |acc, c| {
            c.is_ascii_digit().then(|| acc * 10 + i64::from(c - b'0'))
        })
    };
    let (y, m, d) = (num(0..4)?, num(5..7)?, num(8..10)?);
    if !(1..=12).contains(&m) || d < 1 || d > days_in_month(y, m) {
        return None;
    }
    Some(days_from_civil(y, m, d))
}

fn format_date(day: i64) -> String {
    let (y, m, d) = civil_from_days(day);
    format!("{y:04}-{m:02}-{d:02}")
}

fn format_time(minutes: u32) -> String {
    format!("{:02}:{:02}", minutes / 60, minutes % 60)
}

// ---------------------------------------------------------------------------------------------
// Seaside Spa: catalogue and openings
// ---------------------------------------------------------------------------------------------

struct Treatment {
    code: &'static str,
    title: &'static str,
    category: &'static str,
    minutes: u32,
    price_cents: i64,
    blurb: &'static str,
}

const TREATMENTS: [Treatment; 3] = [
    Treatment {
        code: "MASSAGE-60",
        title: "Deep tissue massage",
        category: "massage",
        minutes: 60,
        price_cents: 9000,
        blurb: "Slow, firm pressure on the deeper layers of muscle; ideal after a long journey.",
    },
    Treatment {
        code: "FACIAL-45",
        title: "Sea-mineral facial",
        category: "facial",
        minutes: 45,
        price_cents: 7000,
        blurb: "Cleansing, gentle exfoliation and a mask of Atlantic sea minerals.",
    },
    Treatment {
        code: "SAUNA-30",
        title: "Private sauna session",
        category: "wellness",
        minutes: 30,
        price_cents: 2500,
        blurb: "Half an hour in the cedar sauna; towels and herbal tea included.",
    },
];

/// Opening start times, minutes after local midnight: 09:00, 11:00, 14:00, 16:00.
const SLOTS: [u32; 4] = [9 * 60, 11 * 60, 14 * 60, 16 * 60];
const SEASON_FIRST: i64 = days_from_civil(2026, 12, 1);
const SEASON_LAST: i64 = days_from_civil(2027, 3, 31);
/// Longest openings query, in days counted inclusively.
const MAX_QUERY_DAYS: i64 = 14;

fn find_treatment(code: &str) -> Option<usize> {
    TREATMENTS.iter().position(|t| t.code == code)
}

fn treatment_json(t: &Treatment) -> Value {
    json!({
        "code": t.code,
        "title": t.title,
        "category": t.category,
        "minutes": t.minutes,
        "price": {"amount_cents": t.price_cents, "ccy": CCY},
        "blurb": t.blurb,
    })
}

/// One opening: treatment index, day number, slot index.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug)]
struct Slot {
    treatment: usize,
    day: i64,
    slot: usize,
}

impl Slot {
    fn begins(self) -> String {
        format!(
            "{}T{}",
            format_date(self.day),
            format_time(SLOTS[self.slot])
        )
    }

    fn ends(self) -> String {
        let end = SLOTS[self.slot] + TREATMENTS[self.treatment].minutes;
        format!("{}T{}", format_date(self.day), format_time(end))
    }

    fn reference(self) -> String {
        format!("{}@{}", TREATMENTS[self.treatment].code, self.begins())
    }

    /// Parses `<code>@<YYYY-MM-DDTHH:MM>`; `None` unless it names an existing opening.
    fn parse(reference: &str) -> Option<Self> {
        let (code, when) = reference.split_once('@')?;
        let treatment = find_treatment(code)?;
        if when.len() != 16 || when.as_bytes()[10] != b'T' {
            return None;
        }
        let day = parse_date(when.get(..10)?)?;
        let time = when.get(11..)?;
        let slot = SLOTS.iter().position(|&m| format_time(m) == time)?;
        (SEASON_FIRST..=SEASON_LAST).contains(&day).then_some(Self {
            treatment,
            day,
            slot,
        })
    }
}

fn list_treatments(query: Option<&str>) -> Reply {
    let category = query_param(query, "category").filter(|c| !c.is_empty());
    let list: Vec<Value> = TREATMENTS
        .iter()
        .filter(|t| {
            category
                .as_deref()
                .is_none_or(|c| t.category.eq_ignore_ascii_case(c))
        })
        .map(treatment_json)
        .collect();
    ok(json!({"treatments": list}))
}

fn get_treatment(code: &str) -> Reply {
    match find_treatment(code) {
        Some(i) => ok(json!({"treatment": treatment_json(&TREATMENTS[i])})),
        None => not_found(format!("no treatment {code}")),
    }
}

// ---------------------------------------------------------------------------------------------
// Harbour Hotel: catalogue
// ---------------------------------------------------------------------------------------------

struct Room {
    code: &'static str,
    label: &'static str,
    max_adults: i64,
    max_kids: i64,
    nightly_cents: i64,
    inventory: usize,
}

const ROOMS: [Room; 3] = [
    Room {
        code: "DBL",
        label: "Double room, harbour view",
        max_adults: 2,
        max_kids: 1,
        nightly_cents: 14_000,
        inventory: 5,
    },
    Room {
        code: "STE",
        label: "Suite, harbour view",
        max_adults: 4,
        max_kids: 2,
        nightly_cents: 32_000,
        inventory: 1,
    },
    Room {
        code: "SGL",
        label: "Single room, courtyard side",
        max_adults: 1,
        max_kids: 0,
        nightly_cents: 9_000,
        inventory: 0,
    },
];

struct Rate {
    code: &'static str,
    label: &'static str,
    /// Price factor in percent of the room's nightly price.
    percent: i64,
}

const RATES: [Rate; 2] = [
    Rate {
        code: "FLEX",
        label: "Flexible rate",
        percent: 100,
    },
    Rate {
        code: "NRF",
        label: "Non-refundable rate",
        percent: 85,
    },
];

const HOTEL_CODE: &str = "HH-LIS";

fn hotel_json() -> Value {
    json!({
        "code": HOTEL_CODE,
        "name": "Harbour Hotel Lisbon",
        "street": "Rua do Cais 1",
        "city": "Lisboa",
        "country": "PT",
        "zip": "1100-001",
        "tz": TZ,
    })
}

const SITE: &str = "https://harbour-hotel.example";

/// Concierge topics: keywords (matched case-insensitively), reply, link label, link path.
const TOPICS: [(&[&str], &str, &str, &str); 5] = [
    (
        &["pet", "dog"],
        "Well-behaved pets up to 10 kg are welcome for EUR 15 per night; please mention them when you book.",
        "Pet policy",
        "/policies/pets",
    ),
    (
        &["breakfast"],
        "Breakfast is served in the Quay restaurant from 07:00 to 10:30 on weekdays and from 07:30 to 11:00 at weekends.",
        "Breakfast and dining",
        "/dining",
    ),
    (
        &["cancel"],
        "Flexible-rate bookings can be cancelled free of charge until 12:00 on the day of arrival; non-refundable (NRF) bookings cannot be refunded.",
        "Cancellation policy",
        "/policies/cancellation",
    ),
    (
        &["parking"],
        "Valet parking costs EUR 25 per night; the public car park at Cais do Sodre is 200 m away.",
        "Parking",
        "/parking",
    ),
    (
        &["check-in", "check in"],
        "Check-in is from 15:00 and check-out until 12:00; early check-in is on request.",
        "Arrival and departure",
        "/arrival",
    ),
];

// ---------------------------------------------------------------------------------------------
// State
// ---------------------------------------------------------------------------------------------

struct Client {
    name: String,
    email: String,
    phone: Option<String>,
}

struct Appointment {
    number: String,
    slot: Slot,
    client: Client,
    cancelled: bool,
    moves: u64,
    created: u64,
    /// Logical clock readings (minutes after the demo epoch) of creation and last change.
    booked_at: u64,
    changed_at: u64,
}

/// Deterministic timestamps: the demo's clock starts at 2026-11-30T08:00:00Z and advances one
/// minute per state change, so responses never depend on the wall clock.
fn stamp(minutes: u64) -> String {
    const EPOCH_DAY: i64 = 20_787; // 2026-11-30
    let total = 8 * 60 + minutes;
    let day = EPOCH_DAY + (total / 1440) as i64;
    let min = (total % 1440) as u32;
    format!("{}T{}:00Z", format_date(day), format_time(min))
}

impl Appointment {
    fn to_json(&self) -> Value {
        let t = &TREATMENTS[self.slot.treatment];
        json!({
            "number": self.number,
            "treatment": t.code,
            "opening": self.slot.reference(),
            "begins": self.slot.begins(),
            "ends": self.slot.ends(),
            "client": {
                "name": self.client.name,
                "email": self.client.email,
                "phone": self.client.phone,
            },
            "status": if self.cancelled { "CANCELLED" } else { "BOOKED" },
            "moves": self.moves,
            "price": {"amount_cents": t.price_cents, "ccy": CCY},
            "created": self.created.to_string(),
            "booked_at": stamp(self.booked_at),
            "changed_at": stamp(self.changed_at),
        })
    }
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum QuoteState {
    Open,
    Confirmed,
    Void,
}

impl QuoteState {
    fn as_str(self) -> &'static str {
        match self {
            Self::Open => "OPEN",
            Self::Confirmed => "CONFIRMED",
            Self::Void => "VOID",
        }
    }
}

struct Guest {
    first: Option<String>,
    last: Option<String>,
    mail: Option<String>,
}

/// The validated body of a quote create / replace.
struct QuoteInput {
    room: usize,
    rate: usize,
    arrive: i64,
    depart: i64,
    adults: i64,
    kids: i64,
    guest: Option<Guest>,
}

struct Quote {
    qid: String,
    state: QuoteState,
    input: QuoteInput,
    confirmation: Option<String>,
}

impl Quote {
    fn to_json(&self) -> Value {
        let q = &self.input;
        let room = &ROOMS[q.room];
        let rate = &RATES[q.rate];
        let nights = q.depart - q.arrive;
        let net = room.nightly_cents * nights * rate.percent / 100;
        let tax = net * 6 / 100;
        let guest = q
            .guest
            .as_ref()
            .map(|g| json!({"first": g.first, "last": g.last, "mail": g.mail}));
        json!({
            "qid": self.qid,
            "state": self.state.as_str(),
            "hotel": hotel_json(),
            "room": {
                "code": room.code,
                "label": room.label,
                "max_adults": room.max_adults,
                "max_kids": room.max_kids,
            },
            "rate": {"code": rate.code, "label": rate.label},
            "arrive": format_date(q.arrive),
            "depart": format_date(q.depart),
            "nights": nights,
            "adults": q.adults,
            "kids": q.kids,
            "guest": guest,
            "price": {
                "net_cents": net,
                "tax_cents": tax,
                "gross_cents": net + tax,
                "ccy": CCY,
            },
            "confirmation": self.confirmation,
            "valid_until": format!("{}T12:00", format_date(q.arrive)),
        })
    }
}

/// Deterministic confirmation code: `HH-` and the FNV-1a hash of the quote id in hex.
fn confirmation_code(qid: &str) -> String {
    let hash = qid.bytes().fold(0x811c_9dc5_u32, |h, b| {
        (h ^ u32::from(b)).wrapping_mul(0x0100_0193)
    });
    format!("HH-{hash:08X}")
}

struct State {
    /// Openings that are not free.
    taken: BTreeSet<Slot>,
    appointments: Vec<Appointment>,
    next_appointment: u64,
    quotes: Vec<Quote>,
    next_quote: u64,
    next_thread: u64,
    /// Logical clock (minutes after the demo epoch), advanced by every appointment change.
    clock: u64,
    /// Calls per entry of [`ROUTES`].
    calls: [u64; ROUTE_COUNT],
}

impl State {
    fn seeded() -> Self {
        let mut taken = BTreeSet::new();
        taken.insert(Slot {
            treatment: 0,
            day: SEASON_FIRST,
            slot: 1,
        });
        Self {
            taken,
            appointments: Vec::new(),
            next_appointment: 1001,
            quotes: Vec::new(),
            next_quote: 5001,
            next_thread: 1,
            clock: 0,
            calls: [0; ROUTE_COUNT],
        }
    }

    fn stats(&self) -> Reply {
        let mut calls = Map::new();
        let mut total = 0;
        for (def, n) in ROUTES.iter().zip(self.calls) {
            if def.counted {
                calls.insert(format!("{} {}", def.method, def.pattern), json!(n));
                total += n;
            }
        }
        ok(json!({"calls": calls, "total": total}))
    }

    // ---- spa ----

    fn openings(&self, code: &str, query: Option<&str>) -> Reply {
        let Some(treatment) = find_treatment(code) else {
            return not_found(format!("no treatment {code}"));
        };
        let mut errors = Errors::default();
        let mut bound = |name: &str| match query_param(query, name) {
            None => {
                errors.push(name, "is required (YYYY-MM-DD)");
                None
            }
            Some(s) => {
                let day = parse_date(&s);
                if day.is_none() {
                    errors.push(name, "must be a date YYYY-MM-DD");
                }
                day
            }
        };
        let (from, to) = (bound("from"), bound("to"));
        if let (Some(from), Some(to)) = (from, to) {
            if to < from {
                errors.push("to", "must not be before from");
            } else if to - from + 1 > MAX_QUERY_DAYS {
                errors.push("to", "the range may cover at most 14 days");
            }
        }
        let (Some(from), Some(to), true) = (from, to, errors.is_empty()) else {
            return errors.reply();
        };
        let mut openings = Vec::new();
        for day in from.max(SEASON_FIRST)..=to.min(SEASON_LAST) {
            for slot in 0..SLOTS.len() {
                let s = Slot {
                    treatment,
                    day,
                    slot,
                };
                openings.push(json!({
                    "ref": s.reference(),
                    "begins": s.begins(),
                    "ends": s.ends(),
                    "free": !self.taken.contains(&s),
                }));
            }
        }
        ok(json!({"treatment": code, "openings": openings, "tz": TZ}))
    }

    fn find_appointment(&mut self, number: &str) -> Option<&mut Appointment> {
        self.appointments.iter_mut().find(|a| a.number == number)
    }

    fn create_appointment(&mut self, body: &Map<String, Value>) -> Reply {
        let mut errors = Errors::default();
        let code = errors.required_str(body, "treatment", "treatment");
        let reference = errors.required_str(body, "opening", "opening");
        let empty = Map::new();
        let client = match body.get("client") {
            Some(Value::Object(c)) => c,
            None | Some(Value::Null) => &empty,
            Some(_) => {
                errors.push("client", "must be an object");
                &empty
            }
        };
        let name = errors.required_str(client, "name", "client.name");
        let email = errors.required_str(client, "email", "client.email");
        if email.is_some_and(|e| !e.contains('@')) {
            errors.push("client.email", "must contain @");
        }
        let phone = errors.optional_str(client, "phone", "client.phone");
        errors.optional_str(body, "note", "note");
        let (Some(code), Some(reference), Some(name), Some(email), true) =
            (code, reference, name, email, errors.is_empty())
        else {
            return errors.reply();
        };
        let Some(treatment) = find_treatment(code) else {
            return not_found(format!("no treatment {code}"));
        };
        let Some(slot) = Slot::parse(reference) else {
            return not_found(format!("no opening {reference}"));
        };
        if slot.treatment != treatment {
            errors.push(
                "opening",
                &format!("{reference} is not an opening of treatment {code}"),
            );
            return errors.reply();
        }
        if self.taken.contains(&slot) {
            return conflict("SLOT_TAKEN", format!("opening {reference} is not free"));
        }
        self.taken.insert(slot);
        let seq = self.next_appointment;
        self.next_appointment += 1;
        self.clock += 1;
        let now = self.clock;
        let appointment = Appointment {
            number: format!("A-{seq}"),
            slot,
            client: Client {
                name: name.to_owned(),
                email: email.to_owned(),
                phone: phone.map(str::to_owned),
            },
            cancelled: false,
            moves: 0,
            created: seq - 1000,
            booked_at: now,
            changed_at: now,
        };
        let value = json!({"appointment": appointment.to_json()});
        self.appointments.push(appointment);
        (StatusCode::CREATED, value)
    }

    fn get_appointment(&mut self, number: &str) -> Reply {
        match self.find_appointment(number) {
            Some(a) => ok(json!({"appointment": a.to_json()})),
            None => not_found(format!("no appointment {number}")),
        }
    }

    fn cancel_appointment(&mut self, number: &str, body: &Map<String, Value>) -> Reply {
        let Some(appointment) = self.appointments.iter_mut().find(|a| a.number == number) else {
            return not_found(format!("no appointment {number}"));
        };
        let mut errors = Errors::default();
        errors.optional_str(body, "reason", "reason");
        if !errors.is_empty() {
            return errors.reply();
        }
        if appointment.cancelled {
            return conflict(
                "ALREADY_CANCELLED",
                format!("appointment {number} is already cancelled"),
            );
        }
        appointment.cancelled = true;
        self.clock += 1;
        appointment.changed_at = self.clock;
        let slot = appointment.slot;
        let value = json!({"appointment": appointment.to_json()});
        self.taken.remove(&slot);
        ok(value)
    }

    fn move_appointment(&mut self, number: &str, body: &Map<String, Value>) -> Reply {
        let Some(pos) = self.appointments.iter().position(|a| a.number == number) else {
            return not_found(format!("no appointment {number}"));
        };
        let mut errors = Errors::default();
        let Some(reference) = errors.required_str(body, "opening", "opening") else {
            return errors.reply();
        };
        let current = &self.appointments[pos];
        if current.cancelled {
            return conflict(
                "ALREADY_CANCELLED",
                format!("appointment {number} is cancelled and cannot be moved"),
            );
        }
        let Some(slot) = Slot::parse(reference) else {
            return not_found(format!("no opening {reference}"));
        };
        if slot.treatment != current.slot.treatment {
            let code = TREATMENTS[current.slot.treatment].code;
            errors.push(
                "opening",
                &format!("{reference} is not an opening of treatment {code}"),
            );
            return errors.reply();
        }
        if self.taken.contains(&slot) {
            return conflict("SLOT_TAKEN", format!("opening {reference} is not free"));
        }
        let old = current.slot;
        self.taken.remove(&old);
        self.taken.insert(slot);
        let appointment = &mut self.appointments[pos];
        appointment.slot = slot;
        appointment.moves += 1;
        self.clock += 1;
        appointment.changed_at = self.clock;
        ok(json!({"appointment": appointment.to_json()}))
    }

    // ---- hotel ----

    fn find_quote(&mut self, qid: &str) -> Option<&mut Quote> {
        self.quotes.iter_mut().find(|q| q.qid == qid)
    }

    /// Whether one more room of this type is free on every night of `[arrive, depart)`.
    fn room_available(&self, room: usize, arrive: i64, depart: i64) -> bool {
        let inventory = ROOMS[room].inventory;
        let booked: Vec<(i64, i64)> = self
            .quotes
            .iter()
            .filter(|q| q.state == QuoteState::Confirmed && q.input.room == room)
            .map(|q| (q.input.arrive, q.input.depart))
            .filter(|&(a, d)| a < depart && d > arrive)
            .collect();
        // Occupancy only rises where a stay begins, so checking those nights suffices.
        std::iter::once(arrive)
            .chain(
                booked
                    .iter()
                    .map(|b| b.0)
                    .filter(|&a| a > arrive && a < depart),
            )
            .all(|night| {
                booked
                    .iter()
                    .filter(|b| b.0 <= night && night < b.1)
                    .count()
                    < inventory
            })
    }

    fn sold_out(&self, input: &QuoteInput) -> Option<Reply> {
        (!self.room_available(input.room, input.arrive, input.depart)).then(|| {
            conflict(
                "SOLD_OUT",
                format!(
                    "no {} left for every night from {} to {}",
                    ROOMS[input.room].code,
                    format_date(input.arrive),
                    format_date(input.depart)
                ),
            )
        })
    }

    fn create_quote(&mut self, body: &Map<String, Value>) -> Reply {
        let input = match parse_quote_input(body) {
            Ok(input) => input,
            Err(reply) => return reply,
        };
        if let Some(reply) = self.sold_out(&input) {
            return reply;
        }
        let qid = format!("Q-{}", self.next_quote);
        self.next_quote += 1;
        let quote = Quote {
            qid,
            state: QuoteState::Open,
            input,
            confirmation: None,
        };
        let value = json!({"quote": quote.to_json()});
        self.quotes.push(quote);
        (StatusCode::CREATED, value)
    }

    fn get_quote(&mut self, qid: &str) -> Reply {
        match self.find_quote(qid) {
            Some(q) => ok(json!({"quote": q.to_json()})),
            None => not_found(format!("no quote {qid}")),
        }
    }

    fn put_quote(&mut self, qid: &str, body: &Map<String, Value>) -> Reply {
        let Some(pos) = self.quotes.iter().position(|q| q.qid == qid) else {
            return not_found(format!("no quote {qid}"));
        };
        if let Some(reply) = locked_unless_open(&self.quotes[pos]) {
            return reply;
        }
        let input = match parse_quote_input(body) {
            Ok(input) => input,
            Err(reply) => return reply,
        };
        if let Some(reply) = self.sold_out(&input) {
            return reply;
        }
        let quote = &mut self.quotes[pos];
        quote.input = input;
        ok(json!({"quote": quote.to_json()}))
    }

    fn confirm_quote(&mut self, qid: &str, body: &Map<String, Value>) -> Reply {
        let Some(pos) = self.quotes.iter().position(|q| q.qid == qid) else {
            return not_found(format!("no quote {qid}"));
        };
        if let Some(reply) = locked_unless_open(&self.quotes[pos]) {
            return reply;
        }
        let mut errors = Errors::default();
        if self.quotes[pos].input.guest.is_none() {
            errors.push(
                "guest",
                "a guest (first, last, mail) is required before confirming",
            );
            return errors.reply();
        }
        let Some(token) = errors.required_str(body, "card_token", "card_token") else {
            return errors.reply();
        };
        if !token.starts_with("tok_") {
            errors.push("card_token", "must be a card token starting with tok_");
            return errors.reply();
        }
        if token == "tok_declined" {
            return (
                StatusCode::PAYMENT_REQUIRED,
                json!({"error": "CARD_DECLINED", "detail": "the card was declined"}),
            );
        }
        if let Some(reply) = self.sold_out(&self.quotes[pos].input) {
            return reply;
        }
        let quote = &mut self.quotes[pos];
        quote.state = QuoteState::Confirmed;
        quote.confirmation = Some(confirmation_code(&quote.qid));
        ok(json!({"quote": quote.to_json()}))
    }

    fn void_quote(&mut self, qid: &str) -> Reply {
        let Some(quote) = self.find_quote(qid) else {
            return not_found(format!("no quote {qid}"));
        };
        if quote.state == QuoteState::Void {
            return conflict("LOCKED", format!("quote {qid} is already VOID"));
        }
        quote.state = QuoteState::Void;
        ok(json!({"quote": quote.to_json()}))
    }

    fn concierge(&mut self, body: &Map<String, Value>) -> Reply {
        let mut errors = Errors::default();
        let question = errors.required_str(body, "question", "question");
        let thread = errors.optional_str(body, "thread", "thread");
        match body.get("refs") {
            None | Some(Value::Null | Value::Array(_)) => {}
            Some(_) => errors.push("refs", "must be an array"),
        }
        let (Some(question), true) = (question, errors.is_empty()) else {
            return errors.reply();
        };
        let thread = match thread {
            Some(t) => t.to_owned(),
            None => {
                let n = self.next_thread;
                self.next_thread += 1;
                format!("t-{n}")
            }
        };
        let lowered = question.to_lowercase();
        let mut replies = Vec::new();
        let mut see_also = Vec::new();
        for (keywords, reply, label, path) in TOPICS {
            if keywords.iter().any(|k| lowered.contains(k)) {
                replies.push(reply);
                see_also.push(json!({"label": label, "href": format!("{SITE}{path}")}));
            }
        }
        if replies.is_empty() {
            replies.push(
                "I'm sorry, I can't answer that one. The front desk will gladly help: \
                 frontdesk@harbour-hotel.example or +351 210 000 000.",
            );
            see_also.push(json!({"label": "Contact us", "href": format!("{SITE}/contact")}));
        }
        ok(json!({"reply": replies.join(" "), "thread": thread, "see_also": see_also}))
    }
}

fn locked_unless_open(quote: &Quote) -> Option<Reply> {
    (quote.state != QuoteState::Open).then(|| {
        conflict(
            "LOCKED",
            format!("quote {} is {}", quote.qid, quote.state.as_str()),
        )
    })
}

/// Validates a quote create / replace body: 200 errors for shape and rule failures, 404 for
/// an unknown hotel, room or rate.
fn parse_quote_input(body: &Map<String, Value>) -> Result<QuoteInput, Reply> {
    let mut errors = Errors::default();
    let hotel = errors.required_str(body, "hotel", "hotel");
    let room = errors.required_str(body, "room", "room");
    let rate = errors.required_str(body, "rate", "rate");
    let arrive = errors.date(body, "arrive");
    let depart = errors.date(body, "depart");
    let adults = errors.integer(body, "adults", None);
    let kids = errors.integer(body, "kids", Some(0));
    if let (Some(a), Some(d)) = (arrive, depart)
        && d <= a
    {
        errors.push("depart", "must be after arrive");
    }
    if adults.is_some_and(|a| a < 1) {
        errors.push("adults", "at least one adult is required");
    }
    if kids.is_some_and(|k| k < 0) {
        errors.push("kids", "must not be negative");
    }
    let guest = match body.get("guest") {
        None | Some(Value::Null) => None,
        Some(Value::Object(g)) => {
            // A reservation needs the whole guest: first name, last name and e-mail.
            let first = errors.required_str(g, "first", "guest.first");
            let last = errors.required_str(g, "last", "guest.last");
            let mail = errors.required_str(g, "mail", "guest.mail");
            if mail.is_some_and(|m| !m.contains('@')) {
                errors.push("guest.mail", "must contain @");
            }
            Some(Guest {
                first: first.map(str::to_owned),
                last: last.map(str::to_owned),
                mail: mail.map(str::to_owned),
            })
        }
        Some(_) => {
            errors.push("guest", "must be an object");
            None
        }
    };
    let (
        Some(hotel),
        Some(room),
        Some(rate),
        Some(arrive),
        Some(depart),
        Some(adults),
        Some(kids),
        true,
    ) = (
        hotel,
        room,
        rate,
        arrive,
        depart,
        adults,
        kids,
        errors.is_empty(),
    )
    else {
        return Err(errors.reply());
    };
    if hotel != HOTEL_CODE {
        return Err(not_found(format!("no hotel {hotel}")));
    }
    let Some(room_idx) = ROOMS.iter().position(|r| r.code == room) else {
        return Err(not_found(format!("no room type {room} at {HOTEL_CODE}")));
    };
    let Some(rate_idx) = RATES.iter().position(|r| r.code == rate) else {
        return Err(not_found(format!("no rate {rate} at {HOTEL_CODE}")));
    };
    let r = &ROOMS[room_idx];
    if adults > r.max_adults {
        errors.push(
            "adults",
            &format!("room {} takes at most {} adults", r.code, r.max_adults),
        );
    }
    if kids > r.max_kids {
        errors.push(
            "kids",
            &format!("room {} takes at most {} kids", r.code, r.max_kids),
        );
    }
    if !errors.is_empty() {
        return Err(errors.reply());
    }
    Ok(QuoteInput {
        room: room_idx,
        rate: rate_idx,
        arrive,
        depart,
        adults,
        kids,
        guest,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use reqwest::Client as Http;

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

    #[tokio::test]
    async fn stats_and_reset() {
        let d = start().await;
        let (_, v) = d.get("/__demo/stats").await;
        assert_eq!(v["total"], 0);
        assert_eq!(v["calls"].as_object().unwrap().len(), 13);
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
}
