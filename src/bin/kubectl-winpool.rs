//! `kubectl winpool`: the kubectl plugin (status, plan, pause, resume, retry).
//! Everything but printing lives in `winpool::plugin`.

use std::process::ExitCode;

use clap::Parser;
use winpool::plugin::cli::{Cli, run};
use winpool::plugin::terminal_safe;

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    match run(Cli::parse()).await {
        Ok(out) => {
            print!("{}", terminal_safe(&out));
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {}", terminal_safe(&e.to_string()));
            ExitCode::FAILURE
        }
    }
}
