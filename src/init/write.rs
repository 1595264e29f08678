//! Writing what `init` generated: the OpenRPC document (JSON) and the mapping file (YAML, laid
//! out like a hand-written one), into a fresh folder that appears whole or not at all. It never
//! writes into an existing non-empty folder and never leaves a half-written one behind.

use super::operations::ToolPlan;
use serde::Serialize;
use serde_json::{Map, Value, json};
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// The comment that lets editors validate and complete a mapping file.
pub const SCHEMA_FILE: &str = "portico-mapping.schema.json";

#[derive(Serialize)]
struct Rpc<'a> {
    openrpc: &'static str,
    info: Info<'a>,
    methods: Vec<RpcMethod>,
    #[serde(skip_serializing_if = "Map::is_empty")]
    components: Map<String, Value>,
}

#[derive(Serialize)]
struct Info<'a> {
    title: &'a str,
    version: &'a str,
}

#[derive(Serialize)]
struct RpcMethod {
    name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    summary: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    description: Option<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tags: Vec<Value>,
    #[serde(rename = "paramStructure")]
    param_structure: &'static str,
    params: Vec<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    result: Option<Value>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    examples: Vec<Value>,
}

/// The OpenRPC document's text.
pub fn openrpc(
    title: &str,
    version: &str,
    tools: &[ToolPlan],
    defs: &BTreeMap<String, Value>,
) -> String {
    let methods = tools
        .iter()
        .map(|t| RpcMethod {
            name: t.name.clone(),
            summary: t.summary.clone(),
            description: t.description.clone(),
            tags: t.tags.iter().map(|n| json!({"name": n})).collect(),
            param_structure: "by-name",
            params: t
                .args
                .iter()
                .map(|a| {
                    let mut p = Map::new();
                    p.insert("name".into(), json!(a.name));
                    if let Some(d) = &a.description {
                        p.insert("description".into(), json!(d));
                    }
                    p.insert("required".into(), json!(a.required));
                    p.insert("schema".into(), a.schema.clone());
                    Value::Object(p)
                })
                .collect(),
            result: t.result.as_ref().map(|s| json!({"name": "result", "schema": s})),
            examples: t
                .result_example
                .as_ref()
                .map(|e| {
                    vec![json!({"name": "documented answer", "params": [], "result": {"name": "result", "value": e}})]
                })
                .unwrap_or_default(),
        })
        .collect();
    let mut components = Map::new();
    if !defs.is_empty() {
        components.insert(
            "schemas".into(),
            Value::Object(defs.iter().map(|(k, v)| (k.clone(), v.clone())).collect()),
        );
    }
    let doc = Rpc {
        openrpc: "1.3.2",
        info: Info {
            title,
            version: if version.is_empty() { "0" } else { version },
        },
        methods,
        components,
    };
    let mut s = serde_json::to_string_pretty(&doc).unwrap_or_else(|_| "{}".into());
    s.push('\n');
    s
}

/// A YAML scalar: plain when that reads back as the same string, else double-quoted (JSON).
pub fn yaml_str(s: &str) -> String {
    let plain = !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.' | '/' | ' '))
        && !s.starts_with([' ', '-', '.'])
        && !s.ends_with(' ')
        && !matches!(
            s.to_ascii_lowercase().as_str(),
            "true" | "false" | "yes" | "no" | "on" | "off" | "null" | "~"
        )
        && s.parse::<f64>().is_err();
    if plain {
        s.to_string()
    } else {
        json!(s).to_string()
    }
}

/// A jq program as a YAML scalar (single-quoted when it is not plain).
pub fn yaml_jq(p: &str) -> String {
    let plain = p.starts_with('.')
        && p.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.'));
    if plain {
        p.to_string()
    } else {
        format!("'{}'", p.replace('\'', "''"))
    }
}

/// What the mapping file says besides the tools.
pub struct MappingHead<'a> {
    pub business: &'a str,
    pub source: &'a str,
    pub openapi_version: &'a str,
    pub title: &'a str,
    pub openrpc_file: &'a str,
    pub backend: &'a str,
    pub backend_note: Option<String>,
    /// Header -> value with `${VAR}`, from the security schemes (written commented out).
    pub credentials: Vec<(String, String, String)>,
    pub skipped: Vec<String>,
}

