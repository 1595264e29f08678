//! Configuration hot reload: polls the configured paths (and every file the configuration read)
//! for content changes, reloads on SIGHUP, recompiles and swaps the gateway atomically. It must
//! never replace a working configuration with a broken one: a failed load is logged, counted
//! and reported, and the previous gateway keeps serving.

use crate::config;
use crate::mcp::handler::Core;
use serde::Serialize;
use std::collections::{BTreeSet, VecDeque};
use std::hash::{DefaultHasher, Hash, Hasher};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// What the reloader last did, for `/readyz`.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct ReloadReport {
    /// Configurations applied since start (the first load is generation 0).
    pub generation: u64,
    /// Refused reload attempts since start.
    pub failures: u64,
    /// Whether the last attempt (if any) was applied.
    pub last_ok: bool,
    /// Seconds since the epoch of the last attempt.
    pub last_attempt_unix: Option<u64>,
    /// Why the last attempt was refused (diagnostics, one per line).
    pub last_error: Option<String>,
}

/// Shared reload status: written by the reloader, read by the admin listener. Not on the
/// request path, so a plain mutex is fine.
#[derive(Debug)]
pub struct ReloadStatus(Mutex<ReloadReport>, Mutex<VecDeque<ReloadEvent>>);

/// One reload attempt, for the status page's history.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct ReloadEvent {
    /// Seconds since the epoch.
    pub at_unix: u64,
    pub applied: bool,
    /// The generation serving after the attempt.
    pub generation: u64,
    /// Why it was refused (first diagnostic line).
    pub error: Option<String>,
}

/// Reload attempts kept for the history.
const HISTORY: usize = 20;

impl Default for ReloadStatus {
    fn default() -> Self {
        ReloadStatus(
            Mutex::new(ReloadReport {
                last_ok: true,
                ..ReloadReport::default()
            }),
            Mutex::new(VecDeque::new()),
        )
    }
}

impl ReloadStatus {
    pub fn report(&self) -> ReloadReport {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// The last reload attempts, newest first.
    pub fn history(&self) -> Vec<ReloadEvent> {
        let h = self.1.lock().unwrap_or_else(PoisonError::into_inner);
        h.iter().rev().cloned().collect()
    }

    /// Records an attempt; `apply` (the swap of a good configuration) runs under the report's
    /// lock, so whoever sees the new configuration and then reads the report sees its
    /// generation too. What `apply` returns (the replaced configuration) is handed back, to
    /// be freed outside the lock.
    fn record<T>(&self, result: Result<(), String>, apply: impl FnOnce() -> T) -> T {
        let mut r = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        let applied = apply();
        r.last_attempt_unix = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .ok()
            .map(|d| d.as_secs());
        let error = result
            .as_ref()
            .err()
            .map(|e| e.lines().next().unwrap_or_default().to_string());
        match result {
            Ok(()) => {
                r.generation += 1;
                r.last_ok = true;
                r.last_error = None;
            }
            Err(e) => {
                r.failures += 1;
                r.last_ok = false;
                r.last_error = Some(e);
            }
        }
        let event = ReloadEvent {
            at_unix: r.last_attempt_unix.unwrap_or(0),
            applied: r.last_ok,
            generation: r.generation,
            error,
        };
        drop(r);
        let mut h = self.1.lock().unwrap_or_else(PoisonError::into_inner);
        if h.len() >= HISTORY {
            h.pop_front();
        }
        h.push_back(event);
        applied
    }
}

/// How long after a configuration job the config thread collects once more: by then the calls
/// that were in flight on the replaced configuration have ended and freed it.
const LATE_COLLECT: Duration = Duration::from_secs(5);

type ConfigJob = Box<dyn FnOnce() + Send>;

/// The one thread every configuration is compiled on (the first load and each reload).
///
/// mimalloc gives each thread its own heap and a configuration lives in the pages of the thread
/// that built it. Built on the blocking pool, each reload's configuration sat in a heap that was
/// abandoned when its short-lived thread exited, and the first one in the heap of the main
/// thread, which never allocates again: when calls on worker threads later freed a replaced
/// configuration, no owner collected those pages, and each reload under load left a step of
/// several MiB in the resident set (docs/reliability.md, "The RSS steps at hot reloads"). This
/// thread lives as long as the process, and collects its heap after each job and once more
/// [`LATE_COLLECT`] later.
fn config_thread() -> Option<&'static Mutex<std::sync::mpsc::Sender<ConfigJob>>> {
    static THREAD: std::sync::OnceLock<Option<Mutex<std::sync::mpsc::Sender<ConfigJob>>>> =
        std::sync::OnceLock::new();
    THREAD
        .get_or_init(|| {
            let (tx, rx) = std::sync::mpsc::channel::<ConfigJob>();
            std::thread::Builder::new()
                .name("portico-config".into())
                .spawn(move || {
                    let mut late = false;
                    loop {
                        let job = if late {
                            rx.recv_timeout(LATE_COLLECT)
                        } else {
                            rx.recv()
                                .map_err(|_| std::sync::mpsc::RecvTimeoutError::Disconnected)
                        };
                        match job {
                            Ok(job) => {
                                // A job that panics (a compiler bug) answers `None` to its
                                // caller; the thread lives on for the next one.
                                let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(job));
                                super::release_freed_memory();
                                // The compiler's code, mapped again by this reload.
                                super::resident::release_code();
                                late = true;
                            }
                            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
                                super::release_freed_memory();
                                late = false;
                            }
                            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => break,
                        }
                    }
                })
                .ok()
                .map(|_| Mutex::new(tx))
        })
        .as_ref()
}

