//! The pool's `HNSCapacity` condition and `status.hns`: expected load against the limits.

#[allow(unused_imports)]
use super::*;

pub use crate::api::CapacityState;

/// 12345 -> "12,345".
pub(super) fn thousands(n: i64) -> String {
    let digits = n.unsigned_abs().to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3 + 1);
    if n < 0 {
        out.push('-');
    }
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// Whole percent of `n` in `limit`, rounded down (so "80%" means at least 80%).
fn percent(n: i64, limit: i64) -> i128 {
    if limit <= 0 { 0 } else { i128::from(n) * 100 / i128::from(limit) }
}

fn dimension_state(n: i64, limit: i64, warn: i64) -> CapacityState {
    if n > limit {
        CapacityState::Exceeded
    } else if i128::from(n) * 100 >= i128::from(limit) * i128::from(warn) {
        CapacityState::NearLimit
    } else {
        CapacityState::WithinLimits
    }
}

/// The pool's `status.hns` and `HNSCapacity` condition from the cluster's
/// expected counts ([`HnsTracker::totals`]), the pool's [`Limits`],
/// `spec.hns.warnPercent` (clamped to 1..=100) and the Services over the
/// pool's backend limit (`tracker.services_over(limits.backends_per_service)`).
///
/// - `NearLimit` when a count is at or above warnPercent of its limit
///   (800 of 1,000 at 80% is NearLimit; 799 is not);
/// - `Exceeded` when a count is above its limit (1,000 of 1,000 is NearLimit),
///   or when any Service has more ready backends than maxBackendsPerService;
///   the message says which.
///
/// The condition's status is `True` while HNS capacity suffices (WithinLimits,
/// NearLimit) and `False` when Exceeded. `lastTransitionTime` is left at the
/// epoch and `observedGeneration` unset: `status::build_status` fills both.
pub fn capacity(totals: (i64, i64), limits: &Limits, warn_percent: i32, over_limit: (Vec<String>, usize)) -> (HnsStatus, Condition) {
    let (lbs, eps) = totals;
    let warn = i64::from(warn_percent.clamp(1, 100));
    let (mut listed, over_total) = over_limit;
    listed.truncate(MAX_LISTED_SERVICES);
    let over_total = over_total.max(listed.len());

    let lb_state = dimension_state(lbs, limits.load_balancers, warn);
    let ep_state = dimension_state(eps, limits.endpoints, warn);
    let backend_state = if over_total > 0 { CapacityState::Exceeded } else { CapacityState::WithinLimits };
    let state = lb_state.max(ep_state).max(backend_state);

    let mut message = format!(
        "{} of {} load balancers ({}%), {} of {} endpoints ({}%); warn at {warn}%",
        thousands(lbs),
        thousands(limits.load_balancers),
        percent(lbs, limits.load_balancers),
        thousands(eps),
        thousands(limits.endpoints),
        percent(eps, limits.endpoints),
    );
    for (which, want) in [("over the limit", CapacityState::Exceeded), ("near the limit", CapacityState::NearLimit)] {
        let dims: Vec<&str> =
            [(lb_state, "load balancers"), (ep_state, "endpoints")].into_iter().filter(|(s, _)| *s == want).map(|(_, d)| d).collect();
        if !dims.is_empty() {
            message.push_str(&format!("; {which}: {}", dims.join(" and ")));
        }
    }
    if over_total > 0 {
        let mut names: Vec<String> = listed.iter().take(MAX_SERVICES_IN_MESSAGE).cloned().collect();
        let shown = names.len();
        if over_total > shown {
            names.push(format!("and {} more", over_total - shown));
        }
        message.push_str(&format!(
            "; {} {} more ready backends than the {} one HNS load balancer accepts (\"invalid number of destinations\"): {}",
            thousands(over_total as i64),
            if over_total == 1 { "Service has" } else { "Services have" },
            thousands(limits.backends_per_service),
            names.join(", ")
        ));
    }

    let status = HnsStatus {
        expected_load_balancers: lbs,
        limit_load_balancers: limits.load_balancers,
        awaiting_load_balancers: 0,
        expected_endpoints: eps,
        limit_endpoints: limits.endpoints,
        state,
        services_over_backend_limit: listed,
    };
    let condition = Condition {
        type_: conditions::HNS_CAPACITY.into(),
        status: if state == CapacityState::Exceeded { "False" } else { "True" }.into(),
        reason: state.as_str().into(),
        message,
        last_transition_time: Time(Timestamp::UNIX_EPOCH),
        observed_generation: None,
    };
    (status, condition)
}
