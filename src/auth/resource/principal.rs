//! Who a valid MCP access token speaks for (`TokenPrincipal`, `McpPrincipal`) and the
//! `insufficient_scope` challenge built from it: a leaf the request's credentials carry. It
//! never holds any part of a token.

/// Who a valid access token speaks for. It holds no part of the token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenPrincipal {
    pub issuer: String,
    /// `sub`, else `client_id` (a client-credentials token).
    pub subject: String,
    pub client_id: Option<String>,
    pub scopes: Vec<String>,
    /// When the token expires (`exp`, seconds since the epoch).
    pub expires_at: i64,
}

/// Who a request's valid access token speaks for, and where its resource's metadata is. It
/// holds no part of the token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct McpPrincipal {
    pub token: TokenPrincipal,
    /// The resource the token was checked for (its audience).
    pub resource: String,
    /// The URL of the protected resource metadata (for challenges).
    pub resource_metadata: String,
}

impl McpPrincipal {
    /// The stable principal id, as the other OAuth mechanism names it.
    pub fn id(&self) -> String {
        format!("oauth:{}|{}", self.token.issuer, self.token.subject)
    }

    /// The first of `need` this token was not granted.
    pub fn lacks<'a>(&self, need: &'a [String]) -> Option<&'a str> {
        need.iter()
            .find(|s| !self.token.scopes.contains(s))
            .map(String::as_str)
    }

    /// The scopes a client stepping up for `need` asks for: those the token has, then those
    /// it lacks, space-separated.
    pub fn step_up_scope(&self, need: &[String]) -> String {
        let mut all = self.token.scopes.clone();
        for s in need {
            if !all.contains(s) {
                all.push(s.clone());
            }
        }
        all.join(" ")
    }

    /// The `403 insufficient_scope` challenge for `need`: the scopes asked are those the token
    /// has plus those it lacks, so a client that steps up keeps what it had.
    pub fn insufficient_scope(&self, need: &[String]) -> String {
        format!(
            "Bearer error=\"insufficient_scope\", scope=\"{}\", resource_metadata=\"{}\", error_description=\"the token lacks a scope this tool needs\"",
            quoted(&self.step_up_scope(need)),
            quoted(&self.resource_metadata)
        )
    }
}

/// Text safe inside a quoted-string of a header: visible ASCII and space, without `"` and `\`.
pub(crate) fn quoted(s: &str) -> String {
    s.chars()
        .filter(|c| (' '..='~').contains(c) && *c != '"' && *c != '\\')
        .take(200)
        .collect()
}
