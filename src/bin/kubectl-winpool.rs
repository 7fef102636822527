//! `kubectl winpool`: the kubectl plugin (status, plan, pause, resume, retry).
//! Everything but printing lives in `winpool::plugin`.

use std::process::ExitCode;

use clap::Parser;
use winpool::plugin::cli::{Cli, complete, run, run_watch};
use winpool::plugin::terminal_safe;

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    // Called as kubectl_complete-winpool (a link to this binary), kubectl asks
    // for the completions of `kubectl winpool <words>`.
    let mut args = std::env::args();
    let called = args.next().unwrap_or_default();
    if std::path::Path::new(&called).file_name().is_some_and(|n| n.to_string_lossy().starts_with("kubectl_complete-winpool")) {
        print!("{}", terminal_safe(&complete(args.collect()).await));
        return ExitCode::SUCCESS;
    }
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
