//! The `winpool` binary: `run` (the operator), `crd` (print the CRD), `sim` (simulated fleet).

use std::collections::{BTreeMap, HashSet};
use std::net::SocketAddr;
use std::time::Duration;

use anyhow::Context as _;
use clap::{ArgAction, Parser, Subcommand, ValueEnum};
use tracing::{error, info};

use winpool::api::OsVersion;
use winpool::controller::{self, Settings};
use winpool::daemonset::AgentImages;
use winpool::lease::{self, LeaseSettings};
use winpool::metrics::{self, Metrics};
use winpool::sim::{self, HnsReport, SimSettings};

#[derive(Parser)]
#[command(name = "winpool", version, about = "Rolls Windows node pools to a declared configuration and reports HNS readiness")]
struct Cli {
    /// Log format.
    #[arg(long, global = true, value_enum, default_value_t = LogFormat::Text, env = "WINPOOL_LOG_FORMAT")]
    log_format: LogFormat,
    #[command(subcommand)]
    command: Command,
}

#[derive(Clone, Copy, ValueEnum)]
enum LogFormat {
    Text,
    Json,
}

#[derive(Subcommand)]
enum Command {
    /// Run the operator (kubeconfig from KUBECONFIG, ~/.kube/config or in-cluster).
    Run(RunArgs),
    /// Print the WindowsNodePool CustomResourceDefinition as YAML.
    Crd,
    /// Simulate a Windows fleet and its agent on a cluster that runs kwok.
    Sim(SimArgs),
}

#[derive(clap::Args)]
struct RunArgs {
    /// Address of the admin server (/metrics, /healthz, /readyz).
    #[arg(long, default_value = "0.0.0.0:8080")]
    metrics_addr: SocketAddr,
    /// Elect a leader through a Lease so only one replica writes (--leader-elect=false to run alone).
    #[arg(long, action = ArgAction::Set, default_value_t = true)]
    leader_elect: bool,
    #[arg(long, default_value = "winpool-leader")]
    lease_name: String,
    /// Namespace of the Lease (default: this pod's namespace, else "default").
    #[arg(long, env = "POD_NAMESPACE", default_value = "default")]
    lease_namespace: String,
    /// Namespace of the agent DaemonSets; it is labelled pod-security enforce=privileged and holds nothing else.
    #[arg(long, default_value = "winpool-agents")]
    agent_namespace: String,
    /// Agent image for pools that leave spec.agent.image empty.
    #[arg(long, default_value = "ghcr.io/winpool/agent:0.1.0")]
    agent_image: String,
    /// CSI Proxy image repository; the pool's csiProxy.version is the tag.
    #[arg(long, default_value = "ghcr.io/kubernetes-csi/csi-proxy")]
    csi_proxy_image: String,
    /// Reconcile only pools matching this label selector (sharding, canary operators, tests).
    #[arg(long)]
    pool_selector: Option<String>,
    /// Image prefixes a pool's spec.agent.image may use (comma-separated); empty allows any.
    #[arg(long, value_delimiter = ',')]
    allowed_agent_images: Vec<String>,
}

#[derive(clap::Args)]
struct SimArgs {
    #[arg(long, default_value_t = 3)]
    nodes: usize,
    #[arg(long, default_value = "win-")]
    name_prefix: String,
    /// Extra node labels, k=v,k=v (how pools select the nodes).
    #[arg(long, value_delimiter = ',', value_parser = parse_kv)]
    labels: Vec<(String, String)>,
    #[arg(long, value_enum, default_value = "ltsc2022")]
    os: OsArg,
    /// The nodes' starting kernelVersion.
    #[arg(long, default_value = "10.0.20348.2700")]
    build: String,
    /// The nodes' starting containerd version.
    #[arg(long, default_value = "1.7.20")]
    containerd: String,
    /// How long the simulated agent takes to apply a revision.
    #[arg(long, default_value_t = 5.0)]
    apply_seconds: f64,
    /// Probability that an apply fails (seeded by --seed).
    #[arg(long, default_value_t = 0.0)]
    fail_rate: f64,
    /// Nodes whose apply always fails.
    #[arg(long, value_delimiter = ',')]
    fail_nodes: Vec<String>,
    #[arg(long, default_value_t = 1)]
    seed: u64,
    #[arg(long, default_value = "winpool-agents")]
    agent_namespace: String,
    /// Do not create nodes, only play the agent for existing ones.
    #[arg(long)]
    no_create: bool,
    /// Create the nodes and exit without playing the agent.
    #[arg(long)]
    create_only: bool,
    /// How long the simulated reboot after an apply keeps the node NotReady.
    #[arg(long, default_value_t = 1.0)]
    reboot_seconds: f64,
    /// HNS counts the simulated agent reports: `auto` (the cluster's expected counts,
    /// reached --hns-sync-seconds after the reboot), `off`, or fixed `LB,ENDPOINTS`.
    #[arg(long, default_value = "auto")]
    hns: String,
    #[arg(long, default_value_t = 2.0)]
    hns_sync_seconds: f64,
}

#[derive(Clone, Copy, ValueEnum)]
enum OsArg {
    Ltsc2019,
    Ltsc2022,
    Ltsc2025,
}

fn parse_kv(s: &str) -> Result<(String, String), String> {
    s.split_once('=').map(|(k, v)| (k.to_string(), v.to_string())).ok_or_else(|| format!("{s:?} is not key=value"))
}

