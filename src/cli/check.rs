//! `portico check`: validates mapping files without starting anything.
//! It prints diagnostics; it never opens a listener.

use super::args::CheckArgs;
use super::common::Exit;
use std::process::ExitCode;

/// Runs `portico check`.
pub fn check(args: CheckArgs) -> ExitCode {
    let CheckArgs {
        config,
        strict,
        try_tool,
        args: try_args,
        response,
    } = args;
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
        match try_tool {
            Some(tool) => dry_run(&paths, &tool, &try_args, response.as_deref()),
            None => Exit::Ok.into(),
        }
    }
}

/// `--try TOOL --args JSON [--response STATUS:FILE]`.
fn dry_run(
    paths: &[std::path::PathBuf],
    tool: &str,
    args: &str,
    response: Option<&str>,
) -> ExitCode {
    let fail = |m: String| -> ExitCode {
        eprintln!("error: {m}");
        Exit::Invalid.into()
    };
    let args: serde_json::Value = match serde_json::from_str(args) {
        Ok(v) => v,
        Err(e) => return fail(format!("--args is not JSON: {e}")),
    };
    let answer = match response {
        None => None,
        Some(spec) => {
            let Some((status, file)) = spec.split_once(':') else {
                return fail(format!(
                    "--response `{spec}`: write STATUS:FILE, e.g. 200:answer.json"
                ));
            };
            let Ok(status) = status.parse::<u16>() else {
                return fail(format!(
                    "--response `{spec}`: `{status}` is not an HTTP status"
                ));
            };
            match std::fs::read(file) {
                Ok(b) => Some((status, b)),
                Err(e) => return fail(format!("--response: cannot read {file}: {e}")),
            }
        }
    };
    // Without --response: the documented answer of the operation, when `backend.openapi`
    // names a document with one.
    let answer = match answer {
        Some(a) => Some(a),
        None => documented_answer(paths, tool).map(|(status, body, from)| {
            println!("sample answer: the documented {status} example of {from}");
            (status, body)
        }),
    };
    let gateway = match portico::config::load(paths) {
        Ok(g) => g,
        Err(ds) => {
            return fail(
                ds.iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
                    .join("\n"),
            );
        }
    };
    match portico::dry_run::run(&gateway, tool, args, answer) {
        Ok(d) => {
            print!("{}", d.text);
            if d.failed {
                Exit::Invalid.into()
            } else {
                Exit::Ok.into()
            }
        }
        Err(m) => fail(m),
    }
}

/// The documented success example for `tool`, from the `backend.openapi` of the mapping file
/// that defines it: status, JSON body, and the file it came from.
fn documented_answer(paths: &[std::path::PathBuf], tool: &str) -> Option<(u16, Vec<u8>, String)> {
    let files = portico::config::compile::mapping_files(paths).ok()?;
    for f in files {
        let Ok(text) = std::fs::read_to_string(&f) else {
            continue;
        };
        let Ok(spec) = serde_saphyr::from_str::<portico::config::mapping::MappingFile>(&text)
        else {
            continue;
        };
        if !spec.tools.contains_key(tool) {
            continue;
        }
        let from = spec.backend.openapi.clone()?;
        let (status, v) = portico::config::backend_doc::documented_answer(&f, &spec, tool)?;
        return Some((status, serde_json::to_vec(&v).ok()?, from));
    }
    None
}
