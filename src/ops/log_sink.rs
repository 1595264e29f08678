//! Where log lines go on their way to stderr: a shared buffer that one thread writes out in
//! batches. It must never drop a line, reorder lines, or make a call wait on stderr while the
//! buffer has room.
//!
//! Every `tools/call` logs a line. Written straight to stderr that is a system call on the
//! request's thread per call. `tracing-appender`'s non-blocking writer moves it to a worker,
//! but wakes that worker for every line: with four connections, each call cost the worker
//! about one `write`, 1.2 `sched_yield` (its channel spins before it sleeps) and 0.24 `futex`
//! (strace -c on the openapi workload). Here a line is appended under a lock; the first line
//! into an empty buffer unparks the writer thread, which waits [`PERIOD`] for more and writes
//! the lot in one `write`: one wake-up and one system call per batch, none while idle. A
//! buffer past [`LIMIT`] is written out by the thread that filled it, as a direct write would.

use std::io::Write;
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::Duration;

/// How long the writer thread gathers lines after the first one before writing them out.
pub const PERIOD: Duration = Duration::from_millis(20);

/// Bytes buffered before the logging thread writes them out itself.
pub const LIMIT: usize = 1 << 20;

/// The buffer, the output and the writer thread: shared by every [`Sink`] handle.
struct Inner {
    lines: Mutex<Vec<u8>>,
    /// The output, and the spare buffer swapped in for the lines taken. Held while lines are
    /// taken and written, so that batches reach the output in the order they were taken.
    out: Mutex<(Box<dyn Write + Send>, Vec<u8>)>,
    writer: OnceLock<std::thread::Thread>,
}

impl Inner {
    /// Buffers `line`; writes the buffer out at once when it is full or no writer thread runs.
    fn push(&self, line: &[u8]) {
        // A poisoned lock still holds whole lines (a panic cannot stop a copy half way):
        // lines are never dropped for it.
        let mut lines = self.lines.lock().unwrap_or_else(PoisonError::into_inner);
        let was_empty = lines.is_empty();
        lines.extend_from_slice(line);
        let full = lines.len() >= LIMIT;
        drop(lines);
        match self.writer.get() {
            Some(t) if !full => {
                if was_empty {
                    t.unpark();
                }
            }
            // Full, or no writer thread (it could not start): straight through.
            _ => self.write_out(),
        }
    }

    /// Writes every buffered line to the output, in order.
    fn write_out(&self) {
        let mut out = self.out.lock().unwrap_or_else(PoisonError::into_inner);
        let (output, spare) = &mut *out;
        std::mem::swap(
            &mut *self.lines.lock().unwrap_or_else(PoisonError::into_inner),
            spare,
        );
        if !spare.is_empty() {
            // A closed or failing stderr loses the lines, as a direct write would.
            let _ = output.write_all(spare);
            let _ = output.flush();
            spare.clear();
        }
    }
}

/// A handle on the log buffer: the `MakeWriter` of the log layer, and the way to write out
/// what is buffered before the process exits.
#[derive(Clone)]
pub struct Sink {
    inner: Arc<Inner>,
}

impl Sink {
    /// A buffer in front of `output`, written out by a thread of its own (`portico-log`).
    /// Without that thread (it could not start), lines are written by the logging thread.
    pub fn start(output: impl Write + Send + 'static) -> Sink {
        let sink = Sink::unstarted(output);
        let weak = Arc::downgrade(&sink.inner);
        let spawned = std::thread::Builder::new()
            .name("portico-log".into())
            .spawn(move || {
                loop {
                    std::thread::park();
                    std::thread::sleep(PERIOD);
                    match weak.upgrade() {
                        Some(inner) => inner.write_out(),
                        None => return,
                    }
                }
            });
        if let Ok(handle) = spawned {
            let _ = sink.inner.writer.set(handle.thread().clone());
        }
        sink
    }

    /// A buffer in front of `output` with no writer thread yet.
    fn unstarted(output: impl Write + Send + 'static) -> Sink {
        Sink {
            inner: Arc::new(Inner {
                lines: Mutex::new(Vec::new()),
                out: Mutex::new((Box::new(output), Vec::new())),
                writer: OnceLock::new(),
            }),
        }
    }

