//! `kubectl winpool`: the kubectl plugin (status, plan, pause, resume, retry).
//! Everything but printing lives in `winpool::plugin`.

use std::process::ExitCode;

use clap::Parser;
use winpool::plugin::cli::{Cli, run};

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    match run(Cli::parse()).await {
        Ok(out) => {
            print!("{out}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
