//! The `winpool` binary: `run` (the operator), `crd` (print the CRD). The
//! simulated fleet is the agent's own code (agent/fleet, `hack/sim.sh`).

use std::net::SocketAddr;
use std::time::Duration;

use anyhow::Context as _;
use clap::{ArgAction, Parser, Subcommand, ValueEnum};
use tracing::{error, info, warn};

use winpool::builders::daemonset::{self, AgentPodOptions, AgentSettings};
use winpool::controller::lease::{self, LeaseSettings};
use winpool::controller::metrics::{self, Metrics};
use winpool::controller::write_fence::WriteFence;
use winpool::controller::{self, Settings};

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
    Run(Box<RunArgs>),
    /// Print the WindowsNodePool CustomResourceDefinition as YAML.
    Crd {
        /// The agents' WindowsNodeReport CRD instead.
        #[arg(long, conflicts_with = "operation")]
        report: bool,
        /// The WindowsNodeOperation CRD (winpool's starts of nodes) instead.
        #[arg(long)]
        operation: bool,
    },
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
    /// How long a Lease holds without renewal: a standby takes over this long
    /// after the leader is gone; the leader stops writing two thirds of it
    /// after its last renewal was sent (client-go's 15s and 10s).
    #[arg(long, default_value = "15s", value_parser = parse_positive)]
    lease_duration: Duration,
    /// How often the leader renews its Lease: well under two thirds of
    /// --lease-duration, so a slow renewal or two do not cost the lead.
    #[arg(long, default_value = "2s", value_parser = parse_positive)]
    lease_renew_every: Duration,
    /// Namespace of the agent DaemonSets; it is labelled pod-security enforce=privileged and holds nothing else.
    #[arg(long, default_value = "winpool-agents")]
    agent_namespace: String,
    /// Agent image for pools that leave spec.agent.image empty.
    #[arg(long, default_value = concat!("ghcr.io/winpool/agent:", env!("CARGO_PKG_VERSION")))]
    agent_image: String,
    /// How often agents re-read their node's HNS counts (written only when they change).
    #[arg(long, default_value = "15s", value_parser = parse_interval)]
    agent_hns_interval: String,
    /// Update installs per revision before an agent reports Failed (never a reboot loop).
    #[arg(long, default_value_t = 3)]
    agent_max_attempts: u32,
    /// Secrets in the agents' namespace that pull the agent image (comma-separated names).
    #[arg(long, value_delimiter = ',')]
    agent_image_pull_secrets: Vec<String>,
    /// More environment variables of the agents (proxy, KUBE_NETWORK), a JSON list of EnvVar objects.
    #[arg(long, value_parser = |s: &str| daemonset::parse_extra_env(s).map(Json))]
    agent_extra_env: Option<Json<Vec<k8s_openapi::api::core::v1::EnvVar>>>,
    /// The agents' resources instead of winpool's defaults, a JSON ResourceRequirements object.
    #[arg(long, value_parser = |s: &str| daemonset::parse_resources(s).map(Json))]
    agent_resources: Option<Json<k8s_openapi::api::core::v1::ResourceRequirements>>,
    /// The API server agents talk to (host:port or https:// URL) instead of the kubelet's or the kubernetes Service.
    #[arg(long, value_parser = daemonset::parse_api_server)]
    agent_api_server: Option<String>,
    /// Node labels agents need beyond the pool's (key=value, comma-separated).
    #[arg(long, value_parser = |s: &str| daemonset::parse_node_selector(s).map(Json))]
    agent_node_selector: Option<Json<std::collections::BTreeMap<String, String>>>,
    /// The agents' PriorityClass instead of system-node-critical.
    #[arg(long)]
    agent_priority_class_name: Option<String>,
    /// Reconcile only pools matching this label selector (sharding, canary operators, tests).
    #[arg(long)]
    pool_selector: Option<String>,
    /// Image prefixes a pool's spec.agent.image may use (comma-separated); empty allows any.
    #[arg(long, value_delimiter = ',')]
    allowed_agent_images: Vec<String>,
    /// URL prefixes (https://…, matched as URLs) a pool's spec.runtime.archive may use
    /// (comma-separated); empty allows none: the official containerd release only.
    #[arg(long, value_delimiter = ',')]
    allowed_runtime_archives: Vec<String>,
    /// Shares (\\server.dns.name\share, matched up to a `\`) a pool's update
    /// packages may be read from (comma-separated); empty allows none: every
    /// node's SYSTEM account authenticates to the server of such a path.
    #[arg(long, value_delimiter = ',', value_parser = share_prefix)]
    allowed_package_shares: Vec<String>,
    /// Image prefixes a pool's rollout.hooks may run (comma-separated); empty allows any.
    #[arg(long, value_delimiter = ',')]
    allowed_hook_images: Vec<String>,
    /// ServiceAccounts of the hooks namespace a pool's rollout.hooks may run
    /// as (comma-separated); empty allows none: hooks run without a token.
    #[arg(long, value_delimiter = ',')]
    allowed_hook_service_accounts: Vec<String>,
    /// CSI Proxy's HostProcess image repository (a mirror in an air-gapped
    /// cluster); the tag is the pool's storage.csiProxy.version.
    #[arg(long, default_value = winpool::builders::csi_proxy::DEFAULT_REPOSITORY)]
    csi_proxy_repository: String,
    /// The pause image each pool's pod-network DaemonSet runs: one pod on
    /// the pod network per node, so a CNI that creates its HNS network only
    /// for a pod sandbox (Azure CNI after AKS's boot-time HNS clean-up) does
    /// so on a drained node too. Empty: no such DaemonSet.
    #[arg(long, default_value = winpool::builders::pod_network::DEFAULT_IMAGE)]
    pod_network_image: String,
    /// This install's name, written into each pool it rolls (annotation
    /// winpool.dev/claimed-by); a pool another install claimed is left
    /// alone. Empty: claim nothing (one install per cluster). The chart
    /// sets <release namespace>/<fullname>.
    #[arg(long, default_value = "")]
    install_id: String,
    /// Nodes that must fail one update (a patch level) with one result
    /// code, counted across pools, before every pool targeting that update
    /// pauses itself (winpool.dev/paused; kubectl winpool resume lifts it).
    /// 0: never.
    #[arg(long, default_value_t = winpool::decision::breaker::DEFAULT_THRESHOLD)]
    bad_update_threshold: u32,
    /// Nodes that may be between Pending and Updated at once across every
    /// pool of this install, on top of each pool's maxUnavailable (three pools
    /// at maxUnavailable 2 would otherwise take six). 0: no such bound.
    #[arg(long, default_value_t = 0)]
    max_nodes_in_flight: u32,
    /// The namespace where pools' rollout.hooks Jobs run (their
    /// ServiceAccounts are that namespace's). Unset: a pool with hooks fails
    /// the node that reaches one, saying so.
    #[arg(long)]
    hooks_namespace: Option<String>,
    /// How long each node's ended WindowsNodeOperations (its record) are
    /// kept (9600h: 400 days, 13 months of monthly patching and more).
    #[arg(long, default_value = "9600h", value_parser = parse_positive)]
    operation_retention: Duration,
    /// The most ended operations kept per node, whatever their age: the
    /// record's bound when a node is started far more than monthly.
    #[arg(long, default_value_t = 64, value_parser = clap::value_parser!(u16).range(2..))]
    operations_per_node: u16,
    /// The only namespace whose Secrets winpool reads: health gate credentials
    /// (default: this pod's namespace, else "default").
    #[arg(long, env = "POD_NAMESPACE", default_value = "default")]
    secret_namespace: String,
}

