//! The Prometheus and Alertmanager HTTP APIs, pure: the request paths of a
//! gate and what its answers mean. Of Prometheus only `/api/v1/query`
//! (instant query) and `/api/v1/alerts` are used; both answer
//! `{"status": "success"|"error", "data": ...}`. Of Alertmanager only
//! `/api/v2/alerts`, which answers a bare list of alerts.

use std::collections::{BTreeMap, BTreeSet};

use serde::Deserialize;

use super::{Failure, SHOWN, Seen, snippet};
use crate::api::{AlertMatch, GateKind, HealthGate, LabelMatcher, MatchOp};

/// What a gate asks: an instant query, the firing alerts Prometheus
/// evaluates, or the active alerts in Alertmanager (not silenced, not
/// inhibited), each kind of alert filtered by name and labels.
#[derive(Debug, Clone)]
pub enum Ask {
    Query(String),
    Alerts(AlertFilter),
    AlertmanagerAlerts(AlertFilter),
}

/// Which alerts count: the name pattern and every label matcher, all
/// anchored like PromQL's `=~`.
#[derive(Debug, Clone)]
pub struct AlertFilter {
    name: regex::Regex,
    matchers: Vec<(String, Test)>,
}

#[derive(Debug, Clone)]
enum Test {
    Equal(String),
    NotEqual(String),
    Matches(regex::Regex),
    NotMatches(regex::Regex),
}

fn anchored(pattern: &str, what: &str) -> Result<regex::Regex, Failure> {
    regex::Regex::new(&format!("^(?:{pattern})$"))
        .map_err(|e| Failure::InvalidSpec(format!("{what} {pattern:?} is not a regular expression: {e}")))
}

impl AlertFilter {
    pub fn of(m: &AlertMatch) -> Result<Self, Failure> {
        let matchers = m
            .matchers
            .iter()
            .map(|LabelMatcher { label, op, value }| {
                let what = format!("alerts.matchers {label}");
                let test = match op {
                    MatchOp::Equal => Test::Equal(value.clone()),
                    MatchOp::NotEqual => Test::NotEqual(value.clone()),
                    MatchOp::Matches => Test::Matches(anchored(value, &what)?),
                    MatchOp::NotMatches => Test::NotMatches(anchored(value, &what)?),
                };
                Ok((label.clone(), test))
            })
            .collect::<Result<_, Failure>>()?;
        Ok(AlertFilter { name: anchored(&m.name, "alerts.name")?, matchers })
    }

    /// The alert's name matches and so does every matcher; a label the
    /// alert lacks reads as empty, as in PromQL.
    fn admits(&self, labels: &BTreeMap<String, String>) -> bool {
        let Some(name) = labels.get("alertname") else { return false };
        let value = |l: &str| labels.get(l).map(String::as_str).unwrap_or_default();
        self.name.is_match(name)
            && self.matchers.iter().all(|(label, test)| match test {
                Test::Equal(v) => value(label) == v,
                Test::NotEqual(v) => value(label) != v,
                Test::Matches(r) => r.is_match(value(label)),
                Test::NotMatches(r) => !r.is_match(value(label)),
            })
    }
}

impl Ask {
    /// The question of a Prometheus or Alertmanager gate.
    pub fn of(gate: &HealthGate) -> Result<Self, Failure> {
        match (gate.kind, &gate.query, &gate.alerts) {
            (GateKind::Pods, ..) => Err(Failure::InvalidSpec("a Pods gate asks no HTTP API".into())),
            (GateKind::Prometheus, Some(q), _) => Ok(Ask::Query(q.clone())),
            (GateKind::Prometheus, None, Some(a)) => AlertFilter::of(a).map(Ask::Alerts),
            (GateKind::Alertmanager, None, Some(a)) => AlertFilter::of(a).map(Ask::AlertmanagerAlerts),
            (GateKind::Alertmanager, Some(_), _) => Err(Failure::InvalidSpec("an Alertmanager gate names alerts, not a query".into())),
            (_, None, None) => Err(Failure::InvalidSpec("the gate has neither query nor alerts".into())),
        }
    }

    /// The request's path and query string, below the gate's base URL.
    pub fn path(&self) -> String {
        match self {
            Ask::Query(q) => format!("/api/v1/query?query={}", encode(q)),
            Ask::Alerts(_) => "/api/v1/alerts".into(),
            // Alertmanager leaves out what a silence or an inhibition covers:
            // a silence set for the maintenance opens the gate with the pager.
            Ask::AlertmanagerAlerts(_) => "/api/v2/alerts?active=true&silenced=false&inhibited=false".into(),
        }
    }

