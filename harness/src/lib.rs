//! The EchoMQ conformance harness: boots a pinned Valkey, drives any connector through one
//! trait, and judges it by the eight gates of `bundle/SPEC.md`.
//!
//! The folders are the layers. A module imports only from its own layer or the ones below it;
//! commands sit on top and nothing imports them.
//!
//! | layer | module | what |
//! |---|---|---|
//! | 0 | [`error`] | typed errors, error kinds and exit codes |
//! | 1 | [`protocol`] | pure: the key grammar (SPEC §1), the bundle (§2), the keyspace model and its invariants |
//! | 2 | [`engine`] | live Valkey: container, binary or url; the harness's own admin connection |
//! | 2 | [`connector`] | the [`connector::Connector`] trait, its wire types, the reference and child connectors |
//! | 3 | [`observe`] | what a connector really sent: MONITOR lines parsed and attributed |
//! | 3 | [`faults`] | a fault-injecting TCP proxy in front of the engine: lost, dropped, cut and late replies |
//! | 3 | [`doubles`] | deliberately broken connectors, each named for what it breaks (feature `doubles`) |
//! | 4 | [`suites`] | what connectors are replayed against: YAML cases (G6) and model histories (G7) |
//! | 5 | [`gates`] | G1–G8: the gate context, verdicts, and one module per gate |
//! | 6 | [`report`] | the record (JSON, Markdown, JUnit) and all user-facing printing |
//! | 7 | [`cmd`] | `emq-gate`'s commands: cli, run, bench, smoke |
#![forbid(unsafe_code)]

pub mod cmd;
pub mod connector;
#[cfg(feature = "doubles")]
pub mod doubles;
pub mod engine;
pub mod error;
pub mod faults;
pub mod gates;
pub mod observe;
pub mod protocol;
pub mod report;
pub mod suites;

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
