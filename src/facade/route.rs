//! Facade routes: `METHOD /path/{param}` templates, matching a request path (literal segments
//! win over parameters) and the `Allow` set of a path; it must never decide what a call means.

use indexmap::IndexMap;
use serde_json::Value;
use std::fmt;

/// How a request body becomes arguments.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Body {
    /// The body object's members are the arguments (USP's by-name params).
    Flatten,
    /// The whole body is the value of this argument.
    Argument(String),
}

/// One path segment of a template.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Segment {
    Literal(String),
    Param(String),
}

/// A path template such as `/bookings/{booking_id}/cancel`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Template {
    pub segments: Vec<Segment>,
}

/// The JSON type a query parameter is converted to (from the OpenAPI schema, when derived).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QueryType {
    String,
    Integer,
    Number,
    Boolean,
}

/// One facade route.
#[derive(Debug, Clone)]
pub struct Route {
    pub method: http::Method,
    pub template: Template,
    /// The upstream tool called.
    pub tool: String,
    /// Success status.
    pub status: u16,
    pub body: Body,
    /// Known query parameters and their types; unknown ones are passed as strings.
    pub query: IndexMap<String, QueryType>,
    /// What the generated OpenAPI says about the route (derived routes).
    pub doc: Option<RouteDoc>,
}

/// The documentation of a derived route, from its OpenRPC method; schemas refer to
/// `#/components/schemas/…`.
#[derive(Debug, Clone)]
pub struct RouteDoc {
    pub summary: Option<String>,
    pub description: Option<String>,
    /// The request body (object of the by-name params that are not path or query parameters).
    pub body: Value,
    /// The success body (`structuredContent`).
    pub result: Value,
}

impl Template {
    /// Parses `/a/{b}/c`: every segment is a literal or one whole `{name}`.
    pub fn parse(path: &str) -> Result<Template, String> {
        let Some(rest) = path.strip_prefix('/') else {
            return Err(format!("the path `{path}` must start with `/`"));
        };
        let mut segments = Vec::new();
        for s in rest.split('/') {
            if let Some(name) = s.strip_prefix('{').and_then(|s| s.strip_suffix('}')) {
                if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
                    return Err(format!("`{{{name}}}` is not a parameter name"));
                }
                if segments
                    .iter()
                    .any(|o| matches!(o, Segment::Param(n) if n == name))
                {
                    return Err(format!("the parameter `{name}` appears twice"));
                }
                segments.push(Segment::Param(name.to_string()));
            } else if s.contains(['{', '}', '?', '#']) {
                return Err(format!(
                    "the segment `{s}` mixes text and a parameter, or has `?`/`#`"
                ));
            } else {
                segments.push(Segment::Literal(s.to_string()));
            }
        }
        Ok(Template { segments })
    }

    /// Same literals and parameter positions (parameter names aside).
    pub fn same_shape(&self, other: &Template) -> bool {
        self.segments.len() == other.segments.len()
            && self
                .segments
                .iter()
                .zip(&other.segments)
                .all(|(a, b)| match (a, b) {
                    (Segment::Literal(x), Segment::Literal(y)) => x == y,
                    (Segment::Param(_), Segment::Param(_)) => true,
                    _ => false,
                })
    }

    /// Matches percent-decoded path segments; returns the parameters and a rank (literal
    /// positions as bits, earlier first) so `/services/feed` beats `/services/{id}`.
    pub fn matches(&self, parts: &[String]) -> Option<(Vec<(String, String)>, u64)> {
        if parts.len() != self.segments.len() {
            return None;
        }
        let mut params = Vec::new();
        let mut rank = 0u64;
        for (i, (seg, part)) in self.segments.iter().zip(parts).enumerate() {
            match seg {
                Segment::Literal(l) if l == part => {
                    if i < 64 {
                        rank |= 1 << (63 - i);
                    }
                }
                Segment::Literal(_) => return None,
                Segment::Param(_) if part.is_empty() => return None,
                Segment::Param(n) => params.push((n.clone(), part.clone())),
            }
        }
        Some((params, rank))
    }
}

impl fmt::Display for Template {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for s in &self.segments {
            match s {
                Segment::Literal(l) => write!(f, "/{l}")?,
                Segment::Param(p) => write!(f, "/{{{p}}}")?,
            }
        }
        Ok(())
    }
}

/// Splits a request path into percent-decoded segments; `None` when a segment does not
/// decode to UTF-8.
pub fn split_path(path: &str) -> Option<Vec<String>> {
    let rest = path.strip_prefix('/').unwrap_or(path);
    rest.split('/')
        .map(|s| {
            percent_encoding::percent_decode_str(s)
                .decode_utf8()
                .ok()
                .map(|c| c.into_owned())
        })
        .collect()
}

/// Path parameters: name and decoded value, in template order.
pub type Params = Vec<(String, String)>;

/// What the router found for a request.
pub enum Found<'a> {
    Route(&'a Route, Vec<(String, String)>),
    /// The path exists with other methods (for `Allow`).
    WrongMethod(Vec<http::Method>),
    NotFound,
}

/// The best route for `method` and the decoded `parts`.
pub fn find<'a>(routes: &'a [Route], method: &http::Method, parts: &[String]) -> Found<'a> {
    let mut best: Option<(&Route, Params, u64)> = None;
    let mut allowed: Vec<http::Method> = Vec::new();
    for r in routes {
        if let Some((params, rank)) = r.template.matches(parts) {
            if r.method == *method {
                if best.as_ref().is_none_or(|b| rank > b.2) {
                    best = Some((r, params, rank));
                }
            } else if !allowed.contains(&r.method) {
                allowed.push(r.method.clone());
            }
        }
    }
    match best {
        Some((r, p, _)) => Found::Route(r, p),
        None if !allowed.is_empty() => Found::WrongMethod(allowed),
        None => Found::NotFound,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn route(m: &str, p: &str) -> Route {
        Route {
            method: m.parse().unwrap(),
            template: Template::parse(p).unwrap(),
            tool: format!("{m} {p}"),
            status: 200,
            body: Body::Flatten,
            query: IndexMap::new(),
            doc: None,
        }
    }

    #[test]
    fn literals_win_and_methods_are_listed() {
        let routes = [
            route("GET", "/services/{service_id}"),
            route("GET", "/services/feed"),
            route("POST", "/services/list"),
        ];
        let parts = split_path("/services/feed").unwrap();
        let Found::Route(r, p) = find(&routes, &http::Method::GET, &parts) else {
            panic!()
        };
        assert_eq!((r.tool.as_str(), p.len()), ("GET /services/feed", 0));
        let parts = split_path("/services/a%2Fb").unwrap();
        let Found::Route(_, p) = find(&routes, &http::Method::GET, &parts) else {
            panic!()
        };
        assert_eq!(p, vec![("service_id".into(), "a/b".into())]);
        let parts = split_path("/services/list").unwrap();
        // GET /services/list matches the parameter route; DELETE matches nothing.
        assert!(matches!(
            find(&routes, &http::Method::DELETE, &parts),
            Found::WrongMethod(m) if m.len() == 2
        ));
        assert!(matches!(
            find(&routes, &http::Method::GET, &split_path("/nope").unwrap()),
            Found::NotFound
        ));
    }

    #[test]
    fn templates_refuse_mixed_segments() {
        assert!(Template::parse("/a/x{b}").is_err());
        assert!(Template::parse("a/b").is_err());
        assert!(Template::parse("/a/{b}/{b}").is_err());
    }
}
