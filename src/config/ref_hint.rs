//! "Did you mean" for a `$ref` that did not resolve: the nearest file beside the one it names,
//! or the nearest member where its JSON pointer stopped. It only reads local files the
//! reference already points into; it never fetches anything.

use super::schema::Unresolved;
use serde_json::Value;

/// The reference as it should probably have been written, when a near name exists.
pub fn suggestion(u: &Unresolved) -> Option<String> {
    let base = url::Url::parse(&u.document)
        .ok()
        .filter(|x| x.scheme() == "file")?
        .to_file_path()
        .ok()?;
    let (file_part, fragment) = match u.reference.split_once('#') {
        Some((f, frag)) => (f, Some(frag)),
        None => (u.reference.as_str(), None),
    };
    // The reference as recorded: resolved to an absolute `file:` URI, or as written.
    let (target, file_part) = match url::Url::parse(file_part) {
        Ok(abs) if abs.scheme() == "file" => {
            let target = abs.to_file_path().ok()?;
            let shown = if target == base { "" } else { file_part };
            (target, shown)
        }
        Ok(_) => return None, // remote: never read
        Err(_) if file_part.is_empty() => (base.clone(), ""),
        Err(_) => (base.parent()?.join(file_part), file_part),
    };
    if !target.is_file() {
        // A file that is not there: the nearest file name in the folder it names.
        let name = target.file_name()?.to_str()?.to_string();
        let folder = target.parent()?;
        let names: Vec<String> = std::fs::read_dir(folder)
            .ok()?
            .filter_map(|e| e.ok()?.file_name().into_string().ok())
            .collect();
        let near = crate::util::similar::nearest(&name, names.iter().map(String::as_str))?;
        let fixed = match file_part.rsplit_once('/') {
            Some((parent, _)) => format!("{parent}/{near}"),
            None => near.to_string(),
        };
        return Some(match fragment {
            Some(f) => format!("{fixed}#{f}"),
            None => fixed,
        });
    }
    // The file is there: walk the pointer and offer the nearest member where it stops.
    let pointer = fragment?;
    let text = std::fs::read_to_string(&target).ok()?;
    let doc: Value = serde_json::from_str(&text)
        .or_else(|_| serde_saphyr::from_str(&text))
        .ok()?;
    let mut node = &doc;
    let mut walked = String::new();
    for token in pointer.split('/').skip(1) {
        let key = token.replace("~1", "/").replace("~0", "~");
        match node.get(&key) {
            Some(next) => {
                node = next;
                walked.push('/');
                walked.push_str(token);
            }
            None => {
                let keys = node.as_object()?.keys().map(String::as_str);
                let near = crate::util::similar::nearest(&key, keys)?;
                return Some(format!(
                    "{file_part}#{walked}/{}",
                    near.replace('~', "~0").replace('/', "~1")
                ));
            }
        }
    }
    None
}

/// `hint` with the suggestion appended, when there is one.
pub fn with_suggestion(hint: String, u: &Unresolved) -> String {
    match suggestion(u) {
        Some(s) => format!("did you mean `$ref: {s}`? Otherwise {hint}"),
        None => hint,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn unresolved(dir: &Path, reference: &str) -> Unresolved {
        Unresolved {
            document: url::Url::from_file_path(dir.join("svc.openrpc.json"))
                .unwrap()
                .to_string(),
            pointer: "/methods/0/params/0/schema".into(),
            reference: reference.into(),
            reason: "not found".into(),
        }
    }

    #[test]
    fn near_files_and_members_are_offered() {
        let dir = std::env::temp_dir().join(format!("portico-refhint-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("types")).unwrap();
        std::fs::write(
            dir.join("svc.openrpc.json"),
            r#"{"components": {"schemas": {"Booking": {}, "Service": {}}}}"#,
        )
        .unwrap();
        std::fs::write(
            dir.join("types/buyer.json"),
            r#"{"$defs": {"address": {}}}"#,
        )
        .unwrap();
        let s = |r: &str| suggestion(&unresolved(&dir, r));
        assert_eq!(
            s("#/components/schemas/Bokking").as_deref(),
            Some("#/components/schemas/Booking")
        );
        assert_eq!(s("types/buyr.json").as_deref(), Some("types/buyer.json"));
        assert_eq!(
            s("types/buyer.json#/$defs/adress").as_deref(),
            Some("types/buyer.json#/$defs/address")
        );
        assert_eq!(s("#/components/schemas/Zebra"), None, "nothing near");
        assert_eq!(s("types/nothing-like-it.json"), None);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
