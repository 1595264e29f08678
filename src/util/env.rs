//! `${NAME}` substitution from the process environment (secrets named in mapping files).
//! A leaf: it must never import from the rest of the crate, and never log the values it reads.

/// Replaces `${NAME}` with the environment variable; names the missing ones.
pub fn substitute_env(s: &str) -> Result<String, String> {
    let mut out = String::new();
    let mut rest = s;
    while let Some(i) = rest.find("${") {
        out.push_str(&rest[..i]);
        let after = &rest[i + 2..];
        let end = after.find('}').ok_or_else(|| "unclosed `${`".to_string())?;
        let name = &after[..end];
        let value =
            std::env::var(name).map_err(|_| format!("environment variable `{name}` is not set"))?;
        out.push_str(&value);
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn env_substitution_names_missing_variables() {
        // SAFETY: single-threaded use of a variable name unique to this test.
        unsafe { std::env::set_var("PORTICO_TEST_KEY", "s3cret") };
        assert_eq!(
            substitute_env("Bearer ${PORTICO_TEST_KEY}").unwrap(),
            "Bearer s3cret"
        );
        let err = substitute_env("${PORTICO_TEST_NOPE_42}").unwrap_err();
        assert!(err.contains("PORTICO_TEST_NOPE_42"));
    }
}
