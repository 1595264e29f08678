//! Where a published OpenRPC's absolute `$ref`s (`https://ucp.dev/schemas/...`) live on disk:
//! JSON Schema files near the OpenRPC whose `$id` matches, as `schema_ids` prefixes. It reads
//! local files only (a bounded walk), never fetches a URL, and never fails: misses are listed.

use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::path::{Path, PathBuf};

/// Folders above the OpenRPC searched, and how deep and wide below each.
const UP: usize = 3;
const DEPTH: usize = 6;
const MAX_FILES: usize = 5000;

/// What was found: `$id` prefix -> folder, and the absolute references no file answered.
#[derive(Debug, Default)]
pub struct Found {
    pub prefixes: Vec<(String, PathBuf)>,
    pub unresolved: BTreeSet<String>,
}

fn refs(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::Object(o) => {
            for (k, x) in o {
                match (k.as_str(), x) {
                    ("$ref", Value::String(r)) => out.push(r.clone()),
                    _ => refs(x, out),
                }
            }
        }
        Value::Array(a) => a.iter().for_each(|x| refs(x, out)),
        _ => {}
    }
}

fn absolute(r: &str) -> bool {
    r.starts_with("http://") || r.starts_with("https://")
}

fn without_fragment(r: &str) -> &str {
    r.split('#').next().unwrap_or(r)
}

fn read(p: &Path) -> Option<Value> {
    let text = std::fs::read_to_string(p).ok()?;
    serde_json::from_str(&text).ok()
}

/// JSON files with an absolute `$id` below `root` (bounded), by `$id`.
fn index(root: &Path, into: &mut HashMap<String, PathBuf>) {
    let mut queue = VecDeque::from([(root.to_path_buf(), 0)]);
    let mut seen = 0;
    while let Some((dir, depth)) = queue.pop_front() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        let mut entries: Vec<PathBuf> = entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
        entries.sort();
        for p in entries {
            let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
            if name.starts_with('.') && depth > 0 || matches!(name, "node_modules" | "target") {
                continue;
            }
            if p.is_dir() {
                if depth < DEPTH {
                    queue.push_back((p, depth + 1));
                }
            } else if name.ends_with(".json") {
                seen += 1;
                if seen > MAX_FILES {
                    return;
                }
                if let Some(id) = read(&p).and_then(|v| v.get("$id")?.as_str().map(str::to_string))
                    && absolute(&id)
                {
                    into.entry(without_fragment(&id).to_string()).or_insert(p);
                }
            }
        }
    }
}

