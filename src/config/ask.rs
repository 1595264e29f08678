//! Compiling a tool's or prompt's `ask:` rounds (elicit, sample, roots) into an [`AskPlan`].
//! It must never panic on user input: every problem becomes a `Diagnostic` with file and line.

use super::diag::{Diagnostic, locate_yaml};
use super::mapping::AskSpec;
use crate::util::duration::parse_duration;
use indexmap::IndexMap;
use serde_json::Value;
use std::collections::HashSet;
use std::path::Path;
use std::time::Duration;

/// How long a 2025-era call waits for the client's answer by default.
pub const DEFAULT_ASK_TIMEOUT: Duration = Duration::from_secs(120);
/// `maxTokens` of a `sample` step by default.
pub const DEFAULT_MAX_TOKENS: u64 = 100;

/// A MiniJinja template over the call's arguments.
pub struct Template(minijinja::Environment<'static>);

impl Template {
    fn compile(src: &str) -> Result<Self, String> {
        let mut env = minijinja::Environment::new();
        env.set_undefined_behavior(minijinja::UndefinedBehavior::Lenient);
        env.add_template_owned("t", src.to_string())
            .map_err(|e| e.to_string())?;
        Ok(Template(env))
    }

    /// Renders over `args` (a JSON object).
    pub fn render(&self, args: &Value) -> Result<String, String> {
        let t = self.0.get_template("t").map_err(|e| e.to_string())?;
        t.render(minijinja::Value::from(minijinja::value::Serde(args)))
            .map_err(|e| e.to_string())
    }
}

/// What one step asks.
pub enum StepKind {
    /// `elicitation/create`.
    Elicit {
        message: Template,
        schema: Value,
        validator: jsonschema::Validator,
        on_decline: Option<Template>,
    },
    /// `sampling/createMessage` with one user message.
    Sample {
        prompt: Template,
        system: Option<Template>,
        max_tokens: u64,
    },
    /// `roots/list`.
    Roots,
}

/// One request to the client, named by its key (the MRTR `inputRequests` key).
pub struct Step {
    pub key: String,
    pub kind: StepKind,
    /// Argument the answer becomes; `None` (elicit only): merged into the arguments.
    pub into: Option<String>,
    /// Skipped when the client lacks the capability, instead of refusing the call.
    pub optional: bool,
    /// 2025 era: wait for the answer at most this long.
    pub timeout: Duration,
}

impl Step {
    /// The client capability this step needs (`elicitation`, `sampling`, `roots`).
    pub fn capability(&self) -> &'static str {
        match self.kind {
            StepKind::Elicit { .. } => "elicitation",
            StepKind::Sample { .. } => "sampling",
            StepKind::Roots => "roots",
        }
    }

    /// The JSON-RPC method sent to the client.
    pub fn method(&self) -> &'static str {
        match self.kind {
            StepKind::Elicit { .. } => "elicitation/create",
            StepKind::Sample { .. } => "sampling/createMessage",
            StepKind::Roots => "roots/list",
        }
    }

    /// The argument names this step fills.
    pub fn fills(&self) -> Vec<String> {
        match (&self.into, &self.kind) {
            (Some(i), _) => vec![i.clone()],
            (None, StepKind::Elicit { schema, .. }) => schema
                .get("properties")
                .and_then(Value::as_object)
                .map(|p| p.keys().cloned().collect())
                .unwrap_or_default(),
            (None, _) => Vec::new(),
        }
    }
}

/// A tool's questions, in rounds: every step of a round is asked at once, and a later round's
/// templates see the answers of the earlier ones.
pub struct AskPlan {
    pub rounds: Vec<Vec<Step>>,
}

impl std::fmt::Debug for AskPlan {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let rounds: Vec<Vec<(&str, &str)>> = self
            .rounds
            .iter()
            .map(|r| r.iter().map(|s| (s.key.as_str(), s.method())).collect())
            .collect();
        f.debug_struct("AskPlan").field("rounds", &rounds).finish()
    }
}

impl AskPlan {
    /// Capabilities the client must have declared (those of non-optional steps), sorted.
    pub fn required_capabilities(&self) -> Vec<&'static str> {
        let mut caps: Vec<&'static str> = self
            .rounds
            .iter()
            .flatten()
            .filter(|s| !s.optional)
            .map(Step::capability)
            .collect();
        caps.sort_unstable();
        caps.dedup();
        caps
    }

    /// Every argument name a step fills (the caller must not send these).
    pub fn filled(&self) -> Vec<String> {
        self.rounds.iter().flatten().flat_map(Step::fills).collect()
    }
}

/// Types an elicitation schema property may have (MCP's restricted `requestedSchema`).
const PRIMITIVES: [&str; 4] = ["string", "number", "integer", "boolean"];

