//! The compiled tool and its status rules (`Tool`, `Descriptor`, `OutcomeRule`), as served.
//! It must never compile mapping files itself: `compile_tool` builds these from a mapping.

use super::business::Business;
use crate::binding::Rule;
use crate::translate::content::ContentRule;
use crate::translate::path::PathTemplate;
use crate::translate::transform::{Transform, Vars3};
use http::{HeaderName, Method};
use serde_json::Value;
use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

/// What a status means, compiled.
#[derive(Debug, Clone)]
pub struct OutcomeRule {
    pub rule: Rule,
    pub content: Option<String>,
    pub content_from: Option<Transform>,
    pub code_from: Option<Transform>,
    pub severity: String,
    /// With `business`: the severity from the backend body (`severity` is the fallback).
    pub severity_from: Option<Transform>,
    /// The predicate over the backend body that must hold for this rule to apply.
    pub when: Option<Transform>,
    /// With `business`: carry the tool's `result` over the body beside `messages[]`.
    pub with_result: bool,
    /// With `business`: the read whose answer is the carried resource (`follow_up:`).
    pub follow_up: Option<FollowUp>,
}

/// A follow-up read: method (`GET`/`HEAD`) and path template over the call's arguments.
#[derive(Debug, Clone)]
pub struct FollowUp {
    pub method: http::Method,
    pub path: crate::translate::path::PathTemplate,
}

impl OutcomeRule {
    /// The binding's own meaning of a status, with no text or predicates of the mapping's.
    fn default_for(rule: Rule) -> OutcomeRule {
        OutcomeRule {
            rule,
            content: None,
            content_from: None,
            code_from: None,
            severity: "recoverable".into(),
            severity_from: None,
            when: None,
            with_result: false,
            follow_up: None,
        }
    }
}

/// Status keys: an exact code or a class (`4xx`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(super) enum StatusKey {
    Exact(u16),
    Class(u16),
}

/// A tool's MCP `Tool` object (its `tools/list` entry), kept as compact JSON text. Parsed, the
/// bundled input and output schemas took about seven times the memory of their text (1.9 MiB
/// for the demo's 37 tools, a sixth of an idle sidecar's heap); `tools/list` parses the page it
/// serves, which is rare next to `tools/call`.
#[derive(Debug, Clone)]
pub struct Descriptor(Box<str>);

impl Descriptor {
    /// `None` when the text cannot be read back (nesting deeper than serde_json's limit).
    pub(super) fn new(v: &Value) -> Option<Descriptor> {
        let text = v.to_string();
        serde_json::from_str::<serde::de::IgnoredAny>(&text).ok()?;
        Some(Descriptor(text.into_boxed_str()))
    }

    /// The descriptor as a JSON value.
    pub fn value(&self) -> Value {
        // Written by `new`, which checked that it reads back.
        serde_json::from_str(&self.0).unwrap_or(Value::Null)
    }
}

/// A tool, ready to serve.
pub struct Tool {
    pub name: String,
    pub business: Arc<Business>,
    /// The MCP `Tool` object served by `tools/list`.
    pub descriptor: Descriptor,
    pub input_validator: jsonschema::Validator,
    pub output_validator: Option<jsonschema::Validator>,
    /// The same output schema for the native check of the hot path (`translate::answer`),
    /// built on the tool's first successful answer ([`Tool::output_check`]): a tool never
    /// called costs no memory for it. `output_validator` stays the authority.
    pub(super) output_check: std::sync::OnceLock<Option<crate::translate::doc_schema::DocSchema>>,
    /// The `usp`/`ucp` member of the tool's successful results (USP and UCP bindings), built
    /// once for the hot path (`translate::answer`).
    pub envelope: Option<(String, Value)>,
    /// The JSON text of `envelope`'s value, written once: the hot path splices it into each
    /// answer instead of writing the constant again.
    pub envelope_text: Option<Vec<u8>>,
    pub method: Method,
    pub path: PathTemplate,
    pub query: Vec<(String, Transform)>,
    pub headers: Vec<(HeaderName, Transform)>,
    pub body: Option<Transform>,
    pub result: Option<Transform>,
    pub business_messages: Option<Transform>,
    pub summary: Option<crate::translate::summary::Summary>,
    pub(super) outcomes: HashMap<StatusKey, Vec<OutcomeRule>>,
    pub capability: Option<String>,
    pub idempotency_required: bool,
    pub timeout: Duration,
    /// Interval of `notifications/progress` ticks while the backend call runs.
    pub progress_every: Duration,
    /// USP `x-usp-access` of the method.
    pub access: Option<String>,
    /// Metric handles, resolved on the first call.
    pub metrics: crate::ops::metrics::ToolMetrics,
    /// The tool's own circuit breaker on its backend (`upstream::resilience`).
    pub breaker: crate::upstream::resilience::Breaker,
    /// How a success body becomes `content[]` (`None`: JSON -> structuredContent + text).
    pub content: Option<ContentRule>,
    /// Questions for the MCP client before the backend call (`ask:`).
    pub ask: Option<Arc<super::ask::AskPlan>>,
    /// Whether any of the tool's transforms names `$meta` (`translate::request::meta_for`).
    pub meta_used: bool,
    /// Drop `null` object members from the success payload, at every depth (`drop_nulls:`).
    pub drop_nulls: bool,
    /// The operation whose request variant of the params' schemas is served, and how many
    /// properties it changed (`config::request_variant`); `None`: as published.
    pub request_variant: Option<(String, usize)>,
    /// One line per `schema_patches:` entry applied at load (`portico check` prints them).
    pub schema_patches: Vec<String>,
    /// SEP-2243: (argument, `Mcp-Param-` header suffix) of each top-level property of the
    /// `inputSchema` annotated `x-mcp-header`.
    pub mcp_headers: Vec<(String, String)>,
    /// A `202` + status resource served as an MCP task (`long_running:`).
    pub long_running: Option<Arc<super::long_running::LongRunning>>,
}

