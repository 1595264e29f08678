//! Who may read what: the one authorization decision for every read and every delivery
//! (resources, prompts that embed them, completions, GET streams, `subscriptions/listen`,
//! webhook fan-out) and for the booking a tool call names, from the business's policy, the
//! resource's tier and who owns the booking.
//! It never lets an anonymous caller or another principal see a booking it does not own, and
//! never changes what a business without an `authorization:` section serves.

use super::policy::{Policy, Tier};
use super::store::stores;
use super::transport::{self, HttpCredentials};
use super::{Asked, Grant, Principal, Refusal};
use crate::config::surface::Resource;
use crate::config::{Business, Gateway, Tool};
use crate::model::Call;
use serde_json::{Map, Value};
use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How long an event about a booking nobody owns yet waits for its owner: a backend may send a
/// booking's webhook before the call that created it has answered (and recorded its owner).
pub const OWNER_WAIT: Duration = Duration::from_secs(3);

/// Who is reading, for one business.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Viewer {
    /// The principal id (`api_key:<name>`, `oauth:<iss>|<sub>`, `mtls:...`).
    pub principal: String,
    /// A business principal: sees every resource and event of its business.
    pub business: bool,
    /// A booking-scoped credential: the one resource it was issued for.
    pub only: Option<String>,
}

impl From<Principal> for Viewer {
    fn from(p: Principal) -> Viewer {
        Viewer {
            principal: p.id,
            business: p.business,
            only: p.only,
        }
    }
}

/// The JSON-RPC request a read arrived in (its method and params: what a proof of possession
/// names and covers), and who its credentials were found to be per business, so each business
/// judges them once per request (a proof's `jti` and a signature are accepted only once).
struct Reading {
    method: String,
    params: Value,
    seen: Mutex<HashMap<String, Result<Option<Viewer>, Refusal>>>,
}

tokio::task_local! {
    static READING: Arc<Reading>;
}

/// Runs `f`, the handling of one JSON-RPC request `method` that is not a `tools/call`, so that
/// the reads it decides judge the credentials in its `params` (`_meta.usp.authorization`,
/// `_meta.usp.profile`) and judge each business's credentials once. A plain function returning
/// the wrapper (see `transport::scope`).
pub fn reading<F: Future>(
    method: &str,
    params: Option<Value>,
    f: F,
) -> impl Future<Output = F::Output> {
    let r = Reading {
        method: method.to_string(),
        params: params.unwrap_or(Value::Null),
        seen: Mutex::new(HashMap::new()),
    };
    READING.scope(Arc::new(r), f)
}

/// Who the current read's credentials are for `business` (`Ok(None)`: nothing presented):
/// [`super::authenticate`], the authentication of tool calls, on `http` and, inside
/// [`reading`], on the request's params (proofs name the JSON-RPC method as `usp_m` and cover
/// its params; request signatures find keys from `_meta.usp.profile` or the agent header). A
/// GET stream has no params: its credentials are its headers (a signature included).
pub async fn identify(
    policy: &Policy,
    business: &str,
    http: &HttpCredentials,
) -> Result<Option<Viewer>, Refusal> {
    let reading = READING.try_with(Arc::clone).ok();
    let seen = |r: &Reading| r.seen.lock().ok().and_then(|m| m.get(business).cloned());
    if let Some(known) = reading.as_deref().and_then(seen) {
        return known;
    }
    let (method, params) = match reading.as_deref() {
        Some(r) => (r.method.as_str(), &r.params),
        None => ("", &Value::Null),
    };
    let presented = super::presented_in(Some(policy), params);
    let asked = Asked {
        business,
        method,
        authorization: params.pointer("/_meta/usp/authorization"),
        profile: params.pointer("/_meta/usp/profile").and_then(Value::as_str),
        presented: &presented,
        call: None,
    };
    let found = super::authenticate(policy, &asked, http)
        .await
        .map(|p| p.map(Viewer::from));
    if let Some(r) = &reading
        && let Ok(mut m) = r.seen.lock()
    {
        m.insert(business.to_string(), found.clone());
    }
    found
}

