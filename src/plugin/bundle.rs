//! `kubectl winpool bundle <pool>`: what a bug report about a pool needs, in
//! one `.tar.gz`: the pool, its nodes and their agents' reports, the status
//! and plan as the plugin shows them, the Events about them, the operators'
//! log tails and the versions. Secrets are never read. What the caller may not
//! read is listed in `errors.txt`, not a failure: a partial bundle still helps.

use std::io::Write;

use kube::api::ObjectMeta;
use serde::Serialize;

/// The files of a bundle, in the order they were added, and what could not be read.
#[derive(Debug, Default)]
pub struct Bundle {
    files: Vec<(String, Vec<u8>)>,
    problems: Vec<String>,
}

impl Bundle {
    pub fn add(&mut self, name: &str, bytes: impl Into<Vec<u8>>) {
        self.files.push((name.to_string(), bytes.into()));
    }

    /// `items` as one YAML document each, without their managedFields (noise in a report).
    pub fn add_yaml<T: Serialize + Clone + HasMeta>(&mut self, name: &str, items: &[T]) {
        let mut out = String::new();
        for item in items {
            let mut item = item.clone();
            item.meta_mut().managed_fields = None;
            match serde_saphyr::to_string(&item) {
                Ok(doc) => out.push_str(&format!("---\n{doc}")),
                Err(e) => self.problem(name, e),
            }
        }
        self.add(name, out);
    }

    /// What could not be read, and why.
    pub fn problem(&mut self, what: &str, why: impl std::fmt::Display) {
        self.problems.push(format!("{what}: {why}"));
    }

    pub fn problems(&self) -> &[String] {
        &self.problems
    }

    pub fn file_names(&self) -> impl Iterator<Item = &str> {
        self.files.iter().map(|(n, _)| n.as_str())
    }

    /// The archive: every file under `root/`, and `errors.txt` when something
    /// could not be read. `mtime` (seconds since the epoch) stamps every entry.
    pub fn archive(&self, root: &str, mtime: u64) -> std::io::Result<Vec<u8>> {
        let gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        let mut tar = tar::Builder::new(gz);
        let errors = self.problems.iter().map(|p| format!("{p}\n")).collect::<String>();
        let extra = (!errors.is_empty()).then(|| ("errors.txt".to_string(), errors.into_bytes()));
        for (name, bytes) in self.files.iter().chain(extra.as_ref()) {
            let mut header = tar::Header::new_gnu();
            header.set_size(bytes.len() as u64);
            header.set_mode(0o644);
            header.set_mtime(mtime);
            header.set_cksum();
            tar.append_data(&mut header, format!("{root}/{name}"), bytes.as_slice())?;
        }
        let mut gz = tar.into_inner()?;
        gz.flush()?;
        gz.finish()
    }
}

/// Kubernetes objects whose metadata a bundle trims.
pub trait HasMeta {
    fn meta_mut(&mut self) -> &mut ObjectMeta;
}

impl<K: kube::Resource> HasMeta for K {
    fn meta_mut(&mut self) -> &mut ObjectMeta {
        kube::Resource::meta_mut(self)
    }
}

/// A file name from an object name: nothing but what a name may hold.
pub fn file_safe(name: &str) -> String {
    name.chars().map(|c| if c.is_ascii_alphanumeric() || c == '-' || c == '.' { c } else { '_' }).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::Node;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ManagedFieldsEntry;

    #[test]
    fn the_archive_holds_every_file_and_what_could_not_be_read_without_managed_fields() {
        let mut b = Bundle::default();
        let node = Node {
            metadata: ObjectMeta {
                name: Some("win-0".into()),
                managed_fields: Some(vec![ManagedFieldsEntry { manager: Some("kubelet".into()), ..Default::default() }]),
                ..Default::default()
            },
            ..Default::default()
        };
        b.add_yaml("nodes.yaml", &[node]);
        b.add("status.txt", "NAME STATE\n");
        b.problem("operator logs", "pods/log is forbidden");
        let bytes = b.archive("winpool-bundle-p", 0).unwrap();
        let mut archive = tar::Archive::new(flate2::read::GzDecoder::new(bytes.as_slice()));
        let mut files = std::collections::BTreeMap::new();
        for entry in archive.entries().unwrap() {
            let mut entry = entry.unwrap();
            let name = entry.path().unwrap().display().to_string();
            let mut text = String::new();
            std::io::Read::read_to_string(&mut entry, &mut text).unwrap();
            files.insert(name, text);
        }
        assert_eq!(
            files.keys().collect::<Vec<_>>(),
            ["winpool-bundle-p/errors.txt", "winpool-bundle-p/nodes.yaml", "winpool-bundle-p/status.txt"]
        );
        assert!(files["winpool-bundle-p/nodes.yaml"].contains("win-0"));
        assert!(!files["winpool-bundle-p/nodes.yaml"].contains("managedFields"));
        assert_eq!(files["winpool-bundle-p/errors.txt"], "operator logs: pods/log is forbidden\n");
    }

    #[test]
    fn file_names_keep_only_what_a_name_may_hold() {
        assert_eq!(file_safe("winpool-7d9f/../x"), "winpool-7d9f_.._x");
    }
}
