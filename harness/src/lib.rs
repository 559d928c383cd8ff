//! The EchoMQ conformance harness: boots a pinned Valkey, drives any connector through one
//! trait, and judges it by the eight gates of `bundle/SPEC.md`.
//!
//! The folders are the layers. A module imports only from its own layer or the ones below it;
//! commands sit on top and nothing imports them.
//!
//! | layer | module | what |
//! |---|---|---|
//! | 0 | [`error`] | typed errors, error kinds and exit codes |
//! | 0 | [`settings`] | every environment variable, named and read once (clap's `env =` names the command line's from here) |
//! | 1 | [`protocol`] | pure: the key grammar (SPEC §1), the bundle (§2), the keyspace model and its invariants, the gate ids (G1–G8) |
//! | 2 | [`engine`] | live Valkey: container, binary, url or cluster; its health; the harness's own admin connection |
//! | 2 | [`faults`] | a fault-injecting TCP proxy in front of the engine (of each cluster node, which [`engine`] announces): lost, dropped, cut and late replies |
//! | 2 | [`connector`] | the [`connector::Connector`] trait, its wire types, the reference and child connectors |
//! | 3 | [`observe`] | what a connector really sent: MONITOR lines parsed and attributed |
//! | 3 | [`doubles`] | deliberately broken connectors, each named for what it breaks (their names and table always; the connectors with feature `doubles`) |
//! | 4 | [`suites`] | what connectors are replayed against: YAML cases (G6) and model histories (G7) |
//! | 5 | [`gates`] | G1–G8: the gate context, verdicts, and one module per gate |
//! | 6 | [`report`] | the record (JSON, Markdown, JUnit) and all user-facing printing |
//! | 7 | [`cmd`] | `emq-gate`'s commands (cli, run, record, matrix, cases, smoke, bench, bench_spread, summary) and what they share (sources, preflight); nothing imports them |
#![forbid(unsafe_code)]

pub mod cmd;
pub mod connector;
pub mod doubles;
pub mod engine;
pub mod error;
pub mod faults;
pub mod gates;
pub mod observe;
pub mod protocol;
pub mod report;
pub mod settings;
pub mod suites;
pub mod tls;

/// `path` inside this repository, shown relative to the working directory when it can be, so
/// error locations read `cases/x.yaml:3` rather than an absolute path.
pub fn repo_relative(path: &str) -> std::path::PathBuf {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let full = root.canonicalize().unwrap_or(root).join(path);
    std::env::current_dir()
        .ok()
        .and_then(|cwd| {
            let cwd = cwd.canonicalize().ok()?;
            full.strip_prefix(&cwd).ok().map(|p| p.to_path_buf())
        })
        .or_else(|| {
            // From harness/ (cargo test's working directory) show ../cases/x.yaml.
            let cwd = std::env::current_dir().ok()?.canonicalize().ok()?;
            let parent = cwd.parent()?;
            full.strip_prefix(parent)
                .ok()
                .map(|p| std::path::Path::new("..").join(p))
        })
        .unwrap_or(full)
}

/// The layer table above, enforced: no module imports a module of a higher layer, and no two
/// top-level modules import each other.
#[cfg(test)]
mod layers {
    use std::collections::{BTreeMap, BTreeSet};
    use std::path::Path;

    const LAYERS: [(&str, u8); 13] = [
        ("error", 0),
        ("settings", 0),
        ("protocol", 1),
        ("tls", 1),
        ("engine", 2),
        ("connector", 2),
        ("observe", 3),
        ("doubles", 3),
        ("faults", 2),
        ("suites", 4),
        ("gates", 5),
        ("report", 6),
        ("cmd", 7),
    ];

    fn layer(m: &str) -> Option<u8> {
        LAYERS.iter().find(|(n, _)| *n == m).map(|(_, l)| *l)
    }

    /// Every source file under `src/`: its path relative to `src/` and its non-test code, with
    /// comment lines left out (doc comments may name any module, and tests may reach up).
    fn sources() -> Vec<(String, String)> {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let mut out = Vec::new();
        let mut stack = vec![root.clone()];
        while let Some(dir) = stack.pop() {
            for entry in std::fs::read_dir(&dir).unwrap() {
                let path = entry.unwrap().path();
                if path.is_dir() {
                    stack.push(path);
                    continue;
                }
                let rel = path
                    .strip_prefix(&root)
                    .unwrap()
                    .to_string_lossy()
                    .to_string();
                let text = std::fs::read_to_string(&path).unwrap();
                let code: String = text
                    .split("#[cfg(test)]")
                    .next()
                    .unwrap()
                    .lines()
                    .filter(|l| !l.trim_start().starts_with("//"))
                    .collect::<Vec<_>>()
                    .join("\n");
                out.push((rel, code));
            }
        }
        out
    }

