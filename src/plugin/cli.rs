//! The command line of `kubectl winpool` and the requests each command makes;
//! what it shows comes from [`super::output`], what it refuses from [`super::retry`].

// The commands' doc comments are their `--help` text, where `node/<name>` is
// what a person types, not an HTML tag.
#![allow(rustdoc::invalid_html_tags)]

use std::path::PathBuf;

use clap::{Parser, Subcommand, ValueEnum};
use jiff::Timestamp;
use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, ListParams, Patch, PatchParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};
use serde_json::json;

use super::output::{self, Members};
use super::{FIELD_MANAGER, PluginError, retry, table};
use crate::api::report::WindowsNodeReport;
use crate::api::{WindowsNodePool, names};

#[derive(Parser, Debug)]
#[command(
    name = "kubectl-winpool",
    bin_name = "kubectl winpool",
    version,
    about = "Read and steer winpool's Windows node pool rollouts",
    long_about = "Read and steer winpool's Windows node pool rollouts. Uses the current kubeconfig context like kubectl; \
                  writes (pause, resume, retry) carry the field manager kubectl-winpool."
)]
pub struct Cli {
    /// Path to the kubeconfig file (default: $KUBECONFIG, ~/.kube/config, or in-cluster).
    #[arg(long, global = true, value_name = "PATH")]
    pub kubeconfig: Option<PathBuf>,
    /// The kubeconfig context to use (default: its current context).
    #[arg(long, global = true, value_name = "NAME")]
    pub context: Option<String>,
    /// Act as this user (impersonation, like kubectl --as).
    #[arg(long = "as", global = true, value_name = "USER")]
    pub as_user: Option<String>,
    /// Act as this group too (repeatable; needs --as).
    #[arg(long = "as-group", global = true, value_name = "GROUP", requires = "as_user")]
    pub as_groups: Vec<String>,
    /// Give up on a request after this long, e.g. 30s or 1m (0: never; a bare number is seconds).
    #[arg(long, global = true, value_name = "DURATION", value_parser = parse_request_timeout)]
    pub request_timeout: Option<std::time::Duration>,
    #[command(subcommand)]
    pub command: Command,
}

