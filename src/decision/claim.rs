//! Which install of winpool a pool belongs to (pure). Two installs in one
//! cluster (two teams, a botched upgrade that left the old release running)
//! would otherwise both roll the same pool: each within its own
//! maxUnavailable, so twice as many nodes out at once, and each releasing
//! the other's nodes. The first install that reconciles a pool claims it in
//! the annotation `winpool.dev/claimed-by`; every other install leaves it
//! alone, writes nothing to it, and says so once. An install that is gone
//! leaves its claim: removing the annotation hands the pool to the next.

use crate::api::{WindowsNodePool, names};

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Claim {
    /// This install's, or no install names itself (`--install-id` empty).
    Ours,
    /// Nobody's yet: this install claims it before anything else.
    Unclaimed,
    /// Another install's: named.
    Theirs(String),
}

pub fn claim_of(pool: &WindowsNodePool, install_id: &str) -> Claim {
    if install_id.is_empty() {
        return Claim::Ours;
    }
    match pool.metadata.annotations.as_ref().and_then(|a| a.get(names::ANN_CLAIMED_BY)).map(String::as_str) {
        Some(by) if by == install_id => Claim::Ours,
        Some(by) if !by.is_empty() => Claim::Theirs(by.to_string()),
        // A pool on its way out is not claimed now: its owner's cleanup runs.
        _ if pool.metadata.deletion_timestamp.is_some() => Claim::Ours,
        _ => Claim::Unclaimed,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pool(claimed_by: Option<&str>, deleting: bool) -> WindowsNodePool {
        let pool = crate::test_builders::pool("p").uid(None);
        let pool = match claimed_by {
            Some(by) => pool.annotation(names::ANN_CLAIMED_BY, by),
            None => pool,
        };
        if deleting { pool.deleting() } else { pool }.build()
    }

    #[test]
    fn a_pool_is_the_first_claimants_and_no_one_elses() {
        assert_eq!(claim_of(&pool(None, false), "ops/winpool"), Claim::Unclaimed);
        assert_eq!(claim_of(&pool(Some("ops/winpool"), false), "ops/winpool"), Claim::Ours);
        assert_eq!(claim_of(&pool(Some("team-b/winpool"), false), "ops/winpool"), Claim::Theirs("team-b/winpool".into()));
        assert_eq!(
            claim_of(&pool(Some("team-b/winpool"), true), "ops/winpool"),
            Claim::Theirs("team-b/winpool".into()),
            "not even its cleanup"
        );
        assert_eq!(claim_of(&pool(None, true), "ops/winpool"), Claim::Ours, "a pool being deleted is not claimed now");
        assert_eq!(claim_of(&pool(Some("team-b/winpool"), false), ""), Claim::Ours, "an install without an id claims nothing");
    }
}
