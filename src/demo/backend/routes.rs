//! The demo backend's route table and path matching: which method and path is which operation.
//! Must never touch the backend's state or build responses.

use http::Method;
use percent_encoding::percent_decode_str;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) enum RouteId {
    Treatments,
    Treatment,
    Openings,
    CreateAppointment,
    GetAppointment,
    CancelAppointment,
    MoveAppointment,
    CreateReport,
    GetReport,
    CancelReport,
    CreateQuote,
    GetQuote,
    PutQuote,
    ConfirmQuote,
    VoidQuote,
    Concierge,
    Stats,
    Reset,
}

pub(super) struct RouteDef {
    pub(super) id: RouteId,
    pub(super) method: Method,
    pub(super) pattern: &'static str,
    /// Requires `X-Api-Key: demo-key`.
    pub(super) keyed: bool,
    /// Counted in `/__demo/stats`.
    pub(super) counted: bool,
}

pub(super) const fn route(
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

pub(super) const ROUTE_COUNT: usize = 18;

pub(super) static ROUTES: [RouteDef; ROUTE_COUNT] = [
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
        RouteId::CreateReport,
        Method::POST,
        "/spa/v1/reports",
        true,
        true,
    ),
    route(
        RouteId::GetReport,
        Method::GET,
        "/spa/v1/reports/{rid}",
        true,
        true,
    ),
    route(
        RouteId::CancelReport,
        Method::DELETE,
        "/spa/v1/reports/{rid}",
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

pub(super) enum Resolved {
    Found(usize, Vec<String>),
    WrongMethod(Vec<&'static str>),
    NoRoute,
}

/// Matches decoded path segments (leading empty segment included) against a pattern.
pub(super) fn match_pattern(pattern: &str, segs: &[String]) -> Option<Vec<String>> {
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

pub(super) fn resolve(method: &Method, raw_path: &str) -> Resolved {
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