/// The decision: may `viewer` read a resource of `tier` of the business `policy` guards, about
/// the owned resource `subject` (a booking, hold or waitlist entry id) when there is one?
/// Public resources are open; anything else needs a principal (unless the business turned
/// enforcement off); a subject is readable only by a business principal or an owner.
/// `Forbidden` means "not yours" (edges answer it as "not found").
pub async fn decide(
    policy: &Policy,
    business: &str,
    viewer: Option<&Viewer>,
    tier: Tier,
    subject: Option<&str>,
) -> Result<(), Refusal> {
    if tier == Tier::Public {
        return Ok(());
    }
    let Some(v) = viewer else {
        if policy.require {
            let accepted: Vec<&str> = policy.mechanisms.iter().map(|m| m.name()).collect();
            return Err(Refusal::missing(format!(
                "this resource requires authentication (accepted: {})",
                accepted.join(", ")
            )));
        }
        return Ok(());
    };
    let Some(id) = subject else {
        return Ok(());
    };
    if v.business {
        return Ok(());
    }
    let mine = match &v.only {
        Some(only) => only == id && stores().owners.owns(business, id, &v.principal).await,
        None => stores().owners.owns(business, id, &v.principal).await,
    };
    if mine {
        Ok(())
    } else {
        Err(Refusal::forbidden(
            "this resource belongs to another principal",
        ))
    }
}

/// Whether the caller of `call` may name the booking (hold, entry, booking session) `tool` acts
/// on (the policy's `acts_on`): only its owner or a business principal may, under the one
/// decision of [`decide`]. A business without a policy, a tool acting on no booking and
/// a call without a principal (a sandbox's anonymous caller; otherwise already refused) are
/// not checked. `false` is answered as an unknown booking, before any backend call.
pub async fn may_name(tool: &Tool, call: &Call, grant: &Grant) -> bool {
    let Some(policy) = tool.business.auth.as_deref() else {
        return true;
    };
    let (Some(arg), Some(p)) = (policy.acts_on.get(&tool.name), &grant.principal) else {
        return true;
    };
    let id = match call.args.get(arg.as_str()) {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Number(n)) => n.to_string(),
        _ => return true,
    };
    let viewer = Viewer::from(p.clone());
    let business = &tool.business.name;
    let decided = decide(policy, business, Some(&viewer), Tier::Scoped, Some(&id)).await;
    if decided.is_err() {
        tracing::info!(business = %business, tool = %tool.name, principal = %p.id, "a call named a booking that is not the caller's; answered as unknown");
    }
    decided.is_ok()
}

/// [`decide`] for the current request's credentials on a resource of `business` (open when the
/// business has no policy).
pub async fn read(business: &Business, tier: Tier, subject: Option<&str>) -> Result<(), Refusal> {
    let Some(policy) = business.auth.as_deref() else {
        return Ok(());
    };
    let http = transport::current().unwrap_or_default();
    let viewer = identify(policy, &business.name, &http).await?;
    decide(policy, &business.name, viewer.as_ref(), tier, subject).await
}

/// The owned resource a mapped resource's URI variables address (`booking_id`, `entry_id`,
/// `hold_id` or the policy's `resource_args`).
fn subject_of<'v>(policy: &Policy, vars: &'v Map<String, Value>) -> Option<&'v str> {
    policy
        .resource_args()
        .iter()
        .find_map(|n| vars.get(n.as_str()).and_then(Value::as_str))
}

/// [`read`] for a mapped resource (`vars`: its URI template's values).
pub async fn resource(res: &Resource, vars: &Map<String, Value>) -> Result<(), Refusal> {
    let Some(policy) = res.business.auth.as_deref() else {
        return Ok(());
    };
    read(
        &res.business,
        policy.resource_tier(&res.uri),
        subject_of(policy, vars),
    )
    .await
}

/// Who a request (or a stream) is, for every business that has a policy: what lists and
/// deliveries are decided with. A credential a business does not accept makes the caller
/// anonymous there (a stream spans businesses; each judges its own credentials).
#[derive(Debug, Default, Clone)]
pub struct Audience {
    viewers: HashMap<String, Option<Viewer>>,
}

