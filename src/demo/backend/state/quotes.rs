//! Harbour Hotel operations on the shared state: quotes, room inventory and the concierge.
//! Must never touch spa appointments or panic on request input.

use http::StatusCode;
use serde_json::{Map, Value, json};

use super::State;
use crate::demo::backend::answer::{Errors, Reply, conflict, not_found, ok};
use crate::demo::backend::calendar::format_date;
use crate::demo::backend::hotel::{
    Quote, QuoteInput, QuoteState, ROOMS, SITE, TOPICS, confirmation_code, locked_unless_open,
    parse_quote_input,
};

impl State {
    pub(crate) fn find_quote(&mut self, qid: &str) -> Option<&mut Quote> {
        self.quotes.iter_mut().find(|q| q.qid == qid)
    }

    /// Whether one more room of this type is free on every night of `[arrive, depart)`.
    pub(crate) fn room_available(&self, room: usize, arrive: i64, depart: i64) -> bool {
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

    pub(crate) fn sold_out(&self, input: &QuoteInput) -> Option<Reply> {
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

    pub(crate) fn create_quote(&mut self, body: &Map<String, Value>) -> Reply {
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

    pub(crate) fn get_quote(&mut self, qid: &str) -> Reply {
        match self.find_quote(qid) {
            Some(q) => ok(json!({"quote": q.to_json()})),
            None => not_found(format!("no quote {qid}")),
        }
    }

    pub(crate) fn put_quote(&mut self, qid: &str, body: &Map<String, Value>) -> Reply {
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

    pub(crate) fn confirm_quote(&mut self, qid: &str, body: &Map<String, Value>) -> Reply {
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

    pub(crate) fn void_quote(&mut self, qid: &str) -> Reply {
        let Some(quote) = self.find_quote(qid) else {
            return not_found(format!("no quote {qid}"));
        };
        if quote.state == QuoteState::Void {
            return conflict("LOCKED", format!("quote {qid} is already VOID"));
        }
        quote.state = QuoteState::Void;
        ok(json!({"quote": quote.to_json()}))
    }

    pub(crate) fn concierge(&mut self, body: &Map<String, Value>) -> Reply {
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
