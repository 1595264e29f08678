//! The spa's bookings report operations on the shared state: `POST /spa/v1/reports` answers `202`, each `GET /spa/v1/reports/{rid}` moves the report one step, `DELETE` cancels it.
//! It must never read the wall clock: a report advances by status reads, its figures are those of the moment it was requested.

use http::StatusCode;
use serde_json::{Map, Value, json};

use super::State;
use crate::demo::backend::answer::{CCY, Errors, Reply, conflict, not_found};
use crate::demo::backend::calendar::parse_date;
use crate::demo::backend::reports::Report;

/// Most reports kept; the oldest go first.
const MAX_REPORTS: usize = 256;

impl State {
    /// `POST /reports` `{"from","to"}`: 202 with the queued report (its URL in `links.status`).
    pub(crate) fn create_report(&mut self, body: &Map<String, Value>) -> Reply {
        let mut errors = Errors::default();
        let from = errors.date(body, "from");
        let to = errors.date(body, "to");
        if let (Some(f), Some(t)) = (from, to)
            && t < f
        {
            errors.push("to", "must not be before from");
        }
        if !errors.is_empty() {
            return errors.reply();
        }
        let from = body.get("from").and_then(Value::as_str).unwrap_or_default();
        let to = body.get("to").and_then(Value::as_str).unwrap_or_default();
        let output = self.figures(from, to);
        if self.reports.len() >= MAX_REPORTS {
            self.reports.remove(0);
        }
        let rid = format!("R-{}", self.next_report);
        self.next_report += 1;
        let report = Report::new(rid, from, to, output);
        let value = report.to_json();
        self.reports.push(report);
        (StatusCode::ACCEPTED, value)
    }

    /// The appointments that begin on a day in `[from, to]`, counted, and the booked revenue.
    fn figures(&self, from: &str, to: &str) -> Value {
        let (mut booked, mut cancelled, mut revenue) = (0u64, 0u64, 0u64);
        let mut lines = Vec::new();
        for a in &self.appointments {
            let v = a.to_json();
            let day = v["begins"].as_str().unwrap_or_default().get(..10);
            let inside = day
                .and_then(parse_date)
                .zip(parse_date(from).zip(parse_date(to)))
                .is_some_and(|(d, (f, t))| (f..=t).contains(&d));
            if !inside {
                continue;
            }
            if v["status"] == "CANCELLED" {
                cancelled += 1;
            } else {
                booked += 1;
                revenue += v["price"]["amount_cents"].as_u64().unwrap_or(0);
            }
            lines.push(json!({"number": v["number"], "treatment": v["treatment"],
                              "begins": v["begins"], "status": v["status"]}));
        }
        json!({"appointments": booked + cancelled, "booked": booked, "cancelled": cancelled,
               "revenue": {"amount_cents": revenue, "ccy": CCY}, "lines": lines})
    }

    /// `GET /reports/{rid}`: the report, one step further along.
    pub(crate) fn read_report(&mut self, rid: &str) -> Reply {
        match self.reports.iter_mut().find(|r| r.rid() == rid) {
            Some(r) => {
                r.read();
                (StatusCode::OK, r.to_json())
            }
            None => not_found(format!("no report {rid}")),
        }
    }

    /// `DELETE /reports/{rid}`: cancels a report that is not ready; 409 once it is.
    pub(crate) fn cancel_report(&mut self, rid: &str) -> Reply {
        let Some(r) = self.reports.iter_mut().find(|r| r.rid() == rid) else {
            return not_found(format!("no report {rid}"));
        };
        match r.state() {
            "READY" => conflict("ALREADY_READY", format!("report {rid} is ready")),
            _ => {
                r.cancel();
                (StatusCode::OK, r.to_json())
            }
        }
    }
}