/// The opening of a mapping file: schema comment, `intro` (comment lines), business, binding,
/// OpenRPC, `extra` (top-level sections, ending in a blank line) and the backend section.
pub fn mapping_head(head: &MappingHead<'_>, binding: &str, intro: &str, extra: &str) -> String {
    let mut y = String::new();
    let _ = writeln!(y, "# yaml-language-server: $schema={SCHEMA_FILE}");
    y.push_str(intro);
    let _ = writeln!(y, "business: {}", yaml_str(head.business));
    let _ = writeln!(y, "binding: {binding}");
    let _ = writeln!(y, "openrpc: {}", yaml_str(head.openrpc_file));
    let _ = writeln!(y);
    y.push_str(extra);
    let _ = writeln!(y, "backend:");
    if let Some(n) = &head.backend_note {
        let _ = writeln!(y, "  # {n}");
    }
    let _ = writeln!(y, "  url: {}", yaml_str(head.backend));
    let _ = writeln!(y, "  timeout: 10s");
    if !head.credentials.is_empty() {
        let _ = writeln!(
            y,
            "  # Credentials (the document's security schemes): export the variable, then uncomment."
        );
        let _ = writeln!(y, "  # headers:");
        for (name, value, scheme) in &head.credentials {
            let _ = writeln!(
                y,
                "  #   {}: {}    # {scheme}",
                yaml_str(name),
                json!(value)
            );
        }
    }
    let _ = writeln!(y);
    y
}

/// The mapping file's text.
pub fn mapping(head: &MappingHead<'_>, tools: &[ToolPlan]) -> String {
    let intro = format!(
        "# {}: served over MCP from its OpenAPI {} document `{}`.\n# One tool per operation; `portico check` validates this file, docs/mapping.md describes it.\n",
        if head.title.is_empty() {
            head.business
        } else {
            head.title
        },
        head.openapi_version,
        head.source
    );
    let mut y = mapping_head(head, "plain", &intro, "");
    let _ = writeln!(y, "tools:");
    for (i, t) in tools.iter().enumerate() {
        if i > 0 {
            let _ = writeln!(y);
        }
        if let Some(s) = &t.summary {
            let line: String = s.lines().next().unwrap_or("").chars().take(100).collect();
            let _ = writeln!(y, "  # {line}");
        }
        for n in &t.notes {
            let _ = writeln!(y, "  # note: {n}");
        }
        let _ = writeln!(y, "  {}:", yaml_str(&t.name));
        let _ = writeln!(y, "    http: {} {}", t.method, t.path);
        for (section, pairs) in [("query", &t.query), ("headers", &t.headers)] {
            if pairs.is_empty() {
                continue;
            }
            let _ = writeln!(y, "    {section}:");
            for (k, v) in pairs {
                let _ = writeln!(y, "      {}: {}", yaml_str(k), yaml_jq(v));
            }
        }
        if let Some(b) = &t.body {
            let _ = writeln!(y, "    body: {}", yaml_jq(b));
        }
        if t.wrap_result {
            let _ = writeln!(y, "    result: '{{ result: . }}'");
        }
    }
    if !head.skipped.is_empty() {
        let _ = writeln!(y);
        let _ = writeln!(y, "# Not served ({} operation(s)):", head.skipped.len());
        for s in &head.skipped {
            let _ = writeln!(y, "#   {s}");
        }
    }
    y
}

/// Writes `files` into `out` through a temporary sibling folder renamed into place.
pub fn publish(out: &Path, files: &[(String, String)]) -> Result<(), String> {
    if out.exists() {
        let empty = std::fs::read_dir(out)
            .map_err(|e| format!("cannot read {}: {e}", out.display()))?
            .next()
            .is_none();
        if !empty {
            return Err(format!(
                "{} exists and is not empty; choose a new folder with --out",
                out.display()
            ));
        }
    }
    let parent = match out.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    std::fs::create_dir_all(&parent)
        .map_err(|e| format!("cannot create {}: {e}", parent.display()))?;
    let leaf = out
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or("out")
        .to_string();
    let tmp = parent.join(format!(".{leaf}.init-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&tmp);
    let result = (|| {
        std::fs::create_dir(&tmp).map_err(|e| format!("cannot create {}: {e}", tmp.display()))?;
        for (name, text) in files {
            std::fs::write(tmp.join(name), text)
                .map_err(|e| format!("cannot write {name}: {e}"))?;
        }
        if out.exists() {
            std::fs::remove_dir(out)
                .map_err(|e| format!("cannot replace {}: {e}", out.display()))?;
        }
        std::fs::rename(&tmp, out).map_err(|e| format!("cannot move into {}: {e}", out.display()))
    })();
    if result.is_err() {
        let _ = std::fs::remove_dir_all(&tmp);
    }
    result
}
