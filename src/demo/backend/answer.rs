//! Replies, validation errors, query parameters and constants shared by the demo businesses.
//! Must never depend on another demo backend module but `calendar`, or panic on request input.

use http::StatusCode;
use percent_encoding::percent_decode_str;
use serde_json::{Map, Value, json};

use super::calendar::parse_date;

pub(super) const TZ: &str = "Europe/Lisbon";
pub(super) const CCY: &str = "EUR";

pub(super) type Reply = (StatusCode, Value);

pub(super) fn ok(value: Value) -> Reply {
    (StatusCode::OK, value)
}

pub(super) fn not_found(detail: String) -> Reply {
    (
        StatusCode::NOT_FOUND,
        json!({"error": "NOT_FOUND", "detail": detail}),
    )
}

pub(super) fn conflict(code: &str, detail: String) -> Reply {
    (
        StatusCode::CONFLICT,
        json!({"error": code, "detail": detail}),
    )
}

/// Validation failures: 200 with `{"errors":[{"field","msg"}...]}`.
#[derive(Default)]
pub(super) struct Errors(Vec<Value>);

impl Errors {
    pub(super) fn push(&mut self, field: &str, msg: &str) {
        self.0.push(json!({"field": field, "msg": msg}));
    }

    pub(super) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub(super) fn reply(self) -> Reply {
        (StatusCode::OK, json!({"errors": self.0}))
    }

    /// A required, non-blank string.
    pub(super) fn required_str<'a>(
        &mut self,
        obj: &'a Map<String, Value>,
        key: &str,
        field: &str,
    ) -> Option<&'a str> {
        match obj.get(key) {
            None | Some(Value::Null) => {
                self.push(field, "is required");
                None
            }
            Some(Value::String(s)) if s.trim().is_empty() => {
                self.push(field, "must not be empty");
                None
            }
            Some(Value::String(s)) => Some(s),
            Some(_) => {
                self.push(field, "must be a string");
                None
            }
        }
    }

    /// An optional string (absent and `null` both mean "not given").
    pub(super) fn optional_str<'a>(
        &mut self,
        obj: &'a Map<String, Value>,
        key: &str,
        field: &str,
    ) -> Option<&'a str> {
        match obj.get(key) {
            None | Some(Value::Null) => None,
            Some(Value::String(s)) => Some(s),
            Some(_) => {
                self.push(field, "must be a string");
                None
            }
        }
    }

    /// An integer; `default` when absent or `null`, `None` (with an error) when malformed.
    pub(super) fn integer(
        &mut self,
        obj: &Map<String, Value>,
        key: &str,
        default: Option<i64>,
    ) -> Option<i64> {
        match obj.get(key) {
            None | Some(Value::Null) => {
                if default.is_none() {
                    self.push(key, "is required");
                }
                default
            }
            Some(v) => match v.as_i64() {
                Some(n) => Some(n),
                None => {
                    self.push(key, "must be an integer");
                    None
                }
            },
        }
    }

    /// A required `YYYY-MM-DD` date, as a day number.
    pub(super) fn date(&mut self, obj: &Map<String, Value>, key: &str) -> Option<i64> {
        let s = self.required_str(obj, key, key)?;
        let day = parse_date(s);
        if day.is_none() {
            self.push(key, "must be a date YYYY-MM-DD");
        }
        day
    }
}

pub(super) fn query_param(query: Option<&str>, name: &str) -> Option<String> {
    query?.split('&').find_map(|pair| {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        (decode_query(k) == name).then(|| decode_query(v))
    })
}

pub(super) fn decode_query(s: &str) -> String {
    let s = s.replace('+', " ");
    percent_decode_str(&s).decode_utf8_lossy().into_owned()
}
