//! Harbour Hotel: the room and rate catalogue, concierge topics, quotes and their validation.
//! Must never hold the backend's shared state or depend on the spa.

use serde_json::{Map, Value, json};

use super::answer::{CCY, Errors, Reply, TZ, conflict, not_found};
use super::calendar::format_date;

pub(super) struct Room {
    pub(super) code: &'static str,
    pub(super) label: &'static str,
    pub(super) max_adults: i64,
    pub(super) max_kids: i64,
    pub(super) nightly_cents: i64,
    pub(super) inventory: usize,
}

pub(super) const ROOMS: [Room; 3] = [
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

pub(super) struct Rate {
    pub(super) code: &'static str,
    pub(super) label: &'static str,
    /// Price factor in percent of the room's nightly price.
    pub(super) percent: i64,
}

pub(super) const RATES: [Rate; 2] = [
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

pub(super) const HOTEL_CODE: &str = "HH-LIS";

pub(super) fn hotel_json() -> Value {
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

pub(super) const SITE: &str = "https://harbour-hotel.example";

/// Concierge topics: keywords (matched case-insensitively), reply, link label, link path.
pub(super) const TOPICS: [(&[&str], &str, &str, &str); 5] = [
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

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) enum QuoteState {
    Open,
    Confirmed,
    Void,
}

impl QuoteState {
    pub(super) fn as_str(self) -> &'static str {
        match self {
            Self::Open => "OPEN",
            Self::Confirmed => "CONFIRMED",
            Self::Void => "VOID",
        }
    }
}

pub(super) struct Guest {
    pub(super) first: Option<String>,
    pub(super) last: Option<String>,
    pub(super) mail: Option<String>,
}

/// The validated body of a quote create / replace.
pub(super) struct QuoteInput {
    pub(super) room: usize,
    pub(super) rate: usize,
    pub(super) arrive: i64,
    pub(super) depart: i64,
    pub(super) adults: i64,
    pub(super) kids: i64,
    pub(super) guest: Option<Guest>,
}

pub(super) struct Quote {
    pub(super) qid: String,
    pub(super) state: QuoteState,
    pub(super) input: QuoteInput,
    pub(super) confirmation: Option<String>,
}

impl Quote {
    pub(super) fn to_json(&self) -> Value {
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
pub(super) fn confirmation_code(qid: &str) -> String {
    let hash = qid.bytes().fold(0x811c_9dc5_u32, |h, b| {
        (h ^ u32::from(b)).wrapping_mul(0x0100_0193)
    });
    format!("HH-{hash:08X}")
}

pub(super) fn locked_unless_open(quote: &Quote) -> Option<Reply> {
    (quote.state != QuoteState::Open).then(|| {
        conflict(
            "LOCKED",
            format!("quote {} is {}", quote.qid, quote.state.as_str()),
        )
    })
}

/// Validates a quote create / replace body: 200 errors for shape and rule failures, 404 for
/// an unknown hotel, room or rate.
pub(super) fn parse_quote_input(body: &Map<String, Value>) -> Result<QuoteInput, Reply> {
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
