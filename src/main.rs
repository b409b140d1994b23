//! The `playdeck` binary: parse the command line, run one command, turn
//! its error into a message and an exit code, once.

mod cli;
mod cmd;

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    let cli = cli::Cli::parse();
    let code = match cmd::dispatch(cli.command) {
        Ok(code) => code,
        Err(e) => {
            e.report();
            e.exit_code()
        }
    };
    ExitCode::from(code.clamp(0, 255) as u8)
}
