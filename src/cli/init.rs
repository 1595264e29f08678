//! `portico init` (a mapping folder generated from an OpenAPI document, then checked) and
//! `portico schema` (the JSON Schema of mapping files).
//! It prints what `portico::init` planned and `portico::check` found; it holds no protocol logic.

use super::args::{InitArgs, SchemaArgs};
use super::common::Exit;
use portico::init::operations::Filter;
use portico::init::{Options, run};
use std::process::ExitCode;

/// Runs `portico init`.
pub fn init(args: InitArgs) -> ExitCode {
    let opts = Options {
        openapi: args.openapi,
        backend: args.backend,
        filter: Filter {
            include: args.include,
            exclude: args.exclude,
        },
        out: args.out,
    };
    let report = match run(&opts) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("error: {e}");
            return Exit::Invalid.into();
        }
    };
    for w in &report.warnings {
        eprintln!("warning: {w}");
    }
    for n in &report.notes {
        eprintln!("note: {n}");
    }
    for s in &report.skipped {
        eprintln!("skipped: {s}");
    }
    println!(
        "wrote {} and {}: {} tool(s), {} operation(s) skipped",
        report.mapping.display(),
        report.openrpc.display(),
        report.tools.len(),
        report.skipped.len()
    );
    if let Some(var) = &report.backend_env
        && std::env::var_os(var).is_none()
    {
        println!(
            "next: export {var}=<backend URL>, then portico check {}",
            opts.out.display()
        );
        return Exit::Ok.into();
    }
    let check = portico::check::run(std::slice::from_ref(&opts.out));
    for d in &check.diagnostics {
        eprintln!("{d}");
    }
    if check.has_errors() {
        eprintln!(
            "the generated mapping does not pass `portico check`: please report this document"
        );
        return Exit::Invalid.into();
    }
    println!(
        "check: ok, {} tool(s); serve it with: portico serve {}",
        check.tools,
        opts.out.display()
    );
    Exit::Ok.into()
}

/// Runs `portico schema`.
pub fn schema(args: SchemaArgs) -> ExitCode {
    let text = portico::mapping_schema::text();
    match args.out {
        None => {
            print!("{text}");
            Exit::Ok.into()
        }
        Some(path) => match std::fs::write(&path, text) {
            Ok(()) => Exit::Ok.into(),
            Err(e) => {
                eprintln!("error: cannot write {}: {e}", path.display());
                Exit::Invalid.into()
            }
        },
    }
}
