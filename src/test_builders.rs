//! Typed builders for the inputs of unit tests (kube-rs controller-rs's
//! `fixtures.rs`): a test names what it is about and builds; everything else
//! is the one default pool every test starts from, a Windows Server 2022 pool
//! at 10.0.20348.2762 selecting every Windows node, with a uid (the objects
//! it owns name it).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use serde_json::{Value, json};

use crate::api::{WindowsNodePool, WindowsNodePoolSpec};

/// The default pool's patch level.
pub const PATCH_LEVEL: &str = "10.0.20348.2762";

#[derive(Clone, Debug)]
pub struct PoolBuilder {
    name: String,
    spec: Value,
    meta: ObjectMeta,
}

/// A pool named `name`, as the default pool.
pub fn pool(name: &str) -> PoolBuilder {
    let spec = json!({"nodeSelector": {}, "os": {"version": "ltsc2022", "patchLevel": PATCH_LEVEL}});
    let meta = ObjectMeta { name: Some(name.into()), uid: Some("uid-1".into()), ..Default::default() };
    PoolBuilder { name: name.into(), spec, meta }
}

/// The default pool's spec with `yaml` over it (see [`PoolBuilder::with`]).
pub fn spec(yaml: &str) -> WindowsNodePoolSpec {
    pool("p").with(yaml).spec()
}

impl PoolBuilder {
    /// Spec fields over what the builder holds, as YAML (`rollout: {maxUnavailable: 2}`):
    /// objects merge field by field, so `os: {patchLevel: …}` keeps the OS version.
    pub fn with(mut self, yaml: &str) -> Self {
        let over: Value = serde_saphyr::from_str(yaml).unwrap_or_else(|e| panic!("{yaml:?}: {e}"));
        if !over.is_null() {
            merge(&mut self.spec, over);
        }
        self
    }

    /// Selects the Windows nodes labelled `key=value`.
    pub fn selecting(self, key: &str, value: &str) -> Self {
        self.with(&format!("nodeSelector: {{matchLabels: {{{key}: {value}}}}}"))
    }

    pub fn patch_level(self, level: &str) -> Self {
        self.with(&format!("os: {{patchLevel: {level}}}"))
    }

    /// containerd at `version` (`runtime.version`).
    pub fn runtime(self, version: &str) -> Self {
        self.with(&format!("runtime: {{version: '{version}'}}"))
    }

    pub fn max_unavailable(self, n: i32) -> Self {
        self.with(&format!("rollout: {{maxUnavailable: {n}}}"))
    }

    pub fn uid(mut self, uid: Option<&str>) -> Self {
        self.meta.uid = uid.map(str::to_string);
        self
    }

    pub fn generation(mut self, generation: i64) -> Self {
        self.meta.generation = Some(generation);
        self
    }

    pub fn annotation(mut self, key: &str, value: &str) -> Self {
        self.meta.annotations.get_or_insert_default().insert(key.into(), value.into());
        self
    }

    pub fn finalizer(mut self, finalizer: &str) -> Self {
        self.meta.finalizers.get_or_insert_default().push(finalizer.into());
        self
    }

    /// Being deleted (a deletionTimestamp), as a finalizer sees it.
    pub fn deleting(mut self) -> Self {
        self.meta.deletion_timestamp = Some(Time(jiff::Timestamp::UNIX_EPOCH));
        self
    }

    /// The spec built; a spec the API types refuse fails the test, naming the field.
    pub fn spec(&self) -> WindowsNodePoolSpec {
        serde_json::from_value(self.spec.clone()).unwrap_or_else(|e| panic!("pool {}: {e}: {:#}", self.name, self.spec))
    }

    pub fn build(self) -> WindowsNodePool {
        let mut pool = WindowsNodePool::new(&self.name, self.spec());
        pool.metadata = self.meta;
        pool
    }
}

/// `over` merged into `base`: objects field by field, anything else replaced.
fn merge(base: &mut Value, over: Value) {
    match (base, over) {
        (Value::Object(base), Value::Object(over)) => {
            for (k, v) in over {
                merge(base.entry(k).or_insert(Value::Null), v);
            }
        }
        (base, over) => *base = over,
    }
}

/// A page of the repository (docs/...), for the tests that check a list it
/// restates against the code that list is about.
pub fn doc(path: &str) -> String {
    let file = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(path);
    std::fs::read_to_string(file).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// The cells of each row of the Markdown table whose header row starts with
/// `header` in `page`.
pub fn doc_table(page: &str, header: &str) -> Vec<Vec<String>> {
    let at = page.find(header).unwrap_or_else(|| panic!("{header:?} is not in the page"));
    // The header row and the separator, then the rows.
    let rows = page[at..].lines().take_while(|l| l.starts_with('|')).skip(2);
    rows.map(|row| row.split('|').skip(1).map(|c| c.trim().to_string()).collect()).collect()
}

/// The names a table cell gives in backquotes: `Name` or `A`, `B`.
pub fn quoted(cell: &str) -> std::collections::BTreeSet<String> {
    cell.split('`').skip(1).step_by(2).map(str::to_string).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_given_in_parts_merge_into_one_spec() {
        let p = pool("win22").selecting("pool", "win22").patch_level("10.0.20348.2849").max_unavailable(2).with("rollout: {soakTime: 10m}");
        let spec = p.clone().build().spec;
        assert_eq!(spec.os.version.as_str(), "ltsc2022", "the OS version stays when the patch level is given");
        assert_eq!(spec.os.patch_level, "10.0.20348.2849");
        assert_eq!(
            (spec.rollout.soak_time.as_str(), spec.rollout.max_unavailable.clone()),
            ("10m", k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::Int(2))
        );
        assert_eq!(spec.node_selector.match_labels.unwrap()["pool"], "win22");
        assert_eq!(p.build().metadata.uid.as_deref(), Some("uid-1"));
    }
}
