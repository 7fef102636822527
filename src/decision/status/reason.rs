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

    #[test]
    fn a_reason_reads_back_as_itself_and_an_unknown_one_as_none() {
        for r in Progress::ALL {
            assert_eq!(Progress::parse(r.as_str()), Some(*r));
        }
        assert_eq!(Readiness::parse("WaitingForMaintenanceWindow"), Some(Readiness::WaitingForMaintenanceWindow));
        assert_eq!(Progress::parse("AgentImageNotAllowed"), None);
    }
}