/// kubectl's --request-timeout: `0` (no timeout), a bare number of seconds, or 30s / 1m / 1h.
fn parse_request_timeout(s: &str) -> Result<std::time::Duration, String> {
    if let Ok(secs) = s.parse::<u64>() {
        return Ok(std::time::Duration::from_secs(secs));
    }
    crate::decision::rollout::parse_duration(s).ok_or_else(|| format!("{s:?} is not a duration such as 30s, 1m or 0"))
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Every pool: patch level, nodes, updated, failed, paused and why the rollout moves or not.
    List {
        #[arg(short, long, value_enum, default_value_t = Output::Table)]
        output: Output,
        /// After the first view, print it again each time it changes, until interrupted.
        #[arg(short, long)]
        watch: bool,
    },
    /// Per-node table of a pool: state, since, revision, patch level, HNS readiness, message.
    Status {
        pool: String,
        /// -o name: the pool's nodes as node/<name>.
        #[arg(short, long, value_enum, default_value_t = Output::Table)]
        output: Output,
        /// After the first view, print it again each time it changes, until interrupted.
        #[arg(short, long)]
        watch: bool,
    },
    /// Dry run: the order nodes would go in, the waves, the maintenance window and what holds the rollout now.
    Plan {
        pool: String,
        /// -o name: the pending nodes in the order they start, as node/<name>.
        #[arg(short, long, value_enum, default_value_t = Output::Table)]
        output: Output,
        /// After the first view, print it again each time it changes, until interrupted.
        #[arg(short, long)]
        watch: bool,
    },
    /// Start no new node (annotation winpool.dev/paused: "true", which GitOps leaves alone); nodes in flight finish.
    Pause { pool: String },
    /// Let the rollout start nodes again (removes winpool.dev/paused; spec.rollout.paused stays the spec owner's).
    Resume { pool: String },
    /// Roll a Failed node again: it becomes Pending and starts when a slot is free.
    Retry { node: String },
    /// The plugin's version, the winpool operators you can see and the agents' versions on the nodes.
    Version {
        #[arg(short, long, value_enum, default_value_t = Output::Table)]
        output: Output,
    },
    /// Write a support archive of a pool for a bug report (.tar.gz): the pool, its nodes and
    /// reports, status, plan, Events, the operators' log tails and versions; never Secrets.
    Bundle {
        pool: String,
        /// Where to write it (default: winpool-bundle-<pool>-<time>.tar.gz here).
        #[arg(short, long, value_name = "PATH")]
        file: Option<PathBuf>,
    },
    /// What winpool did to the nodes of a pool (POOL) or one node (node/NAME), from its operations, oldest first.
    History {
        target: Option<String>,
        /// Check each node's chain of operations: one edited or deleted since is named.
        #[arg(long)]
        verify: bool,
        /// Only operations started since then: a time (RFC 3339) or an age (90d, 720h).
        #[arg(long, value_name = "TIME|AGE", value_parser = parse_since)]
        since: Option<Since>,
        #[arg(short, long, value_enum, default_value_t = Output::Table)]
        output: Output,
    },
    /// Per node of a pool (or every node): the build it ran, its last update and when, the days it was
    /// behind its pool and, with --cve, whether that CVE was fixed on it; now or --as-of a time, from the record.
    Compliance {
        pool: Option<String>,
        /// A CVE ID (CVE-2026-21001): whether each node's build had the update that fixes it.
        #[arg(long, value_name = "ID")]
        cve: Option<String>,
        /// The time to answer for (RFC 3339; default: now).
        #[arg(long, value_name = "TIME")]
        as_of: Option<Timestamp>,
        #[arg(short, long, value_enum, default_value_t = Output::Table)]
        output: Output,
    },
    /// Print a shell completion script: bash, zsh, fish or powershell (for the `kubectl-winpool` command).
    Completion { shell: clap_complete::Shell },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Output {
    Table,
    /// The table with more columns (list: OS, revision, message).
    Wide,
    /// Resource names only, one per line, as `kubectl get -o name` prints them.
    Name,
    Json,
    Yaml,
    /// Comma-separated values with a header line (history and compliance).
    Csv,
}

/// `history --since`: a time, or an age back from now.
#[derive(Clone, Copy, Debug)]
pub enum Since {
    At(Timestamp),
    Ago(std::time::Duration),
}

fn parse_since(s: &str) -> Result<Since, String> {
    if let Ok(t) = s.parse::<Timestamp>() {
        return Ok(Since::At(t));
    }
    let days = s.strip_suffix('d').and_then(|d| d.parse::<u64>().ok()).map(|d| std::time::Duration::from_secs(d * 86_400));
    days.or_else(|| crate::decision::rollout::parse_duration(s))
        .map(Since::Ago)
        .ok_or_else(|| format!("{s:?} is neither a time (2026-01-31T00:00:00Z) nor an age (90d, 720h)"))
}

/// The client of the kubeconfig and context asked for, else kubectl's
/// default; acting as `--as` / `--as-group`, giving up after `--request-timeout`.
pub async fn client(cli: &Cli) -> Result<Client, PluginError> {
    let cfg_err = |e: kube::config::KubeconfigError| PluginError::Config(e.to_string());
    let options = KubeConfigOptions { context: cli.context.clone(), ..Default::default() };
    let mut config = match (&cli.kubeconfig, &cli.context) {
        (Some(path), _) => {
            let kc = Kubeconfig::read_from(path).map_err(cfg_err)?;
            Config::from_custom_kubeconfig(kc, &options).await.map_err(cfg_err)?
        }
        (None, Some(_)) => Config::from_kubeconfig(&options).await.map_err(cfg_err)?,
        (None, None) => Config::infer().await.map_err(|e| PluginError::Config(e.to_string()))?,
    };
    if let Some(user) = &cli.as_user {
        config.auth_info.impersonate = Some(user.clone());
        config.auth_info.impersonate_groups = (!cli.as_groups.is_empty()).then(|| cli.as_groups.clone());
    }
    if let Some(t) = cli.request_timeout.filter(|t| !t.is_zero()) {
        (config.connect_timeout, config.read_timeout, config.write_timeout) = (Some(t), Some(t), Some(t));
        config.reset_reader_on_write = true;
    }
    Client::try_from(config).map_err(PluginError::Api)
}

/// Run one command; returns what to print.
pub async fn run(cli: Cli) -> Result<String, PluginError> {
    if let Command::Completion { shell } = cli.command {
        return Ok(completion(shell));
    }
    let client = client(&cli).await?;
    let now = Timestamp::now();
    match cli.command {
        Command::List { output, .. } => {
            let pools: Api<WindowsNodePool> = Api::all(client.clone());
            let all = pools.list(&ListParams::default()).await.map_err(|e| PluginError::from_kube(e, "pools", ""))?.items;
            render_list(&all, output)
        }
        Command::Status { pool, output, .. } => {
            let (p, m) = read_pool(&client, &pool).await?;
            render_status(&p, &m, output, now)
        }
        Command::Plan { pool, output, .. } => {
            let (p, m) = read_pool(&client, &pool).await?;
            render_plan(&p, &m, output, now)
        }
        Command::Pause { pool } => set_paused(&client, &pool, true).await,
        Command::Resume { pool } => set_paused(&client, &pool, false).await,
        Command::Retry { node } => retry_node(&client, &node).await,
        Command::Bundle { pool, file } => write_bundle(&client, &pool, file, now).await,
        Command::Version { output } => {
            let r = read_versions(&client).await;
            render(&r, output, || vec![format!("kubectl-winpool/{}", r.client)], |_| super::version::table(&r))
        }
        Command::History { target, verify, since, output } => {
            let ops = super::history::read(&client).await?;
            if verify {
                return super::history::verify(&ops, target.as_deref());
            }
            let since = since.map(|s| match s {
                Since::At(t) => t,
                Since::Ago(d) => {
                    now.checked_sub(jiff::SignedDuration::try_from(d).unwrap_or(jiff::SignedDuration::MAX)).unwrap_or(Timestamp::MIN)
                }
            });
            let rows = super::history::rows(&ops, target.as_deref(), since);
            let names = || rows.iter().map(|r| format!("node/{}", r.node)).collect();
            render_records(&rows, output, names, || super::history::table(&rows))
        }
        Command::Compliance { pool, cve, as_of, output } => {
            let ops = super::history::read(&client).await?;
            let nodes: Api<Node> = Api::all(client.clone());
            let nodes = nodes.list(&ListParams::default()).await.map_err(|e| PluginError::from_kube(e, "nodes", ""))?.items;
            let hosts: Vec<_> = nodes.iter().filter_map(super::compliance::host).collect();
            let mut rows = super::compliance::rows(&ops, &hosts, as_of.unwrap_or(now), cve.as_deref());
            rows.retain(|r| pool.as_deref().is_none_or(|p| r.pool == p));
            let names = || rows.iter().map(|r| format!("node/{}", r.node)).collect();
            render_records(&rows, output, names, || super::compliance::table(&rows, cve.as_deref()))
        }
        Command::Completion { .. } => unreachable!("answered before connecting"),
    }
}

fn render_list(all: &[WindowsNodePool], output: Output) -> Result<String, PluginError> {
    let rows = output::list_report(all);
    let names = || rows.iter().map(|r| format!("windowsnodepool.winpool.dev/{}", r.name)).collect();
    render(&rows, output, names, |wide| table::pools(&rows, wide))
}

fn render_status(p: &WindowsNodePool, m: &Members, output: Output, now: Timestamp) -> Result<String, PluginError> {
    let r = output::status_report(p, m);
    let names = || r.nodes.iter().map(|n| format!("node/{}", n.name)).collect();
    render(&r, output, names, |_| table::status(&r, now))
}

fn render_plan(p: &WindowsNodePool, m: &Members, output: Output, now: Timestamp) -> Result<String, PluginError> {
    let r = output::plan_report(p, m, now);
    let names = || r.order.iter().map(|n| format!("node/{n}")).collect();
    render(&r, output, names, |_| table::plan(&r))
}

impl Cli {
    /// `list`, `status` or `plan` with `--watch`.
    pub fn watches(&self) -> bool {
        matches!(self.command, Command::List { watch: true, .. } | Command::Status { watch: true, .. } | Command::Plan { watch: true, .. })
    }
}

/// `--watch`: the view from caches of pools, Windows nodes and reports, printed
/// again each time it changes ([`super::watch`]), until interrupted.
pub async fn run_watch(cli: Cli, print: impl FnMut(&str)) -> Result<(), PluginError> {
    let client = client(&cli).await?;
    if let Command::Status { pool, .. } | Command::Plan { pool, .. } = &cli.command {
        // A pool that does not exist is refused as without --watch, not watched for.
        Api::<WindowsNodePool>::all(client.clone()).get(pool).await.map_err(|e| PluginError::from_kube(e, "pool", pool))?;
    }
    let (caches, changes) = super::watch::start(&client).await?;
    let view = || -> Result<String, PluginError> {
        let (pools, now) = (caches.pools(), Timestamp::now());
        let pool = |name: &str| {
            let p = pools.iter().find(|p| p.metadata.name.as_deref() == Some(name)).cloned();
            let p = p.ok_or_else(|| PluginError::Output(format!("pool {name} was deleted")))?;
            let m = output::members(&p, &pools, &caches.nodes(), &caches.reports());
            Ok::<_, PluginError>((p, m))
        };
        let (view, output) = match &cli.command {
            Command::List { output, .. } => (render_list(&pools, *output), output),
            Command::Status { pool: name, output, .. } => (pool(name).and_then(|(p, m)| render_status(&p, &m, *output, now)), output),
            Command::Plan { pool: name, output, .. } => (pool(name).and_then(|(p, m)| render_plan(&p, &m, *output, now)), output),
            _ => unreachable!("only list, status and plan watch"),
        };
        // One YAML document per view, as kubectl get -w -o yaml prints them.
        view.map(|v| if *output == Output::Yaml { format!("---\n{v}") } else { v })
    };
    super::watch::follow(changes, view, print).await
}

/// `kubectl_complete-winpool <words>`: the candidates for the last word
/// ([`super::complete`]). The cluster is asked with the kubeconfig and
/// context typed so far; any failure completes nothing rather than print an error.
pub async fn complete(words: Vec<String>) -> String {
    use super::complete::{Wanted, answer, matching, wanted};
    let candidates = match wanted(&words) {
        Wanted::These(c) => c,
        Wanted::Pools(prefix) => {
            let names = async {
                let pools: Api<WindowsNodePool> = Api::all(completion_client(&words).await?);
                let list = pools.list(&ListParams::default()).await.ok()?;
                Some(list.items.into_iter().filter_map(|p| p.metadata.name).collect::<Vec<_>>())
            };
            matching(names.await.unwrap_or_default(), &prefix)
        }
        Wanted::FailedNodes(prefix) => {
            let names = async {
                let nodes: Api<Node> = Api::all(completion_client(&words).await?);
                let failed = ListParams::default().labels(&format!("{}=Failed", names::LABEL_STATE));
                let list = nodes.list(&failed).await.ok()?;
                Some(list.items.into_iter().filter_map(|n| n.metadata.name).collect::<Vec<_>>())
            };
            matching(names.await.unwrap_or_default(), &prefix)
        }
    };
    answer(&candidates)
}

/// The client of the global flags among the words typed (--kubeconfig, --context, ...).
async fn completion_client(words: &[String]) -> Option<Client> {
    let typed = words.iter().take(words.len().saturating_sub(1)).cloned();
    // The subcommand's own words may not parse yet; the global flags before it do.
    let commands = <Cli as clap::CommandFactory>::command();
    let globals: Vec<String> = typed.take_while(|w| commands.find_subcommand(w).is_none()).collect();
    let cli = Cli::try_parse_from(std::iter::once("kubectl-winpool".to_string()).chain(globals).chain(["version".into()])).ok()?;
    client(&cli).await.ok()
}

/// The lines of the operators' logs a bundle keeps, per pod.
const BUNDLE_LOG_LINES: i64 = 2000;

/// `bundle`: read what a bug report needs ([`super::bundle`]) and write the archive.
async fn write_bundle(client: &Client, name: &str, file: Option<PathBuf>, now: Timestamp) -> Result<String, PluginError> {
    use super::bundle::{Bundle, file_safe};
    let (p, m) = read_pool(client, name).await?;
    let mut b = Bundle::default();
    b.add_yaml("pool.yaml", std::slice::from_ref(&p));
    for (file, text) in [("status", render_status(&p, &m, Output::Table, now)), ("plan", render_plan(&p, &m, Output::Table, now))] {
        b.add(&format!("{file}.txt"), text?);
    }
    b.add("status.json", render_status(&p, &m, Output::Json, now)?);
    b.add("plan.json", render_plan(&p, &m, Output::Json, now)?);
    let members: std::collections::BTreeSet<String> = m.views.iter().map(|v| v.name.clone()).collect();
    let nodes: Api<Node> = Api::all(client.clone());
    let windows = ListParams::default().labels(&format!("{}=windows", names::LABEL_OS));
    match nodes.list(&windows).await {
        Ok(l) => b.add_yaml(
            "nodes.yaml",
            &l.items.into_iter().filter(|n| members.contains(n.metadata.name.as_deref().unwrap_or(""))).collect::<Vec<_>>(),
        ),
        Err(e) => b.problem("nodes", e),
    }
    let reports = agent_reports(client)
        .await
        .map(|r| r.into_iter().filter(|r| members.contains(r.metadata.name.as_deref().unwrap_or(""))).collect::<Vec<_>>());
    match reports {
        Ok(r) => b.add_yaml("reports.yaml", &r),
        Err(e) => b.problem("windowsnodereports", e),
    }
    bundle_events(client, name, &members, &mut b).await;
    bundle_operator_logs(client, &mut b).await;
    b.add("version.txt", super::version::table(&read_versions(client).await));
    let path =
        file.unwrap_or_else(|| PathBuf::from(format!("winpool-bundle-{}-{}.tar.gz", file_safe(name), now.strftime("%Y%m%dT%H%M%SZ"))));
    let root = format!("winpool-bundle-{}", file_safe(name));
    let bytes = b.archive(&root, now.as_second().max(0) as u64).map_err(|e| PluginError::Output(e.to_string()))?;
    std::fs::write(&path, bytes).map_err(|e| PluginError::Output(format!("writing {}: {e}", path.display())))?;
    let missing = match b.problems().len() {
        0 => String::new(),
        n => format!("; {n} could not be read (errors.txt names them)"),
    };
    Ok(format!("wrote {} ({} files{missing})\n", path.display(), b.file_names().count()))
}

/// The Events about the pool and its nodes, from every namespace the caller may list.
async fn bundle_events(client: &Client, pool: &str, members: &std::collections::BTreeSet<String>, b: &mut super::bundle::Bundle) {
    use k8s_openapi::api::core::v1::Event;
    let events: Api<Event> = Api::all(client.clone());
    let of_pool = ListParams::default().fields(&format!("involvedObject.kind=WindowsNodePool,involvedObject.name={pool}"));
    let of_nodes = ListParams::default().fields("involvedObject.kind=Node");
    let mut found = Vec::new();
    for (what, params) in [("pool Events", of_pool), ("node Events", of_nodes)] {
        match events.list(&params).await {
            Ok(l) => found.extend(l.items.into_iter().filter(|e| {
                let name = e.involved_object.name.as_deref().unwrap_or("");
                name == pool || members.contains(name)
            })),
            Err(e) => b.problem(what, e),
        }
    }
    found.sort_by_key(|e| e.last_timestamp.as_ref().or(e.first_timestamp.as_ref()).map(|t| t.0));
    b.add_yaml("events.yaml", &found);
}

/// The last lines of every winpool operator pod's log (the chart's pods).
async fn bundle_operator_logs(client: &Client, b: &mut super::bundle::Bundle) {
    use k8s_openapi::api::core::v1::Pod;
    let pods: Api<Pod> = Api::all(client.clone());
    let operators = match pods.list(&ListParams::default().labels("app.kubernetes.io/name=winpool")).await {
        Ok(l) => l.items,
        Err(e) => return b.problem("operator pods", e),
    };
    if operators.is_empty() {
        b.problem("operator logs", "no pod labelled app.kubernetes.io/name=winpool is visible");
    }
    for pod in operators {
        let (ns, name) = (pod.metadata.namespace.clone().unwrap_or_default(), pod.metadata.name.clone().unwrap_or_default());
        let params = kube::api::LogParams { tail_lines: Some(BUNDLE_LOG_LINES), ..Default::default() };
        match Api::<Pod>::namespaced(client.clone(), &ns).logs(&name, &params).await {
            Ok(log) => b.add(&format!("operator-{}-{}.log", super::bundle::file_safe(&ns), super::bundle::file_safe(&name)), log),
            Err(e) => b.problem(&format!("log of {ns}/{name}"), e),
        }
    }
}

/// What `version` reads: every winpool operator Deployment and agent report
/// the caller may list; what it may not is said, not an error.
async fn read_versions(client: &Client) -> super::version::VersionReport {
    use super::version::{Operator, VersionReport, agents_by_version};
    use k8s_openapi::api::apps::v1::Deployment;
    let deployments: Api<Deployment> = Api::all(client.clone());
    let operators = deployments
        .list(&ListParams::default().labels("app.kubernetes.io/name=winpool,app.kubernetes.io/part-of=winpool"))
        .await
        .map(|l| {
            l.items
                .iter()
                .map(|d| Operator {
                    deployment: format!(
                        "{}/{}",
                        d.metadata.namespace.as_deref().unwrap_or_default(),
                        d.metadata.name.as_deref().unwrap_or_default()
                    ),
                    version: d.metadata.labels.as_ref().and_then(|l| l.get("app.kubernetes.io/version")).cloned(),
                    image: d.spec.as_ref().and_then(|s| s.template.spec.as_ref()?.containers.first()?.image.clone()),
                    ready: d.status.as_ref().and_then(|s| s.ready_replicas).unwrap_or(0),
                    replicas: d.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1),
                })
                .collect()
        })
        .map_err(|e| PluginError::from_kube(e, "deployments", "").to_string());
    let reports: Api<WindowsNodeReport> = Api::all(client.clone());
    let agents = reports
        .list(&ListParams::default())
        .await
        .map(|l| agents_by_version(l.items.iter().map(|r| r.observations().agent_version.as_deref())))
        .map_err(|e| PluginError::from_kube(e, "windowsnodereports", "").to_string());
    VersionReport { client: env!("CARGO_PKG_VERSION").to_string(), operators, agents }
}

