//! Parsing and comparing the version strings Windows nodes report.
//!
//! The kubelet reports a Windows node's patch level as `status.nodeInfo.kernelVersion`
//! = `10.0.<build>.<revision>` and its runtime as `containerd://<version>`; these are
//! the only sources of truth for "is this node at the target", so they must parse
//! strictly and never panic on garbage.

use std::cmp::Ordering;
use std::fmt;
use std::str::FromStr;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum VersionError {
    #[error("{0:?} is not a Windows build: expected 10.0.<build>.<revision>, e.g. 10.0.20348.2762")]
    WindowsBuild(String),
    #[error("{0:?} is not a container runtime version: expected <runtime>://<version>, e.g. containerd://1.7.20")]
    RuntimeVersion(String),
    #[error("{0:?} is not a version: expected <major>.<minor>.<patch>, e.g. 1.7.20")]
    Version(String),
}

/// `10.0.<build>.<revision>`: the build says which release (20348 = Server 2022),
/// the revision which cumulative update.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct WindowsBuild {
    pub major: u32,
    pub minor: u32,
    pub build: u32,
    /// Absent in `node.kubernetes.io/windows-build` (`10.0.20348`).
    pub revision: Option<u32>,
}

impl WindowsBuild {
    /// Whether this node build satisfies `target`: same release, revision at least the target's.
    pub fn satisfies(&self, target: &WindowsBuild) -> bool {
        self.same_release(target) && self.revision.unwrap_or(0) >= target.revision.unwrap_or(0)
    }

    pub fn same_release(&self, other: &WindowsBuild) -> bool {
        (self.major, self.minor, self.build) == (other.major, other.minor, other.build)
    }
}

impl FromStr for WindowsBuild {
    type Err = VersionError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let err = || VersionError::WindowsBuild(s.to_string());
        let parts: Vec<&str> = s.trim().split('.').collect();
        if !(3..=4).contains(&parts.len()) {
            return Err(err());
        }
        let num = |p: &str| -> Result<u32, VersionError> {
            if p.is_empty() || p.len() > 9 || !p.bytes().all(|b| b.is_ascii_digit()) {
                return Err(err());
            }
            p.parse().map_err(|_| err())
        };
        let b = WindowsBuild {
            major: num(parts[0])?,
            minor: num(parts[1])?,
            build: num(parts[2])?,
            revision: parts.get(3).map(|p| num(p)).transpose()?,
        };
        // Windows nodes running Kubernetes are all NT 10.0; anything else is not a Windows kernel.
        if (b.major, b.minor) != (10, 0) {
            return Err(err());
        }
        Ok(b)
    }
}

impl fmt::Display for WindowsBuild {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}.{}", self.major, self.minor, self.build)?;
        if let Some(r) = self.revision {
            write!(f, ".{r}")?;
        }
        Ok(())
    }
}

/// A containerd or CSI Proxy version (`1.7.20`, `v1.1.3`, `1.7.17+azure`,
/// `2.0.0-rc.10`), compared by semver precedence: build metadata (`+azure`,
/// which real nodes add) is ignored and pre-releases order numerically
/// (`-rc.10` after `-rc.9`), as the `semver` crate implements the spec.
#[derive(Debug, Clone)]
pub struct Version(pub semver::Version);

impl FromStr for Version {
    type Err = VersionError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let t = s.trim();
        let t = t.strip_prefix('v').unwrap_or(t);
        semver::Version::parse(t).map(Version).map_err(|_| VersionError::Version(s.to_string()))
    }
}

impl Ord for Version {
    fn cmp(&self, other: &Self) -> Ordering {
        self.0.cmp_precedence(&other.0)
    }
}
impl PartialOrd for Version {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl PartialEq for Version {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}
impl Eq for Version {}

impl fmt::Display for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// `containerd://1.7.20` as the kubelet reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuntimeVersion {
    pub name: String,
    pub version: Version,
}

