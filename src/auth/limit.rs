//! Rate limits per business and per principal: token buckets in a bounded in-memory table,
//! answered as `RateLimited` failures with `retry_after`. It must never hold a lock across an
//! await, or let one caller's bucket drain another's.

use crate::config::diag::{Diagnostic, locate_yaml};
use serde::Deserialize;
use std::path::Path;
use std::sync::{Arc, LazyLock, Mutex};
use std::time::{Duration, Instant};

/// `rate_limits:` in a mapping file.
#[derive(Debug, Clone, Default, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RateLimitsSpec {
    /// All calls to this business's tools together.
    #[serde(default)]
    pub per_business: Option<BucketSpec>,
    /// Each principal (anonymous callers share one bucket).
    #[serde(default)]
    pub per_principal: Option<BucketSpec>,
}

/// A token bucket: `rate` calls per `per`, bursts of up to `burst` (default `rate`).
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct BucketSpec {
    pub rate: u32,
    #[serde(default)]
    pub per: Option<String>,
    #[serde(default)]
    pub burst: Option<u32>,
}

/// A compiled bucket shape.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Shape {
    /// Tokens per second.
    pub refill: f64,
    pub burst: f64,
}

/// A business's compiled limits.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Limits {
    pub business: Option<Shape>,
    pub principal: Option<Shape>,
}

fn shape(s: &BucketSpec, key: &str, file: &Path, text: &str) -> Result<Shape, Diagnostic> {
    let per = match s.per.as_deref() {
        None => Some(Duration::from_secs(1)),
        Some(p) => crate::util::duration::parse_duration(p),
    };
    let err = |m: &str| {
        Diagnostic::error(file, m.to_string())
            .line(locate_yaml(text, &["rate_limits", key]))
            .at(format!("rate_limits.{key}"))
            .hint("write e.g. `{ rate: 10, per: 1s, burst: 20 }`")
    };
    let per = per.ok_or_else(|| err("`per` is not a duration"))?;
    if s.rate == 0 || s.burst == Some(0) {
        return Err(err("`rate` and `burst` must be at least 1"));
    }
    Ok(Shape {
        refill: f64::from(s.rate) / per.as_secs_f64(),
        burst: f64::from(s.burst.unwrap_or(s.rate)),
    })
}

/// Compiles `spec` (the `rate_limits:` section of `file`).
pub fn compile(spec: &RateLimitsSpec, file: &Path, text: &str) -> Result<Limits, Vec<Diagnostic>> {
    let mut diags = Vec::new();
    let mut one = |s: &Option<BucketSpec>, key: &str| {
        s.as_ref()
            .and_then(|s| shape(s, key, file, text).map_err(|d| diags.push(d)).ok())
    };
    let business = one(&spec.per_business, "per_business");
    let principal = one(&spec.per_principal, "per_principal");
    if diags.is_empty() {
        Ok(Limits {
            business,
            principal,
        })
    } else {
        Err(diags)
    }
}

struct Bucket {
    tokens: f64,
    at: Instant,
}

/// Buckets by `business \0 principal` (or `business` alone), idle ones evicted.
static BUCKETS: LazyLock<moka::sync::Cache<String, Arc<Mutex<Bucket>>>> = LazyLock::new(|| {
    moka::sync::Cache::builder()
        .max_capacity(1_000_000)
        .time_to_idle(Duration::from_secs(3600))
        .build()
});

/// Takes one token from `key`'s bucket; `Err(seconds to wait)` when it is empty.
fn take(key: String, s: Shape) -> Result<(), u64> {
    let bucket = BUCKETS.get_with(key, || {
        Arc::new(Mutex::new(Bucket {
            tokens: s.burst,
            at: Instant::now(),
        }))
    });
    let Ok(mut b) = bucket.lock() else {
        return Ok(());
    };
    let now = Instant::now();
    b.tokens = (b.tokens + now.duration_since(b.at).as_secs_f64() * s.refill).min(s.burst);
    b.at = now;
    if b.tokens >= 1.0 {
        b.tokens -= 1.0;
        Ok(())
    } else {
        Err(((1.0 - b.tokens) / s.refill).ceil().max(1.0) as u64)
    }
}

/// Takes one token from the bucket of `key` in `space` (a limit outside the mapping files,
/// e.g. new sessions per client address); `Err(seconds to wait)` when it is empty.
pub fn take_keyed(space: &str, key: &str, s: Shape) -> Result<(), u64> {
    // `\u{1}` starts no business name, so these buckets never meet a business's.
    take(format!("\u{1}{space}\u{0}{key}"), s)
}

/// Admits one call of `principal` (`None`: anonymous) to `business`, or says how long to wait.
pub fn admit(limits: &Limits, business: &str, principal: Option<&str>) -> Result<(), u64> {
    if let Some(s) = limits.business {
        take(business.to_string(), s)?;
    }
    if let Some(s) = limits.principal {
        let who = principal.unwrap_or("anonymous");
        take(format!("{business}\u{0}{who}"), s)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bucket_allows_its_burst_then_says_when_to_retry() {
        let l = Limits {
            business: None,
            principal: Some(Shape {
                refill: 1.0 / 60.0,
                burst: 2.0,
            }),
        };
        let b = format!("t-{}", uuid::Uuid::new_v4());
        assert_eq!(admit(&l, &b, Some("p1")), Ok(()));
        assert_eq!(admit(&l, &b, Some("p1")), Ok(()));
        let wait = admit(&l, &b, Some("p1")).unwrap_err();
        assert!((59..=60).contains(&wait), "{wait}");
        // Another principal has its own bucket.
        assert_eq!(admit(&l, &b, Some("p2")), Ok(()));
    }
}
