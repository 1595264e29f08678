//! The security layer's stores in Redis (`--state`): identity bindings, the proof `jti` replay cache, issued booking-scoped credentials, proof nonces and booking owners, shared by every replica.
//! Every Redis failure fails closed (a conflict, a replay, an unknown credential, an invalid nonce, no owner), and no credential value is ever stored as a key or logged.

use super::Shared;
use crate::auth::store::{
    Bound, CredentialStore, Fut, IdentityStore, Issued, JTI_TTL, NONCE_TTL, NonceStore,
    OWNED_LISTED, OWNER_IDLE, OwnerStore, ReplayCache, Stores,
};
use serde_json::{Value, json};
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

/// How long an identity binding outlives its last use (as in memory).
const IDENTITY_IDLE: Duration = Duration::from_secs(90 * 24 * 3600);

/// Stores backed by `state`.
pub fn stores(state: &'static Arc<Shared>) -> Stores {
    Stores {
        identities: Arc::new(RedisIdentities(state)),
        replay: Arc::new(RedisReplay(state)),
        credentials: Arc::new(RedisCredentials(state)),
        nonces: Arc::new(RedisNonces(state)),
        owners: Arc::new(RedisOwners(state)),
    }
}

/// Runs `op` in a task of its own, started now (the Redis client's futures are not `Sync`, the
/// traits' are); `closed` is the answer when the task cannot finish.
fn run<T: Send + Sync + 'static>(
    closed: T,
    op: impl Future<Output = T> + Send + 'static,
) -> Fut<'static, T> {
    let task = tokio::spawn(op);
    Box::pin(async move { task.await.unwrap_or(closed) })
}

fn id(parts: &[&str]) -> String {
    super::idempotency::hex_id(&parts.join("\u{0}"))
}

const BIND: &str = r#"
local cur = redis.call('GET', KEYS[1])
if not cur then redis.call('SET', KEYS[1], ARGV[1], 'EX', ARGV[2]) return 0 end
redis.call('EXPIRE', KEYS[1], ARGV[2])
if cur == ARGV[1] then return 1 end
return 2
"#;

struct RedisIdentities(&'static Arc<Shared>);

impl IdentityStore for RedisIdentities {
    fn bind<'a>(
        &'a self,
        business: &'a str,
        principal: &'a str,
        profile: &'a str,
    ) -> Fut<'a, Bound> {
        let state = self.0;
        let key = state.key(&format!("ident:{}", id(&[business, principal])));
        let profile = profile.to_string();
        run(Bound::Conflict, async move {
            let mut c = state.conn();
            let r: Result<i64, _> = redis::Script::new(BIND)
                .key(key)
                .arg(profile)
                .arg(IDENTITY_IDLE.as_secs())
                .invoke_async(&mut c)
                .await;
            match r {
                Ok(0) => {
                    state.ok();
                    Bound::New
                }
                Ok(1) => {
                    state.ok();
                    Bound::Same
                }
                Ok(_) => {
                    state.ok();
                    Bound::Conflict
                }
                Err(e) => {
                    tracing::warn!(error = %state.err(e), "identity binding unavailable; refusing");
                    Bound::Conflict
                }
            }
        })
    }
}

/// `SET key 1 NX EX ttl`: true when the key was new.
async fn set_new(state: &Shared, key: String, ttl: Duration) -> Result<bool, super::StateError> {
    let mut cmd = redis::cmd("SET");
    cmd.arg(key)
        .arg(1)
        .arg("NX")
        .arg("EX")
        .arg(ttl.as_secs().max(1));
    let set: Option<String> = state.query(&cmd).await?;
    Ok(set.is_some())
}

struct RedisReplay(&'static Arc<Shared>);

impl ReplayCache for RedisReplay {
    fn first_use<'a>(&'a self, business: &'a str, jti: &'a str) -> Fut<'a, bool> {
        let state = self.0;
        let key = state.key(&format!("jti:{}", id(&[business, jti])));
        run(false, async move {
            match set_new(state, key, JTI_TTL * 2).await {
                Ok(fresh) => fresh,
                Err(e) => {
                    tracing::warn!(error = %e, "proof replay cache unavailable; refusing the proof");
                    false
                }
            }
        })
    }
}

fn now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0)
}

fn issued_json(i: &Issued) -> String {
    json!({
        "business": i.business, "resource": i.resource, "scope": i.scope, "jkt": i.jkt,
        "expires_at": i.expires_at, "principal": i.principal,
    })
    .to_string()
}

fn issued_from(text: &str) -> Option<Issued> {
    let v: Value = serde_json::from_str(text).ok()?;
    Some(Issued {
        business: v.get("business")?.as_str()?.to_string(),
        resource: v.get("resource")?.as_str()?.to_string(),
        scope: v
            .get("scope")?
            .as_array()?
            .iter()
            .map(|s| s.as_str().map(str::to_string))
            .collect::<Option<Vec<_>>>()?,
        jkt: v.get("jkt").and_then(Value::as_str).map(str::to_string),
        expires_at: v.get("expires_at")?.as_i64()?,
        principal: v.get("principal")?.as_str()?.to_string(),
    })
}

