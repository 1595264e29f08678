//! Seaside Spa: the treatment catalogue, openings, and the appointment and client records.
//! Must never hold the backend's shared state or depend on the hotel.

use serde_json::{Value, json};

use super::answer::{CCY, Reply, not_found, ok, query_param};
use super::calendar::{days_from_civil, format_date, format_time, parse_date};

pub(super) struct Treatment {
    pub(super) code: &'static str,
    pub(super) title: &'static str,
    pub(super) category: &'static str,
    pub(super) minutes: u32,
    pub(super) price_cents: i64,
    pub(super) blurb: &'static str,
}

pub(super) const TREATMENTS: [Treatment; 3] = [
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
pub(super) const SLOTS: [u32; 4] = [9 * 60, 11 * 60, 14 * 60, 16 * 60];
pub(super) const SEASON_FIRST: i64 = days_from_civil(2026, 12, 1);
pub(super) const SEASON_LAST: i64 = days_from_civil(2027, 3, 31);
/// Longest openings query, in days counted inclusively.
pub(super) const MAX_QUERY_DAYS: i64 = 14;

pub(super) fn find_treatment(code: &str) -> Option<usize> {
    TREATMENTS.iter().position(|t| t.code == code)
}

pub(super) fn treatment_json(t: &Treatment) -> Value {
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
pub(super) struct Slot {
    pub(super) treatment: usize,
    pub(super) day: i64,
    pub(super) slot: usize,
}

impl Slot {
    pub(super) fn begins(self) -> String {
        format!(
            "{}T{}",
            format_date(self.day),
            format_time(SLOTS[self.slot])
        )
    }

    pub(super) fn ends(self) -> String {
        let end = SLOTS[self.slot] + TREATMENTS[self.treatment].minutes;
        format!("{}T{}", format_date(self.day), format_time(end))
    }

    pub(super) fn reference(self) -> String {
        format!("{}@{}", TREATMENTS[self.treatment].code, self.begins())
    }

    /// Parses `<code>@<YYYY-MM-DDTHH:MM>`; `None` unless it names an existing opening.
    pub(super) fn parse(reference: &str) -> Option<Self> {
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

pub(super) fn list_treatments(query: Option<&str>) -> Reply {
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

pub(super) fn get_treatment(code: &str) -> Reply {
    match find_treatment(code) {
        Some(i) => ok(json!({"treatment": treatment_json(&TREATMENTS[i])})),
        None => not_found(format!("no treatment {code}")),
    }
}

pub(super) struct Client {
    pub(super) name: String,
    pub(super) email: String,
    pub(super) phone: Option<String>,
}

pub(super) struct Appointment {
    pub(super) number: String,
    pub(super) slot: Slot,
    pub(super) client: Client,
    pub(super) cancelled: bool,
    pub(super) moves: u64,
    pub(super) created: u64,
    /// Logical clock readings (minutes after the demo epoch) of creation and last change.
    pub(super) booked_at: u64,
    pub(super) changed_at: u64,
}

/// Deterministic timestamps: the demo's clock starts at 2026-11-30T08:00:00Z and advances one
/// minute per state change, so responses never depend on the wall clock.
pub(super) fn stamp(minutes: u64) -> String {
    const EPOCH_DAY: i64 = 20_787; // 2026-11-30
    let total = 8 * 60 + minutes;
    let day = EPOCH_DAY + (total / 1440) as i64;
    let min = (total % 1440) as u32;
    format!("{}T{}:00Z", format_date(day), format_time(min))
}

impl Appointment {
    pub(super) fn to_json(&self) -> Value {
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