/// Checks a `requestedSchema`: an object whose properties are primitives, or arrays of enum
/// strings (multi-select).
fn check_requested_schema(schema: &Value) -> Result<(), String> {
    let Some(obj) = schema.as_object() else {
        return Err("`schema` must be a JSON Schema object".into());
    };
    if obj.get("type").and_then(Value::as_str) != Some("object") {
        return Err("`schema` must have `type: object`".into());
    }
    let Some(props) = obj.get("properties").and_then(Value::as_object) else {
        return Err("`schema` needs `properties`".into());
    };
    if props.is_empty() {
        return Err("`schema.properties` is empty: there is nothing to ask".into());
    }
    for (name, p) in props {
        let ty = p.get("type").and_then(Value::as_str).unwrap_or("");
        let ok = PRIMITIVES.contains(&ty)
            || (ty == "array"
                && p.get("items").is_some_and(|i| {
                    i.get("enum").is_some_and(Value::is_array)
                        || i.get("anyOf").is_some_and(Value::is_array)
                }));
        if !ok {
            return Err(format!(
                "`schema.properties.{name}` must have `type` string, number, integer or boolean, or be an array of enum values (elicitation schemas are flat)"
            ));
        }
    }
    if let Some(req) = obj.get("required") {
        let names = req.as_array().ok_or("`schema.required` must be a list")?;
        for n in names {
            let n = n.as_str().ok_or("`schema.required` must list names")?;
            if !props.contains_key(n) {
                return Err(format!(
                    "`schema.required` names `{n}`, which is not a property"
                ));
            }
        }
    }
    Ok(())
}

/// Where a tool's `ask:` lives in its mapping file.
pub struct AskCtx<'a> {
    pub file: &'a Path,
    pub text: &'a str,
    /// `tools` or `prompts`.
    pub section: &'a str,
    /// The tool's or prompt's name.
    pub tool: &'a str,
    /// The caller's arguments (OpenRPC params, declared prompt arguments).
    pub params: &'a [&'a str],
}

/// Compiles `ask:`; `None` when there is none, or after pushing diagnostics.
pub fn compile(
    cx: &AskCtx<'_>,
    rounds: &[IndexMap<String, AskSpec>],
    diags: &mut Vec<Diagnostic>,
) -> Option<AskPlan> {
    if rounds.is_empty() {
        return None;
    }
    let before = diags.len();
    let tool = cx.tool;
    let mut keys = HashSet::new();
    let mut filled = HashSet::new();
    let mut out = Vec::new();
    for (r, round) in rounds.iter().enumerate() {
        if round.is_empty() {
            diags.push(
                Diagnostic::error(cx.file, format!("ask round {} is empty", r + 1))
                    .line(locate_yaml(cx.text, &[cx.section, tool, "ask"]))
                    .at(format!("{}.{tool}.ask[{r}]", cx.section))
                    .hint("each list item is a round: a map of request key -> `elicit:`, `sample:` or `roots: true`"),
            );
            continue;
        }
        let mut steps = Vec::new();
        for (key, spec) in round {
            let line = |field: &str| {
                locate_yaml(cx.text, &[cx.section, tool, "ask", key, field])
                    .or_else(|| locate_yaml(cx.text, &[cx.section, tool, "ask", key]))
                    .or_else(|| locate_yaml(cx.text, &[cx.section, tool, "ask"]))
            };
            let err = |field: &str, msg: String, hint: &str| {
                let section = cx.section;
                let at = if field.is_empty() {
                    format!("{section}.{tool}.ask[{r}].{key}")
                } else {
                    format!("{section}.{tool}.ask[{r}].{key}.{field}")
                };
                Diagnostic::error(cx.file, msg)
                    .line(line(field))
                    .at(at)
                    .hint(hint.to_string())
            };
            if !keys.insert(key.clone()) {
                diags.push(err(
                    "",
                    format!("request key `{key}` is used twice"),
                    "request keys name the answers; make each unique within the tool",
                ));
            }
            if let Some(step) = compile_step(key, spec, &err, diags) {
                for name in step.fills() {
                    if cx.params.contains(&name.as_str()) {
                        diags.push(err(
                            "into",
                            format!("`{name}` is a param of `{tool}`: the caller could send it and skip the question"),
                            "fill an argument the caller does not declare (not an OpenRPC param or prompt argument)",
                        ));
                    }
                    if !filled.insert(name.clone()) {
                        diags.push(err(
                            "into",
                            format!("argument `{name}` is filled by two steps"),
                            "give each step its own `into`",
                        ));
                    }
                }
                steps.push(step);
            }
        }
        out.push(steps);
    }
    (diags.len() == before).then_some(AskPlan { rounds: out })
}

