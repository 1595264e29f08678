//! Seaside Spa operations on the shared state: openings and the appointment lifecycle.
//! Must never touch hotel quotes or panic on request input.

use http::StatusCode;
use serde_json::{Map, Value, json};

use super::State;
use crate::demo::backend::answer::{Errors, Reply, TZ, conflict, not_found, ok, query_param};
use crate::demo::backend::calendar::parse_date;
use crate::demo::backend::spa::{
    Appointment, Client, MAX_QUERY_DAYS, SEASON_FIRST, SEASON_LAST, SLOTS, Slot, TREATMENTS,
    find_treatment,
};

impl State {
    pub(crate) fn openings(&self, code: &str, query: Option<&str>) -> Reply {
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

    pub(crate) fn find_appointment(&mut self, number: &str) -> Option<&mut Appointment> {
        self.appointments.iter_mut().find(|a| a.number == number)
    }

    pub(crate) fn create_appointment(&mut self, body: &Map<String, Value>) -> Reply {
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

    pub(crate) fn get_appointment(&mut self, number: &str) -> Reply {
        match self.find_appointment(number) {
            Some(a) => ok(json!({"appointment": a.to_json()})),
            None => not_found(format!("no appointment {number}")),
        }
    }

    pub(crate) fn cancel_appointment(&mut self, number: &str, body: &Map<String, Value>) -> Reply {
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

    pub(crate) fn move_appointment(&mut self, number: &str, body: &Map<String, Value>) -> Reply {
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
}
