//! Whether a URL someone wrote (a pool's author, a gate's) lies under a URL
//! prefix the cluster admin allowed. Pure.
//!
//! Matched as a URL, not as text: scheme, host and port must be the prefix's
//! and the path must go on from the prefix's path at a segment boundary. The
//! server resolves what the text hides, so a URL that could name another path
//! than it shows is refused whole: a dot segment (`/containerd/../uploads/x`,
//! plain or percent-encoded, `%2e%2e`), an encoded separator (`%2f`, `%5c`), a
//! backslash, or credentials before the host (`https://mirror.corp@evil/…`).

use http::Uri;

/// Why `url` is not under `prefix`, or `Ok`.
pub fn under(url: &str, prefix: &str) -> Result<(), String> {
    let (u, p) = (parts(url)?, parts(prefix).map_err(|e| format!("the allowed prefix {prefix:?}: {e}"))?);
    if u.origin != p.origin {
        return Err(format!("{} is not {}", u.origin, p.origin));
    }
    let mut want = p.segments.as_slice();
    // "…/containerd/" and "…/containerd" allow the same: what is below it.
    if want.last().is_some_and(|s| s.is_empty()) {
        want = &want[..want.len() - 1];
    }
    if u.segments.len() < want.len() || u.segments[..want.len()] != *want {
        return Err(format!("its path {:?} is not under {:?}", u.path, p.path));
    }
    Ok(())
}

/// Whether `url` is under one of `prefixes`.
pub fn under_any<S: AsRef<str>>(url: &str, prefixes: &[S]) -> bool {
    prefixes.iter().any(|p| under(url, p.as_ref()).is_ok())
}

struct Parts {
    /// `scheme://host:port`, lowercase, with the scheme's default port spelled out.
    origin: String,
    path: String,
    segments: Vec<String>,
}

fn parts(url: &str) -> Result<Parts, String> {
    if url.contains('\\') {
        return Err("a backslash in a URL is read as a path separator by some servers and not by others".into());
    }
    let uri: Uri = url.parse().map_err(|e| format!("not a URL ({e})"))?;
    let (Some(scheme), Some(authority)) = (uri.scheme_str(), uri.authority()) else {
        return Err("not an absolute URL (scheme://host/…)".into());
    };
    if authority.as_str().contains('@') {
        return Err("credentials before the host hide which host it is".into());
    }
    let scheme = scheme.to_ascii_lowercase();
    let port = authority.port_u16().or(match scheme.as_str() {
        "https" => Some(443),
        "http" => Some(80),
        _ => None,
    });
    let host = authority.host().to_ascii_lowercase();
    let origin = match port {
        Some(port) => format!("{scheme}://{host}:{port}"),
        None => format!("{scheme}://{host}"),
    };
    let path = uri.path().to_string();
    let segments: Vec<String> = path.split('/').skip(1).map(str::to_string).collect();
    for s in &segments {
        let lower = s.to_ascii_lowercase();
        if lower.contains("%2f") || lower.contains("%5c") {
            return Err(format!("the path segment {s:?} holds an encoded separator"));
        }
        if matches!(lower.replace("%2e", ".").as_str(), "." | "..") {
            return Err(format!("the path {path:?} has a dot segment, which the server resolves to another path"));
        }
    }
    Ok(Parts { origin, path, segments })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_url_is_under_a_prefix_only_as_a_url() {
        let prefix = "https://mirror.corp/containerd";
        for (url, want) in [
            ("https://mirror.corp/containerd/v1.7.22/containerd-1.7.22-windows-amd64.tar.gz", true),
            ("https://mirror.corp/containerd", true),
            ("https://MIRROR.corp:443/containerd/x.tar.gz", true),
            ("https://mirror.corp/containerd/x.tar.gz?sv=2024&sig=abc", true),
            ("https://mirror.corp/containerd-evil/x.tar.gz", false),
            ("https://mirror.corp.evil/containerd/x.tar.gz", false),
            ("https://mirror.corp:8443/containerd/x.tar.gz", false),
            ("http://mirror.corp/containerd/x.tar.gz", false),
            ("https://mirror.corp/containerd/../uploads/x.tar.gz", false),
            ("https://mirror.corp/containerd/%2e%2e/uploads/x.tar.gz", false),
            ("https://mirror.corp/containerd/.%2E/uploads/x.tar.gz", false),
            ("https://mirror.corp/containerd/./x.tar.gz", false),
            ("https://mirror.corp/containerd%2f..%2fuploads/x.tar.gz", false),
            ("https://mirror.corp/containerd/..%5Cuploads/x.tar.gz", false),
            ("https://mirror.corp/containerd\\..\\uploads/x.tar.gz", false),
            ("https://mirror.corp/containerd@evil.example/x.tar.gz", false),
            ("https://mirror.corp@evil.example/containerd/x.tar.gz", false),
            ("mirror.corp/containerd/x.tar.gz", false),
            ("", false),
        ] {
            assert_eq!(under(url, prefix).is_ok(), want, "{url}: {:?}", under(url, prefix));
        }
        assert!(under("https://mirror.corp/containerd/x", "https://mirror.corp/containerd/").is_ok(), "a trailing / is the same prefix");
        assert!(under("https://mirror.corp/any/x", "https://mirror.corp").is_ok(), "a host alone allows all it serves");
        assert!(under("https://mirror.corp/a/x", "https://mirror.corp/a/../b").is_err(), "a prefix with a dot segment allows nothing");
    }
}
