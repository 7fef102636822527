//! `kubectl winpool`: the kubectl plugin (status, plan, pause, resume, retry).
//! Everything but printing lives in `winpool::plugin`.

use std::process::ExitCode;

use clap::Parser;
use winpool::plugin::cli::{Cli, run, run_watch};
use winpool::plugin::terminal_safe;

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    let done = if cli.watches() {
        run_watch(cli, |view| {
            use std::io::Write;
            print!("{}", terminal_safe(view));
            let _ = std::io::stdout().flush();
        })
        .await
    } else {
        run(cli).await.map(|out| print!("{}", terminal_safe(&out)))
    };
    match done {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {}", terminal_safe(&e.to_string()));
            ExitCode::FAILURE
        }
    }
}
