//! The client side of one keep-alive backend GET, `upstream::pool` against a pooled `reqwest`
//! client (hyper-util's pool), for counting instructions per request with callgrind.
//!
//! `pool_cost <pool|reqwest> <host:port> <n>` sends `n` GETs for `/` to a backend on 127.0.0.1
//! on one single-threaded runtime, one at a time, and exits non-zero on any answer other than a
//! 200 with a body. Run it under `valgrind --tool=callgrind` for two values of `n`; the
//! difference of the totals over the difference of `n` is the per-request cost, start-up
//! excluded (the steps are in the header of `src/upstream/pool.rs`).

use http::HeaderMap;
use portico::upstream::pool::Pool;
use std::time::Duration;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let [_, mode, addr, n] = args.as_slice() else {
        return Err("usage: pool_cost <pool|reqwest> <host:port> <n>".into());
    };
    let n: usize = n.parse()?;
    let url = format!("http://{addr}/");
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    rt.block_on(async {
        match mode.as_str() {
            "pool" => {
                let pool = Pool::new(addr, Duration::from_secs(2)).ok_or("bad address")?;
                for _ in 0..n {
                    let a = pool
                        .send(http::Method::GET, &url, HeaderMap::new(), None, 1 << 20)
                        .await?;
                    if a.status != http::StatusCode::OK || a.body.is_empty() {
                        return Err(format!("unexpected answer {}", a.status).into());
                    }
                }
            }
            "reqwest" => {
                let client = reqwest::Client::builder()
                    .connect_timeout(Duration::from_secs(2))
                    .redirect(reqwest::redirect::Policy::none())
                    .build()?;
                for _ in 0..n {
                    let r = client.get(&url).send().await?;
                    let status = r.status();
                    let body = r.bytes().await?;
                    if status != reqwest::StatusCode::OK || body.is_empty() {
                        return Err(format!("unexpected answer {status}").into());
                    }
                }
            }
            other => return Err(format!("unknown mode `{other}`").into()),
        }
        Ok::<(), Box<dyn std::error::Error>>(())
    })
}
