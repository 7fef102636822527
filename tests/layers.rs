//! The folders are the layers (docs/ARCHITECTURE.md), and stay so: the pure
//! decision (`src/decision/`) and the object builders (`src/builders/`) name
//! no client, no runtime, no clock and no controller; the API types
//! (`src/api/`) name nothing of the layers above them. A source scan, so a
//! rule broken anywhere in those folders fails here with the file and line.

use std::path::{Path, PathBuf};

/// What the pure layers may not name: I/O (the client, HTTP, the async
/// runtime), the clock (a decision takes `now` as an argument), and the shell.
const IMPURE: &[(&str, &str)] = &[
    ("kube::Api", "the API client"),
    ("kube::api::Api", "the API client"),
    ("kube::Client", "the API client"),
    ("kube::client", "the API client"),
    ("kube::runtime::controller", "the controller runtime"),
    ("kube::runtime::reflector", "the watch caches"),
    ("tokio", "the async runtime"),
    ("async fn", "I/O"),
    (".await", "I/O"),
    ("hyper", "HTTP"),
    ("reqwest", "HTTP"),
    ("TcpStream", "the network"),
    ("TcpListener", "the network"),
    ("UdpSocket", "the network"),
    ("SystemTime", "the clock"),
    ("Timestamp::now", "the clock"),
    ("Instant::now", "the clock"),
    ("crate::controller", "the shell"),
];

/// What the API types may not name: every layer built on them.
const ABOVE_API: &[(&str, &str)] =
    &[("crate::decision", "the decision"), ("crate::builders", "the builders"), ("crate::controller", "the shell")];

/// Whether `code` names `pattern` as a whole path or word: `.await` is named
/// in `x.await;`, not in `..awaited`.
fn names(code: &str, pattern: &str) -> bool {
    let word = |c: char| c.is_alphanumeric() || c == '_';
    code.match_indices(pattern).any(|(i, _)| {
        let after = code[i + pattern.len()..].chars().next();
        let before = code[..i].chars().next_back();
        // `..awaited` is a struct update, not `.await`.
        let part_of_another = after.is_some_and(word)
            || pattern.starts_with(word) && before.is_some_and(word)
            || pattern.starts_with('.') && before == Some('.');
        !part_of_another
    })
}

fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let path = entry.unwrap().path();
        if path.is_dir() {
            out.extend(rust_files(&path));
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
    out
}

/// Every `file:line: names what (why)` in `src/<folder>` that names a
/// forbidden path, outside comments. Test modules count: a test that needs
/// the client belongs in the shell's tests.
fn violations(folder: &str, rules: &[(&str, &str)]) -> Vec<String> {
    violations_in(&Path::new(env!("CARGO_MANIFEST_DIR")).join("src").join(folder), rules)
}

fn violations_in(root: &Path, rules: &[(&str, &str)]) -> Vec<String> {
    let mut found = Vec::new();
    for file in rust_files(root) {
        let text = std::fs::read_to_string(&file).unwrap();
        for (i, line) in text.lines().enumerate() {
            let code = line.split("//").next().unwrap_or_default();
            for (pattern, what) in rules {
                if names(code, pattern) {
                    let rel = file.strip_prefix(env!("CARGO_MANIFEST_DIR")).unwrap_or(&file);
                    found.push(format!("{}:{}: names {pattern} ({what})", rel.display(), i + 1));
                }
            }
        }
    }
    found
}

#[test]
fn the_decision_and_the_builders_do_no_io_and_read_no_clock() {
    for folder in ["decision", "builders"] {
        let v = violations(folder, IMPURE);
        assert!(v.is_empty(), "src/{folder}/ is a pure layer; move these to src/controller/ or pass the value in:\n{}", v.join("\n"));
    }
}

#[test]
fn the_api_types_depend_on_no_layer_above_them() {
    let v = violations("api", ABOVE_API);
    assert!(v.is_empty(), "src/api/ holds the schema; the layers import it, never the reverse:\n{}", v.join("\n"));
}

/// What may sit at the root of `src/`, outside the layers' folders, and why.
/// A new module belongs in the folder of its layer; this list says so when
/// one lands beside them.
const ROOT: &[(&str, &str)] = &[
    ("api", "the schema: the CRDs' types, the names on Nodes, the Node record"),
    ("decision", "the pure decision"),
    ("builders", "the objects winpool writes"),
    ("controller", "the shell"),
    ("plugin", "the kubectl plugin"),
    ("bin", "the plugin's entry point"),
    ("lib.rs", "the crate"),
    ("main.rs", "the operator's entry point"),
    ("error.rs", "the reconcile's error enum, a metric label"),
    ("controller.rs", "the shell's module: the reconcile, its context and the controller's run"),
    ("crd.rs", "the CLI's CRD generation"),
    ("contract.rs", "tests only: the Rust-Go contract file"),
    ("test_builders.rs", "tests only: the unit tests' typed builders"),
];

#[test]
fn the_root_of_src_holds_the_layers_folders_and_only_the_modules_listed() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut stray = Vec::new();
    for entry in std::fs::read_dir(&src).unwrap() {
        let name = entry.unwrap().file_name().to_string_lossy().into_owned();
        if !ROOT.iter().any(|(listed, _)| *listed == name) {
            stray.push(name);
        }
    }
    stray.sort();
    assert!(
        stray.is_empty(),
        "src/ holds {stray:?} beside the layers: move each into the folder of its layer (api/, decision/, builders/, controller/), \
         or list it in tests/layers.rs with the reason it stands apart"
    );
}

/// A module is named by its full path (`crate::decision::rollout`), so a
/// reader finds its layer in the path: the crate root re-exports nothing.
#[test]
fn the_crate_root_re_exports_no_module() {
    let lib = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("src/lib.rs")).unwrap();
    let aliases: Vec<&str> = lib.lines().filter(|l| l.trim_start().starts_with("pub use")).collect();
    assert!(aliases.is_empty(), "src/lib.rs re-exports {aliases:?}: name the module by its full path instead");
}

/// The scan itself: a planted import is found, in code and not in a comment.
#[test]
fn the_scan_finds_a_planted_import_and_ignores_comments() {
    let dir = std::env::temp_dir().join(format!("winpool-layers-{}", std::process::id()));
    std::fs::create_dir_all(dir.join("nested")).unwrap();
    std::fs::write(
        dir.join("nested/planted.rs"),
        "// kube::Api in a comment\nuse kube::Api;\nlet n = N { ..awaited };\nuse kube::ApiResource;\n",
    )
    .unwrap();
    let v = violations_in(&dir, IMPURE);
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!(v.len(), 1, "{v:?}");
    assert!(v[0].ends_with("planted.rs:2: names kube::Api (the API client)"), "{v:?}");
}
