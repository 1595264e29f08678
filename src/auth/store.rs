//! The security layer's shared state behind traits: identity bindings (principal <-> profile URI),
//! the proof `jti` replay cache, issued booking-scoped credentials, proof nonces and who owns
//! which booking; bounded
//! in-memory TTL stores by default. It must never grow without bound or hold a lock across an await.
//!
//! The traits return boxed futures so that a shared store (Redis, for several replicas) can
//! implement them without blocking the runtime; the in-memory stores answer at once.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

/// A store operation's future.
pub type Fut<'a, T> = Pin<Box<dyn Future<Output = T> + Send + Sync + 'a>>;

/// What recording a principal's profile URI found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Bound {
    /// First contact: the pairing is now recorded.
    New,
    /// The principal presented the profile it is bound to.
    Same,
    /// The principal is bound to another profile URI.
    Conflict,
}

/// Trust-on-first-use identity binding (USP §10.1.6): principal -> profile URI.
pub trait IdentityStore: Send + Sync {
    fn bind<'a>(
        &'a self,
        business: &'a str,
        principal: &'a str,
        profile: &'a str,
    ) -> Fut<'a, Bound>;
}

/// Proof identifiers seen within the replay window.
pub trait ReplayCache: Send + Sync {
    /// True the first time `jti` is presented (it is recorded); false for a replay.
    fn first_use<'a>(&'a self, business: &'a str, jti: &'a str) -> Fut<'a, bool>;
}

/// A booking-scoped credential portico issued.
#[derive(Clone, PartialEq, Eq)]
pub struct Issued {
    pub business: String,
    /// The resource (booking, waitlist entry, hold) id it authorizes.
    pub resource: String,
    /// Tools it authorizes on that resource.
    pub scope: Vec<String>,
    /// RFC 7638 thumbprint of the key it is bound to (`cnf.jkt`).
    pub jkt: Option<String>,
    /// Unix seconds after which it is refused.
    pub expires_at: i64,
    /// The principal it was issued to (for identity binding).
    pub principal: String,
}

impl std::fmt::Debug for Issued {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Issued")
            .field("business", &self.business)
            .field("resource", &self.resource)
            .field("jkt", &self.jkt)
            .finish_non_exhaustive()
    }
}

/// Issued credentials, looked up by value (the value itself is the key; never logged).
pub trait CredentialStore: Send + Sync {
    fn put<'a>(&'a self, value: &'a str, issued: Issued) -> Fut<'a, ()>;
    fn get<'a>(&'a self, value: &'a str) -> Fut<'a, Option<Issued>>;
}

/// Nonces handed out in `proof_nonce_required` challenges.
pub trait NonceStore: Send + Sync {
    fn issue<'a>(&'a self, business: &'a str) -> Fut<'a, String>;
    /// True when `nonce` was issued for `business` and is still fresh.
    fn valid<'a>(&'a self, business: &'a str, nonce: &'a str) -> Fut<'a, bool>;
}

/// Who owns which booking (or hold, or waitlist entry): the principals whose call created it.
/// Reads and deliveries about a booking go to its owners only (`auth::access`).
pub trait OwnerStore: Send + Sync {
    /// Records `principal` as an owner of `resource`.
    fn record<'a>(
        &'a self,
        business: &'a str,
        resource: &'a str,
        principal: &'a str,
    ) -> Fut<'a, ()>;
    /// True when `principal` owns `resource`.
    fn owns<'a>(
        &'a self,
        business: &'a str,
        resource: &'a str,
        principal: &'a str,
    ) -> Fut<'a, bool>;
    /// True when anyone owns `resource`.
    fn known<'a>(&'a self, business: &'a str, resource: &'a str) -> Fut<'a, bool>;
    /// The newest resources `principal` owns (at most [`OWNED_LISTED`]), newest first.
    fn owned<'a>(&'a self, business: &'a str, principal: &'a str) -> Fut<'a, Vec<String>>;
}

/// The stores every business's policy uses.
#[derive(Clone)]
pub struct Stores {
    pub identities: Arc<dyn IdentityStore>,
    pub replay: Arc<dyn ReplayCache>,
    pub credentials: Arc<dyn CredentialStore>,
    pub nonces: Arc<dyn NonceStore>,
    pub owners: Arc<dyn OwnerStore>,
}

