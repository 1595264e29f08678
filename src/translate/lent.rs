//! A request body lent from the text of the JSON-RPC request that carried the call: for a
//! `body` that is a path into the arguments, the client's own bytes of that value are sent
//! instead of the value written again. It never lends text that any JSON reader would read
//! as another value than the one the arguments hold (a repeated key on the way or inside,
//! a number not in the writer's form, an integer past `i64`): then the body is written.
//!
//! What a lent body rests on, besides the checks on the text here:
//! - the text is the body of one JSON-RPC message, `tools/call` of the tool being called
//!   (`params.name` is compared), set by the MCP HTTP endpoint for that request's task only
//!   ([`scope`]); batches, stdio and the REST facade have none;
//! - the arguments reached the call as the client sent them: the binding's metadata
//!   (`_meta`, `meta`) is taken from the top level only, so a path whose value is still in
//!   the arguments is untouched, and tools with `ask:` (whose answers are merged into the
//!   arguments) never lend.

use crate::json_text::{Cursor, Next};
use bytes::Bytes;

tokio::task_local! {
    /// The body of the JSON-RPC request being answered, when it is one `tools/call`.
    static CALL_TEXT: Bytes;
}

/// Runs `fut` with `text` as the request its calls' arguments were read from. A plain
/// function returning the wrapper, not an `async fn`, which would hold `fut` twice.
pub fn scope<F: std::future::Future>(
    text: Bytes,
    fut: F,
) -> impl std::future::Future<Output = F::Output> {
    CALL_TEXT.scope(text, fut)
}

/// The request text of the current task, if [`scope`] set one.
pub fn current() -> Option<Bytes> {
    CALL_TEXT.try_with(Bytes::clone).ok()
}

/// The text of `params.arguments` followed along `path` in `text`, a `tools/call` request
/// of the tool `tool`: `None` unless that request names `tool`, each key on the way is
/// there once, and the whole text reads back as the value read (see the module header).
pub fn body<'t>(text: &'t [u8], tool: &str, path: &[String]) -> Option<&'t [u8]> {
    // `.` (the whole arguments) would carry the binding's metadata, which the call removed.
    if path.is_empty() {
        return None;
    }
    let mut c = Cursor::new(text, true)?;
    let span = member(
        &mut c,
        "params",
        |c| {
            let mut named = false;
            let span = member(
                c,
                "arguments",
                |c| follow(c, path),
                |key, c| {
                    if key == "name" && c.next()? == Next::String {
                        named = c.string()? == tool;
                        Some(())
                    } else {
                        c.skip_value()
                    }
                },
            )?;
            named.then_some(span)
        },
        |_, c| c.skip_value(),
    )?;
    let (narrow, faithful) = c.narrow_and_faithful();
    (c.finish() && narrow && faithful).then(|| text.get(span.0..span.1))?
}

/// The span of the value at `path` inside the object at the cursor, the cursor left past
/// that object.
fn follow(c: &mut Cursor<'_>, path: &[String]) -> Option<(usize, usize)> {
    let (first, rest) = path.split_first()?;
    member(
        c,
        first,
        |c| {
            if rest.is_empty() {
                let from = c.at();
                c.skip_value()?;
                Some((from, c.at()))
            } else {
                follow(c, rest)
            }
        },
        |_, c| c.skip_value(),
    )
}

