//! The hot path of a successful tool call: the backend body read in place, transformed, checked,
//! summarised and written as text without a `serde_json` tree. It never answers another value
//! than the tree path (`forward::reply_for`) would: whatever it does not model goes back to it.
//!
//! The tree path reads the body, runs the tool's programs, turns their answer into a
//! `serde_json` value, wraps it in the binding's envelope, checks it with `jsonschema`,
//! renders the summary and writes the JSON-RPC answer from that tree. Here the answer stays a
//! [`Doc`] from the body to the bytes: the envelope is built on it
//! ([`crate::binding::Binding::structured_doc`]), the output schema is checked natively
//! ([`super::doc_schema::DocSchema`]), the summary's native plan reads it
//! ([`super::summary::render_doc`]) and the writer writes it ([`crate::json_text::write_doc`]),
//! unless it is the backend's object unchanged: then `structuredContent` and its text block are
//! the backend's own text (members in its order, not sorted as the tree path writes them).
//! When nothing else looks at such an answer, its text is checked against the output schema as
//! it is read ([`super::doc_schema::object_passes`]) and no [`Doc`] is built at all.
//! Every "not sure" along the way (jaq must answer, a business outcome, an answer the native
//! check does not pass, a summary MiniJinja must render) returns `None`, and the caller runs the
//! tree path, which decides and reports exactly as before.

use super::response::RestResponse;
use super::transform::Vars3;
use crate::binding::{Kind, Reply, Rule, Written};
use crate::config::Tool;
use crate::json_doc::{self, Doc};
use crate::json_text::Shape;
use crate::model::Call;
use bytes::Bytes;
use serde_json::{Map, json};

/// The reply for a successful answer, written without a tree; `None` when the tree path must
/// answer.
pub fn written(tool: &Tool, call: &Call, resp: &RestResponse) -> Option<Reply> {
    // Rules that read the body are the tree path's to decide.
    if tool.rules_read_body(resp.status)
        || !matches!(tool.rule_for(resp.status, None).rule, Rule::Success)
    {
        return None;
    }
    let check = match &tool.output_validator {
        None => None,
        Some(_) => Some(tool.output_check()?),
    };
    if let Some(text) = as_written(tool, check, &resp.body) {
        return Some(reply(tool, call, Some(text), None));
    }
    // A malformed or empty body: the tree path reports it.
    let (body, shape) = crate::json_text::read_shaped(&resp.body).ok()?;
    let narrow = shape.narrow;
    let meta = super::request::meta_for(tool, call);
    let vars = Vars3 {
        args: &call.args,
        status: resp.status,
        meta: &meta,
    };
    if let Some(t) = &tool.business_messages {
        match t.run_doc_native(&body, narrow, vars)? {
            None | Some(Doc::Null) | Some(Doc::Bool(false)) => {}
            Some(Doc::Arr(m)) if m.is_empty() => {}
            // A business outcome, or a mapping error: the tree path answers.
            Some(_) => return None,
        }
    }
    // A tool without `result` answers with the body as it came (the tree path's
    // `Body::into_value`); an integer past i64 is left to the tree path's reading of it.
    let mut answer = match &tool.result {
        Some(result) => result
            .run_doc_native(&body, narrow, vars)?
            .unwrap_or(Doc::Null),
        None if narrow => body,
        None => return None,
    };
    if tool.drop_nulls {
        json_doc::drop_null_members_doc(&mut answer);
    }
    let binding = &tool.business.binding;
    // An object body that becomes structuredContent as it is keeps the backend's own text:
    // the same value, without writing it again (see `passed_through`).
    let passed = passed_through(tool, &resp.body, &answer, shape);
    let structured = binding.structured_doc(answer, tool.envelope.as_ref())?;
    if let (Some(check), Some(sc)) = (check, &structured)
        && !check.surely_valid(sc)
    {
        return None;
    }
    let sc_text = structured.as_ref().map(|sc| {
        passed.unwrap_or_else(|| {
            let mut out = Vec::with_capacity(resp.body.len());
            write_structured(sc, tool, &mut out);
            Bytes::from(out)
        })
    });
    let summary = match (&tool.summary, &structured) {
        (Some(env), Some(sc)) if !business_error(sc) => {
            Some(super::summary::render_doc(env, sc, &call.args)?)
        }
        _ => None,
    };
    Some(reply(tool, call, sc_text, summary))
}

