//! The subcommands of the `portico` binary: their arguments and what each one runs.
//! It dispatches to one file per subcommand group; it never holds protocol logic.

pub mod args;
mod check;
pub mod common;
mod demo;
mod facade;
mod health;
mod init;
mod serve;
#[cfg(test)]
mod tests;
mod webhook;

use args::Command;
use std::process::ExitCode;

/// Runs one parsed subcommand to its exit code.
pub async fn run(command: Command) -> ExitCode {
    match command {
        Command::WebhookSign(args) => webhook::webhook_sign(args),
        Command::WebhookVerify(args) => webhook::webhook_verify(args),
        Command::Health(args) => health::health(args).await,
        Command::Check(args) => check::check(args),
        Command::Init(args) => init::init(args),
        Command::Schema(args) => init::schema(args),
        Command::Serve(args) => serve::serve(args).await,
        Command::Stdio(args) => serve::stdio(args).await,
        Command::DemoBackend(args) => demo::demo_backend(args).await,
        Command::Facade(args) => facade::facade(args).await,
        Command::Openapi(args) => facade::openapi(args),
        Command::Demo(args) => demo::demo(args).await,
    }
}