/// The completion script of `kubectl-winpool` for `shell`.
pub fn completion(shell: clap_complete::Shell) -> String {
    use clap::CommandFactory;
    let mut out = Vec::new();
    clap_complete::generate(shell, &mut Cli::command(), "kubectl-winpool", &mut out);
    String::from_utf8_lossy(&out).into_owned()
}

/// The record's answers (history, compliance): a table, JSON, YAML or CSV.
fn render_records<T: serde::Serialize>(
    rows: &[T],
    output: Output,
    names: impl FnOnce() -> Vec<String>,
    table: impl FnOnce() -> String,
) -> Result<String, PluginError> {
    if output != Output::Csv {
        return render(&rows, output, names, |_| table());
    }
    let mut w = csv::Writer::from_writer(Vec::new());
    for r in rows {
        w.serialize(r).map_err(|e| PluginError::Output(e.to_string()))?;
    }
    let bytes = w.into_inner().map_err(|e| PluginError::Output(e.to_string()))?;
    String::from_utf8(bytes).map_err(|e| PluginError::Output(e.to_string()))
}

fn render<T: serde::Serialize>(
    r: &T,
    output: Output,
    names: impl FnOnce() -> Vec<String>,
    table: impl FnOnce(bool) -> String,
) -> Result<String, PluginError> {
    match output {
        Output::Csv => {
            Err(PluginError::Refused("-o csv is for history and compliance; this command prints table, wide, name, json or yaml".into()))
        }
        Output::Table => Ok(table(false)),
        Output::Wide => Ok(table(true)),
        Output::Name => Ok(names().iter().map(|n| format!("{n}\n")).collect()),
        Output::Json => serde_json::to_string_pretty(r).map(|s| s + "\n").map_err(|e| PluginError::Output(e.to_string())),
        Output::Yaml => serde_saphyr::to_string(r).map_err(|e| PluginError::Output(e.to_string())),
    }
}