/// Resolves `r` (relative to the document at `base`, a URL or a file).
enum Base<'a> {
    Url(&'a url::Url),
    File(&'a Path),
}

/// Follows the OpenRPC's references (files relative to it, URLs through the index) and names
/// the `schema_ids` prefixes that make every absolute one resolve locally.
pub fn find(openrpc: &Path, doc: &Value) -> Found {
    let mut start = Vec::new();
    refs(doc, &mut start);
    let mut ids: HashMap<String, PathBuf> = HashMap::new();
    let dir = openrpc.parent().unwrap_or(Path::new("."));
    let mut up = 0;
    let mut root = dir.to_path_buf();
    loop {
        let found = walk(openrpc, &start, &ids);
        if found.unresolved.is_empty() || up >= UP {
            return found;
        }
        // Look one folder further up for files carrying the missing `$id`s.
        if up > 0 {
            match root.parent() {
                Some(p) => root = p.to_path_buf(),
                None => return found,
            }
        }
        index(&root, &mut ids);
        up += 1;
    }
}

fn walk(openrpc: &Path, start: &[String], ids: &HashMap<String, PathBuf>) -> Found {
    let mut found = Found::default();
    let mut pairs: BTreeMap<String, PathBuf> = BTreeMap::new();
    let mut files: VecDeque<PathBuf> = VecDeque::new();
    let mut urls: VecDeque<String> = VecDeque::new();
    let mut done_files: BTreeSet<PathBuf> = BTreeSet::new();
    let mut done_urls: BTreeSet<String> = BTreeSet::new();
    let dir = openrpc.parent().unwrap_or(Path::new("."));
    let push =
        |r: &str, base: Base<'_>, files: &mut VecDeque<PathBuf>, urls: &mut VecDeque<String>| {
            let r = without_fragment(r);
            if r.is_empty() {
                return;
            }
            if absolute(r) {
                urls.push_back(r.to_string());
                return;
            }
            match base {
                Base::Url(u) => {
                    if let Ok(j) = u.join(r) {
                        urls.push_back(j.to_string());
                    }
                }
                Base::File(d) => files.push_back(d.join(r)),
            }
        };
    for r in start {
        push(r, Base::File(dir), &mut files, &mut urls);
    }
    let mut steps = 0;
    while steps < MAX_FILES {
        steps += 1;
        if let Some(f) = files.pop_front() {
            let f = std::fs::canonicalize(&f).unwrap_or(f);
            if !done_files.insert(f.clone()) {
                continue;
            }
            let Some(v) = read(&f) else { continue };
            let mut rs = Vec::new();
            refs(&v, &mut rs);
            let fdir = f.parent().unwrap_or(Path::new(".")).to_path_buf();
            let id = v
                .get("$id")
                .and_then(Value::as_str)
                .filter(|i| absolute(i))
                .and_then(|i| url::Url::parse(i).ok());
            // A file with an absolute `$id` is read as that URL: its relative references are
            // resolved against it, and its folder serves the `$id`'s folder.
            if let Some(u) = &id {
                record(&mut pairs, u.as_str(), &f);
            }
            for r in rs.iter().filter(|r| !r.starts_with('#')) {
                match &id {
                    Some(u) => push(r, Base::Url(u), &mut files, &mut urls),
                    None => push(r, Base::File(&fdir), &mut files, &mut urls),
                }
            }
        } else if let Some(u) = urls.pop_front() {
            if !done_urls.insert(u.clone()) {
                continue;
            }
            let Some(p) = ids.get(&u) else {
                found.unresolved.insert(u);
                continue;
            };
            record(&mut pairs, &u, p);
            let Some(v) = read(p) else { continue };
            let Ok(base) = url::Url::parse(&u) else {
                continue;
            };
            let mut rs = Vec::new();
            refs(&v, &mut rs);
            for r in rs {
                if !r.starts_with('#') {
                    push(&r, Base::Url(&base), &mut files, &mut urls);
                }
            }
        } else {
            break;
        }
    }
    // A folder prefix laid out below a shorter one exactly as its URL is adds nothing.
    let folders: Vec<(String, PathBuf)> = pairs
        .iter()
        .filter(|(u, _)| u.ends_with('/'))
        .map(|(u, d)| (u.clone(), d.clone()))
        .collect();
    pairs.retain(|u, d| {
        !folders.iter().any(|(q, e)| {
            u.len() > q.len() && u.starts_with(q.as_str()) && *d == e.join(&u[q.len()..])
        })
    });
    let mut prefixes: Vec<(String, PathBuf)> = pairs.into_iter().collect();
    // Longest first: the more specific prefix is the one meant.
    prefixes.sort_by(|a, b| b.0.len().cmp(&a.0.len()).then(a.0.cmp(&b.0)));
    found.prefixes = prefixes;
    found
}

/// `url` is served by `file`: its folder for the URL's folder when the names agree, else
/// the one URL for the one file.
fn record(pairs: &mut BTreeMap<String, PathBuf>, url: &str, file: &Path) {
    let url = without_fragment(url);
    let Some(cut) = url.rfind('/') else { return };
    let name = file.file_name().and_then(|n| n.to_str()).unwrap_or("");
    if url[cut + 1..] == *name {
        let dir = file.parent().unwrap_or(Path::new(".")).to_path_buf();
        pairs.entry(url[..=cut].to_string()).or_insert(dir);
    } else {
        pairs.entry(url.to_string()).or_insert(file.to_path_buf());
    }
}

/// `to` written relative to the folder `from` (both made absolute first); `to` as given when
/// they share no root.
pub fn relative(from: &Path, to: &Path) -> String {
    let abs = |p: &Path| {
        std::fs::canonicalize(p).unwrap_or_else(|_| {
            std::env::current_dir()
                .map(|d| d.join(p))
                .unwrap_or_else(|_| p.to_path_buf())
        })
    };
    let (from, to) = (abs(from), abs(to));
    let a: Vec<_> = from.components().collect();
    let b: Vec<_> = to.components().collect();
    let common = a.iter().zip(&b).take_while(|(x, y)| x == y).count();
    if common == 0 {
        return to.display().to_string();
    }
    let mut out = PathBuf::new();
    for _ in common..a.len() {
        out.push("..");
    }
    for c in &b[common..] {
        out.push(c);
    }
    let s = out.display().to_string().replace('\\', "/");
    if s.is_empty() { ".".into() } else { s }
}
