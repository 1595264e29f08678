//! Pairing a protocol's OpenRPC methods with a backend's OpenAPI operations: by declared links
//! (`Maps to POST /x`, `x-` fields), by name, by path words and by schema overlap. Pure: it
//! reads parsed documents and never writes, guesses a pairing it cannot justify, or panics.

use serde_json::Value;
use std::collections::BTreeSet;

/// What pairing needs to know of one backend operation.
#[derive(Debug, Clone, Default)]
pub struct Operation {
    /// Upper case: `GET`, `POST`, ...
    pub method: String,
    pub path: String,
    pub id: Option<String>,
    /// Path placeholders, in template order.
    pub path_params: Vec<String>,
    /// Query and header parameter names (credential ones left out).
    pub query: Vec<String>,
    pub headers: Vec<String>,
    /// File names or component names the request body schema refers to (`checkout.json`).
    pub body_refs: BTreeSet<String>,
    /// `x-` string values of the operation (a declared method name).
    pub links: Vec<String>,
}

impl Operation {
    /// `POST /path (operationId)`.
    pub fn label(&self) -> String {
        match &self.id {
            Some(id) => format!("{} {} ({id})", self.method, self.path),
            None => format!("{} {}", self.method, self.path),
        }
    }
}

/// What pairing needs to know of one OpenRPC method.
#[derive(Debug, Clone, Default)]
pub struct Method {
    pub name: String,
    /// Summary and description.
    pub text: String,
    /// Param name -> file or component names its schema refers to.
    pub params: Vec<(String, BTreeSet<String>)>,
    /// `x-` string values of the method.
    pub links: Vec<String>,
}

/// One operation considered for a method.
#[derive(Debug, Clone)]
pub struct Candidate {
    pub op: usize,
    pub score: i32,
    pub why: Vec<String>,
    /// Something speaks for it (a declared link, its name, shared words or schemas).
    pub evidence: bool,
}

/// The outcome for one method.
#[derive(Debug, Clone)]
pub enum Outcome {
    Paired {
        op: usize,
        why: String,
    },
    Todo {
        reason: String,
        candidates: Vec<Candidate>,
    },
}

/// A score from which a pairing is made (a declared link or the same name reach it alone).
pub const PAIR_AT: i32 = 60;
/// A runner-up this close to the best makes the choice ambiguous (unless declared).
const MARGIN: i32 = 10;
const DECLARED: i32 = 100;

const VERBS: [&str; 5] = ["GET", "POST", "PUT", "PATCH", "DELETE"];

/// `METHOD /path` pairs named in free text (`Maps to POST /services/list.`).
pub fn declared_routes(text: &str) -> Vec<(String, String)> {
    let words: Vec<&str> = text.split_whitespace().collect();
    let mut out = Vec::new();
    for w in words.windows(2) {
        let verb = w[0].trim_start_matches(['(', '`', '"']);
        if VERBS.contains(&verb) && w[1].starts_with('/') {
            let path = w[1].trim_end_matches(['.', ',', ';', ':', ')', '`', '"']);
            out.push((verb.to_string(), path.to_string()));
        }
    }
    out
}

/// Lower-case words of an identifier or path (`usp_bookings_get`, `getBooking`, `/bookings/{id}`);
/// placeholders are left out and plurals folded.
pub fn words(s: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut cur = String::new();
    let mut depth = 0;
    let mut prev_lower = false;
    let flush = |cur: &mut String, out: &mut BTreeSet<String>| {
        if !cur.is_empty() {
            out.insert(stem(cur));
            cur.clear();
        }
    };
    for c in s.chars() {
        match c {
            '{' => {
                flush(&mut cur, &mut out);
                depth += 1;
            }
            '}' => depth -= 1,
            _ if depth > 0 => {}
            c if c.is_ascii_alphanumeric() => {
                if c.is_ascii_uppercase() && prev_lower {
                    flush(&mut cur, &mut out);
                }
                prev_lower = c.is_ascii_lowercase() || c.is_ascii_digit();
                cur.push(c.to_ascii_lowercase());
            }
            _ => {
                flush(&mut cur, &mut out);
                prev_lower = false;
            }
        }
    }
    flush(&mut cur, &mut out);
    out
}

fn stem(w: &str) -> String {
    if w.len() > 5 && w.ends_with("sses") {
        w[..w.len() - 2].to_string()
    } else if w.len() > 3 && w.ends_with("ies") {
        format!("{}y", &w[..w.len() - 3])
    } else if w.len() > 3 && w.ends_with('s') && !w.ends_with("ss") {
        w[..w.len() - 1].to_string()
    } else {
        w.to_string()
    }
}

fn squash(s: &str) -> String {
    s.chars()
        .filter(char::is_ascii_alphanumeric)
        .map(|c| c.to_ascii_lowercase())
        .collect()
}