impl FromStr for RuntimeVersion {
    type Err = VersionError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let err = || VersionError::RuntimeVersion(s.to_string());
        let (name, version) = s.trim().split_once("://").ok_or_else(err)?;
        if name.is_empty() || !name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'.') {
            return Err(err());
        }
        Ok(RuntimeVersion { name: name.to_string(), version: version.parse().map_err(|_| err())? })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn windows_builds_parse_strictly() {
        type BuildRevision = Option<(u32, Option<u32>)>;
        let cases: &[(&str, BuildRevision)] = &[
            ("10.0.20348.2762", Some((20348, Some(2762)))),
            ("10.0.17763.6414", Some((17763, Some(6414)))),
            ("10.0.26100.1", Some((26100, Some(1)))),
            (" 10.0.20348.2762 ", Some((20348, Some(2762)))),
            ("10.0.20348", Some((20348, None))),
            ("", None),
            ("10.0", None),
            ("10.0.20348.2762.1", None),
            ("6.3.9600.0", None),
            ("10.0.abc.1", None),
            ("10.0.20348.-1", None),
            ("10.0.20348.", None),
            ("5.15.0-1051-azure", None),
            ("10.0.99999999999.1", None),
        ];
        for (input, want) in cases {
            let got = input.parse::<WindowsBuild>().ok().map(|b| (b.build, b.revision));
            assert_eq!(got, *want, "parsing {input:?}");
        }
    }

    #[test]
    fn a_node_satisfies_a_target_only_on_the_same_release_at_or_above_the_revision() {
        let t: WindowsBuild = "10.0.20348.2762".parse().unwrap();
        let cases = [
            ("10.0.20348.2762", true),
            ("10.0.20348.2763", true),
            ("10.0.20348.10000", true),
            ("10.0.20348.2700", false),
            ("10.0.20348", false),
            ("10.0.17763.9999", false),
            ("10.0.26100.3000", false),
        ];
        for (node, want) in cases {
            assert_eq!(node.parse::<WindowsBuild>().unwrap().satisfies(&t), want, "{node} vs {t}");
        }
    }

    #[test]
    fn runtime_versions_parse_from_the_kubelet_format() {
        let r: RuntimeVersion = "containerd://1.7.20".parse().unwrap();
        assert_eq!(r.name, "containerd");
        assert_eq!(r.version, "1.7.20".parse().unwrap());
        let r: RuntimeVersion = "docker://20.10.9".parse().unwrap();
        assert_eq!(r.name, "docker");
        let r: RuntimeVersion = "containerd://v2.0.0-rc.1".parse().unwrap();
        assert_eq!(r.version.0.pre.as_str(), "rc.1");
        for bad in ["", "containerd", "containerd://", "://1.7.20", "containerd://1.7", "containerd://latest", "con tainerd://1.7.0"] {
            assert!(bad.parse::<RuntimeVersion>().is_err(), "{bad:?} should not parse");
        }
    }

    #[test]
    fn versions_order_numerically_with_prereleases_first() {
        let v = |s: &str| s.parse::<Version>().unwrap();
        assert!(v("1.7.10") > v("1.7.9"));
        assert!(v("2.0.0") > v("1.99.99"));
        assert!(v("1.7.0") > v("1.7.0-rc.1"));
        assert!(v("2.0.0-rc.10") > v("2.0.0-rc.9"), "pre-release numbers order numerically");
        assert_eq!(v("v1.1.3"), v("1.1.3"));
        assert_eq!(v("v1.1.3").to_string(), "1.1.3");
    }

    #[test]
    fn vendor_build_metadata_does_not_change_the_version() {
        let v = |s: &str| s.parse::<Version>().unwrap();
        assert_eq!(v("1.7.17+azure"), v("1.7.17"));
        assert_eq!(v("1.7.17+azure-1"), v("1.7.17"));
        assert!(v("1.7.18+azure") > v("1.7.17"));
        let r: RuntimeVersion = "containerd://1.7.17+azure".parse().unwrap();
        assert_eq!(r.version, v("1.7.17"));
    }
}
