//! The command line the benchmark examples share: listen port, backend URL, static headers.
//! It only parses; it never opens a socket or reads anything but the process arguments.

use http::{HeaderMap, HeaderName, HeaderValue};
use portico::upstream::pool::Pool;
use std::time::Duration;

/// `<listen port> <backend URL> [header: value]...`, and a backend pool for the URL's
/// authority (plain `http://` only).
pub struct Args {
    pub port: u16,
    pub url: String,
    pub headers: HeaderMap,
    pub pool: Pool,
}

pub fn args() -> Result<Args, Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let port: u16 = args.next().ok_or("listen port")?.parse()?;
    let url = args.next().ok_or("backend URL")?;
    let mut headers = HeaderMap::new();
    for h in args {
        let (k, v) = h.split_once(':').ok_or("header: value")?;
        headers.insert(
            HeaderName::try_from(k.trim())?,
            HeaderValue::try_from(v.trim())?,
        );
    }
    let authority = url
        .strip_prefix("http://")
        .and_then(|rest| rest.split('/').next())
        .ok_or("an http:// URL")?;
    let pool = Pool::new(authority, Duration::from_secs(1)).ok_or("authority")?;
    Ok(Args {
        port,
        url,
        headers,
        pool,
    })
}
