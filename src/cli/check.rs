//! `portico check`: validates mapping files without starting anything.
//! It prints diagnostics; it never opens a listener.

use super::args::CheckArgs;
use super::common::Exit;
use std::process::ExitCode;

/// Runs `portico check`.
pub fn check(args: CheckArgs) -> ExitCode {
    let CheckArgs { config, strict } = args;
    let paths = config.all();
    let report = portico::check::run(&paths);
    for d in &report.diagnostics {
        eprintln!("{d}");
    }
    for o in &report.overrides {
        eprintln!("note: {o}");
    }
    let failed = report.has_errors() || (strict && !report.diagnostics.is_empty());
    if failed {
        let n = report.diagnostics.iter().filter(|d| d.is_error()).count();
        eprintln!(
            "check failed: {n} error(s), {} warning(s)",
            report.diagnostics.len() - n
        );
        Exit::Invalid.into()
    } else {
        println!(
            "ok: {} file(s), {} tool(s), {} warning(s)",
            report.files,
            report.tools,
            report.diagnostics.len()
        );
        Exit::Ok.into()
    }
}