/// A flag's value parsed from JSON (clap would take a bare Vec or map as repeated flags).
#[derive(Clone)]
struct Json<T>(T);

fn parse_positive(s: &str) -> Result<Duration, String> {
    parse_interval(s).map(|_| winpool::decision::rollout::parse_duration(s).expect("parsed above"))
}

fn parse_interval(s: &str) -> Result<String, String> {
    match winpool::decision::rollout::parse_duration(s) {
        Some(d) if !d.is_zero() => Ok(s.to_string()),
        _ => Err(format!("{s:?} is not a positive duration such as 15s or 1m")),
    }
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

/// Waits for SIGTERM (on `term`, registered before anything else runs, so a
/// signal that comes early is not the default action's to end the process)
/// or Ctrl-C.
async fn shutdown_signal(mut term: tokio::signal::unix::Signal) {
    tokio::select! {
        _ = term.recv() => {},
        _ = tokio::signal::ctrl_c() => {},
    }
    info!("shutdown signal received");
}

/// The Kubernetes client of this replica, which names it in its user agent
/// and writes nothing once its fence, armed when it leads, says its lease ran out.
async fn client(identity: &str, unacked_for: Option<Duration>) -> anyhow::Result<(kube::Client, WriteFence)> {
    let mut config =
        kube::Config::infer().await.context("reading the Kubernetes client configuration (KUBECONFIG, ~/.kube/config or in-cluster)")?;
    // A 429 from the Eviction API means "a PodDisruptionBudget says not now": the next
    // round retries it. The client's own retry loop would stall the whole reconcile.
    config.default_retry = false;
    // The API server's audit log then says which replica made each request.
    let user_agent = format!("winpool/{} ({identity})", env!("CARGO_PKG_VERSION"));
    config.headers.push((
        hyper::header::USER_AGENT,
        hyper::header::HeaderValue::from_str(&user_agent).context("the replica's identity is not a valid header value")?,
    ));
    let fence = WriteFence::default();
    let client = winpool::controller::write_fence::client(config, fence.clone(), unacked_for).context("building the Kubernetes client")?;
    Ok((client, fence))
}

/// An allowed package share, refused at start unless it names its server by
/// a DNS name (Kerberos; an IP address or a bare name falls back to NTLM).
fn share_prefix(s: &str) -> Result<String, String> {
    if s.is_empty() || winpool::decision::round::agent::share_prefix_valid(s) {
        Ok(s.to_string())
    } else {
        Err(format!(
            r"{s:?} is not \\server.dns.name\share: name the server by its DNS name (not an IP address or a bare host name) and the share"
        ))
    }
}

fn controller_settings(args: &RunArgs) -> Settings {
    let nonempty = |v: &[String]| v.iter().filter(|s| !s.is_empty()).cloned().collect();
    Settings {
        agent_namespace: args.agent_namespace.clone(),
        agent: AgentSettings {
            image: args.agent_image.clone(),
            hns_interval: args.agent_hns_interval.clone(),
            max_attempts: args.agent_max_attempts,
            pod: AgentPodOptions {
                image_pull_secrets: nonempty(&args.agent_image_pull_secrets),
                extra_env: args.agent_extra_env.as_ref().map(|j| j.0.clone()).unwrap_or_default(),
                resources: args.agent_resources.as_ref().map(|j| j.0.clone()),
                api_server: args.agent_api_server.clone(),
                node_selector: args.agent_node_selector.as_ref().map(|j| j.0.clone()).unwrap_or_default(),
                priority_class_name: args.agent_priority_class_name.clone().filter(|s| !s.is_empty()),
            },
        },
        pool_selector: args.pool_selector.clone(),
        allowed_agent_images: nonempty(&args.allowed_agent_images),
        allowed_runtime_archives: nonempty(&args.allowed_runtime_archives),
        allowed_package_shares: nonempty(&args.allowed_package_shares),
        allowed_hook_images: nonempty(&args.allowed_hook_images),
        allowed_hook_service_accounts: nonempty(&args.allowed_hook_service_accounts),
        csi_proxy_repository: args.csi_proxy_repository.clone(),
        pod_network_image: Some(args.pod_network_image.clone()).filter(|s| !s.is_empty()),
        secret_namespace: args.secret_namespace.clone(),
        install_id: args.install_id.clone(),
        bad_update_threshold: args.bad_update_threshold,
        max_nodes_in_flight: args.max_nodes_in_flight,
        hooks_namespace: args.hooks_namespace.clone().filter(|ns| !ns.is_empty()),
        operation_retention: winpool::decision::operation::Retention {
            max_age: args.operation_retention,
            per_node: args.operations_per_node.into(),
        },
    }
}

async fn run(args: RunArgs) -> anyhow::Result<()> {
    let identity = std::env::var("POD_NAME").unwrap_or_else(|_| format!("{}-{}", hostname(), std::process::id()));
    let lease_settings = LeaseSettings {
        name: args.lease_name.clone(),
        namespace: args.lease_namespace.clone(),
        identity: identity.clone(),
        lease_duration: args.lease_duration,
        renew_every: args.lease_renew_every,
    };
    // Refused before anything connects: bad flags, not a cluster problem.
    lease::check(&lease_settings).map_err(|e| anyhow::anyhow!(e))?;
    let term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).context("installing the SIGTERM handler")?;
    // Only a replica that may lead has writes to keep from landing late.
    let (client, fence) = client(&identity, args.leader_elect.then(|| lease::delivery_bound(&lease_settings))).await?;
    let m = Metrics::new();
    let admin = tokio::spawn(metrics::serve(args.metrics_addr, m.clone()));
    let settings = controller_settings(&args);
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    tokio::spawn(async move {
        shutdown_signal(term).await;
        let _ = stop_tx.send(true);
    });
    let stopped = |mut rx: tokio::sync::watch::Receiver<bool>| async move {
        let _ = rx.wait_for(|s| *s).await;
    };

    let mut leadership = None;
    if args.leader_elect {
        tokio::select! {
            l = lease::acquire(client.clone(), lease_settings.clone()) => leadership = Some(l),
            _ = stopped(stop_rx.clone()) => return Ok(()),
        }
    }
    let leading = leadership.as_ref().map(|l| l.leading.clone());
    let validity = leadership.as_ref().map(|l| l.validity.clone());
    validity.iter().for_each(|v| fence.arm(v.clone()));
    m.leader.set(1);
    // A lost lease ends the process at once, as client-go's OnStoppedLeading
    // does: a round waiting on a connection that hangs (a partition) is not
    // waited for, and the write fence refuses whatever it would still send.
    let lost = async move {
        let Some(mut l) = leading else { return std::future::pending().await };
        // An error is the renewal task gone without a word (a release stops
        // it only after this select): nothing renews the lease any more, so
        // it is as good as lost.
        let _ = l.wait_for(|leading| !*leading).await;
    };
    // The controller stops at its next write once told to; one still waiting
    // on an API server that does not answer (caches never synced, a CRD
    // missing, a connection that hangs) is not waited for past the grace.
    let forced = {
        let stop_rx = stop_rx.clone();
        async move {
            stopped(stop_rx).await;
            tokio::time::sleep(SHUTDOWN_GRACE).await;
        }
    };
    let res = tokio::select! {
        r = controller::run(client.clone(), settings, m.clone(), stopped(stop_rx.clone()), validity) => r.context("running the controller"),
        r = admin => Err(anyhow::anyhow!("admin server on {} stopped: {:?}", args.metrics_addr, r)),
        _ = forced => {
            warn!(grace = ?SHUTDOWN_GRACE, "the controller had not stopped this long after the shutdown signal; exiting without it");
            Ok(())
        }
        _ = lost => Ok(()),
    };
    m.leader.set(0);
    if let Some(l) = leadership {
        if !*l.leading.borrow() || l.leading.has_changed().is_err() {
            error!("lost the leader lease; exiting so no two replicas write");
            std::process::exit(EXIT_LOST_LEASE);
        }
        // Releasing only saves the standby its wait; an API server that does
        // not answer must not hold the exit.
        if tokio::time::timeout(RELEASE_TIMEOUT, lease::release(client, &lease_settings, l)).await.is_err() {
            warn!(lease = %lease_settings.name, "could not release the leader lease in time; the standby takes it when it expires");
        }
    }
    res
}