impl fmt::Debug for Tool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Tool")
            .field("name", &self.name)
            .field("business", &self.business.name)
            .field("method", &self.method)
            .finish()
    }
}

impl Tool {
    /// The native check of the tool's output schema (see `translate::doc_schema`), built from
    /// the served `outputSchema` on first use; `None` when the tool has no output schema.
    /// The hot path's answers always carry [`Tool::envelope`], so the check is pinned to it
    /// ([`crate::translate::doc_schema::DocSchema::pin`]): the constant is checked once here,
    /// not in every answer. Only for answers built with that envelope.
    pub fn output_check(&self) -> Option<&crate::translate::doc_schema::DocSchema> {
        self.output_check
            .get_or_init(|| {
                self.output_validator.as_ref()?;
                let descriptor = self.descriptor.value();
                let mut check = crate::translate::doc_schema::DocSchema::compile(
                    descriptor.get("outputSchema")?,
                );
                if let Some((key, env)) = &self.envelope {
                    check.pin(key, &crate::json_doc::Doc::from_value(env));
                }
                Some(check)
            })
            .as_ref()
    }

    /// The rule for a backend status: tool rules, then business rules (merged at load), then the
    /// binding's table. Within a status, the first rule whose `when` holds on `body` wins; a
    /// rule with a `when` never applies without a body (see [`Tool::rules_read_body`]).
    pub fn rule_for(&self, status: u16, body: Option<(&Value, Vars3<'_>)>) -> OutcomeRule {
        for key in [StatusKey::Exact(status), StatusKey::Class(status / 100)] {
            let Some(rules) = self.outcomes.get(&key) else {
                continue;
            };
            for rule in rules {
                let applies = match (&rule.when, body) {
                    (None, _) => true,
                    (Some(_), None) => false,
                    (Some(t), Some((b, vars))) => matches!(
                        t.run(b, vars),
                        Ok(Some(v)) if !matches!(v, Value::Null | Value::Bool(false))
                    ),
                };
                if applies {
                    return rule.clone();
                }
            }
        }
        OutcomeRule::default_for(self.business.binding.default_rule(status))
    }

    /// The mapping's rules that may decide `status`: its exact code's, then its class's.
    fn rules_of(&self, status: u16) -> impl Iterator<Item = &OutcomeRule> {
        [StatusKey::Exact(status), StatusKey::Class(status / 100)]
            .into_iter()
            .filter_map(|k| self.outcomes.get(&k))
            .flatten()
    }

    /// Whether the rule for `status` depends on the backend body (a `when` predicate).
    pub fn rules_read_body(&self, status: u16) -> bool {
        self.rules_of(status).any(|r| r.when.is_some())
    }

    /// Whether a rule for `status` names a follow-up read.
    pub fn follows_up(&self, status: u16) -> bool {
        self.rules_of(status).any(|r| r.follow_up.is_some())
    }

    /// Every jq program of this tool, named by where it sits in the mapping.
    pub fn transforms(&self) -> Vec<(String, &Transform)> {
        let mut all: Vec<(String, &Transform)> = Vec::new();
        all.extend(self.query.iter().map(|(k, t)| (format!("query.{k}"), t)));
        all.extend(
            self.headers
                .iter()
                .map(|(k, t)| (format!("headers.{k}"), t)),
        );
        all.extend(self.body.iter().map(|t| ("body".to_string(), t)));
        all.extend(self.result.iter().map(|t| ("result".to_string(), t)));
        all.extend(
            self.business_messages
                .iter()
                .map(|t| ("business".to_string(), t)),
        );
        for (key, rules) in &self.outcomes {
            let key = match key {
                StatusKey::Exact(s) => s.to_string(),
                StatusKey::Class(c) => format!("{c}xx"),
            };
            for rule in rules {
                for (field, t) in [
                    ("content_from", &rule.content_from),
                    ("code_from", &rule.code_from),
                    ("severity_from", &rule.severity_from),
                    ("when", &rule.when),
                ] {
                    all.extend(t.iter().map(|t| (format!("outcomes.{key}.{field}"), t)));
                }
            }
        }
        all
    }
}
