//! The reasons of the pool's conditions winpool decides by: enums, written as
//! their names and read back by name (an unknown reason is none of them).

macro_rules! reasons {
    ($(#[$doc:meta])* $name:ident { $($(#[$vdoc:meta])* $variant:ident),+ $(,)? }) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub enum $name {
            $($(#[$vdoc])* $variant),+
        }

        impl $name {
            pub const ALL: &'static [$name] = &[$($name::$variant),+];

            pub fn as_str(self) -> &'static str {
                match self {
                    $($name::$variant => stringify!($variant)),+
                }
            }

            /// The reason a condition carries, if it is one of these.
            pub fn parse(reason: &str) -> Option<Self> {
                Self::ALL.iter().copied().find(|r| r.as_str() == reason)
            }
        }
    };
}

reasons! {
    /// Progressing's reason (and Reconciling's and Stalled's, which follow it):
    /// why the rollout moves or stands.
    Progress {
        NodesUpdating,
        Soaking,
        DrainBlocked,
        RuntimeUpgradeRefused,
        AwaitingPreflight,
        PreflightBlocked,
        NodesNotReady,
        Paused,
        FailureLimitReached,
        OutsideMaintenanceWindow,
        NoMaintenanceWindowAhead,
        InvalidMaintenanceWindow,
        HealthGateClosed,
        /// The operator's clock is too far off the API server's.
        ClockSkewed,
        /// Every pending node is labelled winpool.dev/hold=true.
        NodesHeld,
        /// rollout.follows: the pool followed has not soaked the revision, or is Degraded.
        AwaitingFollowedPool,
        /// Nodes of the install's pools fill the operator's --max-nodes-in-flight.
        ClusterLimitReached,
        /// rollout.hnsPacing: the nodes' HNS is further behind than the budget.
        WaitingForHNS,
        /// Nothing left to update, and nodes failed.
        NodesFailed,
        /// The pool selects no Windows node.
        NoNodes,
        /// Every node the pool selects is left alone: it belongs to another
        /// pool too, runs another Windows release, or is still held by the
        /// pool it leaves (condition NodeConflicts names them).
        NodesConflict,
        RolloutComplete,
    }
}

reasons! {
    /// Ready's reason.
    Readiness {
        NoNodes,
        /// The pool selects nodes, but none is its own (condition NodeConflicts).
        NodesConflict,
        /// Every node runs the target revision.
        RolloutComplete,
        /// Nothing failed; the nodes left start when the maintenance window opens.
        WaitingForMaintenanceWindow,
        /// Nothing failed; the nodes left start once the pool followed has soaked the revision.
        WaitingForFollowedPool,
        RolloutIncomplete,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::EventReason;
    use crate::test_builders::{doc, doc_table, quoted};
    use std::collections::BTreeSet;
    use strum::IntoEnumIterator;

    #[test]
    fn a_reason_reads_back_as_itself_and_an_unknown_one_as_none() {
        for r in Progress::ALL {
            assert_eq!(Progress::parse(r.as_str()), Some(*r));
        }
        assert_eq!(Readiness::parse("WaitingForMaintenanceWindow"), Some(Readiness::WaitingForMaintenanceWindow));
        assert_eq!(Progress::parse("AgentImageNotAllowed"), None);
    }

    /// `reasons` and those of a refused pool (round::agent's
    /// system_inputs_refused), which Ready, Progressing and Stalled carry
    /// instead: the Events named `...NotAllowed`.
    fn with_refusals(reasons: impl Iterator<Item = &'static str>) -> BTreeSet<String> {
        let refusals = EventReason::iter().map(EventReason::as_str).filter(|r| r.ends_with("NotAllowed"));
        reasons.chain(refusals).map(str::to_string).collect()
    }

    fn same(listed: BTreeSet<String>, code: &BTreeSet<String>, what: &str) {
        let (lacks, extra): (Vec<_>, Vec<_>) = (code.difference(&listed).collect(), listed.difference(code).collect());
        assert!(lacks.is_empty() && extra.is_empty(), "{what} lacks {lacks:?} and lists {extra:?}, which no condition carries");
    }

    /// The pages that list Ready's and Progressing's reasons list each, and
    /// no other; docs/gitops.md puts each of Progressing's reasons in a row
    /// (Reconciling, Stalled or neither), as Reconciling and Stalled carry it.
    #[test]
    fn the_docs_list_every_ready_and_progressing_reason_and_no_other() {
        let progress = with_refusals(Progress::ALL.iter().map(|r| r.as_str()));
        let ready = with_refusals(Readiness::ALL.iter().map(|r| r.as_str()));
        let ops = doc("docs/OPERATIONS.md");
        let progressing = doc_table(&ops, "| Status | Reason | Means | Waits for |").iter().flat_map(|r| quoted(&r[1])).collect();
        same(progressing, &progress, "docs/OPERATIONS.md's Progressing table");
        let row = |table: &[Vec<String>], first: &str, column: usize| {
            table.iter().find(|r| r[0] == first).map(|r| quoted(&r[column])).unwrap_or_else(|| panic!("no row {first}"))
        };
        same(row(&doc_table(&ops, "| Condition | Reasons |"), "`Ready`", 1), &ready, "docs/OPERATIONS.md's Ready row");
        let gitops = doc_table(&doc("docs/gitops.md"), "| Condition | True when | Reasons |");
        same(row(&gitops, "`Ready`", 2), &ready, "docs/gitops.md's Ready row");
        let placed = ["`Reconciling`", "`Stalled`", "neither"].iter().flat_map(|first| row(&gitops, first, 2)).collect();
        same(placed, &progress, "docs/gitops.md's Reconciling, Stalled and neither rows");
    }
}