    /// Writes out every line buffered so far.
    pub fn flush(&self) {
        self.inner.write_out();
    }
}

/// One log line's writer (`tracing_subscriber` makes one per event and writes the line whole).
pub struct Line<'a> {
    inner: &'a Inner,
}

impl Write for Line<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.inner.push(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for Sink {
    type Writer = Line<'a>;

    fn make_writer(&'a self) -> Line<'a> {
        Line { inner: &self.inner }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;
    use tracing_subscriber::fmt::MakeWriter;

    /// An output the test can read, counting the writes it received.
    #[derive(Clone, Default)]
    struct Seen(Arc<Mutex<(Vec<u8>, usize)>>);

    impl Write for Seen {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            let mut s = self.0.lock().expect("not poisoned");
            s.0.extend_from_slice(buf);
            s.1 += 1;
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    impl Seen {
        fn text(&self) -> String {
            String::from_utf8_lossy(&self.0.lock().expect("not poisoned").0).into_owned()
        }
        fn writes(&self) -> usize {
            self.0.lock().expect("not poisoned").1
        }
    }

    fn log(sink: &Sink, line: &str) {
        sink.make_writer()
            .write_all(line.as_bytes())
            .expect("never fails");
    }

    #[test]
    fn lines_reach_the_output_in_one_batch_after_the_period() {
        let seen = Seen::default();
        let sink = Sink::start(seen.clone());
        for i in 0..100 {
            log(&sink, &format!("line {i}\n"));
        }
        let expected: String = (0..100).map(|i| format!("line {i}\n")).collect();
        let deadline = Instant::now() + Duration::from_secs(10);
        while seen.text() != expected && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
        assert_eq!(seen.text(), expected, "the writer thread wrote every line");
        // A write per line would make 100; a batch is one unless the test thread was held up
        // for a whole period between two of its lines.
        assert!(seen.writes() < 10, "{} writes", seen.writes());
    }

    #[test]
    fn flush_writes_out_what_is_buffered_and_lines_from_many_threads_stay_whole() {
        let seen = Seen::default();
        let sink = Sink::start(seen.clone());
        let threads: Vec<_> = (0..4)
            .map(|t| {
                let sink = sink.clone();
                std::thread::spawn(move || {
                    for i in 0..500 {
                        log(&sink, &format!("thread {t} line {i}\n"));
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().expect("a logging thread");
        }
        sink.flush();
        let text = seen.text();
        assert_eq!(text.lines().count(), 2000);
        for t in 0..4 {
            let mine: Vec<&str> = text
                .lines()
                .filter(|l| l.starts_with(&format!("thread {t} ")))
                .collect();
            let expected: Vec<String> = (0..500).map(|i| format!("thread {t} line {i}")).collect();
            assert_eq!(mine, expected, "each thread's lines whole and in order");
        }
    }

    #[test]
    fn a_full_buffer_is_written_out_by_the_thread_that_filled_it() {
        let seen = Seen::default();
        // A writer thread that never writes: only the filling thread can.
        let sink = Sink::unstarted(seen.clone());
        let _ = sink.inner.writer.set(std::thread::current());
        let line = "x".repeat(1023) + "\n";
        log(&sink, &line);
        assert_eq!(seen.writes(), 0, "a line waits for the writer thread");
        for _ in 1..(LIMIT / line.len()) {
            log(&sink, &line);
        }
        // The line that fills the buffer writes it out at once.
        assert_eq!(seen.writes(), 1);
        assert_eq!(seen.text().len(), LIMIT);
    }

    #[test]
    fn a_poisoned_buffer_still_takes_and_writes_lines() {
        let seen = Seen::default();
        let sink = Sink::unstarted(seen.clone());
        let inner = sink.inner.clone();
        let _ = std::thread::spawn(move || {
            let _held = inner.lines.lock();
            panic!("poisons the buffer");
        })
        .join();
        assert!(sink.inner.lines.is_poisoned());
        log(&sink, "kept\n");
        assert_eq!(seen.text(), "kept\n");
    }

    #[test]
    fn without_a_writer_thread_lines_are_written_at_once() {
        let seen = Seen::default();
        let sink = Sink::unstarted(seen.clone());
        log(&sink, "one\n");
        log(&sink, "two\n");
        assert_eq!(seen.text(), "one\ntwo\n");
    }
}