/// Replay window of proofs (USP §10.1.6: `iat` within ±60 s; `jti` kept at least twice that).
pub const JTI_TTL: Duration = Duration::from_secs(300);
/// How long a challenged nonce stays usable.
pub const NONCE_TTL: Duration = Duration::from_secs(300);
/// Most credentials remembered (oldest evicted first; each also expires on its own).
const MAX_CREDENTIALS: u64 = 1_000_000;
/// How long an ownership record outlives its last use (as identity bindings).
pub const OWNER_IDLE: Duration = Duration::from_secs(90 * 24 * 3600);
/// Most resources listed per owner (the newest); older ones stay readable.
pub const OWNED_LISTED: usize = 100;
/// Most owners remembered per resource (a booking has one creator; grants add few).
const OWNERS_PER_RESOURCE: usize = 16;

static STORES: OnceLock<Stores> = OnceLock::new();

/// The process's stores: the in-memory ones unless `install` ran first.
pub fn stores() -> &'static Stores {
    STORES.get_or_init(Stores::memory)
}

/// Installs other stores (a shared backend) before the first call; false if too late.
pub fn install(s: Stores) -> bool {
    STORES.set(s).is_ok()
}

impl Stores {
    /// Bounded in-memory stores for one process.
    pub fn memory() -> Stores {
        Stores {
            identities: Arc::new(MemoryIdentities(
                moka::sync::Cache::builder()
                    .max_capacity(1_000_000)
                    .time_to_idle(Duration::from_secs(90 * 24 * 3600))
                    .build(),
            )),
            replay: Arc::new(MemoryReplay(
                moka::sync::Cache::builder()
                    .max_capacity(1_000_000)
                    .time_to_live(JTI_TTL)
                    .build(),
            )),
            credentials: Arc::new(MemoryCredentials(
                moka::sync::Cache::builder()
                    .max_capacity(MAX_CREDENTIALS)
                    .build(),
            )),
            nonces: Arc::new(MemoryNonces(
                moka::sync::Cache::builder()
                    .max_capacity(100_000)
                    .time_to_live(NONCE_TTL)
                    .build(),
            )),
            owners: Arc::new(MemoryOwners {
                by_resource: moka::sync::Cache::builder()
                    .max_capacity(1_000_000)
                    .time_to_idle(OWNER_IDLE)
                    .build(),
                by_principal: moka::sync::Cache::builder()
                    .max_capacity(1_000_000)
                    .time_to_idle(OWNER_IDLE)
                    .build(),
            }),
        }
    }
}

struct MemoryIdentities(moka::sync::Cache<String, Arc<str>>);

impl IdentityStore for MemoryIdentities {
    fn bind<'a>(
        &'a self,
        business: &'a str,
        principal: &'a str,
        profile: &'a str,
    ) -> Fut<'a, Bound> {
        let key = format!("{business}\u{0}{principal}");
        let mut fresh = false;
        let entry = self
            .0
            .entry(key)
            .or_insert_with(|| {
                fresh = true;
                Arc::from(profile)
            })
            .into_value();
        let out = if fresh {
            Bound::New
        } else if &*entry == profile {
            Bound::Same
        } else {
            Bound::Conflict
        };
        Box::pin(async move { out })
    }
}

struct MemoryReplay(moka::sync::Cache<String, ()>);

impl ReplayCache for MemoryReplay {
    fn first_use<'a>(&'a self, business: &'a str, jti: &'a str) -> Fut<'a, bool> {
        let fresh = self
            .0
            .entry(format!("{business}\u{0}{jti}"))
            .or_insert(())
            .is_fresh();
        Box::pin(async move { fresh })
    }
}

struct MemoryCredentials(moka::sync::Cache<String, Issued>);

impl CredentialStore for MemoryCredentials {
    fn put<'a>(&'a self, value: &'a str, issued: Issued) -> Fut<'a, ()> {
        self.0.insert(value.to_string(), issued);
        Box::pin(async {})
    }

    fn get<'a>(&'a self, value: &'a str) -> Fut<'a, Option<Issued>> {
        let found = self.0.get(value);
        Box::pin(async move { found })
    }
}

struct MemoryNonces(moka::sync::Cache<String, ()>);

impl NonceStore for MemoryNonces {
    fn issue<'a>(&'a self, business: &'a str) -> Fut<'a, String> {
        let nonce = uuid::Uuid::new_v4().simple().to_string();
        self.0.insert(format!("{business}\u{0}{nonce}"), ());
        Box::pin(async move { nonce })
    }