/// The reply: `structuredContent`'s JSON text and the text block, the summary for a success
/// (business errors keep the JSON text), else the JSON text of structuredContent, else "OK"
/// (as `Binding::render` and `forward::finish`).
fn reply(tool: &Tool, call: &Call, sc_text: Option<Bytes>, summary: Option<String>) -> Reply {
    let text_len = match (&summary, &sc_text) {
        (Some(text), _) => text.len(),
        // JSON text as a string: a quote to escape for each end of every key and string, an
        // eighth of the bytes or more where they are short (13 % of a list of short records):
        // room for a quarter, so that the escape never grows the buffer in the middle (a
        // copy of all written so far), and for the worst case of a sixteen-byte block, which
        // the escaper needs spare to write a block whole (`json_text::write`).
        (None, Some(json)) => json.len() + json.len() / 4 + 64,
        (None, None) => 0,
    };
    let mut content = Vec::with_capacity(32 + text_len);
    content.extend_from_slice(b"[{\"text\":");
    match (&summary, &sc_text) {
        (Some(text), _) => crate::json_text::write_str(text, &mut content),
        // JSON text the writer just wrote, or the body the reader read whole: UTF-8 already.
        (None, Some(json)) => crate::json_text::write_str_bytes(json, &mut content),
        (None, None) => content.extend_from_slice(b"\"OK\""),
    }
    content.extend_from_slice(b",\"type\":\"text\"}]");
    let mut meta = Map::new();
    if let Some(c) = &call.meta.correlation_id
        && tool.business.binding.kind == Kind::Usp
    {
        meta.insert("usp".into(), json!({ "correlation_id": c }));
    }
    Reply::Written(Written {
        meta,
        content,
        structured: sc_text,
        complete: false,
    })
}

/// The backend's text, when its answer becomes `structuredContent` unchanged and nothing but
/// the output schema looks at it: no `result` program, no null dropping, no business-message
/// program, no summary, a binding that keeps an object body as it is, and text that
/// [`object_passes`](super::doc_schema::object_passes) reads as one faithful object surely
/// valid against the output schema, without building it. `None` leaves the answer to the
/// reading into a [`Doc`] below, which decides (and answers the same for these texts).
fn as_written(
    tool: &Tool,
    check: Option<&super::doc_schema::DocSchema>,
    body: &Bytes,
) -> Option<Bytes> {
    let unchanged = keeps_body(tool) && tool.business_messages.is_none() && tool.summary.is_none();
    if !unchanged {
        return None;
    }
    super::doc_schema::object_passes(check, body)?;
    trimmed(body)
}

/// The backend's text of its answer, when that answer becomes `structuredContent` unchanged:
/// no `result` program and no null dropping, a binding that keeps an object body as it is
/// ([`crate::binding::Binding::keeps_object_body`]), and a body whose text stands for the
/// value read ([`Shape::faithful`]: every JSON reader reads from it the value the output
/// schema was checked on). The text is the body without its surrounding
/// whitespace: a slice, not a copy. Any other answer is written from its [`Doc`].
fn passed_through(tool: &Tool, body: &Bytes, answer: &Doc<'_>, shape: Shape) -> Option<Bytes> {
    let unchanged =
        keeps_body(tool) && shape.narrow && shape.faithful && matches!(answer, Doc::Obj(_));
    if !unchanged {
        return None;
    }
    trimmed(body)
}

/// The tool makes an object body its `structuredContent` as it is: no `result` program, no
/// null dropping, a binding that keeps the object.
fn keeps_body(tool: &Tool) -> bool {
    tool.result.is_none() && !tool.drop_nulls && tool.business.binding.keeps_object_body()
}

/// The body without its surrounding whitespace: a slice, not a copy.
fn trimmed(body: &Bytes) -> Option<Bytes> {
    let ws = |b: &u8| matches!(b, b' ' | b'\n' | b'\t' | b'\r');
    let start = body.iter().position(|b| !ws(b))?;
    let end = body.iter().rposition(|b| !ws(b))? + 1;
    Some(body.slice(start..end))
}

/// Writes `structuredContent`, its envelope member from the text written once per tool
/// ([`Tool::envelope_text`]): `Binding::structured_doc` always sets that member to the tool's
/// envelope, so the text is the member's own.
fn write_structured(sc: &Doc<'_>, tool: &Tool, out: &mut Vec<u8>) {
    let (Doc::Obj(members), Some((key, _)), Some(text)) = (sc, &tool.envelope, &tool.envelope_text)
    else {
        return crate::json_text::write_doc(sc, out);
    };
    crate::json_text::write_object(
        members.iter().map(|(k, v)| (k, v)),
        |k, v, out| {
            if k == key {
                out.extend_from_slice(text);
            } else {
                crate::json_text::write_doc(v, out);
            }
        },
        out,
    );
}

/// `structuredContent.messages` holds a message of type `error` (a business outcome, which
/// keeps its JSON text rather than a summary).
fn business_error(sc: &Doc<'_>) -> bool {
    let Doc::Obj(m) = sc else {
        return false;
    };
    let Some(Doc::Arr(messages)) = json_doc::member(m, "messages") else {
        return false;
    };
    messages.iter().any(|m| match m {
        Doc::Obj(fields) => json_doc::member(fields, "type").and_then(Doc::as_str) == Some("error"),
        _ => false,
    })
}