struct RedisCredentials(&'static Arc<Shared>);

impl CredentialStore for RedisCredentials {
    fn put<'a>(&'a self, value: &'a str, issued: Issued) -> Fut<'a, ()> {
        let state = self.0;
        // The key is a digest of the credential: Redis never holds a usable value.
        let key = state.key(&format!("cred:{}", id(&[value])));
        let ttl = (issued.expires_at - now()).max(1) as u64;
        let text = issued_json(&issued);
        run((), async move {
            let mut cmd = redis::cmd("SET");
            cmd.arg(key).arg(text).arg("EX").arg(ttl);
            if let Err(e) = state.query::<()>(&cmd).await {
                tracing::warn!(error = %e, "cannot record an issued credential; it will be refused");
            }
        })
    }

    fn get<'a>(&'a self, value: &'a str) -> Fut<'a, Option<Issued>> {
        let state = self.0;
        let key = state.key(&format!("cred:{}", id(&[value])));
        run(None, async move {
            match state
                .query::<Option<String>>(redis::cmd("GET").arg(key))
                .await
            {
                Ok(found) => found.as_deref().and_then(issued_from),
                Err(e) => {
                    tracing::warn!(error = %e, "credential store unavailable; treating the credential as absent");
                    None
                }
            }
        })
    }
}

struct RedisNonces(&'static Arc<Shared>);

impl NonceStore for RedisNonces {
    fn issue<'a>(&'a self, business: &'a str) -> Fut<'a, String> {
        let state = self.0;
        let nonce = uuid::Uuid::new_v4().simple().to_string();
        let key = state.key(&format!("nonce:{}", id(&[business, &nonce])));
        run(nonce.clone(), async move {
            if let Err(e) = set_new(state, key, NONCE_TTL).await {
                // The nonce is still handed out; a proof carrying it is refused as invalid.
                tracing::warn!(error = %e, "cannot record a proof nonce");
            }
            nonce
        })
    }

    fn valid<'a>(&'a self, business: &'a str, nonce: &'a str) -> Fut<'a, bool> {
        let state = self.0;
        let key = state.key(&format!("nonce:{}", id(&[business, nonce])));
        run(false, async move {
            match state.query::<i64>(redis::cmd("EXISTS").arg(key)).await {
                Ok(n) => n > 0,
                Err(e) => {
                    tracing::warn!(error = %e, "nonce store unavailable; refusing the nonce");
                    false
                }
            }
        })
    }
}

/// Records an owner: the resource's owner set and the principal's newest-first list.
const OWN: &str = r#"
redis.call('SADD', KEYS[1], ARGV[1])
redis.call('EXPIRE', KEYS[1], ARGV[3])
redis.call('LREM', KEYS[2], 0, ARGV[2])
redis.call('LPUSH', KEYS[2], ARGV[2])
redis.call('LTRIM', KEYS[2], 0, ARGV[4] - 1)
redis.call('EXPIRE', KEYS[2], ARGV[3])
return 1
"#;

struct RedisOwners(&'static Arc<Shared>);

impl RedisOwners {
    fn resource_key(&self, business: &str, resource: &str) -> String {
        self.0.key(&format!("owners:{}", id(&[business, resource])))
    }
}

impl OwnerStore for RedisOwners {
    fn record<'a>(
        &'a self,
        business: &'a str,
        resource: &'a str,
        principal: &'a str,
    ) -> Fut<'a, ()> {
        let state = self.0;
        let owners = self.resource_key(business, resource);
        let owned = state.key(&format!("owned:{}", id(&[business, principal])));
        let (principal, resource) = (principal.to_string(), resource.to_string());
        run((), async move {
            let mut c = state.conn();
            let r: Result<i64, _> = redis::Script::new(OWN)
                .key(owners)
                .key(owned)
                .arg(principal)
                .arg(resource)
                .arg(OWNER_IDLE.as_secs())
                .arg(OWNED_LISTED)
                .invoke_async(&mut c)
                .await;
            match r {
                Ok(_) => state.ok(),
                Err(e) => {
                    tracing::warn!(error = %state.err(e), "cannot record a booking's owner; its reads and events will be refused")
                }
            }
        })
    }

    fn owns<'a>(
        &'a self,
        business: &'a str,
        resource: &'a str,
        principal: &'a str,
    ) -> Fut<'a, bool> {
        let state = self.0;
        let key = self.resource_key(business, resource);
        let principal = principal.to_string();
        run(false, async move {
            let mut cmd = redis::cmd("SISMEMBER");
            cmd.arg(key).arg(principal);
            match state.query::<i64>(&cmd).await {
                Ok(n) => n > 0,
                Err(e) => {
                    tracing::warn!(error = %e, "owner store unavailable; refusing the read");
                    false
                }
            }
        })
    }

    fn known<'a>(&'a self, business: &'a str, resource: &'a str) -> Fut<'a, bool> {
        let state = self.0;
        let key = self.resource_key(business, resource);
        run(false, async move {
            state
                .query::<i64>(redis::cmd("EXISTS").arg(key))
                .await
                .is_ok_and(|n| n > 0)
        })
    }

    fn owned<'a>(&'a self, business: &'a str, principal: &'a str) -> Fut<'a, Vec<String>> {
        let state = self.0;
        let key = state.key(&format!("owned:{}", id(&[business, principal])));
        run(Vec::new(), async move {
            let mut cmd = redis::cmd("LRANGE");
            cmd.arg(key).arg(0).arg(OWNED_LISTED.saturating_sub(1));
            state.query::<Vec<String>>(&cmd).await.unwrap_or_default()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn issued_credentials_survive_the_round_trip() {
        let i = Issued {
            business: "spa".into(),
            resource: "B-1".into(),
            scope: vec!["usp_bookings_get".into(), "usp_bookings_cancel".into()],
            jkt: Some("thumb".into()),
            expires_at: 1_900_000_000,
            principal: "agent".into(),
        };
        assert_eq!(issued_from(&issued_json(&i)), Some(i.clone()));
        let unbound = Issued { jkt: None, ..i };
        assert_eq!(issued_from(&issued_json(&unbound)), Some(unbound));
        assert_eq!(issued_from("{}"), None);
    }
}
