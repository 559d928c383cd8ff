//! The flags every judging command shares: the engine (`EngineArgs`), the run's seed, histories
//! and batch (`RunArgs`), and the subject and its reporting (`Common`), with their defaults and
//! parsers. Their own concept: one set of options, flattened into `run`, `record`, `check` and the
//! rest, and what a run is built from.

use std::path::PathBuf;

use clap::{Args, Parser};

use crate::cmd::run::{RunOptions, Subject};
use crate::engine::{DEFAULT_IMAGE, EngineChoice, EngineOptions};
use crate::error::HarnessError;
use crate::settings;

/// Engine selection flags.
#[derive(Debug, Args)]
pub struct EngineArgs {
    /// Which engine to judge on.
    #[arg(long, value_enum, default_value = "auto", env = settings::ENGINE)]
    pub engine: EngineChoice,
    /// An existing server (engine url); never flushed when it holds foreign keys unless --allow-flush.
    #[arg(long, env = settings::ENGINE_URL)]
    pub url: Option<String>,
    /// Let the harness flush a url database that holds keys it did not make.
    #[arg(long, env = settings::ALLOW_FLUSH)]
    pub allow_flush: bool,
    /// The container image.
    #[arg(long, default_value = DEFAULT_IMAGE, env = settings::VALKEY_IMAGE)]
    pub image: String,
    /// The valkey-server binary (binary engine).
    #[arg(long, env = settings::VALKEY_SERVER)]
    pub valkey_server: Option<PathBuf>,
    // Its help names the engines from the one list (`engine::named::DEFAULT_NAMES`).
    #[arg(long, env = settings::ENGINE_NAME, value_parser = parse_engine_name,
          help = engine_name_help())]
    pub engine_name: Option<crate::engine::named::EngineName>,
}

/// A `--gates` id (`G1`..`G8`, any case); an unknown one is refused naming the known ones.
pub fn parse_gate(s: &str) -> Result<crate::gates::GateId, String> {
    s.parse().map_err(|e: crate::protocol::gate::UnknownGate| {
        let known: Vec<&str> = crate::gates::ALL.iter().map(|g| g.id.as_str()).collect();
        format!("{e} (known: {})", known.join(", "))
    })
}

/// `--engine-name`'s help: the engines by name, from [`crate::engine::named::DEFAULT_NAMES`],
/// so a new engine is named in the help the day it is in the list.
pub fn engine_name_help() -> String {
    format!(
        "An engine by name ({}), through EMQ_ENGINE_<NAME>_SERVER (binary engine) or _IMAGE \
         (container engine); wins over --valkey-server and --image",
        crate::engine::named::DEFAULT_NAMES.join(", ")
    )
}

fn parse_engine_name(s: &str) -> Result<crate::engine::named::EngineName, String> {
    crate::engine::named::EngineName::resolve(s)
}

/// G7 and G8's seed unless `--seed` (or [`settings::SEED`]) says otherwise.
pub const SEED: u64 = 1;
/// G7's history count unless `--histories` says otherwise.
pub const HISTORIES: u32 = 256;
/// G5's batch size unless `--batch` says otherwise (at least this many certifies).
pub const BATCH: i64 = 100_000;
/// A child-process connector's per-request timeout, seconds, unless `--timeout` says otherwise.
pub const TIMEOUT_SECS: u64 = 10;

/// What a gate run is judged with: shared by run, record, check and matrix.
#[derive(Debug, Args)]
pub struct RunArgs {
    /// Seed for G7 and G8.
    #[arg(long, default_value_t = SEED, env = settings::SEED)]
    pub seed: u64,
    /// G7 histories.
    #[arg(long, default_value_t = HISTORIES)]
    pub histories: u32,
    /// G5 batch size (at least 100 000 certifies).
    #[arg(long, default_value_t = BATCH)]
    pub batch: i64,
    /// Per-request timeout for a child-process connector, seconds.
    #[arg(long, default_value_t = TIMEOUT_SECS)]
    pub timeout: u64,
}

/// The engine options the environment alone gives ([`EngineArgs`] with no flags: clap reads the
/// same variables as on the command line), for tests and library callers. A bad value is an
/// error, never a silent default.
pub fn engine_options_from_env() -> Result<EngineOptions, HarnessError> {
    #[derive(Debug, Parser)]
    struct EnvOnly {
        #[command(flatten)]
        engine: EngineArgs,
    }
    EnvOnly::try_parse_from(["emq-gate"])
        .map(|a| a.engine.options())
        .map_err(|e| {
            let text = e.to_string();
            let first = text.lines().next().unwrap_or("");
            HarnessError::BadInput(first.trim_start_matches("error: ").to_string())
        })
}

