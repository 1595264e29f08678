//! The demo backend's shared, seeded state and its call statistics (operations in the children).
//! Must never read the wall clock or randomness.

use std::collections::BTreeSet;

use serde_json::{Map, json};

use super::answer::{Reply, ok};
use super::hotel::Quote;
use super::reports::Report;
use super::routes::{ROUTE_COUNT, ROUTES};
use super::spa::{Appointment, SEASON_FIRST, Slot};
mod appointments;
mod quotes;
mod reports;

pub(super) struct State {
    /// Openings that are not free.
    pub(super) taken: BTreeSet<Slot>,
    pub(super) appointments: Vec<Appointment>,
    pub(super) next_appointment: u64,
    pub(super) quotes: Vec<Quote>,
    pub(super) next_quote: u64,
    pub(super) next_thread: u64,
    /// The spa's bookings reports (long-running: `reports`).
    pub(super) reports: Vec<Report>,
    pub(super) next_report: u64,
    /// Logical clock (minutes after the demo epoch), advanced by every appointment change.
    pub(super) clock: u64,
    /// Calls per entry of [`ROUTES`].
    pub(super) calls: [u64; ROUTE_COUNT],
}

impl State {
    pub(super) fn seeded() -> Self {
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
            reports: Vec::new(),
            next_report: 3001,
            clock: 0,
            calls: [0; ROUTE_COUNT],
        }
    }

    pub(super) fn stats(&self) -> Reply {
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
}
