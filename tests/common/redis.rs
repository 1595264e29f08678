//! A private `redis-server` per test on 127.0.0.1 (nothing kept on disk), for the tests of
//! shared state. It never reuses a server another test started: a port is taken only once
//! `redis-server` itself answers `PING` on it.

use std::io::{Read, Write};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

pub struct Redis {
    child: Child,
    port: u16,
}

impl Redis {
    /// A server on a free port. A port freed a moment ago can be taken by a parallel test
    /// before `redis-server` binds it (the server then exits, and something else answers):
    /// such a start is retried on another port.
    pub fn start() -> Redis {
        for _ in 0..5 {
            let port = std::net::TcpListener::bind("127.0.0.1:0")
                .and_then(|l| l.local_addr())
                .map(|a| a.port())
                .expect("a free port");
            if let Some(redis) = Self::try_on(port) {
                return redis;
            }
        }
        panic!("redis-server did not start on any of five free ports");
    }

    /// A server on `port` (a restart on the address a stopped one had).
    pub fn on(port: u16) -> Redis {
        Self::try_on(port).unwrap_or_else(|| panic!("redis-server did not start on port {port}"))
    }

    fn try_on(port: u16) -> Option<Redis> {
        let child = Command::new("redis-server")
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no"])
            .stdout(Stdio::null())
            .spawn()
            .expect("redis-server must be installed (Debian package redis-server)");
        let mut redis = Redis { child, port };
        for _ in 0..200 {
            // Exited: it could not bind the port.
            if !matches!(redis.child.try_wait(), Ok(None)) {
                return None;
            }
            if pong(port) {
                return Some(redis);
            }
            std::thread::sleep(Duration::from_millis(25));
        }
        None
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    /// Stops the server; its port, for [`Redis::on`].
    pub fn stop(self) -> u16 {
        self.port
    }
}

/// Whether a Redis server answers `PING` on `port`.
fn pong(port: u16) -> bool {
    let Ok(mut s) = std::net::TcpStream::connect(("127.0.0.1", port)) else {
        return false;
    };
    let _ = s.set_read_timeout(Some(Duration::from_secs(1)));
    let mut buf = [0u8; 7];
    s.write_all(b"PING\r\n").is_ok() && s.read_exact(&mut buf).is_ok() && &buf == b"+PONG\r\n"
}

impl Drop for Redis {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