fn compile_step(
    key: &str,
    spec: &AskSpec,
    err: &dyn Fn(&str, String, &str) -> Diagnostic,
    diags: &mut Vec<Diagnostic>,
) -> Option<Step> {
    let before = diags.len();
    let kinds = [
        spec.elicit.is_some(),
        spec.sample.is_some(),
        spec.roots.is_some(),
    ];
    if kinds.iter().filter(|k| **k).count() != 1 {
        diags.push(err(
            "",
            format!("step `{key}` needs exactly one of `elicit`, `sample`, `roots: true`"),
            "e.g. `confirm: { elicit: \"Cancel {{ booking_id }}?\", schema: {...} }`",
        ));
        return None;
    }
    let template = |field: &str, src: &str, diags: &mut Vec<Diagnostic>| {
        Template::compile(src)
            .map_err(|e| {
                diags.push(err(
                    field,
                    format!("{field} template: {e}"),
                    "MiniJinja over the arguments, e.g. `Cancel booking {{ booking_id }}?`",
                ))
            })
            .ok()
    };
    let this = if spec.elicit.is_some() {
        "elicit"
    } else if spec.sample.is_some() {
        "sample"
    } else {
        "roots"
    };
    let fields = [
        ("schema", spec.schema.is_some(), "elicit"),
        ("on_decline", spec.on_decline.is_some(), "elicit"),
        ("system", spec.system.is_some(), "sample"),
        ("max_tokens", spec.max_tokens.is_some(), "sample"),
    ];
    for (field, _, only) in fields.iter().filter(|(_, set, only)| *set && *only != this) {
        diags.push(err(
            field,
            format!("`{field}` only applies to `{only}` steps"),
            "remove it",
        ));
    }
    let kind = if let Some(msg) = &spec.elicit {
        let message = template("elicit", msg, diags);
        let on_decline = spec
            .on_decline
            .as_deref()
            .and_then(|s| template("on_decline", s, diags));
        let Some(schema) = spec.schema.clone() else {
            diags.push(err(
                "schema",
                format!("elicit step `{key}` needs a `schema`"),
                "e.g. `schema: { type: object, properties: { ok: { type: boolean } }, required: [ok] }`",
            ));
            return None;
        };
        if let Err(e) = check_requested_schema(&schema) {
            diags.push(err(
                "schema",
                e,
                "elicitation asks for a flat object: `{ type: object, properties: { name: { type: string } } }`",
            ));
            return None;
        }
        let validator = match jsonschema::options()
            .with_draft(jsonschema::Draft::Draft202012)
            .build(&schema)
        {
            Ok(v) => v,
            Err(e) => {
                diags.push(err(
                    "schema",
                    format!("schema does not compile: {e}"),
                    "JSON Schema 2020-12",
                ));
                return None;
            }
        };
        StepKind::Elicit {
            message: message?,
            schema,
            validator,
            on_decline,
        }
    } else if let Some(prompt) = &spec.sample {
        let prompt = template("sample", prompt, diags);
        let system = spec
            .system
            .as_deref()
            .and_then(|s| template("system", s, diags));
        if spec.max_tokens == Some(0) {
            diags.push(err(
                "max_tokens",
                "`max_tokens` must be at least 1".into(),
                "e.g. `max_tokens: 200`",
            ));
        }
        StepKind::Sample {
            prompt: prompt?,
            system,
            max_tokens: spec.max_tokens.unwrap_or(DEFAULT_MAX_TOKENS),
        }
    } else {
        if spec.roots != Some(true) {
            diags.push(err(
                "roots",
                "`roots` must be `true`".into(),
                "write `roots: true`",
            ));
        }
        StepKind::Roots
    };
    let needs_into = !matches!(kind, StepKind::Elicit { .. });
    match spec.into.as_deref() {
        Some("") => diags.push(err(
            "into",
            "`into` must name an argument".into(),
            "e.g. `into: reply`",
        )),
        None if needs_into => diags.push(err(
            "into",
            format!("step `{key}` needs `into`: the argument its answer becomes"),
            "e.g. `into: reply`",
        )),
        _ => {}
    }
    let timeout = match &spec.timeout {
        None => DEFAULT_ASK_TIMEOUT,
        Some(s) => parse_duration(s).unwrap_or_else(|| {
            diags.push(err(
                "timeout",
                format!("`{s}` is not a positive duration"),
                "write e.g. `60s` or `2m`",
            ));
            DEFAULT_ASK_TIMEOUT
        }),
    };
    (diags.len() == before).then(|| Step {
        key: key.to_string(),
        kind,
        into: spec.into.clone(),
        optional: spec.optional,
        timeout,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn requested_schemas_must_be_flat() {
        assert!(
            check_requested_schema(&json!({"type":"object","properties":{"a":{"type":"string"}}}))
                .is_ok()
        );
        assert!(
            check_requested_schema(&json!({"type":"object","properties":{"a":{"type":"object"}}}))
                .is_err()
        );
        assert!(
            check_requested_schema(
                &json!({"type":"object","properties":{"a":{"type":"string"}},"required":["b"]})
            )
            .is_err()
        );
        assert!(check_requested_schema(&json!({"type":"array"})).is_err());
        assert!(
            check_requested_schema(
                &json!({"type":"object","properties":{"m":{"type":"array","items":{"enum":["x"]}}}})
            )
            .is_ok()
        );
    }
}