impl Audience {
    /// The audience of `http`'s credentials; `None` when no business has a policy (everything
    /// is open, and nothing needs deciding).
    pub async fn of(g: &Gateway, http: &HttpCredentials) -> Option<Audience> {
        let mut viewers = HashMap::new();
        for b in &g.businesses {
            let Some(policy) = b.auth.as_deref() else {
                continue;
            };
            let v = match identify(policy, &b.name, http).await {
                Ok(v) => v,
                Err(r) => {
                    tracing::debug!(business = %b.name, reason = %r.message, "a read's credential was refused; treated as anonymous");
                    None
                }
            };
            viewers.insert(b.name.clone(), v);
        }
        (!viewers.is_empty()).then_some(Audience { viewers })
    }

    /// The audience of the current request's credentials.
    pub async fn current(g: &Gateway) -> Option<Audience> {
        Audience::of(g, &transport::current().unwrap_or_default()).await
    }

    fn viewer(&self, business: &str) -> Option<&Viewer> {
        self.viewers.get(business).and_then(Option::as_ref)
    }

    /// Whether a resource of `tier` (no subject) may be listed or completed.
    pub fn may_list(&self, business: &Business, tier: Tier) -> bool {
        let Some(policy) = business.auth.as_deref() else {
            return true;
        };
        tier == Tier::Public || !policy.require || self.viewer(&business.name).is_some()
    }

    /// Whether `res` may be listed.
    pub fn lists(&self, res: &Resource) -> bool {
        let tier = res
            .business
            .auth
            .as_deref()
            .map_or(Tier::Public, |p| p.resource_tier(&res.uri));
        self.may_list(&res.business, tier)
    }

    /// The resources of `business` this audience owns, newest first (none for anonymous).
    pub async fn owned(&self, business: &str) -> Vec<String> {
        match self.viewer(business) {
            Some(Viewer { only: Some(r), .. }) => vec![r.clone()],
            Some(v) => stores().owners.owned(business, &v.principal).await,
            None => Vec::new(),
        }
    }

    /// Whether an event of `business` about `subject` (a booking id) reaches this audience.
    /// An event about a booking nobody owns yet waits until [`OWNER_WAIT`] after `at` for its
    /// owner to be recorded.
    pub async fn receives(&self, business: &Business, subject: Option<&str>, at: Instant) -> bool {
        let Some(policy) = business.auth.as_deref() else {
            return true;
        };
        let viewer = self.viewer(&business.name);
        let Some(v) = viewer else {
            // Nothing of a guarded business reaches an anonymous stream (a sandbox aside).
            return !policy.require;
        };
        if v.business {
            return true;
        }
        // An event about no owned resource is the business's own.
        let Some(id) = subject else {
            return false;
        };
        loop {
            let decided = decide(policy, &business.name, viewer, Tier::Scoped, Some(id)).await;
            if decided.is_ok() {
                return true;
            }
            let waited = at.elapsed();
            if waited >= OWNER_WAIT || stores().owners.known(&business.name, id).await {
                return false;
            }
            tokio::time::sleep((OWNER_WAIT - waited).min(Duration::from_millis(100))).await;
        }
    }
}

/// A client stream's delivery check: its audience against the gateway in force.
pub struct StreamGate {
    audience: Audience,
    gateway: Box<dyn Fn() -> Arc<Gateway> + Send + Sync>,
}

impl StreamGate {
    /// The gate of a stream opened with `http`'s credentials; `None` when no business has a
    /// policy. `gateway` loads the configuration in force (reloads apply to open streams).
    pub async fn open(
        gateway: impl Fn() -> Arc<Gateway> + Send + Sync + 'static,
        http: &HttpCredentials,
    ) -> Option<Arc<StreamGate>> {
        let audience = Audience::of(&gateway(), http).await?;
        Some(Arc::new(StreamGate {
            audience,
            gateway: Box::new(gateway),
        }))
    }
}

impl crate::webhook::hub::Gate for StreamGate {
    fn allows<'a>(
        &'a self,
        business: &'a str,
        uri: Option<&'a str>,
        at: Instant,
    ) -> crate::webhook::hub::GateFut<'a> {
        Box::pin(async move {
            let g = (self.gateway)();
            let Some(b) = g.businesses.iter().find(|b| b.name == business) else {
                // A business no longer configured: only an open gateway delivers it.
                return g.businesses.iter().all(|b| b.auth.is_none());
            };
            let subject = uri.and_then(|u| b.webhooks.as_ref().and_then(|w| w.id_of(u)));
            self.audience.receives(b, subject.as_deref(), at).await
        })
    }
}
