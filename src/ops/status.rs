//! The admin listener's status page (`/`): one self-contained HTML document (inline CSS, no
//! script, no external resource) with businesses and tools, backend health and breakers, recent
//! calls, webhooks and dead letters, and the reload history. It must never show argument,
//! header or body values (only names, states and numbers), and never leave a value unescaped.

use super::recent::RecentCall;
use super::reload::{ReloadEvent, ReloadReport};
use crate::config::Gateway;
use crate::webhook::egress::DeadLetter;
use crate::webhook::hub::Event;
use serde::Serialize;
use std::fmt::Write;
use std::sync::Arc;

/// One business's backend as `/readyz` reports it.
#[derive(Debug, Clone, Serialize)]
pub struct BackendState {
    pub business: String,
    pub backend: String,
    /// `up` or `down`.
    pub state: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Circuit breaker and concurrency (read when reported, never cached).
    pub resilience: crate::upstream::resilience::Snapshot,
}

/// Everything the page shows, gathered by the admin listener.
pub struct StatusData<'a> {
    pub gateway: &'a Gateway,
    pub backends: &'a [BackendState],
    pub ready: bool,
    pub draining: bool,
    pub reload: ReloadReport,
    pub history: Vec<ReloadEvent>,
    pub calls: Vec<Arc<RecentCall>>,
    /// Connected webhook streams, recent accepted events, dead letters; `None` without webhooks.
    pub webhooks: Option<Webhooks>,
}

/// The webhook part of the page.
pub struct Webhooks {
    pub clients: usize,
    pub events: Vec<Arc<Event>>,
    pub dead: Vec<DeadLetter>,
}

/// HTML-escapes text for element content and quoted attribute values.
pub fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            _ => out.push(c),
        }
    }
    out
}

