//! Settings the harness and its tests read from the environment outside the command line (whose
//! flags and their `env =` variables live in `cmd/cli.rs`), each read here once, by name.

/// `EMQ_BLESS=1`: rewrite snapshots (case expectations, schemas, bad-case errors, double case
/// lists, transcripts) instead of checking them. Authoring only; CI never blesses.
pub const BLESS: &str = "EMQ_BLESS";

/// True when [`BLESS`] is `1`.
pub fn bless() -> bool {
    std::env::var(BLESS).is_ok_and(|v| v == "1")
}

/// `EMQ_PYTHON_CONNECTOR`: the Python connector's launcher (`ci/provision` writes it).
pub const PYTHON_CONNECTOR: &str = "EMQ_PYTHON_CONNECTOR";

/// `CI`: set on a CI runner, where a missing connector or browser is a failure, never a skip.
pub const CI: &str = "CI";

/// The Python connector [`PYTHON_CONNECTOR`] names, when it names a file.
pub fn python_connector() -> Option<std::path::PathBuf> {
    std::env::var_os(PYTHON_CONNECTOR)
        .filter(|p| !p.is_empty())
        .map(std::path::PathBuf::from)
        .filter(|p| p.is_file())
}

/// True on a CI runner ([`CI`] set).
pub fn in_ci() -> bool {
    std::env::var_os(CI).is_some()
}
