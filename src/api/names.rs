//! Node labels, annotations, taints and condition types: the fixed interface of SPEC §2/§3/§7.

/// The pool's finalizer: a pool is deleted only once its nodes are released
/// (labels and annotations gone, uncordoned if winpool cordoned them).
pub const FINALIZER: &str = "winpool.dev/release-nodes";

pub const LABEL_OS: &str = "kubernetes.io/os";
pub const LABEL_WINDOWS_BUILD: &str = "node.kubernetes.io/windows-build";
pub const LABEL_POOL: &str = "winpool.dev/pool";
pub const LABEL_REVISION: &str = "winpool.dev/revision";
/// A person's "not this node now": a Pending node labelled `winpool.dev/hold=true`
/// is never started; a node in flight finishes.
pub const LABEL_HOLD: &str = "winpool.dev/hold";
/// Why winpool itself held a node (a failed hook with `onFailure: Hold`).
pub const ANN_HOLD_REASON: &str = "winpool.dev/hold-reason";
/// On a hook Job: which hook (`pre-drain`, `post-update`).
pub const LABEL_HOOK: &str = "winpool.dev/hook";
/// On a hook Job: the node it runs for (an annotation: names outgrow label values).
pub const ANN_HOOK_NODE: &str = "winpool.dev/node";
/// The state annotation mirrored as a label on failed nodes only
/// (`kubectl get nodes -l winpool.dev/state=Failed`): see `NodeState::label`.
pub const LABEL_STATE: &str = "winpool.dev/state";

/// winpool's mirror of the agent's report of a CSI Proxy the node image
/// runs as a host service (`observed.csiProxyHost`) as a label, which the CSI Proxy
/// DaemonSets' node affinity excludes: a second CSI Proxy on the same
/// pipes would crash-loop.
pub const LABEL_CSI_PROXY_HOST: &str = "winpool.dev/csi-proxy-host";
/// Marks (`true`) the revision ConfigMap of a pool's target revision: the
/// agents watch it to preflight a revision before their node is started.
pub const LABEL_TARGET: &str = "winpool.dev/target";
/// When the operator put that mark on (RFC 3339): an agent that has not
/// answered a whole nodeTimeout later is reported, not waited for.
pub const ANN_TARGET_SINCE: &str = "winpool.dev/target-since";
/// On a member whose HNS lost what it held in this boot, with the pool's
/// `hns.repair` on: the Node's bootID winpool asked its agent to restart
/// kube-proxy in (once per boot; an ask for another boot is no ask).
pub const ANN_HNS_REPAIR: &str = "winpool.dev/hns-repair";
/// When winpool asked it (RFC 3339): the pool's `hns.repair.maxPerHour` counts these.
pub const ANN_HNS_REPAIR_ASKED_AT: &str = "winpool.dev/hns-repair-asked-at";

