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
        openrpc: args.openrpc,
        binding: args.binding,
        protocol_version: args.protocol_version,
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
    if opts.openrpc.is_some() {
        println!("binding: {} ({})", report.binding.0, report.binding.1);
        for p in &report.paired {
            println!("paired: {p}");
        }
        for t in &report.todos {
            println!("todo: {t}");
        }
        println!(
            "wrote {} for {}: {} method(s) paired, {} TODO(s)",
            report.mapping.display(),
            report.openrpc.display(),
            report.paired.len(),
            report.todos.len()
        );
    } else {
        println!(
            "wrote {} and {}: {} tool(s), {} operation(s) skipped",
            report.mapping.display(),
            report.openrpc.display(),
            report.tools.len(),
            report.skipped.len()
        );
    }
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
    let todos = check
        .diagnostics
        .iter()
        .filter(|d| d.is_error() && d.message.starts_with(portico::config::todo::PREFIX))
        .count();
    let others = check.diagnostics.iter().filter(|d| d.is_error()).count() - todos;
    if todos > 0 && others == 0 {
        println!(
            "check: {todos} TODO(s) left, each listed above with its candidates; pair them, then portico check {}",
            opts.out.display()
        );
        return Exit::Ok.into();
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
