//! Fetching documents the security layer needs from other parties (JWK Sets, profiles,
//! authorization server metadata, token introspection answers): https
//! only, no redirects, a size cap, a time limit, and no private, loopback or link-local address
//! unless the host is explicitly allowed. It must never follow a redirect or read an unbounded body.

use futures_util::StreamExt;
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

/// Limits of one fetch.
#[derive(Debug, Clone)]
pub struct Limits {
    pub max_bytes: usize,
    pub timeout: Duration,
    /// Hosts (`127.0.0.1`, `jwks.internal`) that may be plain http and resolve to a private,
    /// loopback or link-local address.
    pub allow_hosts: Vec<String>,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_bytes: 256 * 1024,
            timeout: Duration::from_secs(5),
            allow_hosts: Vec::new(),
        }
    }
}

/// Why a document could not be fetched. Texts carry the URL's host, never credentials.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FetchError {
    #[error("the URL must be https (plain http only for an allowed host)")]
    NotHttps,
    #[error("the URL is not valid")]
    BadUrl,
    #[error("`{0}` resolves to a private, loopback or link-local address")]
    PrivateAddress(String),
    #[error("`{0}` could not be resolved")]
    Unresolvable(String),
    #[error("the server answered with a redirect, which is refused")]
    Redirect,
    #[error("the server answered HTTP {0}")]
    Status(u16),
    #[error("the document is larger than {0} bytes")]
    TooLarge(usize),
    #[error("the fetch took longer than {0:?}")]
    Timeout(Duration),
    #[error("the fetch failed: {0}")]
    Transport(String),
}

/// True for addresses a fetch must not reach unless the host is allowed.
pub fn special_use(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => {
            let o = v4.octets();
            v4.is_private()
                || v4.is_loopback()
                || v4.is_link_local()
                || v4.is_unspecified()
                || v4.is_broadcast()
                || v4.is_multicast()
                || v4.is_documentation()
                || o[0] == 0
                || (o[0] == 100 && (64..128).contains(&o[1]))
                || (o[0] == 192 && o[1] == 0 && o[2] == 0)
                || o[0] >= 240
        }
        IpAddr::V6(v6) => {
            if let Some(v4) = v6.to_ipv4_mapped() {
                return special_use(IpAddr::V4(v4));
            }
            let s = v6.segments();
            v6.is_loopback()
                || v6.is_unspecified()
                || v6.is_multicast()
                || (s[0] & 0xfe00) == 0xfc00
                || (s[0] & 0xffc0) == 0xfe80
                || (s[0] == 0x2001 && s[1] == 0x0db8)
                || (s[0] == 0x64 && s[1] == 0xff9b)
        }
    }
}

fn transport(e: reqwest::Error, limits: &Limits) -> FetchError {
    if e.is_timeout() {
        FetchError::Timeout(limits.timeout)
    } else {
        FetchError::Transport(e.without_url().to_string())
    }
}

/// A URL another party named, checked: where portico may send a request to it.
#[derive(Debug, Clone)]
pub struct Target {
    pub url: url::Url,
    /// The host without IPv6 brackets.
    pub host: String,
    /// The first address the host resolved to, all of which passed the check.
    pub addr: SocketAddr,
}

/// Checks a URL another party named (a JWK Set, a profile, a profile's `webhook_url`): https
/// unless its host is in `limits.allow_hosts`, and resolving only to public addresses unless
/// allowed. One rule for every such URL, so none of them can aim portico at its own network.
pub async fn check_target(url: &str, limits: &Limits) -> Result<Target, FetchError> {
    let u = url::Url::parse(url).map_err(|_| FetchError::BadUrl)?;
    let host = u.host_str().ok_or(FetchError::BadUrl)?.to_string();
    let bare = host
        .trim_start_matches('[')
        .trim_end_matches(']')
        .to_string();
    let allowed = limits.allow_hosts.iter().any(|h| h == &host || h == &bare);
    match u.scheme() {
        "https" => {}
        "http" if allowed => {}
        _ => return Err(FetchError::NotHttps),
    }
    let port = u.port_or_known_default().ok_or(FetchError::BadUrl)?;
    let addrs: Vec<SocketAddr> = tokio::time::timeout(
        limits.timeout,
        tokio::net::lookup_host((bare.as_str(), port)),
    )
    .await
    .map_err(|_| FetchError::Timeout(limits.timeout))?
    .map_err(|_| FetchError::Unresolvable(host.clone()))?
    .collect();
    let Some(addr) = addrs.first().copied() else {
        return Err(FetchError::Unresolvable(host));
    };
    if !allowed && addrs.iter().any(|a| special_use(a.ip())) {
        return Err(FetchError::PrivateAddress(host));
    }
    Ok(Target {
        url: u,
        host: bare,
        addr,
    })
}

