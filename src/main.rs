//! The `portico` command line: serve, demo, check.
//! It parses arguments and wires modules; it never holds protocol logic.

use clap::Parser;
use cli::args::Cli;
use cli::common::Exit;
use std::process::ExitCode;

/// mimalloc: the translation path allocates many small JSON values; measured in
/// docs/benchmarks.md against the system allocator and against the `mimalloc` crate's wrapper.
#[global_allocator]
static GLOBAL: portico::ops::alloc::Allocator = portico::ops::alloc::Allocator;

/// mimalloc 3.3's `mi_option_arena_eager_commit` (libmimalloc-sys 0.1.49 names no constant).
const MI_OPTION_ARENA_EAGER_COMMIT: libmimalloc_sys::mi_option_t = 4;

/// Runs before `main` and before Rust's first allocation (mimalloc reserves its first arena
/// then): arenas are committed as they are used, not up front, which keeps an idle sidecar's
/// resident set about 5 MiB smaller (docs/benchmarks.md). It allocates nothing itself.
extern "C" fn lazy_arena_commit() {
    // SAFETY: sets one process-wide allocator option before any Rust allocation;
    // mi_option_set has no other precondition.
    unsafe { libmimalloc_sys::mi_option_set(MI_OPTION_ARENA_EAGER_COMMIT, 0) };
}

#[used]
#[unsafe(link_section = ".init_array")]
static LAZY_ARENA_COMMIT: extern "C" fn() = lazy_arena_commit;

mod cli;

#[tokio::main]
async fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => {
            let _ = e.print();
            // `--help` and `--version` print to stdout: not an error.
            return if e.use_stderr() {
                Exit::Usage
            } else {
                Exit::Ok
            }
            .into();
        }
    };
    let exit = cli::run(cli.command).await;
    cli::common::flush_logs();
    exit
}