/// `YYYY-MM-DD HH:MM:SS` UTC for Unix seconds.
pub fn utc(secs: u64) -> String {
    let (year, month, day) = crate::clock::civil_from_days((secs / 86_400) as i64);
    let rem = secs % 86_400;
    format!(
        "{year:04}-{month:02}-{day:02} {:02}:{:02}:{:02}",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

const STYLE: &str = "body{font:14px/1.4 system-ui,sans-serif;margin:1.5em;color:#1b1f24;background:#fff}\
h1{font-size:1.4em;margin:0 0 .2em}h2{font-size:1.1em;margin:1.6em 0 .4em;border-bottom:1px solid #d0d7de}\
table{border-collapse:collapse;width:100%}th,td{text-align:left;padding:.25em .6em;border-bottom:1px solid #eaeef2;vertical-align:top}\
th{background:#f6f8fa}code{font:12px ui-monospace,monospace}.ok{color:#1a7f37;font-weight:600}\
.bad{color:#cf222e;font-weight:600}.warn{color:#9a6700;font-weight:600}.muted{color:#656d76}";

fn state_class(s: &str) -> &'static str {
    match s {
        "up" | "closed" | "ok" | "applied" | "ready" => "ok",
        "half_open" | "tool_error" | "draining" => "warn",
        _ => "bad",
    }
}

fn badge(s: &str) -> String {
    format!("<span class=\"{}\">{}</span>", state_class(s), esc(s))
}

/// Renders the page.
pub fn render(d: &StatusData<'_>) -> String {
    let mut h = String::with_capacity(16 * 1024);
    let overall = if d.draining {
        "draining"
    } else if d.ready {
        "ready"
    } else {
        "not ready"
    };
    let _ = write!(
        h,
        "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\">\
<meta http-equiv=\"refresh\" content=\"10\"><title>portico status</title><style>{STYLE}</style></head><body>\
<h1>portico status</h1><p>{} &middot; version {} &middot; configuration generation {} &middot; {} tool(s) in {} business(es) \
&middot; <span class=\"muted\">refreshes every 10 s; JSON at <a href=\"/readyz\">/readyz</a>, metrics at <a href=\"/metrics\">/metrics</a></span></p>",
        badge(overall),
        esc(env!("CARGO_PKG_VERSION")),
        d.reload.generation,
        d.gateway.tools.len(),
        d.gateway.businesses.len(),
    );

    h.push_str("<h2 id=\"businesses\">Businesses and backends</h2><table><tr><th>Business</th><th>Binding</th><th>Backend</th><th>Health</th><th>Breaker</th><th>In flight</th><th>Tools</th></tr>");
    for b in d.gateway.businesses.iter() {
        let state = d.backends.iter().find(|s| s.business == b.name);
        let tools: Vec<String> = d
            .gateway
            .tools
            .values()
            .filter(|t| t.business.name == b.name)
            .map(|t| format!("<code>{}</code>", esc(&t.name)))
            .collect();
        let (health, breaker, flight) = match state {
            Some(s) => {
                let health = match &s.error {
                    Some(e) => format!(
                        "{}<br><span class=\"muted\">{}</span>",
                        badge(s.state),
                        esc(e)
                    ),
                    None => badge(s.state),
                };
                let r = &s.resilience;
                let mut breaker = badge(r.breaker);
                if let Some(left) = r.retry_in_s {
                    let _ = write!(breaker, " <span class=\"muted\">(trial in {left} s)</span>");
                } else if r.failures > 0 {
                    let _ = write!(
                        breaker,
                        " <span class=\"muted\">({} failure(s) in the window)</span>",
                        r.failures
                    );
                }
                // The routes (tools, resources) whose own breaker is not closed.
                for route in &r.routes {
                    let _ = write!(
                        breaker,
                        "<br><code>{}</code> {}",
                        esc(&route.route),
                        badge(route.breaker)
                    );
                    if let Some(left) = route.retry_in_s {
                        let _ =
                            write!(breaker, " <span class=\"muted\">(trial in {left} s)</span>");
                    }
                }
                let limit = if r.max_concurrency == 0 {
                    "no limit".to_string()
                } else {
                    format!("limit {}", r.max_concurrency)
                };
                (
                    health,
                    breaker,
                    format!("{} <span class=\"muted\">({limit})</span>", r.in_flight),
                )
            }
            None => (
                "<span class=\"muted\">not probed</span>".into(),
                String::new(),
                String::new(),
            ),
        };
        let _ = write!(
            h,
            "<tr><td>{}</td><td>{}</td><td><code>{}</code></td><td>{health}</td><td>{breaker}</td><td>{flight}</td><td>{}</td></tr>",
            esc(&b.name),
            esc(&format!("{:?}", b.binding.kind).to_lowercase()),
            esc(&b.backend.base),
            tools.join(", "),
        );
    }
    h.push_str("</table>");

    let _ = write!(
        h,
        "<h2 id=\"calls\">Recent calls</h2><p class=\"muted\">The last {} tools/call requests of this process, newest first.</p>",
        super::recent::SIZE
    );
    if d.calls.is_empty() {
        h.push_str("<p>No calls yet.</p>");
    } else {
        h.push_str("<table><tr><th>Finished (UTC)</th><th>Business</th><th>Tool</th><th>Outcome</th><th>HTTP</th><th>JSON-RPC</th><th>Backend</th><th>Reason</th><th>Latency</th></tr>");
        for c in &d.calls {
            let _ = write!(
                h,
                "<tr><td>{}.{:03}</td><td>{}</td><td><code>{}</code></td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{:.1} ms</td></tr>",
                utc(c.at_ms / 1000),
                c.at_ms % 1000,
                esc(&c.business),
                esc(&c.tool),
                badge(c.outcome),
                c.status,
                if c.rpc_code == 0 {
                    "&ndash;".to_string()
                } else {
                    c.rpc_code.to_string()
                },
                if c.backend_status == 0 {
                    "&ndash;".to_string()
                } else {
                    c.backend_status.to_string()
                },
                c.reason.as_deref().map_or("&ndash;".to_string(), esc),
                c.latency.as_secs_f64() * 1000.0,
            );
        }
        h.push_str("</table>");
    }

    h.push_str("<h2 id=\"webhooks\">Webhooks</h2>");
    match &d.webhooks {
        None => h.push_str("<p>No webhook ingress.</p>"),
        Some(w) => {
            let _ = write!(
                h,
                "<p>{} connected notification stream(s); {} dead letter(s).</p><h3>Recent events</h3>",
                w.clients,
                w.dead.len()
            );
            if w.events.is_empty() {
                h.push_str("<p>No webhook accepted yet.</p>");
            } else {
                h.push_str(
                    "<table><tr><th>Seq</th><th>Business</th><th>Event</th><th>Resource</th></tr>",
                );
                for e in &w.events {
                    let _ = write!(
                        h,
                        "<tr><td>{}</td><td>{}</td><td><code>{}</code></td><td><code>{}</code></td></tr>",
                        e.seq,
                        esc(&e.business),
                        esc(e.kind.as_deref().unwrap_or("")),
                        esc(e.uri.as_deref().unwrap_or("")),
                    );
                }
                h.push_str("</table>");
            }
            h.push_str("<h3>Dead letters</h3>");
            if w.dead.is_empty() {
                h.push_str("<p>No dead letters.</p>");
            } else {
                h.push_str("<table><tr><th>Given up (UTC)</th><th>Event id</th><th>Delivery URL</th><th>Attempts</th><th>Last error</th></tr>");
                for x in w.dead.iter().rev() {
                    let _ = write!(
                        h,
                        "<tr><td>{}</td><td><code>{}</code></td><td><code>{}</code></td><td>{}</td><td>{}</td></tr>",
                        utc(x.at.max(0) as u64),
                        esc(&x.event_id),
                        esc(&x.url),
                        x.attempts,
                        esc(&x.last_error),
                    );
                }
                h.push_str("</table>");
            }
        }
    }

    let _ = write!(
        h,
        "<h2 id=\"reloads\">Configuration reloads</h2><p>Generation {} serving; {} refused reload(s).</p>",
        d.reload.generation, d.reload.failures
    );
    if d.history.is_empty() {
        h.push_str("<p>No reload since start.</p>");
    } else {
        h.push_str("<table><tr><th>At (UTC)</th><th>Result</th><th>Generation</th><th>Why refused</th></tr>");
        for r in &d.history {
            let _ = write!(
                h,
                "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                utc(r.at_unix),
                badge(if r.applied { "applied" } else { "refused" }),
                r.generation,
                esc(r.error.as_deref().unwrap_or("")),
            );
        }
        h.push_str("</table>");
    }
    h.push_str("</body></html>\n");
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_markup() {
        assert_eq!(
            esc("<script>\"a\" & 'b'</script>"),
            "&lt;script&gt;&quot;a&quot; &amp; &#39;b&#39;&lt;/script&gt;"
        );
    }

    #[test]
    fn formats_utc() {
        assert_eq!(utc(0), "1970-01-01 00:00:00");
        assert_eq!(utc(951_782_400), "2000-02-29 00:00:00");
        assert_eq!(utc(1_796_083_199), "2026-11-30 23:59:59");
    }
}
