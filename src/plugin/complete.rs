//! `kubectl winpool <TAB>`: kubectl (1.26+) completes a plugin's arguments by
//! running `kubectl_complete-winpool` with the words typed so far, the last
//! one the word being completed, and reading one candidate per line and a
//! last `:<directive>` line (cobra's protocol). The plugin binary answers
//! when called by that name (a link to it): subcommands and flags from the
//! command line's own definition, pool names, and for `retry` the Failed nodes.

use clap::CommandFactory;

use super::cli::Cli;

/// Cobra's ShellCompDirectiveNoFileComp: offer no file names instead.
pub const NO_FILE_COMPLETION: &str = ":4";

/// What completing the last of `words` needs from the cluster, if anything.
#[derive(Debug, PartialEq, Eq)]
pub enum Wanted {
    /// The candidates are known without the cluster.
    These(Vec<String>),
    /// Pool names starting with the prefix.
    Pools(String),
    /// Names of Failed nodes starting with the prefix.
    FailedNodes(String),
}

/// The candidates for the last of `words` (the arguments after `winpool`).
pub fn wanted(words: &[String]) -> Wanted {
    let (cur, done) = match words.split_last() {
        Some((cur, done)) => (cur.as_str(), done),
        None => ("", &[][..]),
    };
    let cli = Cli::command();
    let global = |name: &str| cli.get_arguments().any(|a| a.get_long() == Some(name));
    // Skip the global flags (and the value of one that takes it) to find the subcommand.
    let mut rest = done.iter().map(String::as_str).peekable();
    let mut sub = None;
    while let Some(w) = rest.next() {
        if let Some(long) = w.strip_prefix("--") {
            if global(long) && !long.contains('=') {
                rest.next();
            }
            continue;
        }
        sub = cli.find_subcommand(w);
        break;
    }
    let Some(sub) = sub else {
        return Wanted::These(matching(cli.get_subcommands().filter(|s| !s.is_hide_set()).map(|s| s.get_name().to_string()), cur));
    };
    let args: Vec<&str> = rest.collect();
    if matches!(args.last(), Some(&("-o" | "--output"))) {
        let values = ["table", "wide", "name", "json", "yaml"].map(String::from);
        return Wanted::These(matching(values, cur));
    }
    if cur.starts_with('-') {
        let flags = sub.get_arguments().chain(cli.get_arguments()).filter_map(|a| a.get_long()).map(|l| format!("--{l}"));
        return Wanted::These(matching(flags, cur));
    }
    // A flag that takes a value (-o json, --file x) is no positional, nor is its value.
    let takes_value = |flag: &str| {
        sub.get_arguments().chain(cli.get_arguments()).any(|a| {
            let named = flag.strip_prefix("--").map(|l| a.get_long() == Some(l)).unwrap_or_else(|| {
                let mut c = flag.chars().skip(1);
                matches!((c.next(), c.next()), (Some(short), None) if a.get_short() == Some(short))
            });
            named && a.get_action().takes_values()
        })
    };
    let (mut positionals, mut it) = (0, args.iter());
    while let Some(a) = it.next() {
        match a.starts_with('-') {
            true if takes_value(a) => drop(it.next()),
            true => {}
            false => positionals += 1,
        }
    }
    if positionals > 0 {
        return Wanted::These(Vec::new());
    }
    match sub.get_name() {
        "status" | "plan" | "pause" | "resume" | "bundle" => Wanted::Pools(cur.to_string()),
        "retry" => Wanted::FailedNodes(cur.to_string()),
        "completion" => Wanted::These(matching(["bash", "zsh", "fish", "powershell"].map(String::from), cur)),
        _ => Wanted::These(Vec::new()),
    }
}

/// The candidates that start with `prefix`, sorted.
pub fn matching(candidates: impl IntoIterator<Item = String>, prefix: &str) -> Vec<String> {
    let mut out: Vec<String> = candidates.into_iter().filter(|c| c.starts_with(prefix)).collect();
    out.sort();
    out.dedup();
    out
}

/// The lines kubectl reads: the candidates and the directive.
pub fn answer(candidates: &[String]) -> String {
    candidates.iter().map(|c| format!("{c}\n")).collect::<String>() + NO_FILE_COMPLETION + "\n"
}

#[cfg(test)]
mod tests {
    use super::*;

    fn w(words: &[&str]) -> Wanted {
        wanted(&words.iter().map(|s| s.to_string()).collect::<Vec<_>>())
    }

    fn these(list: &[&str]) -> Wanted {
        Wanted::These(list.iter().map(|s| s.to_string()).collect())
    }

    #[test]
    fn subcommands_then_pools_or_failed_nodes_then_flags_and_output_formats() {
        assert_eq!(
            w(&[""]),
            these(&["bundle", "completion", "compliance", "history", "list", "pause", "plan", "resume", "retry", "status", "version"])
        );
        assert_eq!(w(&["p"]), these(&["pause", "plan"]));
        assert_eq!(w(&["--context", "prod", "st"]), these(&["status"]), "a global flag and its value are skipped");
        assert_eq!(w(&["status", "win"]), Wanted::Pools("win".into()));
        assert_eq!(w(&["retry", ""]), Wanted::FailedNodes("".into()));
        assert_eq!(w(&["status", "win22", ""]), these(&[]), "one pool only");
        assert_eq!(w(&["status", "win22", "-o", "j"]), these(&["json"]));
        assert_eq!(w(&["status", "-o", "json", "w"]), Wanted::Pools("w".into()), "a flag's value is no pool");
        assert_eq!(w(&["plan", "--w"]), these(&["--watch"]));
        assert_eq!(w(&["completion", "z"]), these(&["zsh"]));
        assert_eq!(answer(&["a".into()]), "a\n:4\n");
    }
}