    /// Top-level module → the top-level modules its non-test code names as `crate::<m>`.
    fn imports() -> BTreeMap<String, BTreeSet<String>> {
        let mut out: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for (rel, code) in sources() {
            let top = rel.split('/').next().unwrap().trim_end_matches(".rs");
            if layer(top).is_none() {
                continue;
            }
            for part in code.split("crate::").skip(1) {
                let name: String = part
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                    .collect();
                if name != top && layer(&name).is_some() {
                    out.entry(top.to_string()).or_default().insert(name);
                }
            }
        }
        out
    }

    #[test]
    fn no_module_imports_a_higher_layer() {
        let mut wrong = Vec::new();
        for (from, tos) in imports() {
            for to in tos {
                if layer(&to) > layer(&from) {
                    wrong.push(format!(
                        "{from} (layer {:?}) imports {to} (layer {:?})",
                        layer(&from),
                        layer(&to)
                    ));
                }
            }
        }
        assert!(wrong.is_empty(), "{wrong:#?}");
    }

    /// A file past 600 lines wants splitting by concept.
    #[test]
    fn no_source_file_passes_600_lines() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let mut long = Vec::new();
        let mut stack = vec![root];
        while let Some(dir) = stack.pop() {
            for entry in std::fs::read_dir(&dir).unwrap() {
                let path = entry.unwrap().path();
                if path.is_dir() {
                    stack.push(path);
                } else if let Ok(text) = std::fs::read_to_string(&path) {
                    let n = text.lines().count();
                    if n > 600 {
                        long.push(format!("{}: {n} lines", path.display()));
                    }
                }
            }
        }
        assert!(long.is_empty(), "{long:#?}");
    }

    /// Every source file as a module path (`cmd::cli`, `gates::g8`) → the file modules its
    /// non-test code names (`crate::a::b::...` resolved to the longest file module it starts with,
    /// `super::x` resolved from the file's parent), leaving out its own ancestors and descendants:
    /// a `mod.rs` and its children share types both ways by design.
    fn file_imports() -> BTreeMap<String, BTreeSet<String>> {
        let mut files: BTreeMap<String, String> = BTreeMap::new();
        for (rel, code) in sources() {
            let Some(stem) = rel.strip_suffix(".rs") else {
                continue;
            };
            let module = stem.trim_end_matches("/mod").replace('/', "::");
            if !matches!(module.as_str(), "lib" | "main") {
                files.insert(module, code);
            }
        }
        let related = |a: &str, b: &str| {
            a == b || a.starts_with(&format!("{b}::")) || b.starts_with(&format!("{a}::"))
        };
        let resolve = |path: &str| -> Option<String> {
            let mut parts: Vec<&str> = path.split("::").collect();
            while !parts.is_empty() {
                let m = parts.join("::");
                if files.contains_key(&m) {
                    return Some(m);
                }
                parts.pop();
            }
            None
        };
        let mut out: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for (module, code) in &files {
            let parent = module.rsplit_once("::").map_or("", |(p, _)| p).to_string();
            let mut refs: Vec<String> = Vec::new();
            for (prefix, base) in [("crate::", String::new()), ("super::", parent.clone())] {
                for part in code.split(prefix).skip(1) {
                    let name: String = part
                        .chars()
                        .take_while(|c| c.is_ascii_alphanumeric() || *c == '_' || *c == ':')
                        .collect();
                    let full = if base.is_empty() {
                        name
                    } else {
                        format!("{base}::{name}")
                    };
                    refs.push(full.trim_end_matches(':').to_string());
                }
            }
            for r in refs {
                if let Some(to) = resolve(&r).filter(|to| !related(module, to)) {
                    out.entry(module.clone()).or_default().insert(to);
                }
            }
        }
        out
    }

    #[test]
    fn no_file_level_import_circle() {
        let all = file_imports();
        // The graph is real: known edges are in it (so a circle could be found).
        assert!(all["cmd::matrix"].contains("cmd::run"), "{all:#?}");
        assert!(all["report::html"].contains("report::matrix"), "{all:#?}");
        assert!(
            all["gates::g8::crashes"].contains("observe::reconnect"),
            "{all:#?}"
        );
        let mut circles = Vec::new();
        for (a, tos) in &all {
            for b in tos {
                // Any path back from b to a closes a circle.
                let mut seen = BTreeSet::new();
                let mut stack = vec![b.clone()];
                while let Some(m) = stack.pop() {
                    if m == *a {
                        circles.push(format!("{a} -> {b} -> ... -> {a}"));
                        break;
                    }
                    if seen.insert(m.clone()) {
                        stack.extend(all.get(&m).into_iter().flatten().cloned());
                    }
                }
            }
        }
        assert!(circles.is_empty(), "{circles:#?}");
    }

    #[test]
    fn no_two_modules_import_each_other() {
        let all = imports();
        let mut cycles = Vec::new();
        for (a, tos) in &all {
            for b in tos {
                if all.get(b).is_some_and(|back| back.contains(a)) && a < b {
                    cycles.push(format!("{a} <-> {b}"));
                }
            }
        }
        assert!(cycles.is_empty(), "{cycles:?}");
    }
}
