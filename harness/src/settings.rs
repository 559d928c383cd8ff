//! Every environment variable the harness, its command line and its tests read: each named here
//! once, and read here (the command line's flags name theirs through clap's `env =`, with these
//! constants, so clap reads those). Nothing else calls `std::env::var`.

use std::ffi::OsString;
use std::path::PathBuf;

// The command line's variables (a flag wins over its variable; see `cmd/cli.rs`).

/// `--engine`: auto | container | binary | url | cluster.
pub const ENGINE: &str = "EMQ_ENGINE";
/// `--url`: an existing server, `redis://[:password@]host:port[/db]`.
pub const ENGINE_URL: &str = "EMQ_ENGINE_URL";
/// `--engine-name`: an engine by name, through [`engine_var_prefix`]'s variables.
pub const ENGINE_NAME: &str = "EMQ_ENGINE_NAME";
/// `--allow-flush`: let the harness flush a url database holding keys it did not make.
pub const ALLOW_FLUSH: &str = "EMQ_ALLOW_FLUSH";
/// `--image`: the container engine's image.
pub const VALKEY_IMAGE: &str = "EMQ_VALKEY_IMAGE";
/// `--valkey-server`: the binary engine's server (read by clap only; library callers take it
/// from `cmd::cli::engine_options_from_env`).
pub const VALKEY_SERVER: &str = "EMQ_VALKEY_SERVER";
/// `--seed`: G7 and G8's seed.
pub const SEED: &str = "EMQ_SEED";
/// `--bundle`: the bundle directory (also the default of [`bundle_dir`]).
pub const BUNDLE_DIR: &str = "EMQ_BUNDLE_DIR";
/// `--cases`: the case corpus.
pub const CASES_DIR: &str = "EMQ_CASES_DIR";
/// `--reports`: where `record` writes and `check` reads.
pub const REPORTS_DIR: &str = "EMQ_REPORTS_DIR";

// Read outside the command line.

/// `valkey-benchmark` for `emq-gate bench`.
pub const VALKEY_BENCHMARK: &str = "EMQ_VALKEY_BENCHMARK";
/// Where `ci/provision` builds engines and records paths (default `~/.cache/emq`).
pub const CACHE: &str = "EMQ_CACHE";
/// Where G7 keeps a failure's whole original history (default: under the temp dir).
pub const G7_CASE_OUT: &str = "EMQ_G7_CASE_OUT";
/// A G7 history file (one G7 kept, `<case>.history.json`) that G7 replays before anything else:
/// what a failed G7's reproduce line sets, so the very history that failed runs again.
pub const G7_REPLAY: &str = "EMQ_G7_REPLAY";
/// Set to anything but empty: no colour on a terminal (<https://no-color.org>).
pub const NO_COLOR: &str = "NO_COLOR";

/// `EMQ_BLESS=1`: rewrite snapshots (case expectations, schemas, bad-case errors, double case
/// lists, transcripts) instead of checking them. Authoring only; CI never blesses.
pub const BLESS: &str = "EMQ_BLESS";

/// `EMQ_PYTHON_CONNECTOR`: the Python connector's launcher (`ci/provision` writes it).
pub const PYTHON_CONNECTOR: &str = "EMQ_PYTHON_CONNECTOR";

/// `CI`: set on a CI runner, where a missing connector or browser is a failure, never a skip.
pub const CI: &str = "CI";

// Read by the test suite only (the README's table lists them).

/// `EMQ_SELFTEST_SEED`: G7's and G8's seed in the gate self-tests (default 42).
pub const SELFTEST_SEED: &str = "EMQ_SELFTEST_SEED";
/// `EMQ_SELFTEST_GATES=G1,G4`: narrows the gate self-tests while working on a gate.
pub const SELFTEST_GATES: &str = "EMQ_SELFTEST_GATES";
/// `EMQ_RULES=R4.11,R5.4`: narrows the kill matrix while working on a rule.
pub const RULES: &str = "EMQ_RULES";
/// `EMQ_HANGS_ALL=1`: every hang scenario, not the quick set.
pub const HANGS_ALL: &str = "EMQ_HANGS_ALL";
/// `EMQ_SKIP_CONTAINER=1`: skip the container engine's record test.
pub const SKIP_CONTAINER: &str = "EMQ_SKIP_CONTAINER";
/// `EMQ_CHROMIUM`: the browser that renders `reports/index.html` in a test.
pub const CHROMIUM: &str = "EMQ_CHROMIUM";
/// `EMQ_G7_BENCH_HISTORIES`, `EMQ_G7_BENCH_SEED`: the G7 bench's size and seed.
pub const G7_BENCH_HISTORIES: &str = "EMQ_G7_BENCH_HISTORIES";
pub const G7_BENCH_SEED: &str = "EMQ_G7_BENCH_SEED";