/// Per-node rollout state written by the operator, so a restarted operator
/// resumes exactly where it was (SPEC §2).
/// On a pool: "true" pauses it like spec.rollout.paused, outside the spec
/// that GitOps owns (`kubectl winpool pause` writes it).
pub const ANN_PAUSED: &str = "winpool.dev/paused";
/// The value of `winpool.dev/paused` the bad-update breaker writes: its pause,
/// which an undo does not wait for, told apart from a person's ("true").
pub const PAUSED_BY_BREAKER: &str = "bad-update";
/// The install of winpool that rolls this pool (`--install-id`, the chart's
/// `<namespace>/<fullname>`); other installs leave the pool alone.
pub const ANN_CLAIMED_BY: &str = "winpool.dev/claimed-by";
/// On a pool: the bad-update trips (`<patch level>/<result code>`,
/// comma-separated) that paused it; a resume after them stands
/// (`decision::breaker`).
pub const ANN_BAD_UPDATE: &str = "winpool.dev/bad-update";
pub const ANN_STATE: &str = "winpool.dev/state";
pub const ANN_STATE_SINCE: &str = "winpool.dev/state-since";
/// When this node's rollout to its target revision began; nodeTimeout counts from here.
pub const ANN_STARTED_AT: &str = "winpool.dev/started-at";
/// Set with started-at: how long this start lets the node's servicing task
/// run (rollout.timeouts.install, never below nodeTimeout), as a Go duration,
/// so the agent cuts its own task at the pool's budget rather than at a fixed
/// one. It bounds only the agent on that node; the operator times the node
/// out by its own reading of the spec.
pub const ANN_INSTALL_BUDGET: &str = "winpool.dev/install-budget";
/// On a node started without cordon or drain because its update is a
/// hotpatch (`rollout.hotpatch: true`): removed with `started-at`, and
/// when the hotpatch asks for a reboot after all and the node is drained.
pub const ANN_HOTPATCH: &str = "winpool.dev/hotpatch";
/// On a node started again to take its cumulative update off (`rollout.undo:
/// Enabled`), with started-at: the health gate that held it in its soak. Its
/// agent removes the update instead of installing one; any other start, a
/// retarget and a give-back remove it.
pub const ANN_UNDO: &str = "winpool.dev/undo";
/// The revision the node is being moved to while Draining (the label moves at Applying).
pub const ANN_TARGET_REVISION: &str = "winpool.dev/target-revision";
/// Present only when winpool itself cordoned the node: winpool never
/// uncordons a node someone else cordoned.
pub const ANN_CORDONED_BY_WINPOOL: &str = "winpool.dev/cordoned";
pub const ANN_FAILURE_REASON: &str = "winpool.dev/failure-reason";
pub const ANN_FAILURE_MESSAGE: &str = "winpool.dev/failure-message";
/// Revisions already drained on this node; a node is never drained twice for one revision.
pub const ANN_DRAINED_REVISION: &str = "winpool.dev/drained-revision";
/// A node put back because a PodDisruptionBudget refused its evictions:
/// which budget (namespace/name), and since when its drain has been blocked
/// (drain.timeout counts from there, across the retries).
pub const ANN_DRAIN_BLOCKED_BY: &str = "winpool.dev/drain-blocked-by";
pub const ANN_DRAIN_BLOCKED_SINCE: &str = "winpool.dev/drain-blocked-since";

/// A Secret winpool may send to a health gate's endpoint must carry this
/// label (value "true"): a pool's author names the Secret and the URL, so
/// no other Secret of the operator's namespace can be sent anywhere.
pub const LABEL_GATE_CREDENTIALS: &str = "winpool.dev/health-gate-credentials";
/// On a health gate's credentials Secret: the URL prefixes (comma-separated,
/// matched up to a `/`) its credentials may be sent to. A gate naming the
/// Secret with another URL is refused without sending them.
pub const ANN_GATE_ALLOWED_URLS: &str = "winpool.dev/allowed-urls";

/// On a node that joined a pool below its patch level: no pod lands on it
/// until winpool has updated it (node images may register with it,
/// `docs/clusters.md`); winpool removes it when the node is Updated.
pub const TAINT_UNPATCHED: &str = "winpool.dev/unpatched";
pub const TAINT_HNS_NOT_READY: &str = "winpool.dev/hns-not-ready";
pub const NODE_CONDITION_HNS_READY: &str = "WindowsHNSReady";

/// The kubelet's bootID when winpool started an update that needs a reboot.
pub const ANN_BOOT_ID: &str = "winpool.dev/boot-id";
pub const APPLY_APPLYING: &str = "Applying";
pub const APPLY_REBOOTING: &str = "Rebooting";
/// The update is installed and Windows asks for a reboot, on a node started
/// in service (a hotpatch): the agent waits for winpool's drain.
pub const APPLY_REBOOT_REQUIRED: &str = "RebootRequired";
pub const APPLY_SUCCEEDED: &str = "Succeeded";
pub const APPLY_FAILED: &str = "Failed";
