//! Deliberately broken connectors, all in one place, each named for the one thing it breaks and
//! declared once, in [`TABLE`]'s file (`table.rs`: one `doubles!` entry a double, its name and
//! doc, how it is made, what it breaks; the enum, the table and `Double::make` follow from it;
//! the macro is in `macros.rs`, what a make expression is given in `build.rs`). Which gates
//! must FAIL each is declared once: the rule catalogue (`crate::gates::rules`) names the doubles
//! that break each rule and the gates that enforce it, and a table entry adds the gates that fail
//! it for another reason (`also`). The self-tests run every double through those gates
//! (`tests/gates.rs`, generated from them; `tests/rules.rs`, `tests/interleavings.rs`,
//! `tests/case_doubles.rs`).
//!
//! The names ([`Double`]) and the table compile always; the connectors only with the feature
//! `doubles`. The production reference connector's only departures are
//! `crate::connector::reference::Quirks` flags, all off outside a double. Eight kinds, one module
//! each:
//! - **rewriters** (`rewrite`): wrap a correct connector and change requests or replies on the
//!   way (a short batch, an ignored token, a duplicated enqueue);
//! - **lowerings** (`wire`): use the reference connector's doubles-only lowering API
//!   (`Reference::connect_unfenced`, `script_load`, `raw`, `with_root`), compiled only with this
//!   feature, to send the wrong thing on the wire;
//! - **rule breakers** (`broken`): one per numbered SPEC rule not already broken elsewhere. Wire
//!   rules are broken by child fixtures (`harness/tests/fixtures/wire_*.py`, named by the ways
//!   of the catalogue's rules) that forward to the Python connector; the `Strict` doubles refuse
//!   valid input beyond SPEC (the other side of each refusal rule);
//! - **fault mishandlers** (`faults`): a failed connection answered wrongly (a re-send, a made-up
//!   success), what G8's fault phase catches; with the Python connector's broken-on-purpose flags;
//! - **wrong time** (`time`): a lease, delay or backoff off by a little (a grace period, a
//!   rounding, a ms↔s mix-up, a margin taken off), caught by scores judged to the millisecond;
//! - **cluster breakers** (`cluster`, and `Quirks` flags): SPEC §8 (R8.10 and R8.11 too: a
//!   session that gives up after a lost connection, an enqueue re-sent after a reset, `READONLY`
//!   taken as final, a slot map kept after a node died), the reference on one node
//!   (`redial_unfenced` breaks R3.5 as `silent_reconnect` does, the two `leak_on_*` break R5.13;
//!   four `Quirks` flags break §4 instead: `incrby_probe`, redis-py's `incr()` in the probe;
//!   `noscript_lands`, Debian's eredis reading a split `NOSCRIPT` as a value; `eval_on_noscript`,
//!   redigo's `Script.Do`; `preload_only`, scripts loaded at connect and never again);
//! - **ACL breakers** (`acl`): a command outside SPEC R4.19's list, the url's user ignored;
//!   the engine's least-privilege user refuses them and G1's `ACL LOG` check (after every gate)
//!   names them;
//! - **a failure that does not reproduce** (`flaky`): one wrong reply in a factory's life, for
//!   G7's replay verdict (`tests/interleavings.rs`).
//!
//! Child-process misbehaviour (hangs, garbage, wrong `seq`, early exits) is exercised by the
//! Python fixtures listed in [`CHILD_FIXTURES`].

// The connectors themselves only with the feature; the names and the table always (the rule
// catalogue names the doubles that break each rule, and `emq-gate rules` prints them).
#[cfg(feature = "doubles")]
pub mod acl;
#[cfg(feature = "doubles")]
pub mod broken;
#[cfg(feature = "doubles")]
pub mod build;
#[cfg(feature = "doubles")]
pub mod cluster;
#[cfg(feature = "doubles")]
pub mod faults;
#[cfg(feature = "doubles")]
pub mod flaky;
#[macro_use]
mod macros;
pub mod permits;
#[cfg(feature = "doubles")]
pub mod rewrite;
mod table;
#[cfg(feature = "doubles")]
pub mod time;
#[cfg(feature = "doubles")]
pub mod tls;
#[cfg(feature = "doubles")]
pub mod wire;

pub use table::{Double, Entry, TABLE};