/// Flags shared by run, record and check.
#[derive(Debug, Args)]
pub struct Common {
    #[command(flatten)]
    pub engine: EngineArgs,
    /// The record's name (file stem under --reports or --out; default: `reference`, or the
    /// connector's hello name).
    #[arg(long)]
    pub name: Option<String>,
    #[command(flatten)]
    pub run: RunArgs,
    /// Only these gates (e.g. G1,G5); the rest are NOT RUN, and the run is judged on these.
    #[arg(long, value_delimiter = ',', value_parser = parse_gate)]
    pub gates: Option<Vec<crate::gates::GateId>>,
    /// Judge a connector in another runtime: its command and arguments after `--`
    /// (default: the in-process reference connector).
    #[arg(last = true)]
    pub connector: Vec<String>,
    /// Where `record` writes and `check` reads (default: the checkout's reports/ around the
    /// current directory, else ./reports).
    #[arg(long, env = settings::REPORTS_DIR, value_name = "DIR")]
    pub reports: Option<PathBuf>,
    /// Let `record` overwrite the record of another connector.
    #[arg(long)]
    pub force: bool,
    /// Stop at the first gate that is not PASS; the rest are NOT RUN (on one engine, in order).
    #[arg(long)]
    pub fail_fast: bool,
    /// Run every gate on one engine, one after another. Without it the gates run in lanes, each
    /// lane on an engine of its own and all lanes at once (a url engine is always one lane).
    #[arg(long)]
    pub one_engine: bool,
    /// Append every request and reply of a child connector to FILE (JSON lines, timestamps).
    #[arg(long, value_name = "FILE")]
    pub wire_log: Option<PathBuf>,
    /// Expected failures: a YAML file of gate or rule ids this connector is known to fail, each
    /// with a reason (README: "Expected failures"). A failure it names is expected, one it does
    /// not is new (exit 1), an entry that passed is reported (remove it); only expected failures
    /// exit 5.
    #[arg(long, value_name = "FILE")]
    pub baseline: Option<PathBuf>,
    /// Judge a deliberately broken connector of `emq::doubles` by name (`SkipFence`): built only
    /// with the `doubles` feature, for the CLI's own tests, never in a release.
    #[cfg(feature = "doubles")]
    #[arg(long, hide = true, value_name = "NAME", value_parser = parse_double, conflicts_with = "connector")]
    pub double: Option<crate::doubles::Double>,
}

/// A double by its type name (`SkipFence`).
#[cfg(feature = "doubles")]
fn parse_double(s: &str) -> Result<crate::doubles::Double, String> {
    crate::doubles::Double::all()
        .find(|d| format!("{d:?}") == s)
        .ok_or_else(|| format!("unknown double {s:?}"))
}

/// A double's record name: `double-SkipFence`.
#[cfg(feature = "doubles")]
pub fn double_stem(d: crate::doubles::Double) -> String {
    format!("double-{d:?}")
}

impl EngineArgs {
    /// Engine options from the flags (clap has already read the environment).
    pub fn options(&self) -> EngineOptions {
        let mut o = EngineOptions {
            choice: self.engine,
            url: self.url.clone().filter(|u| !u.is_empty()),
            image: self.image.clone(),
            valkey_server: self.valkey_server.clone(),
            allow_flush: self.allow_flush,
            tls: false,
        };
        if let Some(name) = &self.engine_name {
            let named = crate::cmd::matrix::engine_options(name, self.engine);
            o.image = named.image;
            o.valkey_server = named.valkey_server;
            o.tls = named.tls;
            if matches!(named.choice, EngineChoice::Cluster | EngineChoice::Sentinel) {
                o.choice = named.choice;
            }
        }
        o
    }
}

impl Common {
    /// `--double`'s name, for the reproduce line (always `None` in a release build).
    pub fn double_name(&self) -> Option<String> {
        #[cfg(feature = "doubles")]
        if let Some(d) = self.double {
            return Some(format!("{d:?}"));
        }
        None
    }

    /// The subject the flags name: a double (test builds), the reference, or a child.
    fn subject(&self, dirs: &crate::cmd::sources::Dirs) -> Subject {
        #[cfg(feature = "doubles")]
        if let Some(d) = self.double {
            return Subject::Double(d);
        }
        if self.connector.is_empty() {
            Subject::Reference
        } else {
            Subject::Child(crate::cmd::sources::child_spec_logged(
                &self.connector,
                self.run.timeout,
                self.wire_log.as_ref(),
                &dirs.bundle,
            ))
        }
    }

    /// Run options from the flags, judged by the bundle and cases in `dirs`.
    pub fn options(&self, dirs: &crate::cmd::sources::Dirs) -> RunOptions {
        RunOptions {
            engine: self.engine.options(),
            subject: self.subject(dirs),
            seed: self.run.seed,
            histories: self.run.histories,
            batch: self.run.batch,
            only: self.gates.clone(),
            fail_fast: self.fail_fast,
            one_engine: self.one_engine,
            dirs: dirs.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::named::EngineName;

    /// A name that names a topology boots that topology, whatever `--engine` says: a Sentinel
    /// name once booted the pinned engine's container and certified it as the Sentinel column.
    #[test]
    fn an_engine_name_of_a_topology_boots_that_topology() {
        let named = |name: &str, cluster: bool, sentinel: bool| EngineName {
            name: name.into(),
            server: Some(PathBuf::from("/bin/valkey-server")),
            image: None,
            cluster,
            tls: false,
            sentinel,
        };
        for (name, cluster, sentinel, want) in [
            ("valkey-9.1-sentinel", false, true, EngineChoice::Sentinel),
            ("valkey-9.1-cluster", true, false, EngineChoice::Cluster),
            ("valkey-9.1", false, false, EngineChoice::Auto),
        ] {
            let args = EngineArgs {
                engine: EngineChoice::Auto,
                url: None,
                allow_flush: false,
                image: DEFAULT_IMAGE.into(),
                valkey_server: None,
                engine_name: Some(named(name, cluster, sentinel)),
            };
            assert_eq!(args.options().choice, want, "{name}");
        }
    }
}
