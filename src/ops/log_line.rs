//! The JSON log line: tracing-subscriber's `json()` format, byte for byte, written straight into
//! the line. It must never change what a line says, and never format a line the crate's own way
//! would write differently (those it hands to the crate's formatter).
//!
//! Kept because it paid: the crate's JSON formatter serialises each field through a generic
//! serde map and parses the call span's stored fields back into a `serde_json::Value` on every
//! line to write them again. With one line per call that was 23.6k of a call's 182k instructions
//! (`INSTR=1 LOG=info ./scripts/bench-workloads`, openapi). The span's fields are stored as JSON
//! text by the crate's `JsonFields` (an object, keys in order, each once), so they are spliced in
//! as they are. Events from the `log` crate and spans whose stored fields are not an object are
//! handed to the crate's formatter. `tests` hold the two formatters to the same bytes.

use std::fmt;
use tracing::field::{Field, Visit};
use tracing::{Event, Subscriber};
use tracing_subscriber::fmt::format::{Format, Json, JsonFields, Writer};
use tracing_subscriber::fmt::time::{FormatTime, SystemTime};
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormattedFields};
use tracing_subscriber::registry::LookupSpan;

/// The event format: `{"timestamp","level","fields","target","span"}`, as tracing-subscriber's
/// `fmt().json().with_span_list(false)` writes it (span fields formatted by [`JsonFields`]).
pub struct JsonLine {
    /// The crate's own formatter, for the lines this one leaves to it.
    fallback: Format<Json, SystemTime>,
}

impl Default for JsonLine {
    fn default() -> Self {
        JsonLine {
            fallback: tracing_subscriber::fmt::format()
                .json()
                .with_span_list(false),
        }
    }
}

/// The field formatter that goes with [`JsonLine`] (spans' fields stored as JSON objects).
pub fn fields() -> JsonFields {
    JsonFields::new()
}

impl<S> FormatEvent<S, JsonFields> for JsonLine
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    fn format_event(
        &self,
        ctx: &FmtContext<'_, S, JsonFields>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result {
        if is_from_log(event) {
            return self.fallback.format_event(ctx, writer, event);
        }
        let span = event
            .parent()
            .and_then(|id| ctx.span(id))
            .or_else(|| ctx.lookup_current());
        let extensions = span.as_ref().map(|s| s.extensions());
        let stored = match &extensions {
            Some(ext) => match ext.get::<FormattedFields<JsonFields>>() {
                Some(f) if is_object(&f.fields) => Some(f.fields.as_str()),
                // Stored fields that are not an object (or none): the crate writes what it
                // makes of them.
                _ => None,
            },
            None => None,
        };
        if span.is_some() && stored.is_none() {
            drop(extensions);
            return self.fallback.format_event(ctx, writer, event);
        }
        let meta = event.metadata();
        let mut line = Vec::with_capacity(256);
        line.extend_from_slice(b"{\"timestamp\":\"");
        let mut time = String::with_capacity(32);
        SystemTime.format_time(&mut Writer::new(&mut time))?;
        crate::json_text::write_str_contents(time.as_bytes(), &mut line);
        line.extend_from_slice(b"\",\"level\":\"");
        line.extend_from_slice(meta.level().as_str().as_bytes());
        line.extend_from_slice(b"\",\"fields\":{");
        let mut visitor = Fields {
            out: &mut line,
            first: true,
        };
        event.record(&mut visitor);
        line.extend_from_slice(b"},\"target\":");
        crate::json_text::write_str(meta.target(), &mut line);
        if let (Some(span), Some(stored)) = (&span, stored) {
            line.extend_from_slice(b",\"span\":");
            // `{...}` less its closing brace, then the span's name as the crate adds it.
            let inner = &stored[..stored.len() - 1];
            line.extend_from_slice(inner.as_bytes());
            if inner.len() > 1 {
                line.push(b',');
            }
            line.extend_from_slice(b"\"name\":");
            crate::json_text::write_str(span.metadata().name(), &mut line);
            line.push(b'}');
        }
        line.extend_from_slice(b"}\n");
        // Only valid UTF-8 is written: the fields' own text and ASCII around it.
        let text = std::str::from_utf8(&line).map_err(|_| fmt::Error)?;
        writer.write_str(text)
    }
}

/// True for an event the `log` crate's bridge made: its fields name the record's origin
/// (`log.target`, ...), which the crate's formatter reads back into the line's metadata.
fn is_from_log(event: &Event<'_>) -> bool {
    event.metadata().fields().field("log.target").is_some()
}

/// `{...}` as `JsonFields` stores it.
fn is_object(s: &str) -> bool {
    s.len() >= 2 && s.starts_with('{') && s.ends_with('}')
}

/// Writes an event's fields as JSON members, as `tracing_serde`'s map visitor does: strings
/// and `Debug`/`Display` values as strings, integers, booleans and floats (a non-finite float
/// as `null`) as JSON values; 128-bit integers and errors through `Debug`, as the defaults of
/// `Visit` route them.
struct Fields<'a> {
    out: &'a mut Vec<u8>,
    first: bool,
}

impl Fields<'_> {
    fn key(&mut self, field: &Field) {
        if !self.first {
            self.out.push(b',');
        }
        self.first = false;
        crate::json_text::write_str(field.name(), self.out);
        self.out.push(b':');
    }
}

impl Visit for Fields<'_> {
    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        self.key(field);
        self.out.push(b'"');
        let _ = fmt::write(&mut Escaping(self.out), format_args!("{value:?}"));
        self.out.push(b'"');
    }

    fn record_str(&mut self, field: &Field, value: &str) {
        self.key(field);
        crate::json_text::write_str(value, self.out);
    }

    fn record_bool(&mut self, field: &Field, value: bool) {
        self.key(field);
        self.out
            .extend_from_slice(if value { b"true" } else { b"false" });
    }

    fn record_u64(&mut self, field: &Field, value: u64) {
        self.key(field);
        self.out
            .extend_from_slice(itoa::Buffer::new().format(value).as_bytes());
    }

    fn record_i64(&mut self, field: &Field, value: i64) {
        self.key(field);
        self.out
            .extend_from_slice(itoa::Buffer::new().format(value).as_bytes());
    }

    fn record_f64(&mut self, field: &Field, value: f64) {
        self.key(field);
        crate::json_text::write(&serde_json::Value::from(value), self.out);
    }
}

/// Text formatted into a JSON string as it is written.
struct Escaping<'a>(&'a mut Vec<u8>);

impl fmt::Write for Escaping<'_> {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        crate::json_text::write_str_contents(s.as_bytes(), self.0);
        Ok(())
    }
}

#[cfg(test)]
mod tests;