/// The value of `name`, when it is set and not empty.
pub fn var(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.is_empty())
}

/// The value of `name` as the OS gave it, when it is set and not empty.
pub fn var_os(name: &str) -> Option<OsString> {
    std::env::var_os(name).filter(|v| !v.is_empty())
}

/// True when `name` is `1`.
pub fn flag(name: &str) -> bool {
    var(name).is_some_and(|v| v == "1")
}

/// The value of `name` parsed, when it is set and parses.
pub fn parsed<T: std::str::FromStr>(name: &str) -> Option<T> {
    var(name).and_then(|v| v.parse().ok())
}

/// True when [`BLESS`] is `1`.
pub fn bless() -> bool {
    flag(BLESS)
}

/// The Python connector [`PYTHON_CONNECTOR`] names, when it names a file.
pub fn python_connector() -> Option<PathBuf> {
    var_os(PYTHON_CONNECTOR)
        .map(PathBuf::from)
        .filter(|p| p.is_file())
}

/// True on a CI runner ([`CI`] set).
pub fn in_ci() -> bool {
    std::env::var_os(CI).is_some()
}

/// `ci/provision`'s cache: [`CACHE`], else `~/.cache/emq`.
pub fn cache_dir() -> Option<PathBuf> {
    var_os(CACHE)
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache/emq")))
}

/// `program` in each directory of `PATH`, in order (whether there or not).
pub fn on_path(program: &str) -> Vec<PathBuf> {
    std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).map(|d| d.join(program)).collect())
        .unwrap_or_default()
}

/// The bundle directory [`BUNDLE_DIR`] names.
pub fn bundle_dir() -> Option<PathBuf> {
    var_os(BUNDLE_DIR).map(PathBuf::from)
}

/// The case corpus [`CASES_DIR`] names.
pub fn cases_dir() -> Option<PathBuf> {
    var_os(CASES_DIR).map(PathBuf::from)
}

/// False when [`NO_COLOR`] asks for no colour.
pub fn color_allowed() -> bool {
    var_os(NO_COLOR).is_none()
}

/// `EMQ_ENGINE_<NAME>`, whose `_SERVER` and `_IMAGE` `ci/provision` writes for every engine it
/// built: `valkey-9.1` → `EMQ_ENGINE_VALKEY_9_1`.
pub fn engine_var_prefix(name: &str) -> String {
    let up: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_uppercase()
            } else {
                '_'
            }
        })
        .collect();
    format!("EMQ_ENGINE_{up}")
}

/// The engine names the environment holds a non-empty `EMQ_ENGINE_<NAME>_SERVER` or `_IMAGE`
/// for, as the upper-case `<NAME>` stems (`VALKEY_9_1`).
pub fn engine_var_stems() -> Vec<String> {
    std::env::vars()
        .filter_map(|(k, v)| {
            let rest = k.strip_prefix("EMQ_ENGINE_")?;
            let stem = rest
                .strip_suffix("_SERVER")
                .or_else(|| rest.strip_suffix("_IMAGE"))?;
            (!v.is_empty()).then_some(stem.to_string())
        })
        .collect()
}

/// `EMQ_<LABEL>_CONNECTOR`: the launcher of the connector a label names (`node`, `go`, ...),
/// written by its `ci/provision`.
pub fn connector_var(label: &str) -> String {
    format!(
        "EMQ_{}_CONNECTOR",
        label.to_ascii_uppercase().replace(['-', '.'], "_")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn variable_names_are_spelt_as_provision_writes_them() {
        assert_eq!(engine_var_prefix("valkey-9.1"), "EMQ_ENGINE_VALKEY_9_1");
        assert_eq!(connector_var("node"), "EMQ_NODE_CONNECTOR");
        assert_eq!(connector_var("my-conn.x"), "EMQ_MY_CONN_X_CONNECTOR");
    }
}