/// The pool, and its members among the Windows nodes as the operator judges them.
async fn read_pool(client: &Client, name: &str) -> Result<(WindowsNodePool, Members), PluginError> {
    let pools: Api<WindowsNodePool> = Api::all(client.clone());
    let pool = pools.get(name).await.map_err(|e| PluginError::from_kube(e, "pool", name))?;
    let all = pools.list(&ListParams::default()).await.map_err(|e| PluginError::from_kube(e, "pools", ""))?.items;
    let nodes: Api<Node> = Api::all(client.clone());
    let windows = ListParams::default().labels(&format!("{}=windows", names::LABEL_OS));
    let nodes = nodes.list(&windows).await.map_err(|e| PluginError::from_kube(e, "nodes", ""))?.items;
    let reports = agent_reports(client).await?;
    let m = output::members(&pool, &all, &nodes, &reports);
    Ok((pool, m))
}

/// Every agent's report, in whichever namespace winpool's agents run.
async fn agent_reports(client: &Client) -> Result<Vec<WindowsNodeReport>, PluginError> {
    let api: Api<WindowsNodeReport> = Api::all(client.clone());
    Ok(api.list(&ListParams::default()).await.map_err(|e| PluginError::from_kube(e, "windowsnodereports", ""))?.items)
}

fn params() -> PatchParams {
    PatchParams { field_manager: Some(FIELD_MANAGER.into()), ..Default::default() }
}