    /// What an answer (HTTP status and body) means for the gate.
    pub fn read(&self, status: u16, body: &[u8]) -> Seen {
        if let Ask::AlertmanagerAlerts(filter) = self {
            return alertmanager_active(status, body, filter).unwrap_or_else(Seen::Failed);
        }
        let data = match envelope(status, body) {
            Ok(d) => d,
            Err(f) => return Seen::Failed(f),
        };
        let seen = match self {
            Ask::Query(_) => query_result(data),
            Ask::Alerts(filter) => firing(data, filter),
            Ask::AlertmanagerAlerts(_) => unreachable!("read above"),
        };
        seen.unwrap_or_else(Seen::Failed)
    }
}

/// The gate's full request URL.
pub fn url(base: &str, ask: &Ask) -> String {
    format!("{}{}", base.trim_end_matches('/'), ask.path())
}

/// Percent-encode a query parameter (RFC 3986 unreserved characters stay).
fn encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len() * 3);
    for b in s.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => out.push(b as char),
            _ => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Envelope {
    status: String,
    #[serde(default)]
    data: serde_json::Value,
    #[serde(default)]
    error_type: String,
    #[serde(default)]
    error: String,
}

/// The `data` of a successful answer, or why there is none. Prometheus sends
/// its errors as JSON with 4xx/5xx, whose `error` is shown; of anything else
/// only the status, or where it stops parsing, is: never the body itself
/// (an internal service's page, reflected into the pool's status).
fn envelope(status: u16, body: &[u8]) -> Result<serde_json::Value, Failure> {
    let parsed: Result<Envelope, _> = serde_json::from_slice(body);
    match parsed {
        Ok(e) if e.status == "error" => Err(Failure::Prometheus { error_type: snippet(&e.error_type), error: snippet(&e.error) }),
        Ok(e) if e.status == "success" && (200..300).contains(&status) => Ok(e.data),
        _ if !(200..300).contains(&status) => Err(Failure::HttpStatus { code: status }),
        Ok(e) => Err(Failure::BadResponse(format!("status {:?}", snippet(&e.status)))),
        Err(e) => Err(Failure::BadResponse(e.to_string())),
    }
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct QueryData {
    result_type: String,
    result: serde_json::Value,
}

#[derive(Deserialize)]
struct Series {
    #[serde(default)]
    metric: BTreeMap<String, String>,
}

fn query_result(data: serde_json::Value) -> Result<Seen, Failure> {
    let d: QueryData = serde_json::from_value(data).map_err(|e| Failure::BadResponse(format!("query data: {e}")))?;
    if !matches!(d.result_type.as_str(), "vector" | "matrix") {
        return Err(Failure::NotAVector(d.result_type));
    }
    let series: Vec<Series> = serde_json::from_value(d.result).map_err(|e| Failure::BadResponse(format!("query result: {e}")))?;
    let shown = series.iter().take(SHOWN).map(|s| selector(&s.metric)).collect();
    Ok(Seen::Series { total: series.len(), shown })
}

/// A series' labels as PromQL writes them: `up{job="node"}`, `{job="node"}` without a name.
fn selector(metric: &BTreeMap<String, String>) -> String {
    let name = metric.get("__name__").map(String::as_str).unwrap_or_default();
    let labels: Vec<String> = metric.iter().filter(|(k, _)| *k != "__name__").map(|(k, v)| format!("{k}={v:?}")).collect();
    if labels.is_empty() && !name.is_empty() { name.to_string() } else { format!("{name}{{{}}}", labels.join(", ")) }
}

#[derive(Deserialize)]
struct AlertsData {
    alerts: Vec<Alert>,
}

#[derive(Deserialize)]
struct Alert {
    #[serde(default)]
    labels: BTreeMap<String, String>,
    state: String,
}

/// Firing alerts the filter admits; pending ones (still within their `for:`) do not count.
fn firing(data: serde_json::Value, filter: &AlertFilter) -> Result<Seen, Failure> {
    let d: AlertsData = serde_json::from_value(data).map_err(|e| Failure::BadResponse(format!("alerts data: {e}")))?;
    Ok(seen_alerts(d.alerts.iter().filter(|a| a.state == "firing").map(|a| &a.labels), filter))
}

fn seen_alerts<'a>(labels: impl Iterator<Item = &'a BTreeMap<String, String>>, filter: &AlertFilter) -> Seen {
    let matching: Vec<&str> = labels.filter(|l| filter.admits(l)).filter_map(|l| l.get("alertname").map(String::as_str)).collect();
    let names: BTreeSet<&str> = matching.iter().copied().collect();
    Seen::Alerts { total: matching.len(), names: names.into_iter().map(str::to_string).collect() }
}

