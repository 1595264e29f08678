//! A bookings report of the spa's legacy API (a long-running operation): its state by status reads (`QUEUED`, `RUNNING`, `READY`, `CANCELLED`) and its JSON.
//! A leaf: it never reads the wall clock and never touches the backend's shared state.

use serde_json::{Value, json};

/// Status reads after which a report is `READY` (a new report is `QUEUED`, read once `RUNNING`).
const READS_TO_READY: u32 = 2;

/// A report of the spa's bookings between two dates, figured when it was requested.
pub(super) struct Report {
    rid: String,
    from: String,
    to: String,
    /// Status reads so far.
    reads: u32,
    cancelled: bool,
    /// The finished report's figures.
    output: Value,
}

impl Report {
    pub(super) fn new(rid: String, from: &str, to: &str, output: Value) -> Self {
        Report {
            rid,
            from: from.to_string(),
            to: to.to_string(),
            reads: 0,
            cancelled: false,
            output,
        }
    }

    pub(super) fn rid(&self) -> &str {
        &self.rid
    }

    /// One status read: a report that is not cancelled moves one step on.
    pub(super) fn read(&mut self) {
        if !self.cancelled {
            self.reads = self.reads.saturating_add(1);
        }
    }

    pub(super) fn cancel(&mut self) {
        self.cancelled = true;
    }

    pub(super) fn state(&self) -> &'static str {
        match (self.cancelled, self.reads) {
            (true, _) => "CANCELLED",
            (false, n) if n >= READS_TO_READY => "READY",
            (false, 0) => "QUEUED",
            _ => "RUNNING",
        }
    }

    pub(super) fn to_json(&self) -> Value {
        let state = self.state();
        let mut v = json!({
            "rid": self.rid, "state": state, "from": self.from, "to": self.to,
            "links": {"status": format!("/spa/v1/reports/{}", self.rid)},
        });
        match state {
            "READY" => v["output"] = self.output.clone(),
            "RUNNING" => v["progress_pct"] = json!(50),
            _ => {}
        }
        json!({"report": v})
    }
}