/// Runs `f` on the configuration thread and waits for its result (on the calling thread when
/// that thread cannot be started or is gone). Blocking: call it from `main` or a blocking task.
/// `None` when `f` panicked.
pub fn on_config_thread<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> Option<T> {
    let (tx, rx) = std::sync::mpsc::sync_channel::<T>(1);
    let job: ConfigJob = Box::new(move || {
        let _ = tx.send(f());
    });
    let inline = match config_thread() {
        Some(jobs) => jobs
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .send(job)
            .err()
            .map(|e| e.0),
        None => Some(job),
    };
    if let Some(job) = inline {
        job();
    }
    rx.recv().ok()
}

/// Reloads from `paths` into `core`: applies a good configuration, refuses a broken one.
pub fn reload_now(core: &Core, paths: &[PathBuf], status: &ReloadStatus) -> Result<(), String> {
    match config::load(paths) {
        Ok(g) => {
            for w in &g.warnings {
                tracing::warn!("{w}");
            }
            let tools = g.tools.len();
            let replaced = status.record(Ok(()), || core.gateway.swap(Arc::new(g)));
            drop(replaced);
            tracing::info!(tools, "configuration reloaded");
            super::metrics::reload(true, tools);
            Ok(())
        }
        Err(ds) => {
            let text = ds
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join("\n");
            tracing::error!(diagnostics = %text, "configuration reload refused; the previous configuration keeps serving");
            super::metrics::reload(false, core.gateway.load().tools.len());
            status.record(Err(text.clone()), || {});
            Err(text)
        }
    }
}

/// Fingerprint of everything a reload would read: the mapping files found under `paths` (so
/// added and removed files count) and the contents of those and of `sources`. Contents are
/// read through symlinks, so a Kubernetes ConfigMap `..data` swap changes the fingerprint.
fn fingerprint(paths: &[PathBuf], sources: &[PathBuf]) -> u64 {
    let mut files: BTreeSet<PathBuf> = sources.iter().cloned().collect();
    match config::compile::mapping_files(paths) {
        Ok(found) => files.extend(found),
        Err(_) => files.extend(paths.iter().cloned()),
    }
    let mut h = DefaultHasher::new();
    for f in &files {
        f.hash(&mut h);
        hash_file(f, &mut h);
    }
    h.finish()
}

