//! Diagnostics for configuration files: file, line or JSON pointer, message and a fix hint.
//! It owns formatting only; it must never decide whether a configuration is acceptable.

use std::fmt;
use std::path::{Path, PathBuf};

/// How bad a finding is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Severity {
    Warning,
    Error,
}

/// One finding about one place in one file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Diagnostic {
    pub severity: Severity,
    pub file: PathBuf,
    /// 1-based line in `file`, when the place is in a YAML/JSON text we can locate.
    pub line: Option<usize>,
    /// Dotted key path in a mapping file, or a JSON pointer in a JSON document.
    pub at: Option<String>,
    pub message: String,
    pub hint: Option<String>,
}

impl Diagnostic {
    pub fn error(file: &Path, message: impl Into<String>) -> Self {
        Diagnostic {
            severity: Severity::Error,
            file: file.to_path_buf(),
            line: None,
            at: None,
            message: message.into(),
            hint: None,
        }
    }

    pub fn warning(file: &Path, message: impl Into<String>) -> Self {
        Diagnostic {
            severity: Severity::Warning,
            ..Diagnostic::error(file, message)
        }
    }

    pub fn line(mut self, line: Option<usize>) -> Self {
        self.line = line;
        self
    }

    pub fn at(mut self, at: impl Into<String>) -> Self {
        self.at = Some(at.into());
        self
    }

    pub fn hint(mut self, hint: impl Into<String>) -> Self {
        self.hint = Some(hint.into());
        self
    }

    pub fn is_error(&self) -> bool {
        self.severity == Severity::Error
    }
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let sev = match self.severity {
            Severity::Error => "error",
            Severity::Warning => "warning",
        };
        write!(f, "{sev}: {}", self.file.display())?;
        if let Some(line) = self.line {
            write!(f, ":{line}")?;
        }
        if let Some(at) = &self.at {
            write!(f, " ({at})")?;
        }
        write!(f, ": {}", self.message)?;
        if let Some(hint) = &self.hint {
            write!(f, "\n  hint: {hint}")?;
        }
        Ok(())
    }
}

/// Finds the line of a key path (`["tools", "book", "http"]`) in a block-style YAML text.
///
/// Each key is searched for below its parent, deeper-indented than the parent; when a key is not
/// found the line of the deepest key that was found is returned.
pub fn locate_yaml(text: &str, path: &[&str]) -> Option<usize> {
    let lines: Vec<&str> = text.lines().collect();
    let mut start = 0usize;
    let mut parent_indent: Option<usize> = None;
    let mut found: Option<usize> = None;
    for key in path {
        let mut hit = None;
        for (i, line) in lines.iter().enumerate().skip(start) {
            let trimmed = line.trim_start();
            if trimmed.is_empty() || trimmed.starts_with('#') {
                continue;
            }
            let indent = line.len() - trimmed.len();
            if let Some(p) = parent_indent
                && indent <= p
                && i > start
            {
                break;
            }
            let bare = trimmed.trim_start_matches("- ");
            let matches = [
                format!("{key}:"),
                format!("\"{key}\":"),
                format!("'{key}':"),
            ]
            .iter()
            .any(|k| bare.starts_with(k.as_str()));
            if matches && parent_indent.is_none_or(|p| indent > p) {
                hit = Some((i, indent));
                break;
            }
        }
        match hit {
            Some((i, indent)) => {
                found = Some(i + 1);
                start = i + 1;
                parent_indent = Some(indent);
            }
            None => break,
        }
    }
    found
}

/// Finds the line where a JSON pointer's target starts in a pretty-printed JSON text (best effort:
/// follows object keys in order; array indices are counted by their opening lines).
pub fn locate_json(text: &str, pointer: &str) -> Option<usize> {
    let mut pos = 0usize;
    let mut line = 1usize;
    for token in pointer.split('/').skip(1) {
        let key = token.replace("~1", "/").replace("~0", "~");
        if !key.is_empty() && key.chars().all(|c| c.is_ascii_digit()) {
            // Array index: the array's own line is close enough.
            continue;
        }
        let needle = format!("\"{key}\"");
        let at = text.get(pos..)?.find(&needle)? + pos;
        line = text[..at].matches('\n').count() + 1;
        pos = at + needle.len();
    }
    Some(line)
}

#[cfg(test)]
mod tests {
    use super::*;

    const YAML: &str = "business: spa\ntools:\n  # comment\n  book:\n    http: POST /x\n    body: .a\n  get:\n    http: GET /y\n";

    #[test]
    fn locates_nested_keys() {
        assert_eq!(locate_yaml(YAML, &["business"]), Some(1));
        assert_eq!(locate_yaml(YAML, &["tools", "book", "http"]), Some(5));
        assert_eq!(locate_yaml(YAML, &["tools", "get", "http"]), Some(8));
        assert_eq!(locate_yaml(YAML, &["tools", "get", "body"]), Some(7));
        assert_eq!(locate_yaml(YAML, &["nope"]), None);
    }

    #[test]
    fn locates_json_pointers() {
        let text = "{\n  \"methods\": [\n    {\n      \"name\": \"a\",\n      \"params\": []\n    }\n  ]\n}";
        assert_eq!(locate_json(text, "/methods/0/params"), Some(5));
    }

    #[test]
    fn displays_file_line_and_hint() {
        let d = Diagnostic::error(Path::new("m.yaml"), "bad")
            .line(Some(3))
            .at("tools.x")
            .hint("fix it");
        assert_eq!(
            d.to_string(),
            "error: m.yaml:3 (tools.x): bad\n  hint: fix it"
        );
    }
}