#[cfg(feature = "doubles")]
use std::sync::Arc;

#[cfg(feature = "doubles")]
use crate::connector::child::{ChildFactory, ChildSpec};
#[cfg(feature = "doubles")]
use crate::connector::{Connector, ConnectorFactory};
#[cfg(feature = "doubles")]
use crate::error::HarnessError;
#[cfg(feature = "doubles")]
use crate::protocol::bundle::Bundle;

impl Double {
    /// Every double, in table order.
    pub fn all() -> impl Iterator<Item = Double> {
        TABLE.iter().map(|e| e.double)
    }

    /// True for a double the Python connector plays (with a broken-on-purpose flag): it needs
    /// `EMQ_PYTHON_CONNECTOR`.
    // Not derived from `python_flag`: `PythonSilentNodeReconnect` has never been in this set,
    // and `tests/gates.rs` ignores a double's trials without the Python connector by it, so
    // deriving it would change which tests run. Kept as it was, on purpose.
    pub fn is_python(self) -> bool {
        matches!(
            self,
            Self::PythonRetryOnError | Self::PythonSilentReconnect | Self::PythonClusterRetry
        )
    }

    /// Its table entry.
    pub fn entry(self) -> &'static Entry {
        TABLE
            .iter()
            .find(|e| e.double == self)
            .expect("every double has a table entry")
    }

    /// A factory of this double: the Python connector's with its flag, for a double it plays
    /// when it is provisioned; otherwise one that calls [`Double::make`].
    #[cfg(feature = "doubles")]
    pub fn factory(self, bundle: &Arc<Bundle>) -> Box<dyn ConnectorFactory> {
        if let Some(f) = self.python_flag().and_then(python_flag_factory) {
            return Box::new(f);
        }
        let bundle = bundle.clone();
        Box::new(move || -> Result<Box<dyn Connector + Send>, HarnessError> {
            Ok(self.make(&bundle))
        })
    }
}

/// One connector of [`python_flag_factory`], or one that says why there is none.
#[cfg(feature = "doubles")]
fn python_double(flag: &str) -> Box<dyn Connector + Send> {
    match python_flag_factory(flag) {
        Some(f) => f
            .make()
            .unwrap_or_else(|e| Box::new(faults::Unavailable(e.to_string()))),
        None => Box::new(faults::Unavailable(
            "no Python connector (set EMQ_PYTHON_CONNECTOR)".into(),
        )),
    }
}

/// The Python connector with a broken-on-purpose `flag`, when it is provisioned, running this
/// repository's `connectors/python` package.
#[cfg(feature = "doubles")]
fn python_flag_factory(flag: &str) -> Option<ChildFactory> {
    let program = faults::python_connector()?;
    // This repository's package first, whichever checkout the venv was installed from.
    let package = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../connectors/python");
    Some(ChildFactory::new(
        ChildSpec::new([program.display().to_string(), flag.to_string()])
            .with_env("PYTHONPATH", package.display().to_string()),
    ))
}

/// A misbehaving child process (`harness/tests/fixtures/<file>`), what it does wrong, and the
/// test in `tests/child.rs` that shows the harness stays bounded and says so.
pub const CHILD_FIXTURES: &[(&str, &str)] = &[
    ("hang.py", "reads the first request and never answers"),
    ("garbage.py", "answers hello, then a non-JSON line"),
    ("wrong_seq.py", "answers with the previous request's seq"),
    ("crash.py", "dies of SIGSEGV on the second request"),
    ("exit_after_hello.py", "exits with status 3 after hello"),
    (
        "slow_start.py",
        "sleeps 1.5 s before hello (must be tolerated)",
    ),
    ("flood_stderr.py", "writes 5000 lines to stderr and dies"),
    ("grandchild.py", "leaves a grandchild in its process group"),
    ("chatty.py", "answers hello with two lines"),
    (
        "quirky.py",
        "wrong shapes, unknown error kinds, empty messages",
    ),
];

#[cfg(test)]
mod tests {
    use super::Double;

    /// `is_python`, kept by hand, names only doubles the Python connector plays.
    #[test]
    fn is_python_names_only_doubles_with_a_python_flag() {
        for d in Double::all().filter(|d| d.is_python()) {
            assert!(d.python_flag().is_some(), "{d:?}");
        }
    }
}