/// A word every method name starts with (`usp` in `usp_bookings_get`): no evidence of a pair.
pub fn common_prefix(methods: &[Method]) -> Option<String> {
    let first = methods.first()?.name.split(['_', '.', '-']).next()?;
    (methods.len() > 1
        && methods.iter().all(|m| {
            m.name.split(['_', '.', '-']).next() == Some(first) && m.name.len() > first.len()
        }))
    .then(|| first.to_ascii_lowercase())
}

/// How well `op` fits `m`, and why.
pub fn score(m: &Method, op: &Operation, prefix: Option<&str>) -> Candidate {
    let mut s = 0;
    let mut why = Vec::new();
    let mut evidence = false;
    let declared = declared_routes(&m.text);
    if declared
        .iter()
        .any(|(v, p)| *v == op.method && *p == op.path)
    {
        s += DECLARED;
        evidence = true;
        why.push(format!("its description says `{} {}`", op.method, op.path));
    } else if m
        .links
        .iter()
        .any(|l| op.id.as_deref() == Some(l.as_str()) || *l == format!("{} {}", op.method, op.path))
        || op.links.contains(&m.name)
    {
        s += DECLARED;
        evidence = true;
        why.push("declared by an `x-` field".into());
    } else if !declared.is_empty() {
        s -= 30;
        why.push("its description names another route".into());
    }
    if op
        .id
        .as_deref()
        .is_some_and(|id| squash(id) == squash(&m.name))
    {
        s += 80;
        evidence = true;
        why.push("same name as the operationId".into());
    } else {
        let mut mw = words(&m.name);
        if let Some(p) = prefix {
            mw.remove(p);
        }
        let mut ow = words(op.id.as_deref().unwrap_or(""));
        ow.extend(words(&op.path));
        let common: Vec<&String> = mw.intersection(&ow).collect();
        if !mw.is_empty() && !common.is_empty() {
            let all = mw.union(&ow).count().max(1) as i32;
            s += 65 * common.len() as i32 / all;
            evidence = true;
            why.push(format!(
                "words in common: {}",
                common
                    .iter()
                    .map(|w| w.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
    }
    let params: BTreeSet<&str> = m.params.iter().map(|(n, _)| n.as_str()).collect();
    let missing: Vec<&String> = op
        .path_params
        .iter()
        .filter(|p| !params.contains(p.as_str()))
        .collect();
    if !missing.is_empty() {
        s -= 50;
        why.push(format!(
            "path placeholder(s) {} are not params of the method",
            missing
                .iter()
                .map(|p| format!("`{{{p}}}`"))
                .collect::<Vec<_>>()
                .join(", ")
        ));
    } else if !op.path_params.is_empty() {
        s += 5;
    }
    if let Some(p) = body_param(m, op) {
        s += 20;
        evidence = true;
        why.push(format!("the request body's schema is param `{p}`'s"));
    }
    Candidate {
        op: 0,
        score: s,
        why,
        evidence,
    }
}

/// The one method param whose schema is the request body's, when there is exactly one.
pub fn body_param<'m>(m: &'m Method, op: &Operation) -> Option<&'m str> {
    if op.body_refs.is_empty() {
        return None;
    }
    let hits: Vec<&str> = m
        .params
        .iter()
        .filter(|(_, refs)| refs.iter().any(|r| op.body_refs.contains(r)))
        .map(|(n, _)| n.as_str())
        .collect();
    (hits.len() == 1).then(|| hits[0])
}

/// Pairs every method with at most one operation and every operation with at most one method.
pub fn pair(methods: &[Method], ops: &[Operation]) -> Vec<Outcome> {
    let prefix = common_prefix(methods);
    let ranked: Vec<Vec<Candidate>> = methods
        .iter()
        .map(|m| {
            let mut c: Vec<Candidate> = ops
                .iter()
                .enumerate()
                .map(|(i, op)| Candidate {
                    op: i,
                    ..score(m, op, prefix.as_deref())
                })
                .filter(|c| c.evidence)
                .collect();
            c.sort_by(|a, b| b.score.cmp(&a.score).then(a.op.cmp(&b.op)));
            c
        })
        .collect();
    // Strongest first, so a weak guess never takes an operation a declared link names.
    let mut order: Vec<usize> = (0..methods.len()).collect();
    order.sort_by_key(|&i| std::cmp::Reverse(ranked[i].first().map_or(0, |c| c.score)));
    let mut taken: Vec<Option<usize>> = vec![None; ops.len()];
    let mut out: Vec<Option<Outcome>> = vec![None; methods.len()];
    for i in order {
        let free: Vec<&Candidate> = ranked[i].iter().filter(|c| taken[c.op].is_none()).collect();
        let top3 = || ranked[i].iter().take(3).cloned().collect::<Vec<_>>();
        let outcome = match free.first() {
            None if ranked[i].is_empty() => Outcome::Todo {
                reason: declared_reason(&methods[i])
                    .unwrap_or_else(|| "no operation shares its name, words or schemas".into()),
                candidates: Vec::new(),
            },
            None => Outcome::Todo {
                reason: declared_reason(&methods[i]).unwrap_or_else(|| {
                    format!(
                        "its candidates are paired with other methods ({})",
                        ranked[i]
                            .iter()
                            .take(3)
                            .filter_map(|c| taken[c.op].map(|t| methods[t].name.clone()))
                            .collect::<Vec<_>>()
                            .join(", ")
                    )
                }),
                candidates: top3(),
            },
            Some(best) if best.score < PAIR_AT => Outcome::Todo {
                reason: declared_reason(&methods[i]).unwrap_or_else(|| {
                    format!(
                        "no operation scored {PAIR_AT} or more (best: {})",
                        best.score
                    )
                }),
                candidates: top3(),
            },
            Some(best)
                if best.score < DECLARED
                    && free.get(1).is_some_and(|n| best.score - n.score < MARGIN) =>
            {
                Outcome::Todo {
                    reason: "two operations fit about as well".into(),
                    candidates: top3(),
                }
            }
            Some(best) => {
                taken[best.op] = Some(i);
                Outcome::Paired {
                    op: best.op,
                    why: best.why.join("; "),
                }
            }
        };
        out[i] = Some(outcome);
    }
    out.into_iter()
        .map(|o| {
            o.unwrap_or(Outcome::Todo {
                reason: "not considered".into(),
                candidates: Vec::new(),
            })
        })
        .collect()
}

/// "its description names GET /x, which the backend document does not have".
fn declared_reason(m: &Method) -> Option<String> {
    let routes = declared_routes(&m.text);
    (!routes.is_empty()).then(|| {
        format!(
            "its description names {}, which the backend document does not have (or --include/--exclude left out)",
            routes
                .iter()
                .map(|(v, p)| format!("`{v} {p}`"))
                .collect::<Vec<_>>()
                .join(", ")
        )
    })
}

/// `x-` string values (direct members only) of an OpenRPC method or OpenAPI operation.
pub fn x_strings(v: &Value) -> Vec<String> {
    v.as_object()
        .map(|o| {
            o.iter()
                .filter(|(k, _)| k.starts_with("x-"))
                .filter_map(|(_, v)| v.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn op(method: &str, path: &str, id: &str) -> Operation {
        Operation {
            method: method.into(),
            path: path.into(),
            id: Some(id.into()),
            path_params: words_in_braces(path),
            ..Default::default()
        }
    }

    fn words_in_braces(path: &str) -> Vec<String> {
        path.split('{')
            .skip(1)
            .filter_map(|s| s.split('}').next())
            .map(str::to_string)
            .collect()
    }

    fn method(name: &str, text: &str, params: &[&str]) -> Method {
        Method {
            name: name.into(),
            text: text.into(),
            params: params
                .iter()
                .map(|p| (p.to_string(), BTreeSet::new()))
                .collect(),
            links: Vec::new(),
        }
    }

    #[test]
    fn words_split_identifiers_and_paths() {
        let w: Vec<String> = words("getBookingSessions").into_iter().collect();
        assert_eq!(w, ["booking", "get", "session"]);
        let w: Vec<String> = words("/registry/businesses/{id}/search_services")
            .into_iter()
            .collect();
        assert_eq!(w, ["business", "registry", "search", "service"]);
    }

    #[test]
    fn a_declared_route_wins_over_names() {
        let ops = [
            op("GET", "/bookings/{booking_id}", "getBooking"),
            op("POST", "/bookings", "createBooking"),
        ];
        let ms = [
            method(
                "usp_bookings_get",
                "Maps to GET /bookings/{booking_id}.",
                &["booking_id"],
            ),
            method("usp_bookings_create", "Maps to POST /bookings.", &[]),
        ];
        let out = pair(&ms, &ops);
        assert!(matches!(out[0], Outcome::Paired { op: 0, .. }), "{out:?}");
        assert!(matches!(out[1], Outcome::Paired { op: 1, .. }), "{out:?}");
    }

    #[test]
    fn a_missing_route_is_a_todo_naming_it() {
        let ops = [op("GET", "/waitlist/{entry_id}", "getWaitlistEntry")];
        let ms = [method(
            "usp_bookings_get",
            "Maps to GET /bookings/{booking_id}.",
            &["booking_id"],
        )];
        match &pair(&ms, &ops)[0] {
            Outcome::Todo { reason, .. } => {
                assert!(reason.contains("`GET /bookings/{booking_id}`"), "{reason}")
            }
            o => panic!("paired: {o:?}"),
        }
    }

    #[test]
    fn two_equal_fits_are_ambiguous_not_guessed() {
        let ops = [
            op("GET", "/pets", "listPets"),
            op("POST", "/pets/list", "list_pets"),
        ];
        let ms = [method("list_pets", "", &[])];
        match &pair(&ms, &ops)[0] {
            Outcome::Todo { reason, candidates } => {
                assert_eq!(reason, "two operations fit about as well");
                assert_eq!(candidates.len(), 2);
            }
            o => panic!("paired: {o:?}"),
        }
    }
}
