//! `kubectl winpool version`: the plugin's own version, the operators the
//! caller can see (their Deployments) and the agents' (their reports). A
//! support request starts with these three; a mismatch between them is the
//! first thing to look at. Pure: the shell reads, this says it.

use std::collections::BTreeMap;

use serde::Serialize;

/// One operator install, as its Deployment says it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Operator {
    /// `namespace/name` of the Deployment.
    pub deployment: String,
    /// Its `app.kubernetes.io/version` label (the chart's appVersion).
    pub version: Option<String>,
    pub image: Option<String>,
    pub ready: i32,
    pub replicas: i32,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct VersionReport {
    pub client: String,
    /// The operators found, or why they could not be read.
    #[serde(serialize_with = "found_or_why")]
    pub operators: Result<Vec<Operator>, String>,
    /// Agents by the version their reports give, or why they could not be read.
    #[serde(serialize_with = "found_or_why")]
    pub agents: Result<BTreeMap<String, usize>, String>,
}

/// `-o json`: what was found, or `{"notVisible": "<why>"}`.
fn found_or_why<T: Serialize, S: serde::Serializer>(v: &Result<T, String>, s: S) -> Result<S::Ok, S::Error> {
    match v {
        Ok(found) => found.serialize(s),
        Err(why) => BTreeMap::from([("notVisible", why)]).serialize(s),
    }
}

/// The report as text.
pub fn table(r: &VersionReport) -> String {
    let mut out = format!("client:    kubectl-winpool {}\n", r.client);
    match &r.operators {
        Ok(ops) if ops.is_empty() => out.push_str("operator:  no winpool Deployment found (label app.kubernetes.io/name=winpool)\n"),
        Ok(ops) => {
            for o in ops {
                let version = o.version.as_deref().unwrap_or("unknown");
                let image = o.image.as_deref().unwrap_or("no image");
                out.push_str(&format!("operator:  {version} ({}, {}/{} ready, {image})\n", o.deployment, o.ready, o.replicas));
            }
        }
        Err(why) => out.push_str(&format!("operator:  not visible: {why}\n")),
    }
    match &r.agents {
        Ok(by) if by.is_empty() => out.push_str("agents:    no agent has reported\n"),
        Ok(by) => {
            let list: Vec<String> = by.iter().map(|(v, n)| format!("{v} on {n} node{}", if *n == 1 { "" } else { "s" })).collect();
            out.push_str(&format!("agents:    {}\n", list.join(", ")));
        }
        Err(why) => out.push_str(&format!("agents:    not visible: {why}\n")),
    }
    out
}

/// Agents counted by version (`unknown` for a report without one).
pub fn agents_by_version<'a>(versions: impl IntoIterator<Item = Option<&'a str>>) -> BTreeMap<String, usize> {
    let mut by = BTreeMap::new();
    for v in versions {
        *by.entry(v.unwrap_or("unknown").to_string()).or_default() += 1;
    }
    by
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_client_the_operators_and_the_agents_each_on_a_line() {
        let r = VersionReport {
            client: "0.2.0".into(),
            operators: Ok(vec![Operator {
                deployment: "winpool-system/winpool".into(),
                version: Some("0.2.0".into()),
                image: Some("ghcr.io/winpool/winpool:0.2.0".into()),
                ready: 2,
                replicas: 2,
            }]),
            agents: Ok(agents_by_version([Some("v0.2.0"), Some("v0.2.0"), Some("v0.1.9"), None])),
        };
        assert_eq!(
            table(&r),
            "client:    kubectl-winpool 0.2.0\n\
             operator:  0.2.0 (winpool-system/winpool, 2/2 ready, ghcr.io/winpool/winpool:0.2.0)\n\
             agents:    unknown on 1 node, v0.1.9 on 1 node, v0.2.0 on 2 nodes\n"
        );
        let json = serde_json::to_value(&r).unwrap();
        assert_eq!(json["operators"][0]["deployment"], "winpool-system/winpool");
        assert_eq!(json["agents"]["v0.2.0"], 2);
        let hidden = VersionReport { operators: Err("forbidden".into()), agents: Ok(BTreeMap::new()), ..r };
        let t = table(&hidden);
        assert!(t.contains("operator:  not visible: forbidden") && t.contains("agents:    no agent has reported"), "{t}");
        assert_eq!(serde_json::to_value(&hidden).unwrap()["operators"]["notVisible"], "forbidden");
    }
}