/// Pause and resume by the annotation `winpool.dev/paused`, not the spec: a
/// GitOps controller that owns the spec (Argo CD self-heal, Flux) would put
/// `spec.rollout.paused` back within minutes, and an annotation it does not
/// manage it leaves alone. A pause in the spec stays the spec owner's to lift.
async fn set_paused(client: &Client, name: &str, paused: bool) -> Result<String, PluginError> {
    let pools: Api<WindowsNodePool> = Api::all(client.clone());
    let pool = pools.get(name).await.map_err(|e| PluginError::from_kube(e, "pool", name))?;
    let by_spec = pool.spec.rollout.paused;
    // Over the bad-update breaker's pause, a person's is written: theirs to
    // lift, and an undo waits for it.
    if paused && (by_spec || pool.pause_annotation() == Some("true")) {
        let how = if by_spec { "spec.rollout.paused" } else { names::ANN_PAUSED };
        return Ok(format!("pool {name} is already paused ({how})\n"));
    }
    if !paused && !pool.paused_by_annotation() {
        return match by_spec {
            true => Err(PluginError::Refused(format!(
                "pool {name} is paused by its spec (spec.rollout.paused: true); set it false where the pool's spec is managed"
            ))),
            false => Ok(format!("pool {name} is already not paused\n")),
        };
    }
    let value = if paused { json!("true") } else { json!(null) };
    let body = json!({"metadata": {"annotations": {names::ANN_PAUSED: value}}});
    pools.patch(name, &params(), &Patch::Merge(&body)).await.map_err(|e| PluginError::from_kube(e, "pool", name))?;
    Ok(match (paused, by_spec) {
        (true, _) => format!("pool {name} paused ({}): nodes in flight finish, no new node starts\n", names::ANN_PAUSED),
        (false, false) => format!("pool {name} resumed: nodes start again as slots free\n"),
        (false, true) => format!(
            "pool {name}: {} removed, but it stays paused by its spec (spec.rollout.paused: true); set it false where the pool's spec is managed\n",
            names::ANN_PAUSED
        ),
    })
}

