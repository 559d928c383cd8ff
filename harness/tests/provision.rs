//! `ci/provision` on a cache it has never seen (a fresh machine): it ends with exit 0, writes this
//! checkout's settings and the shared copy, and on a second run leaves a shared copy that belongs
//! to another checkout alone. The engine is the one already provisioned (`EMQ_VALKEY_SERVER`), so
//! nothing is built; without it the test is skipped with a line (a failure under `CI`).

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn provision(cache: &Path, server: &Path) -> Output {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    Command::new(root.join("ci/provision"))
        .args(["--quiet", "--connectors", "none"])
        .env("EMQ_CACHE", cache)
        .env("EMQ_VALKEY_SERVER", server)
        .env_remove("EMQ_ENGINES")
        .output()
        .expect("ci/provision runs")
}

#[test]
fn a_fresh_cache_is_provisioned_and_another_checkouts_settings_are_left_alone() {
    let Some(server) = common::provisioned("EMQ_VALKEY_SERVER") else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let cache = tmp.path();
    // A first run on an empty cache: no shared `env` file exists yet (a fresh machine).
    let first = provision(cache, &server);
    assert!(
        first.status.success(),
        "ci/provision on an empty cache exited {:?}: {}",
        first.status.code(),
        String::from_utf8_lossy(&first.stderr)
    );
    let own: Vec<_> = std::fs::read_dir(cache)
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().to_string())
        .filter(|n| n.starts_with("env-"))
        .collect();
    assert_eq!(own.len(), 1, "one settings file for this checkout: {own:?}");
    let shared = std::fs::read_to_string(cache.join("env")).expect("the shared copy is written");
    assert!(shared.contains(&format!("EMQ_VALKEY_SERVER={}", server.display())));

    // Another checkout owns the shared copy: a second run keeps it byte for byte.
    let theirs = "EMQ_CHECKOUT=/somewhere/else\nEMQ_VALKEY_SERVER=/their/valkey-server\n";
    std::fs::write(cache.join("env"), theirs).unwrap();
    let second = provision(cache, &server);
    assert!(
        second.status.success(),
        "{}",
        String::from_utf8_lossy(&second.stderr)
    );
    assert_eq!(std::fs::read_to_string(cache.join("env")).unwrap(), theirs);
}
