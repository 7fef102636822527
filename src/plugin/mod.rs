//! `kubectl winpool`: the kubectl plugin (binary `kubectl-winpool`). It reads
//! a pool and its nodes with the operator's own code (`membership`, `observe`,
//! `rollout`), so what it shows is what the operator decides, and writes with
//! its own field manager ([`FIELD_MANAGER`]) so `managedFields` say who paused
//! a pool or retried a node.
//!
//! Pure parts, unit-tested: [`age`] (kubectl's ages), [`output`] (what status
//! and plan print, in their stable JSON/YAML shape), [`retry`] (when a node may
//! be retried), [`table`] (the text output), [`version`] (what runs where).
//! [`cli`] is the thin shell that
//! reads the cluster, calls them and writes.

pub mod age;
pub mod bundle;
pub mod cli;
pub mod complete;
pub mod compliance;
pub mod history;
pub mod output;
pub mod retry;
pub mod table;
pub mod version;
pub mod watch;

/// The field manager of every write the plugin makes.
pub const FIELD_MANAGER: &str = "kubectl-winpool";

/// What the plugin prints, made safe for a terminal: agents (SYSTEM on their
/// hosts) and anyone who may patch a Node write the messages it shows, and an
/// escape sequence in one could rewrite the screen, retitle the window or
/// hide a line. Control characters other than newline and tab are shown as
/// `\u{..}` escapes; JSON and YAML output carry none unescaped.
pub fn terminal_safe(text: &str) -> String {
    text.chars().map(|c| if c.is_control() && c != '\n' && c != '\t' { c.escape_unicode().to_string() } else { c.to_string() }).collect()
}

/// Why a command failed, said plainly; the binary prints it and exits 1.
#[derive(Debug, thiserror::Error)]
pub enum PluginError {
    #[error("{kind} {name:?} not found")]
    NotFound { kind: &'static str, name: String },
    #[error("permission denied: {0}")]
    Forbidden(String),
    #[error("not authorized by the cluster (is the kubeconfig's user valid?): {0}")]
    Unauthorized(String),
    /// The command was understood and refused (e.g. retrying a node that did not fail).
    #[error("{0}")]
    Refused(String),
    #[error("reading the kubeconfig: {0}")]
    Config(String),
    #[error("talking to the API server: {0}")]
    Api(#[source] kube::Error),
    #[error("{0}")]
    Output(String),
}

impl PluginError {
    /// The error of a request about `kind` `name`: 404, 403 and 401 said plainly.
    pub fn from_kube(e: kube::Error, kind: &'static str, name: &str) -> Self {
        match &e {
            kube::Error::Api(s) if s.code == 404 => PluginError::NotFound { kind, name: name.to_string() },
            kube::Error::Api(s) if s.code == 403 => PluginError::Forbidden(s.message.clone()),
            kube::Error::Api(s) if s.code == 401 => PluginError::Unauthorized(s.message.clone()),
            _ => PluginError::Api(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escape_sequences_in_what_is_printed_are_shown_not_obeyed() {
        let hostile = "ApplyFailed: \u{1b}]0;owned\u{7}\u{1b}[2Kdone\r\u{9b}31m\nnext\tcol";
        let safe = terminal_safe(hostile);
        assert!(!safe.chars().any(|c| c.is_control() && c != '\n' && c != '\t'), "{safe:?}");
        assert_eq!(safe, "ApplyFailed: \\u{1b}]0;owned\\u{7}\\u{1b}[2Kdone\\u{d}\\u{9b}31m\nnext\tcol");
        assert_eq!(terminal_safe("win-0   Updated   5m"), "win-0   Updated   5m");
    }

    fn api(code: u16, message: &str) -> kube::Error {
        kube::Error::Api(kube::core::Status { code, message: message.into(), ..Default::default() }.into())
    }

    #[test]
    fn api_refusals_read_plainly() {
        let e = PluginError::from_kube(api(404, "windowsnodepools.winpool.dev \"p\" not found"), "pool", "p");
        assert_eq!(e.to_string(), "pool \"p\" not found");
        let e = PluginError::from_kube(api(403, "nodes \"n\" is forbidden: User \"u\" cannot patch resource \"nodes\""), "node", "n");
        assert_eq!(e.to_string(), "permission denied: nodes \"n\" is forbidden: User \"u\" cannot patch resource \"nodes\"");
        assert!(matches!(PluginError::from_kube(api(500, "boom"), "pool", "p"), PluginError::Api(_)));
    }
}
