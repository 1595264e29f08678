//! Facts about JSON Web Keys (RFC 7517/7518) shared by the modules that check or publish keys.
//! A leaf: it must never import from the rest of the crate, and never hold key material.

/// Private JWK members: a published key set carries public keys only.
pub const PRIVATE_JWK_MEMBERS: [&str; 8] = ["d", "p", "q", "dp", "dq", "qi", "oth", "k"];