/// Reads the object at the cursor to its end: the member `key` is read by `inner`, every
/// other by `other` (with its key). `None` when the value is not an object, or `key` is
/// missing or repeated.
fn member<'t, T>(
    c: &mut Cursor<'t>,
    key: &str,
    mut inner: impl FnMut(&mut Cursor<'t>) -> Option<T>,
    mut other: impl FnMut(&str, &mut Cursor<'t>) -> Option<()>,
) -> Option<T> {
    if c.next()? != Next::Object {
        return None;
    }
    let mut found = None;
    if !c.open(b'}')? {
        loop {
            let k = c.key()?;
            if k == key {
                if found.is_some() {
                    return None;
                }
                found = Some(inner(c)?);
            } else {
                other(&k, c)?;
            }
            if c.next_or_close(b'}')? {
                break;
            }
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::body;
    use serde_json::Value;

    fn path(p: &[&str]) -> Vec<String> {
        p.iter().map(|s| s.to_string()).collect()
    }

    fn lent(text: &str, tool: &str, p: &[&str]) -> Option<Value> {
        body(text.as_bytes(), tool, &path(p)).map(|b| serde_json::from_slice(b).expect("JSON"))
    }

    /// The lent text is the value at the path, as serde_json reads it, whatever the
    /// client's spacing, escapes and member order.
    #[test]
    fn lends_the_value_at_the_path() {
        let cases = [
            (
                r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"put","arguments":{"folder":"F","doc":{"a":[1,2.5,"x\"y"],"b":null}}}}"#,
                &["doc"][..],
            ),
            (
                "{ \"params\" : { \"arguments\" : { \"doc\" : { \"t\" : \"\\u00e9\\n\" } } , \"name\" : \"put\" } , \"id\" : \"7\" , \"method\" : \"tools/call\" , \"jsonrpc\" : \"2.0\" }\n",
                &["doc"],
            ),
            (
                r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"put","arguments":{"a":{"b":{"c":[{"d":-0.0}]}},"z":1},"_meta":{"x":[1]}}}"#,
                &["a", "b"],
            ),
        ];
        for (text, p) in cases {
            let whole: Value = serde_json::from_str(text).expect("JSON");
            let mut want = &whole["params"]["arguments"];
            for k in p {
                want = &want[*k];
            }
            assert_eq!(lent(text, "put", p).as_ref(), Some(want), "{text}");
        }
    }

    /// Text that would not read back as the arguments' value, or is not this tool's call,
    /// is never lent.
    #[test]
    fn refuses_what_another_reader_could_read_otherwise() {
        let call = |args: &str| {
            format!(
                r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"put","arguments":{args}}}}}"#
            )
        };
        let refused = [
            // The path's key twice: serde_json keeps the last, another reader the first.
            call(r#"{"doc":{"a":1},"doc":{"a":2}}"#),
            // A key repeated inside the value.
            call(r#"{"doc":{"a":1,"a":2}}"#),
            // Numbers not in the writer's form, an integer past i64.
            call(r#"{"doc":{"a":1E2}}"#),
            call(r#"{"doc":{"a":0.10000000000000000000001}}"#),
            call(r#"{"doc":{"a":18446744073709551615}}"#),
            // The path is missing, or goes through a value that is not an object.
            call(r#"{"other":{}}"#),
            // Another tool's call, a second `arguments`, a second `params`.
            call(r#"{"doc":{}}"#).replace("\"put\"", "\"get\""),
            call(r#"{"doc":{}},"arguments":{"doc":{}}"#),
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"put","arguments":{"doc":{}}},"params":{}}"#.to_string(),
            // A batch, a truncated text, trailing bytes.
            format!("[{}]", call(r#"{"doc":{}}"#)),
            call(r#"{"doc":{}}"#).strip_suffix('}').unwrap_or_default().to_string(),
            format!("{} x", call(r#"{"doc":{}}"#)),
        ];
        for text in &refused {
            assert_eq!(lent(text, "put", &["doc"]), None, "{text}");
        }
        assert_eq!(
            lent(&call(r#"{"doc":{}}"#), "put", &[]),
            None,
            "the whole arguments"
        );
        assert!(lent(&call(r#"{"doc":{"a":[1]}}"#), "put", &["doc"]).is_some());
        assert_eq!(
            lent(&call(r#"{"doc":{"a":[1]}}"#), "put", &["doc", "a", "b"]),
            None
        );
    }

    proptest::proptest! {
        /// Any text as the value at the path (repeated keys, `\u` escapes, spacing, numbers
        /// of every form): what is lent reads, with serde_json, as the value the arguments
        /// hold and repeats no key, so a reader keeping a repeated key's first value reads
        /// it too; and a request whose whole text stands for its value is always lent.
        #[test]
        fn what_is_lent_reads_back_as_the_arguments_value(doc in crate::json_text::tests::varied_text()) {
            let text = format!(
                r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"put","arguments":{{"d": {doc} }}}}}}"#
            );
            let Ok(whole) = serde_json::from_str::<Value>(&text) else {
                return Ok(());
            };
            let lent = body(text.as_bytes(), "put", &path(&["d"]));
            if let Some(b) = lent {
                let fail = |what: &str| proptest::test_runner::TestCaseError::fail(format!("{what}: {doc}"));
                let read: Value = serde_json::from_slice(b).map_err(|_| fail("lent text is not JSON"))?;
                proptest::prop_assert_eq!(&read, &whole["params"]["arguments"]["d"]);
                let (_, shape) = crate::json_text::read_shaped(b).map_err(|_| fail("lent text does not read"))?;
                proptest::prop_assert!(shape.faithful && shape.narrow, "{}", doc);
            }
            if let Ok((_, shape)) = crate::json_text::read_shaped(text.as_bytes())
                && shape.faithful
                && shape.narrow
            {
                proptest::prop_assert!(lent.is_some(), "{}", doc);
            }
        }
    }
}