fn parse_pair(s: &str) -> Result<(i64, i64), String> {
    let (a, b) = s.split_once(',').ok_or_else(|| format!("{s:?} is not LB,ENDPOINTS"))?;
    Ok((a.trim().parse().map_err(|e| format!("{e}"))?, b.trim().parse().map_err(|e| format!("{e}"))?))
}

fn init_logging(format: LogFormat) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info,kube=warn".into());
    use std::io::IsTerminal;
    let b = tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr).with_ansi(std::io::stderr().is_terminal());
    match format {
        LogFormat::Text => b.init(),
        LogFormat::Json => b.json().init(),
    }
}

async fn shutdown_signal() {
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).expect("SIGTERM handler");
    tokio::select! {
        _ = term.recv() => {},
        _ = tokio::signal::ctrl_c() => {},
    }
    info!("shutdown signal received");
}

async fn run(args: RunArgs) -> anyhow::Result<()> {
    let mut config =
        kube::Config::infer().await.context("reading the Kubernetes client configuration (KUBECONFIG, ~/.kube/config or in-cluster)")?;
    // A 429 from the Eviction API means "a PodDisruptionBudget says not now": the next
    // round retries it. The client's own retry loop would stall the whole reconcile.
    config.default_retry = false;
    let client = kube::Client::try_from(config).context("building the Kubernetes client")?;
    let m = Metrics::new();
    let admin = tokio::spawn(metrics::serve(args.metrics_addr, m.clone()));
    let settings = Settings {
        agent_namespace: args.agent_namespace,
        images: AgentImages { agent: args.agent_image, csi_proxy: args.csi_proxy_image },
        pool_selector: args.pool_selector,
        allowed_agent_images: args.allowed_agent_images.into_iter().filter(|s| !s.is_empty()).collect(),
    };
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    tokio::spawn(async move {
        shutdown_signal().await;
        let _ = stop_tx.send(true);
    });
    let stopped = |mut rx: tokio::sync::watch::Receiver<bool>| async move {
        let _ = rx.wait_for(|s| *s).await;
    };

    let lease_settings = LeaseSettings {
        name: args.lease_name,
        namespace: args.lease_namespace,
        identity: std::env::var("POD_NAME").unwrap_or_else(|_| format!("{}-{}", hostname(), std::process::id())),
        lease_duration: Duration::from_secs(15),
        renew_every: Duration::from_secs(2),
    };
    let mut lost = None;
    if args.leader_elect {
        tokio::select! {
            rx = lease::acquire(client.clone(), lease_settings.clone()) => lost = Some(rx),
            _ = stopped(stop_rx.clone()) => return Ok(()),
        }
    }
    m.leader.set(1);
    let shutdown = {
        let stop_rx = stop_rx.clone();
        let lost = lost.clone();
        async move {
            match lost {
                Some(mut l) => tokio::select! {
                    _ = stopped(stop_rx) => {},
                    _ = l.wait_for(|leading| !*leading) => {},
                },
                None => stopped(stop_rx).await,
            }
        }
    };
    let res = tokio::select! {
        r = controller::run(client.clone(), settings, m.clone(), shutdown) => r,
        r = admin => Err(anyhow::anyhow!("admin server on {} stopped: {:?}", args.metrics_addr, r)),
    };
    m.leader.set(0);
    if let Some(l) = lost {
        if !*l.borrow() {
            error!("lost the leader lease; exiting so no two replicas write");
            std::process::exit(1);
        }
        lease::release(client, &lease_settings).await;
    }
    res
}

fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname").map(|s| s.trim().to_string()).unwrap_or_else(|_| "winpool".into())
}

async fn sim(args: SimArgs) -> anyhow::Result<()> {
    let os = match args.os {
        OsArg::Ltsc2019 => OsVersion::Ltsc2019,
        OsArg::Ltsc2022 => OsVersion::Ltsc2022,
        OsArg::Ltsc2025 => OsVersion::Ltsc2025,
    };
    let s = SimSettings {
        nodes: args.nodes,
        name_prefix: args.name_prefix,
        labels: args.labels.into_iter().collect::<BTreeMap<_, _>>(),
        os,
        build: args.build.parse().context("--build")?,
        containerd: args.containerd.parse().context("--containerd")?,
        apply_seconds: args.apply_seconds,
        fail_rate: args.fail_rate,
        fail_nodes: args.fail_nodes.into_iter().collect::<HashSet<_>>(),
        agent_namespace: args.agent_namespace,
        seed: args.seed,
        create: !args.no_create,
        hns: match args.hns.as_str() {
            "auto" => HnsReport::Auto { sync_seconds: args.hns_sync_seconds },
            "off" => HnsReport::Off,
            fixed => {
                let (lb, ep) = parse_pair(fixed).map_err(|e| anyhow::anyhow!("--hns: {e}"))?;
                HnsReport::Fixed(lb, ep)
            }
        },
        reboot_seconds: args.reboot_seconds,
    };
    s.validate()?;
    let client = kube::Client::try_default().await.context("connecting to the Kubernetes API")?;
    if args.create_only {
        sim::create_nodes(&client, &s).await?;
        return Ok(());
    }
    sim::run(client, s, shutdown_signal()).await?;
    Ok(())
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    match cli.command {
        Command::Crd => {
            print!("{}", winpool::crd::crd_yaml());
            Ok(())
        }
        Command::Run(a) => {
            init_logging(cli.log_format);
            run(a).await
        }
        Command::Sim(a) => {
            init_logging(cli.log_format);
            sim(a).await
        }
    }
}