    fn valid<'a>(&'a self, business: &'a str, nonce: &'a str) -> Fut<'a, bool> {
        let ok = self.0.contains_key(&format!("{business}\u{0}{nonce}"));
        Box::pin(async move { ok })
    }
}

type Shared<T> = Arc<std::sync::Mutex<T>>;

struct MemoryOwners {
    /// `business\0resource` -> its owners.
    by_resource: moka::sync::Cache<String, Shared<Vec<String>>>,
    /// `business\0principal` -> what it owns, newest first.
    by_principal: moka::sync::Cache<String, Shared<std::collections::VecDeque<String>>>,
}

impl OwnerStore for MemoryOwners {
    fn record<'a>(
        &'a self,
        business: &'a str,
        resource: &'a str,
        principal: &'a str,
    ) -> Fut<'a, ()> {
        let owners = self
            .by_resource
            .get_with(format!("{business}\u{0}{resource}"), Default::default);
        if let Ok(mut o) = owners.lock()
            && !o.iter().any(|p| p == principal)
        {
            if o.len() >= OWNERS_PER_RESOURCE {
                o.remove(0);
            }
            o.push(principal.to_string());
        }
        let owned = self
            .by_principal
            .get_with(format!("{business}\u{0}{principal}"), Default::default);
        if let Ok(mut o) = owned.lock() {
            o.retain(|r| r != resource);
            o.push_front(resource.to_string());
            o.truncate(OWNED_LISTED);
        }
        Box::pin(async {})
    }

    fn owns<'a>(
        &'a self,
        business: &'a str,
        resource: &'a str,
        principal: &'a str,
    ) -> Fut<'a, bool> {
        let yes = self
            .by_resource
            .get(&format!("{business}\u{0}{resource}"))
            .is_some_and(|o| o.lock().is_ok_and(|o| o.iter().any(|p| p == principal)));
        Box::pin(async move { yes })
    }

    fn known<'a>(&'a self, business: &'a str, resource: &'a str) -> Fut<'a, bool> {
        let yes = self
            .by_resource
            .contains_key(&format!("{business}\u{0}{resource}"));
        Box::pin(async move { yes })
    }

    fn owned<'a>(&'a self, business: &'a str, principal: &'a str) -> Fut<'a, Vec<String>> {
        let list = self
            .by_principal
            .get(&format!("{business}\u{0}{principal}"))
            .and_then(|o| o.lock().ok().map(|o| o.iter().cloned().collect()))
            .unwrap_or_default();
        Box::pin(async move { list })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn bindings_are_first_contact_and_replays_are_caught() {
        let s = Stores::memory();
        assert_eq!(
            s.identities.bind("b", "k1", "https://a/p").await,
            Bound::New
        );
        assert_eq!(
            s.identities.bind("b", "k1", "https://a/p").await,
            Bound::Same
        );
        assert_eq!(
            s.identities.bind("b", "k1", "https://x/p").await,
            Bound::Conflict
        );
        // Many principals may share one profile URI.
        assert_eq!(
            s.identities.bind("b", "k2", "https://a/p").await,
            Bound::New
        );
        assert!(s.replay.first_use("b", "j1").await);
        assert!(!s.replay.first_use("b", "j1").await);
        assert!(s.replay.first_use("other", "j1").await);
        let n = s.nonces.issue("b").await;
        assert!(s.nonces.valid("b", &n).await);
        assert!(!s.nonces.valid("c", &n).await);
    }

    #[tokio::test]
    async fn owners_are_per_business_and_listed_newest_first() {
        let s = Stores::memory();
        assert!(!s.owners.known("b", "B-1").await);
        s.owners.record("b", "B-1", "api_key:a").await;
        s.owners.record("b", "B-2", "api_key:a").await;
        s.owners.record("b", "B-1", "api_key:a").await;
        assert!(s.owners.known("b", "B-1").await);
        assert!(s.owners.owns("b", "B-1", "api_key:a").await);
        assert!(!s.owners.owns("b", "B-1", "api_key:b").await);
        assert!(!s.owners.owns("other", "B-1", "api_key:a").await);
        assert_eq!(s.owners.owned("b", "api_key:a").await, ["B-1", "B-2"]);
        assert!(s.owners.owned("b", "api_key:b").await.is_empty());
    }
}
