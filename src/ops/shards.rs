//! Connection shards: event-loop threads that each run a single-threaded tokio runtime and own
//! the client connections handed to them. It never moves a connection between shards.
//!
//! With a work-stealing runtime a request's task hops between worker threads (the worker that
//! polls the reactor wakes every ready task), so memory allocated on one thread is freed on
//! another and the caches of both see the same objects. A shard keeps a client connection,
//! every request on it and the backend connections those requests use (`upstream::pool` keeps
//! one idle list per shard) on one thread.

use std::cell::Cell;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use tokio::sync::mpsc;

/// The most shards a process runs (per-shard tables are sized by it).
pub const MAX: usize = 64;

thread_local! {
    /// 1 + the index of the shard running on this thread; 0 off the shards.
    static SLOT: Cell<usize> = const { Cell::new(0) };
}

/// One shard per CPU the process may use (at least one).
pub fn per_cpu() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get().min(MAX))
}

/// The per-shard slot of the calling thread: 0 off the shards, `1..=n` on shard `n - 1`.
pub fn slot() -> usize {
    SLOT.with(Cell::get)
}

/// How often each shard's timer wakes it (see [`keep_next_wake_close`]).
pub const TICK: std::time::Duration = std::time::Duration::from_millis(250);

/// Keeps a timer at most [`TICK`] away on the shard's runtime. tokio wakes a runtime's driver
/// (a write to its eventfd, which also ends its next `epoll_wait` at once) whenever a timer is
/// set to fire before the driver's next planned wake-up, which, with no timer pending, is every
/// timer: each call sets a few (the backend deadline, hyper's header-read timeout). Without
/// this tick, 0.41 such writes per call (strace -c of a shard serving the openapi workload at
/// c=4; 0.02 with it). Deadlines further away than the tick are then noticed at the driver's
/// next planned wake-up, as tokio intends; the cost is four wake-ups a second of an idle shard.
async fn keep_next_wake_close() {
    let mut tick = tokio::time::interval(TICK);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
    }
}

/// A job a shard runs: it makes its future on the shard's thread, inside the shard's runtime.
type Job = Box<dyn FnOnce() -> std::pin::Pin<Box<dyn Future<Output = ()> + Send>> + Send>;

/// Handles to the shard threads; dropping every clone ends them once their tasks finish.
#[derive(Clone)]
pub struct Shards {
    senders: Arc<Vec<mpsc::UnboundedSender<Job>>>,
    next: Arc<AtomicUsize>,
}

impl Shards {
    /// Starts `count` shard threads (at least one, at most [`MAX`]).
    pub fn start(count: usize) -> std::io::Result<Shards> {
        let count = count.clamp(1, MAX);
        let mut senders = Vec::with_capacity(count);
        for index in 0..count {
            let (tx, mut rx) = mpsc::unbounded_channel::<Job>();
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()?;
            std::thread::Builder::new()
                .name(format!("portico-shard-{index}"))
                .spawn(move || {
                    SLOT.with(|s| s.set(index + 1));
                    rt.block_on(async move {
                        tokio::spawn(keep_next_wake_close());
                        while let Some(job) = rx.recv().await {
                            tokio::spawn(job());
                        }
                    });
                })?;
            senders.push(tx);
        }
        Ok(Shards {
            senders: Arc::new(senders),
            next: Arc::new(AtomicUsize::new(0)),
        })
    }

    /// Runs `job` on the next shard, round robin. The job is built there (a `TcpStream` must be
    /// registered with the runtime that polls it). False when the shard has ended.
    pub fn run<F, Fut>(&self, job: F) -> bool
    where
        F: FnOnce() -> Fut + Send + 'static,
        Fut: Future<Output = ()> + Send + 'static,
    {
        let at = self.next.fetch_add(1, Ordering::Relaxed) % self.senders.len();
        self.senders[at]
            .send(Box::new(move || Box::pin(job())))
            .is_ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn jobs_run_on_their_shard_threads_round_robin() {
        let shards = Shards::start(2).expect("threads start");
        let (tx, mut rx) = mpsc::unbounded_channel();
        for _ in 0..4 {
            let tx = tx.clone();
            assert!(shards.run(move || async move {
                let _ = tx.send(slot());
            }));
        }
        let mut seen = Vec::new();
        for _ in 0..4 {
            seen.push(rx.recv().await.expect("a job ran"));
        }
        seen.sort();
        assert_eq!(seen, vec![1, 1, 2, 2]);
        assert_eq!(slot(), 0, "the test's own thread is no shard");
    }
}
