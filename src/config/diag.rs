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
    /// 1-based column on that line, when the reader gave one (syntax errors; beyond 65535 none).
    pub column: Option<u16>,
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
            column: None,
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

    pub fn column(mut self, column: Option<u16>) -> Self {
        self.column = column;
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
            if let Some(col) = self.column {
                write!(f, ":{col}")?;
            }
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

/// Line `line` (1-based) of `text` quoted, with a caret under column `column`: for hints.
pub fn quote_line(text: &str, line: usize, column: Option<u16>) -> Option<String> {
    let l = text.lines().nth(line.checked_sub(1)?)?;
    let mut out = format!("\n    {l}");
    if let Some(c) = column {
        let pad: String = l
            .chars()
            .take(c.saturating_sub(1) as usize)
            .map(|ch| if ch == '\t' { '\t' } else { ' ' })
            .collect();
        out.push_str(&format!("\n    {pad}^"));
    }
    Some(out)
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

/// The line of item `index` of the block sequence under the key on line `key_line` (1-based),
/// or `key_line` itself when the sequence is written another way (a flow `[...]`).
pub fn locate_yaml_item(text: &str, key_line: usize, index: usize) -> usize {
    let lines: Vec<&str> = text.lines().collect();
    let Some(key) = lines.get(key_line.wrapping_sub(1)) else {
        return key_line;
    };
    let key_indent = key.len() - key.trim_start().len();
    let mut item_indent = None;
    let mut seen = 0;
    for (i, line) in lines.iter().enumerate().skip(key_line) {
        let trimmed = line.trim_start();
        if trimmed.is_empty() || trimmed.starts_with('#') {
            continue;
        }
        let indent = line.len() - trimmed.len();
        if indent < key_indent || (indent == key_indent && !trimmed.starts_with('-')) {
            break;
        }
        if trimmed == "-" || trimmed.starts_with("- ") {
            match item_indent {
                None => item_indent = Some(indent),
                Some(at) if at != indent => continue,
                Some(_) => {}
            }
            if seen == index {
                return i + 1;
            }
            seen += 1;
        }
    }
    key_line
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

/// Whether the value on a YAML key's line opens a literal block (`key: |`, `|-`, `|+`, `|2`),
/// whose text is the file's lines below the key, newlines kept.
fn opens_literal_block(line: &str) -> bool {
    let Some((_, value)) = line.split_once(':') else {
        return false;
    };
    let value = value.split(" #").next().unwrap_or("").trim();
    value
        .strip_prefix('|')
        .is_some_and(|rest| rest.chars().all(|c| matches!(c, '-' | '+' | '1'..='9')))
}

/// Places a jq compile error: `key_line` is the line of the program's key in `text`, `offset`
/// the byte in `src` the error is near. Returns the line to report (the error's own line when
/// the program is a literal block, whose lines are the file's; the key's line otherwise) and
/// the words for the hint: which column of which line, quoting that line of the program
/// (`None` when jaq gave no offset: the caller's example is the better hint then).
pub fn jq_error_place(
    text: &str,
    key_line: Option<usize>,
    src: &str,
    offset: Option<usize>,
) -> (Option<usize>, Option<String>) {
    let Some(mut at) = offset else {
        return (key_line, None);
    };
    // An error at the end of the program (a missing term) is placed just past its last line.
    at = at.min(src.trim_end().len());
    while !src.is_char_boundary(at) {
        at -= 1;
    }
    let before = &src[..at];
    let row = before.matches('\n').count();
    let start = before.rfind('\n').map_or(0, |i| i + 1);
    let end = src[start..].find('\n').map_or(src.len(), |i| start + i);
    let line_text = &src[start..end];
    let column = src[start..at].chars().count() + 1;
    let multi_line = src.trim_end().contains('\n');
    let block_line =
        key_line.filter(|&k| k > 0 && text.lines().nth(k - 1).is_some_and(opens_literal_block));
    let quoted = line_text.trim();
    let (line, place) = match block_line {
        Some(k) if multi_line => {
            let line = k + 1 + row;
            // The file line is the program line behind the block's indentation.
            let indent = text
                .lines()
                .nth(line - 1)
                .filter(|l| l.ends_with(line_text))
                .map_or(0, |l| l[..l.len() - line_text.len()].chars().count());
            (
                Some(line),
                format!(
                    "jq syntax; the problem is near column {} of this line: `{quoted}`",
                    indent + column
                ),
            )
        }
        _ if multi_line => (
            key_line,
            format!(
                "jq syntax; the problem is near column {column} of the program's line {}: `{quoted}`",
                row + 1
            ),
        ),
        _ => (
            key_line,
            format!("jq syntax; the problem is near column {column} of `{quoted}`"),
        ),
    };
    (line, Some(place))
}

#[cfg(test)]
mod tests {
    use super::*;

    const YAML: &str = "business: spa\ntools:\n  # comment\n  book:\n    http: POST /x\n    body: .a\n  get:\n    http: GET /y\n";

    #[test]
    fn locates_sequence_items() {
        let y = "outcomes:\n  409:\n    - when: .a\n      error: x\n    # c\n    - business: b\n      list:\n        - nested\n  400:\n  - business: c\n  flow: [1, 2]\n";
        assert_eq!(locate_yaml_item(y, 2, 0), 3);
        assert_eq!(
            locate_yaml_item(y, 2, 1),
            6,
            "comments and nested items skipped"
        );
        assert_eq!(locate_yaml_item(y, 2, 2), 2, "no such item: the key's line");
        assert_eq!(
            locate_yaml_item(y, 9, 0),
            10,
            "items at the key's own indent"
        );
        assert_eq!(
            locate_yaml_item(y, 11, 0),
            11,
            "a flow sequence: the key's line"
        );
        assert_eq!(locate_yaml_item(y, 99, 0), 99);
    }

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
    #[test]
    fn places_a_jq_error_on_its_own_line_in_a_literal_block() {
        let text = "tools:\n  t:\n    result: |\n      { a: .x,\n        b: .y |, c: 1 }\n";
        let src = "{ a: .x,\n  b: .y |, c: 1 }\n";
        let offset = src.find("|,").map(|i| i + 1);
        let (line, hint) = jq_error_place(text, Some(3), src, offset);
        let hint = hint.expect("a place");
        assert_eq!(line, Some(5));
        assert!(
            hint.contains("near column 16 of this line: `b: .y |, c: 1 }`"),
            "{hint}"
        );
        let bar = text.lines().nth(4).and_then(|l| l.chars().nth(15));
        assert_eq!(
            bar,
            Some(','),
            "column 16 of the file's line 5 is the comma"
        );
    }

    #[test]
    fn places_a_jq_error_in_other_scalar_styles_on_the_key_line() {
        let text = "tools:\n  t:\n    result: '.appointment | bookng'\n";
        let (line, hint) = jq_error_place(text, Some(3), ".appointment | bookng", Some(15));
        assert_eq!(line, Some(3));
        assert_eq!(
            hint.as_deref(),
            Some("jq syntax; the problem is near column 16 of `.appointment | bookng`")
        );
        // A folded block does not keep the program's lines as the file's.
        let text = "tools:\n  t:\n    result: >\n      { a: .x,\n        b: .y | }\n";
        let (line, hint) = jq_error_place(text, Some(3), "{ a: .x,\n  b: .y | }\n", Some(16));
        assert_eq!(line, Some(3));
        let hint = hint.expect("a place");
        assert!(hint.contains("program's line 2: `b: .y | }`"), "{hint}");
        // Offsets past the text or inside a character are clamped, never a panic.
        let (_, hint) = jq_error_place(text, None, "\"é\"", Some(2));
        assert!(hint.is_some_and(|h| h.contains("column 2")));
        let (_, hint) = jq_error_place(text, None, ".a", Some(99));
        assert!(hint.is_some_and(|h| h.contains("column 3")));
        // No offset: the line stays the key's and the caller gives its own example.
        assert_eq!(jq_error_place(text, Some(3), ".a", None), (Some(3), None));
        assert!(opens_literal_block("    body: |-  # comment"));
        assert!(!opens_literal_block("    body: '|'"));
    }
}