fn hash_file(path: &Path, h: &mut DefaultHasher) {
    match std::fs::read(path) {
        Ok(bytes) => bytes.hash(h),
        Err(e) => e.kind().to_string().hash(h),
    }
}

/// How the reloader runs.
#[derive(Debug, Clone)]
pub struct Watch {
    /// The paths the configuration was loaded from.
    pub paths: Vec<PathBuf>,
    /// Poll period; `None` disables polling (SIGHUP still reloads if enabled).
    pub interval: Option<Duration>,
    /// Reload on SIGHUP (only one gateway per process should ask for it).
    pub sighup: bool,
}

/// Runs the reloader until the task is aborted.
pub fn spawn(
    core: Arc<Core>,
    watch: Watch,
    status: Arc<ReloadStatus>,
) -> tokio::task::JoinHandle<()> {
    // Registered before returning, so a SIGHUP right after start-up reloads instead of
    // terminating the process (the default action).
    let mut hup = hangups(watch.sighup);
    let sources = |core: &Core| core.gateway.load().sources.clone();
    // Taken now, so a change made right after start-up is still a change.
    let mut seen = fingerprint(&watch.paths, &sources(&core));
    tokio::spawn(async move {
        let period = watch.interval.unwrap_or(Duration::from_secs(3600));
        let mut tick = tokio::time::interval_at(tokio::time::Instant::now() + period, period);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            let forced = tokio::select! {
                _ = tick.tick() => false,
                Some(()) = next_hangup(&mut hup) => true,
            };
            if !forced && watch.interval.is_none() {
                continue;
            }
            let judged_sources = sources(&core);
            let mut judged = fingerprint(&watch.paths, &judged_sources);
            if !forced && judged == seen {
                continue;
            }
            if !forced {
                // A writer may be half-way through: wait until two reads agree.
                judged = settle(&watch.paths, &judged_sources, judged).await;
                if judged == seen {
                    continue;
                }
            }
            let paths = watch.paths.clone();
            let core2 = core.clone();
            let status2 = status.clone();
            // Compiling reads files and builds validators: off the async workers, on the
            // configuration thread (see `config_thread`).
            let applied = tokio::task::spawn_blocking(move || {
                on_config_thread(move || reload_now(&core2, &paths, &status2).is_ok())
            })
            .await
            .ok()
            .flatten()
            .unwrap_or(false);
            tracing::debug!(applied, forced, "reload attempt finished");
            // Failed or not, this content has been judged: only a new change retries. A change
            // made while it was being judged is a new change: the files are read again (with
            // the sources the judged content named) after the new fingerprint is taken, and
            // if they moved, the judged fingerprint stays, so the next tick reloads.
            let fresh = fingerprint(&watch.paths, &sources(&core));
            seen = if fingerprint(&watch.paths, &judged_sources) == judged {
                fresh
            } else {
                judged
            };
        }
    })
}

async fn settle(paths: &[PathBuf], sources: &[PathBuf], mut last: u64) -> u64 {
    for _ in 0..20 {
        tokio::time::sleep(Duration::from_millis(100)).await;
        let now = fingerprint(paths, sources);
        if now == last {
            return now;
        }
        last = now;
    }
    last
}

#[cfg(unix)]
type Hangups = Option<tokio::signal::unix::Signal>;
#[cfg(not(unix))]
type Hangups = Option<()>;

#[cfg(unix)]
fn hangups(enabled: bool) -> Hangups {
    use tokio::signal::unix::{SignalKind, signal};
    if !enabled {
        return None;
    }
    match signal(SignalKind::hangup()) {
        Ok(s) => Some(s),
        Err(e) => {
            tracing::warn!(error = %e, "cannot listen for SIGHUP; reload by file change only");
            None
        }
    }
}

#[cfg(not(unix))]
fn hangups(_enabled: bool) -> Hangups {
    None
}

async fn next_hangup(hup: &mut Hangups) -> Option<()> {
    #[cfg(unix)]
    if let Some(s) = hup {
        return s.recv().await;
    }
    let _ = hup;
    std::future::pending().await
}