/// How long after SIGTERM the controller may take to stop (the writes already
/// sent finish); well inside Kubernetes' 30 s termination grace period.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);
/// How long releasing the leader lease may take on the way out.
const RELEASE_TIMEOUT: Duration = Duration::from_secs(3);

/// Exit status after losing the leader lease (EX_TEMPFAIL): the Deployment
/// restarts the pod as a follower. Any other failure exits with 1, so the two
/// can be told apart in `kubectl get pod -o yaml` (lastState.terminated.exitCode).
const EXIT_LOST_LEASE: i32 = 75;

fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname").map(|s| s.trim().to_string()).unwrap_or_else(|_| "winpool".into())
}

/// At most two glibc malloc arenas (glibc allows eight per core). A thread that
/// meets contention gets an arena of its own, and memory freed into an arena
/// serves only later allocations from it, so each extra arena can keep a
/// high-water mark of its own. MALLOC_ARENA_MAX, when set, still decides.
fn limit_malloc_arenas() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    if std::env::var_os("MALLOC_ARENA_MAX").is_none() {
        // SAFETY: called before any other thread exists; mallopt only sets a tunable.
        unsafe {
            libc::mallopt(libc::M_ARENA_MAX, 2);
        }
    }
}

fn main() -> anyhow::Result<()> {
    limit_malloc_arenas();
    tokio::runtime::Builder::new_multi_thread().enable_all().build().context("starting the async runtime")?.block_on(async_main())
}

async fn async_main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    match cli.command {
        Command::Crd { report, operation } => {
            let yaml = match (report, operation) {
                (true, _) => winpool::crd::report_crd_yaml(),
                (_, true) => winpool::crd::operation_crd_yaml(),
                _ => winpool::crd::crd_yaml(),
            };
            print!("{yaml}");
            Ok(())
        }
        Command::Run(a) => {
            init_logging(cli.log_format);
            run(*a).await
        }
    }
}
