//! A child whose wall clock is wrong: `skewed_clock.c`, built here with the
//! system's C compiler and preloaded, moves its realtime clock by a fixed
//! offset. The operator under it is the real binary on a host whose NTP
//! broke; nothing in the operator knows it is being tested.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// The environment that runs a child `by_seconds` ahead of this host (behind when negative).
pub fn env(by_seconds: i64) -> Vec<(String, String)> {
    vec![("LD_PRELOAD".into(), preload().display().to_string()), ("WINPOOL_CLOCK_SKEW_SECONDS".into(), by_seconds.to_string())]
}

/// The environment that runs a child as many seconds ahead of this host as
/// `file` says when it reads its clock: write another number to step it.
pub fn env_stepped_by(file: &Path) -> Vec<(String, String)> {
    vec![("LD_PRELOAD".into(), preload().display().to_string()), ("WINPOOL_CLOCK_SKEW_FILE".into(), file.display().to_string())]
}

fn preload() -> &'static Path {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    BUILT.get_or_init(|| {
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/support/skewed_clock.c");
        let out = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("skewed_clock-{}.so", std::process::id()));
        let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
        let st = Command::new(&cc)
            .args(["-shared", "-fPIC", "-O2", "-o"])
            .arg(&out)
            .arg(&src)
            .arg("-ldl")
            .status()
            .unwrap_or_else(|e| panic!("{cc} (the C compiler that builds {}) does not run: {e}", src.display()));
        assert!(st.success(), "{cc} could not build {}", src.display());
        out
    })
}

#[cfg(test)]
mod tests {
    /// The preload moves `date`'s clock and nothing else's.
    #[test]
    fn a_child_under_the_preload_reads_a_clock_that_far_ahead() {
        let read = |env: Vec<(String, String)>| -> i64 {
            let out = std::process::Command::new("date").arg("+%s").envs(env).output().expect("date runs");
            String::from_utf8_lossy(&out.stdout).trim().parse().expect("seconds")
        };
        // Bracketed by the true clock, so a slow fork on a loaded host widens
        // the bounds rather than failing the test.
        let before = read(vec![]);
        let skewed = read(super::env(1200));
        let after = read(vec![]);
        assert!(
            (before + 1200..=after + 1200).contains(&skewed),
            "the child's clock reads {skewed}: not 1200s ahead of the true clock ({before}..={after})"
        );
    }
}
