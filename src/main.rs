use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(name = "winpool", version, about = "Rolls Windows node pools to a declared configuration and reports HNS readiness")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Print the WindowsNodePool CustomResourceDefinition as YAML.
    Crd,
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    match cli.command {
        Command::Crd => print!("{}", winpool::crd::crd_yaml()),
    }
    Ok(())
}