/// GETs `url` within `limits`; the body bytes of a 2xx answer.
pub async fn get(url: &str, limits: &Limits) -> Result<Vec<u8>, FetchError> {
    send(url, limits, None).await
}

/// A form POST (`form`: the urlencoded body) with HTTP Basic client authentication, within
/// `limits`: RFC 7662 token introspection.
pub struct Form<'a> {
    pub user: &'a str,
    pub password: &'a str,
    pub body: String,
}

/// POSTs `form` to `url` within `limits`; the body bytes of a 2xx answer.
pub async fn post_form(url: &str, limits: &Limits, form: Form<'_>) -> Result<Vec<u8>, FetchError> {
    send(url, limits, Some(form)).await
}

async fn send(url: &str, limits: &Limits, form: Option<Form<'_>>) -> Result<Vec<u8>, FetchError> {
    let Target {
        url: u,
        host: bare,
        addr,
    } = check_target(url, limits).await?;
    // The connection goes to the address just checked (no second lookup to rebind).
    let client = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .resolve(&bare, addr)
        .timeout(limits.timeout)
        .build()
        .map_err(|e| FetchError::Transport(e.to_string()))?;
    let work = async {
        let req = match form {
            None => client.get(u.clone()),
            Some(f) => client
                .post(u.clone())
                .basic_auth(f.user, Some(f.password))
                .header("content-type", "application/x-www-form-urlencoded")
                .body(f.body),
        };
        let resp = req
            .header("accept", "application/json")
            .send()
            .await
            .map_err(|e| transport(e, limits))?;
        let status = resp.status();
        if status.is_redirection() {
            return Err(FetchError::Redirect);
        }
        if !status.is_success() {
            return Err(FetchError::Status(status.as_u16()));
        }
        if resp
            .content_length()
            .is_some_and(|n| n > limits.max_bytes as u64)
        {
            return Err(FetchError::TooLarge(limits.max_bytes));
        }
        let mut body = Vec::new();
        let mut stream = resp.bytes_stream();
        while let Some(chunk) = stream.next().await {
            let chunk = chunk.map_err(|e| transport(e, limits))?;
            if body.len() + chunk.len() > limits.max_bytes {
                return Err(FetchError::TooLarge(limits.max_bytes));
            }
            body.extend_from_slice(&chunk);
        }
        Ok(body)
    };
    tokio::time::timeout(limits.timeout, work)
        .await
        .map_err(|_| FetchError::Timeout(limits.timeout))?
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn special_use_addresses() {
        for bad in [
            "127.0.0.1",
            "10.1.2.3",
            "172.16.0.1",
            "192.168.1.1",
            "169.254.169.254",
            "0.0.0.0",
            "100.64.0.1",
            "::1",
            "fe80::1",
            "fd00::1",
            "::ffff:127.0.0.1",
            "224.0.0.1",
        ] {
            assert!(special_use(bad.parse().unwrap()), "{bad}");
        }
        for ok in ["93.184.216.34", "2606:4700::1111", "8.8.8.8"] {
            assert!(!special_use(ok.parse().unwrap()), "{ok}");
        }
    }

    #[tokio::test]
    async fn refuses_http_and_private_addresses_unless_allowed() {
        let l = Limits::default();
        assert_eq!(
            get("http://example.com/j", &l).await,
            Err(FetchError::NotHttps)
        );
        assert_eq!(
            get("ftp://example.com/j", &l).await,
            Err(FetchError::NotHttps)
        );
        assert_eq!(
            get("https://127.0.0.1:1/j", &l).await,
            Err(FetchError::PrivateAddress("127.0.0.1".into()))
        );
        assert_eq!(
            get("https://[::1]:1/j", &l).await,
            Err(FetchError::PrivateAddress("[::1]".into()))
        );
    }
}
