//! The reasons of the Events the operator records: the names users filter
//! and forward on (`kubectl get events --field-selector reason=...`, an
//! event exporter's routes). docs/OPERATIONS.md and docs/notifications.md list
//! every one, with the agent's own; a test compares the lists.

use kube::runtime::events::{Event, EventType};
use strum::{EnumIter, IntoStaticStr};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, IntoStaticStr, EnumIter)]
pub enum EventReason {
    // A pool's condition changed (`status::PoolTransition`).
    RolloutStarted,
    RolloutComplete,
    RolloutPaused,
    RolloutResumed,
    #[strum(serialize = "HNSCapacity")]
    HnsCapacity,
    // Nodes moving, in batches, and one by one when it went wrong.
    NodesStarted,
    NodesUpdated,
    NodeFailed,
    DrainBlocked,
    HookJobNotCreated,
    // What a round found that a person should know.
    #[strum(serialize = "HNSCollapsed")]
    HnsCollapsed,
    #[strum(serialize = "HNSDrifted")]
    HnsDrifted,
    #[strum(serialize = "HNSRepairAsked")]
    HnsRepairAsked,
    #[strum(serialize = "HNSRepairFailed")]
    HnsRepairFailed,
    NodeIgnoredValue,
    RevisionLabelRestored,
    PreflightBlocked,
    HealthGateClosed,
    NodesLeftAlone,
    BadUpdateStopped,
    PoolClaimedByAnotherInstall,
    // winpool's DaemonSets, edited by hand and put back.
    AgentDaemonSetReverted,
    #[strum(serialize = "CSIProxyDaemonSetReverted")]
    CsiProxyDaemonSetReverted,
    PodNetworkDaemonSetReverted,
    // What would reach SYSTEM on the nodes and is not allowed (also the
    // reason of the pool's conditions).
    AgentImageNotAllowed,
    RuntimeArchiveNotAllowed,
    PackageShareNotAllowed,
    HookNotAllowed,
}

impl EventReason {
    pub fn as_str(self) -> &'static str {
        self.into()
    }

    /// A Warning on the pool alone, for `action`, saying `note`.
    pub fn warning(self, note: String, action: &str) -> Event {
        Event { type_: EventType::Warning, reason: self.as_str().into(), note: Some(note), action: action.into(), secondary: None }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_builders::{doc as read, doc_table, quoted};
    use std::collections::BTreeSet;
    use strum::IntoEnumIterator;

    /// The agent's Event reasons: its `Reason...` constants.
    fn agents() -> BTreeSet<String> {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("agent/internal/agent");
        let mut out = BTreeSet::new();
        for f in std::fs::read_dir(&dir).expect("the agent's sources").flatten() {
            let name = f.file_name().to_string_lossy().to_string();
            if !name.ends_with(".go") || name.ends_with("_test.go") {
                continue;
            }
            let src = std::fs::read_to_string(f.path()).expect("a Go file");
            for line in src.lines().map(str::trim).filter(|l| l.starts_with("Reason")) {
                if let Some(v) = line.split_once('=').and_then(|(_, v)| v.trim().strip_prefix('"')?.strip_suffix('"')) {
                    out.insert(v.to_string());
                }
            }
        }
        out
    }

    /// The reasons notifications.md says the recipe forwards ("yes" in its
    /// fourth column) and those its exporter's routes match.
    fn forwarded(page: &str, recipe: &str) -> (BTreeSet<String>, BTreeSet<String>) {
        let at = page.find("| Reason | On | Type | Forwarded | Why |").expect("the table");
        let said = page[at..]
            .lines()
            .take_while(|l| l.starts_with('|'))
            .skip(2)
            .filter(|row| row.split('|').nth(4).is_some_and(|f| f.trim().starts_with("yes")))
            .flat_map(|row| row.split('|').nth(1).unwrap_or_default().split('`').skip(1).step_by(2).map(str::to_string).collect::<Vec<_>>())
            .collect();
        let routed = recipe
            .lines()
            .filter_map(|l| l.trim().strip_prefix("reason: \"^(")?.strip_suffix(")$\""))
            .flat_map(|alternatives| alternatives.split('|').map(str::to_string).collect::<Vec<_>>())
            .collect();
        (said, routed)
    }

    /// Every reason the operator or an agent records is in both lists, and
    /// neither lists one that is recorded by nobody; the recipe forwards
    /// what notifications.md says it does.
    #[test]
    fn the_docs_list_every_event_reason_and_no_other() {
        let mut recorded: BTreeSet<String> = EventReason::iter().map(|r| r.as_str().to_string()).collect();
        let agent = agents();
        assert!(
            agent.contains("WinpoolApplyFailed") && agent.contains("WinpoolKubeProxyRestarted"),
            "the agent's reasons are read: {agent:?}"
        );
        recorded.extend(agent);
        for (page, heading) in
            [("docs/OPERATIONS.md", "| Reason | Type | On | When |"), ("docs/notifications.md", "| Reason | On | Type | Forwarded | Why |")]
        {
            let doc: BTreeSet<String> = doc_table(&read(page), heading).iter().flat_map(|row| quoted(&row[0])).collect();
            assert_eq!(doc, recorded, "{page}'s Events table and the reasons recorded differ");
        }
        let (said, routed) = forwarded(&read("docs/notifications.md"), &read("docs/notifications/event-exporter.yaml"));
        assert!(said.contains("NodeFailed") && said.contains("WinpoolApplyFailed"), "{said:?}");
        assert_eq!(said, routed, "docs/notifications.md says the recipe forwards what its routes do not");
    }
}
