//! The EchoMQ conformance harness: boots a pinned Valkey, drives any connector through one
//! trait, and judges it by the eight gates of `bundle/SPEC.md`.
#![forbid(unsafe_code)]

pub mod bench;
pub mod bundle;
pub mod cases;
pub mod cli;
pub mod connector;
pub mod engine;
pub mod error;
pub mod gate;
pub mod gates;
pub mod grammar;
pub mod keyspace;
pub mod model;
pub mod observe;
pub mod output;
pub mod record;
pub mod run;
pub mod smoke;

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
