//! Unit tests of the command line: its consistency, help examples, env variables and exit codes against docs/operations.md.
//! They only parse arguments; they never start a server.

use super::args::Cli;
use super::common::Exit;
use clap::{CommandFactory, Parser};

/// Every argument of every subcommand (help and version aside).
fn all_args() -> Vec<(String, clap::Arg)> {
    let cli = Cli::command();
    let mut out = Vec::new();
    for sub in cli.get_subcommands() {
        for arg in sub.get_arguments() {
            if !matches!(arg.get_id().as_str(), "help" | "version") {
                out.push((sub.get_name().to_string(), arg.clone()));
            }
        }
    }
    out
}

#[test]
fn the_command_line_is_consistent() {
    Cli::command().debug_assert();
}

#[test]
fn every_argument_has_an_environment_variable_documented_in_the_operations_reference() {
    let readme = include_str!("../../docs/operations.md");
    for (sub, arg) in all_args() {
        if arg.get_id() == "paths" {
            // The CONFIG arguments: `--config` (PORTICO_CONFIG) is their variable.
            continue;
        }
        let env = arg
            .get_env()
            .unwrap_or_else(|| panic!("`portico {sub}`: {} has no env", arg.get_id()));
        let env = env.to_string_lossy();
        assert!(
            env.starts_with("PORTICO_") || env == "OTEL_EXPORTER_OTLP_ENDPOINT",
            "{env}"
        );
        assert!(
            readme.contains(&format!("`{env}`")),
            "docs/operations.md does not document {env} (`portico {sub}`)"
        );
    }
}

/// The flag (`--long`) whose variable is `env`, in subcommand `sub`.
fn flag_of(sub: &str, env: &str) -> String {
    let (_, arg) = all_args()
        .into_iter()
        .find(|(s, a)| s == sub && a.get_env().is_some_and(|e| e == env))
        .unwrap_or_else(|| panic!("`portico {sub}` has no flag for {env}"));
    match arg.get_long() {
        Some(long) => format!("--{long}"),
        // A positional argument: its value alone.
        None => String::new(),
    }
}

/// Every `portico ...` example line of every subcommand's help parses, with its variables
/// (`NAME=value portico ...`) read as the flags they stand for, and the files it names from
/// the repository exist.
#[test]
fn every_help_example_parses_and_names_real_files() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut cli = Cli::command();
    let mut n = 0;
    for sub in cli.get_subcommands_mut() {
        let name = sub.get_name().to_string();
        let help = sub.render_long_help().to_string();
        let examples = help
            .split("Examples:\n")
            .nth(1)
            .unwrap_or_else(|| panic!("`portico {name}` has no examples"));
        for line in examples.lines().filter(|l| l.contains("portico ")) {
            // A shell pipeline or redirection ends the command.
            let command = line.split(['|', '>', '&']).next().unwrap_or("").trim();
            let mut argv = Vec::new();
            let mut env = Vec::new();
            for word in command.split_whitespace() {
                match word.split_once('=') {
                    Some((var, value)) if argv.is_empty() && var.starts_with("PORTICO_") => {
                        env.push((var.to_string(), value.to_string()))
                    }
                    _ => argv.push(word.to_string()),
                }
            }
            for (var, value) in env {
                let flag = flag_of(&name, &var);
                if !flag.is_empty() {
                    argv.push(flag);
                }
                argv.push(value);
            }
            for word in &argv {
                if word.starts_with("mappings/") {
                    assert!(root.join(word).exists(), "{line}: {word} does not exist");
                }
            }
            if let Err(e) = Cli::try_parse_from(&argv) {
                panic!("example `{line}` does not parse ({argv:?}): {e}");
            }
            n += 1;
        }
    }
    assert!(n >= 20, "only {n} examples");
}

#[test]
fn usage_errors_exit_with_the_documented_code() {
    let e = Cli::try_parse_from(["portico", "serve", "--no-such-flag"])
        .err()
        .expect("refused");
    assert!(e.use_stderr());
    assert_eq!(e.exit_code(), Exit::Usage as i32, "clap's own code agrees");
    let readme = include_str!("../../docs/operations.md");
    for code in [
        Exit::Ok,
        Exit::Invalid,
        Exit::Usage,
        Exit::Startup,
        Exit::Runtime,
    ] {
        let row = format!("| {} |", code as u8);
        assert!(
            readme.contains(&row),
            "docs/operations.md's exit code table lacks {row}"
        );
    }
}
