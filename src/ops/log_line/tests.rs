//! [`super::JsonLine`] against tracing-subscriber's own JSON format: the same events give the
//! same bytes (timestamps aside).

use super::*;
use std::sync::{Arc, Mutex};
use tracing_subscriber::fmt::MakeWriter;
use tracing_subscriber::layer::SubscriberExt;

#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'a> MakeWriter<'a> for Captured {
    type Writer = Captured;
    fn make_writer(&'a self) -> Captured {
        self.clone()
    }
}

/// The lines `emit` logs through this formatter (`ours`) or the crate's, each timestamp's
/// value replaced by `T`.
fn lines(ours: bool, emit: &dyn Fn()) -> Vec<String> {
    let cap = Captured::default();
    let layer = tracing_subscriber::fmt::layer().with_writer(cap.clone());
    let dispatch = if ours {
        tracing::Dispatch::new(
            tracing_subscriber::registry()
                .with(layer.fmt_fields(fields()).event_format(JsonLine::default())),
        )
    } else {
        tracing::Dispatch::new(
            tracing_subscriber::registry().with(layer.json().with_span_list(false)),
        )
    };
    tracing::dispatcher::with_default(&dispatch, emit);
    let text = String::from_utf8(cap.0.lock().unwrap().clone()).unwrap();
    text.lines()
        .map(|l| {
            let head = "{\"timestamp\":\"";
            assert!(l.starts_with(head), "{l}");
            let end = l[head.len()..].find('"').unwrap() + head.len();
            format!("{head}T{}", &l[end..])
        })
        .collect()
}

fn same(emit: &dyn Fn()) {
    let (ours, theirs) = (lines(true, emit), lines(false, emit));
    assert!(!theirs.is_empty());
    assert_eq!(ours, theirs);
}

#[test]
fn events_without_a_span_are_written_as_the_crate_writes_them() {
    same(&|| {
        tracing::info!("hello");
        tracing::warn!(
            a = "quote \" backslash \\ newline \n control \u{1} del \u{7f} é ☃ 😀",
            b = 7u64,
            c = -3i64,
            d = true,
            e = 1.5f64,
            f = f64::NAN,
            g = f64::NEG_INFINITY,
            h = 1e300,
            i = 0.1f64,
            j = 12345678901234567890123i128,
            k = %"display <\\> \t",
            l = ?vec!["x\"", "y"],
            "message {} with \"quotes\"",
            5
        );
        let e = std::io::Error::other("boom \"x\"");
        tracing::error!(error = &e as &(dyn std::error::Error + 'static), "failed");
        tracing::debug!("below the level is still formatted by both when enabled");
        tracing::info!(target: "custom::target", n = 1u64);
        tracing::info!("log.target" = "looks like a log record", "handed over");
        tracing::info!(empty = "", "");
    });
}

#[test]
fn the_call_span_is_spliced_as_the_crate_writes_it() {
    same(&|| {
        let span = tracing::info_span!(
            "request",
            request_id = %"abc-000001",
            correlation_id = tracing::field::Empty
        );
        span.in_scope(|| {
            tracing::info!(business = %"spa", tool = %"list", outcome = "ok", status = 200u16, latency_us = 95u64, "tools/call");
        });
        span.record("correlation_id", "c \"1\"");
        span.in_scope(|| tracing::info!("after a field was recorded"));
        tracing::info!(parent: &span, "explicit parent outside the span");
        let bare = tracing::info_span!("bare");
        bare.in_scope(|| tracing::info!("in a span without fields"));
        let inner = tracing::info_span!(parent: &span, "inner", step = 2u64, text = "t\n");
        inner.in_scope(|| tracing::warn!(x = 1.25f64, "in the inner span"));
    });
}