async fn retry_node(client: &Client, name: &str) -> Result<String, PluginError> {
    let nodes: Api<Node> = Api::all(client.clone());
    let node = nodes.get(name).await.map_err(|e| PluginError::from_kube(e, "node", name))?;
    let reports = agent_reports(client).await?;
    let view = output::view(&node, output::report_of(&node, &reports));
    let pool = match view.pool_label.as_deref() {
        Some(p) => Api::<WindowsNodePool>::all(client.clone()).get_opt(p).await.map_err(|e| PluginError::from_kube(e, "pool", p))?,
        None => None,
    };
    if let Some(why) = retry::refusal(&view, pool.as_ref()) {
        return Err(PluginError::Refused(why));
    }
    let patch: json_patch::Patch = serde_json::from_value(retry::patch(&view)).map_err(|e| PluginError::Output(e.to_string()))?;
    match nodes.patch(name, &params(), &Patch::<()>::Json(patch)).await {
        Ok(_) => {}
        // The test op failed: the operator moved the node since it was read.
        Err(kube::Error::Api(s)) if s.code == 422 => {
            return Err(PluginError::Refused(format!("node {name} changed while it was read (it is no longer Failed); look again")));
        }
        Err(e) => return Err(PluginError::from_kube(e, "node", name)),
    }
    let pool = view.pool_label.unwrap_or_default();
    Ok(format!("node {name} will be retried: it is Pending in pool {pool} and starts when a slot is free\n"))
}