/// An alert as Alertmanager's API v2 lists it.
#[derive(Deserialize)]
struct GettableAlert {
    #[serde(default)]
    labels: BTreeMap<String, String>,
    status: AlertStatus,
}

#[derive(Deserialize)]
struct AlertStatus {
    state: String,
}

/// Active alerts the filter admits. The request already leaves out silenced
/// and inhibited ones; their state ("suppressed") is checked as well, so a
/// proxy that drops the query string cannot count them.
fn alertmanager_active(status: u16, body: &[u8], filter: &AlertFilter) -> Result<Seen, Failure> {
    if !(200..300).contains(&status) {
        return Err(Failure::HttpStatus { code: status });
    }
    let alerts: Vec<GettableAlert> = serde_json::from_slice(body).map_err(|e| Failure::BadResponse(format!("alertmanager alerts: {e}")))?;
    Ok(seen_alerts(alerts.iter().filter(|a| a.status.state == "active").map(|a| &a.labels), filter))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::AlertMatch;

    fn gate(kind: GateKind, query: Option<&str>, alerts: Option<&str>) -> HealthGate {
        HealthGate {
            name: "g".into(),
            kind,
            url: Some("http://prometheus:9090".into()),
            query: query.map(str::to_string),
            alerts: alerts.map(|a| AlertMatch { name: a.into(), matchers: vec![] }),
            timeout: None,
            auth: None,
            tls: None,
            selector: None,
            namespaces: vec![],
            scope: None,
        }
    }

    fn alerts(pattern: &str) -> Ask {
        Ask::of(&gate(GateKind::Prometheus, None, Some(pattern))).expect("a valid pattern")
    }

    const QUERY: &str = r#"{"status":"success","data":{"resultType":"vector","result":[
        {"metric":{"__name__":"up","job":"node","instance":"a:9100"},"value":[1700000000,"0"]},
        {"metric":{"job":"api"},"value":[1700000000,"0"]}]}}"#;
    const EMPTY: &str = r#"{"status":"success","data":{"resultType":"vector","result":[]}}"#;
    const ALERTS: &str = r#"{"status":"success","data":{"alerts":[
        {"labels":{"alertname":"KubeNodeNotReady","node":"a"},"state":"firing","activeAt":"2026-01-01T00:00:00Z","value":"1"},
        {"labels":{"alertname":"KubeNodeNotReady","node":"b"},"state":"firing"},
        {"labels":{"alertname":"KubeNodeUnreachable"},"state":"pending"},
        {"labels":{"alertname":"Watchdog"},"state":"firing"},
        {"labels":{"alertname":"DiskCritical"},"state":"firing"}]}}"#;

    #[test]
    fn query_answers_become_what_the_gate_saw() {
        let q = Ask::Query("up == 0".into());
        let series = |total: usize, shown: &[&str]| Seen::Series { total, shown: shown.iter().map(|s| s.to_string()).collect() };
        let cases: [(u16, &str, Seen); 9] = [
            (200, QUERY, series(2, &["up{instance=\"a:9100\", job=\"node\"}", "{job=\"api\"}"])),
            (200, EMPTY, series(0, &[])),
            (
                200,
                r#"{"status":"success","data":{"resultType":"matrix","result":[{"metric":{"__name__":"x"},"values":[]}]}}"#,
                series(1, &["x"]),
            ),
            (
                200,
                r#"{"status":"success","data":{"resultType":"scalar","result":[1700000000,"1"]}}"#,
                Seen::Failed(Failure::NotAVector("scalar".into())),
            ),
            (
                400,
                r#"{"status":"error","errorType":"bad_data","error":"1:4: parse error: unexpected <EOF>"}"#,
                Seen::Failed(Failure::Prometheus { error_type: "bad_data".into(), error: "1:4: parse error: unexpected <EOF>".into() }),
            ),
            (
                503,
                r#"{"status":"error","errorType":"unavailable","error":"starting"}"#,
                Seen::Failed(Failure::Prometheus { error_type: "unavailable".into(), error: "starting".into() }),
            ),
            (502, "<html>Bad Gateway</html>", Seen::Failed(Failure::HttpStatus { code: 502 })),
            // A 2xx answer that is not Prometheus's envelope is not trusted to mean "no series".
            (
                200,
                r#"{"status":"success","data":{"resultType":"vector"}}"#,
                Seen::Failed(Failure::BadResponse("query data: missing field `result`".into())),
            ),
            (200, r#"{"status":"pending"}"#, Seen::Failed(Failure::BadResponse("status \"pending\"".into()))),
        ];
        for (status, body, want) in cases {
            assert_eq!(q.read(status, body.as_bytes()), want, "{status} {body}");
        }
    }

    #[test]
    fn garbage_closes_the_gate_and_never_shows_the_body() {
        let q = Ask::Query("up".into());
        for body in
            ["", "not json", "<html>login</html>", "[1,2]", r#"{"status":"success","data":{"resultType":"vector","result":{"a":1}}}"#]
        {
            match q.read(200, body.as_bytes()) {
                Seen::Failed(Failure::BadResponse(msg)) => assert!(!msg.is_empty(), "{body}"),
                other => panic!("{body:?} read as {other:?}"),
            }
        }
        // What an internal service answered is never reflected into status:
        // where parsing stopped, or the status, but not the body.
        for (status, body) in
            [(200, "<html>secret-token: hunter2</html>"), (502, "<html>secret-token: hunter2</html>"), (403, "secret-token: hunter2")]
        {
            let Seen::Failed(f) = q.read(status, body.as_bytes()) else { panic!() };
            assert!(!f.to_string().contains("hunter2") && !f.to_string().contains("html"), "{status}: {f}");
            let Seen::Failed(f) = alerts(".*").read(status, body.as_bytes()) else { panic!() };
            assert!(!f.to_string().contains("hunter2"), "alertmanager {status}: {f}");
        }
    }

    #[test]
    fn only_firing_alerts_whose_whole_name_matches_close_the_gate() {
        let names = |n: &[&str]| n.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let cases = [
            ("KubeNode.*", Seen::Alerts { total: 2, names: names(&["KubeNodeNotReady"]) }),
            (".*Critical|Watchdog", Seen::Alerts { total: 2, names: names(&["DiskCritical", "Watchdog"]) }),
            // Anchored like =~: a part of the name is not a match.
            ("Node", Seen::Alerts { total: 0, names: vec![] }),
            // Pending alerts are not firing yet.
            ("KubeNodeUnreachable", Seen::Alerts { total: 0, names: vec![] }),
        ];
        for (pattern, want) in cases {
            assert_eq!(alerts(pattern).read(200, ALERTS.as_bytes()), want, "{pattern}");
        }
        let none = r#"{"status":"success","data":{"alerts":[]}}"#;
        assert!(!crate::decision::gates::GateResult { gate: "g".into(), seen: alerts(".*").read(200, none.as_bytes()) }.closes_pool());
        assert!(matches!(alerts(".*").read(200, br#"{"status":"success","data":{}}"#), Seen::Failed(Failure::BadResponse(_))));
    }

    #[test]
    fn a_pattern_that_does_not_compile_is_a_failure_of_the_gate() {
        match Ask::of(&gate(GateKind::Prometheus, None, Some("Kube(Node"))) {
            Err(Failure::InvalidSpec(msg)) => assert!(msg.contains("Kube(Node"), "{msg}"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn requests_go_below_the_base_url_with_the_query_encoded() {
        let q = Ask::of(&gate(GateKind::Prometheus, Some("sum(up{job=\"a b\"}) > 0"), None)).unwrap();
        assert_eq!(url("http://p:9090/", &q), "http://p:9090/api/v1/query?query=sum%28up%7Bjob%3D%22a%20b%22%7D%29%20%3E%200");
        assert_eq!(url("https://mon.corp/prometheus", &alerts("X")), "https://mon.corp/prometheus/api/v1/alerts");
        assert_eq!(encode("a+b&c=é"), "a%2Bb%26c%3D%C3%A9");
        let am = Ask::of(&gate(GateKind::Alertmanager, None, Some("X"))).unwrap();
        assert_eq!(
            url("http://alertmanager:9093", &am),
            "http://alertmanager:9093/api/v2/alerts?active=true&silenced=false&inhibited=false"
        );
        assert!(matches!(Ask::of(&gate(GateKind::Alertmanager, Some("up"), None)), Err(Failure::InvalidSpec(_))));
        assert!(matches!(Ask::of(&gate(GateKind::Pods, None, Some("X"))), Err(Failure::InvalidSpec(_))));
    }

    fn matching(pattern: &str, matchers: &[(&str, MatchOp, &str)], kind: GateKind) -> Ask {
        let mut g = gate(kind, None, Some(pattern));
        g.alerts.as_mut().unwrap().matchers =
            matchers.iter().map(|(l, op, v)| LabelMatcher { label: l.to_string(), op: *op, value: v.to_string() }).collect();
        Ask::of(&g).expect("valid matchers")
    }

    #[test]
    fn label_matchers_narrow_the_alerts_that_close_the_gate() {
        const SEVERITIES: &str = r#"{"status":"success","data":{"alerts":[
            {"labels":{"alertname":"KubeNodeNotReady","severity":"critical","namespace":"prod"},"state":"firing"},
            {"labels":{"alertname":"KubeNodeNotReady","severity":"warning","namespace":"dev-7"},"state":"firing"},
            {"labels":{"alertname":"DiskCritical"},"state":"firing"}]}}"#;
        let total = |ask: Ask| match ask.read(200, SEVERITIES.as_bytes()) {
            Seen::Alerts { total, .. } => total,
            other => panic!("{other:?}"),
        };
        use MatchOp::*;
        assert_eq!(total(matching(".*", &[], GateKind::Prometheus)), 3);
        assert_eq!(total(matching(".*", &[("severity", Equal, "critical")], GateKind::Prometheus)), 1);
        assert_eq!(total(matching(".*", &[("severity", NotEqual, "critical")], GateKind::Prometheus)), 2, "a missing label is empty");
        assert_eq!(total(matching(".*", &[("namespace", NotMatches, "dev-.*")], GateKind::Prometheus)), 2);
        assert_eq!(total(matching(".*", &[("namespace", Matches, "dev")], GateKind::Prometheus)), 0, "anchored: dev is not dev-7");
        assert_eq!(
            total(matching("KubeNode.*", &[("severity", Matches, "critical|warning"), ("namespace", Equal, "prod")], GateKind::Prometheus)),
            1
        );
        let mut g = gate(GateKind::Prometheus, None, Some(".*"));
        g.alerts.as_mut().unwrap().matchers = vec![LabelMatcher { label: "severity".into(), op: Matches, value: "crit(".into() }];
        assert!(matches!(Ask::of(&g), Err(Failure::InvalidSpec(m)) if m.contains("alerts.matchers severity")));
    }

    /// Alertmanager's list: only active alerts count, not the ones a silence
    /// or an inhibition suppresses, nor those not processed yet.
    #[test]
    fn alertmanager_counts_active_alerts_and_never_suppressed_ones() {
        const LISTED: &str = r#"[
            {"labels":{"alertname":"KubeNodeNotReady","severity":"critical"},"status":{"state":"active","silencedBy":[],"inhibitedBy":[]},
             "annotations":{},"startsAt":"2026-12-03T07:00:00Z","endsAt":"2026-12-03T08:00:00Z","fingerprint":"a","receivers":[{"name":"x"}],"updatedAt":"2026-12-03T07:00:00Z"},
            {"labels":{"alertname":"KubeNodeNotReady","severity":"critical","node":"b"},"status":{"state":"suppressed","silencedBy":["s-1"],"inhibitedBy":[]}},
            {"labels":{"alertname":"KubeNodeNotReady","node":"c"},"status":{"state":"unprocessed","silencedBy":[],"inhibitedBy":[]}},
            {"labels":{"alertname":"Watchdog"},"status":{"state":"active"}}]"#;
        let am = matching("KubeNode.*", &[("severity", MatchOp::Equal, "critical")], GateKind::Alertmanager);
        assert_eq!(am.read(200, LISTED.as_bytes()), Seen::Alerts { total: 1, names: vec!["KubeNodeNotReady".into()] });
        assert_eq!(matching("Nothing", &[], GateKind::Alertmanager).read(200, b"[]"), Seen::Alerts { total: 0, names: vec![] });
        match am.read(200, br#"{"status":"success","data":{"alerts":[]}}"#) {
            Seen::Failed(Failure::BadResponse(m)) => assert!(m.starts_with("alertmanager alerts: "), "{m}"),
            other => panic!("Prometheus's answer is not Alertmanager's: {other:?}"),
        }
        assert_eq!(am.read(503, b"not ready"), Seen::Failed(Failure::HttpStatus { code: 503 }));
    }
}
