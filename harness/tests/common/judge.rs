//! How the gate self-tests judge a connector (`tests/gates.rs`: the doubles; `tests/permits.rs`:
//! the permission doubles): who is judged, on which engine, and which gates must FAIL.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use libtest_mimic::Failed;

use emq::connector::Connector;
use emq::connector::child::{ChildFactory, ChildSpec};
use emq::connector::reference::Reference;
use emq::doubles::Double;
use emq::doubles::permits::Taker;
use emq::engine::Engine;
use emq::error::HarnessError;
use emq::gates::{ConnectorFactory, GateContext, GateId, GateOutcome, Verdict};
use emq::protocol::bundle::Bundle;

/// The gates these tests cover: all but G6 and G7.
pub fn mine() -> Vec<GateId> {
    GateId::ALL
        .into_iter()
        .filter(|g| !matches!(g, GateId::G6 | GateId::G7))
        .collect()
}

/// Small enough to keep the tests quick; a certifying run uses ≥ 100 000.
pub const BATCH: i64 = 20_000;

/// G7's and G8's seed: 42, or `EMQ_SELFTEST_SEED` (to try the self-tests under other seeds).
pub fn seed() -> u64 {
    emq::settings::parsed(emq::settings::SELFTEST_SEED).unwrap_or(42)
}

/// Who is judged: the reference connector, a double, a permission double, or the Python
/// connector.
#[derive(Clone, Copy, Debug)]
pub enum Subject {
    Reference,
    Double(Double),
    Taker(Taker),
    Python,
}

impl Subject {
    pub fn factory(self, bundle: &Arc<Bundle>) -> Box<dyn ConnectorFactory> {
        match self {
            Subject::Reference => {
                let b = bundle.clone();
                Box::new(move || -> Result<Box<dyn Connector + Send>, HarnessError> {
                    Ok(Reference::boxed(&b))
                })
            }
            Subject::Double(d) => d.factory(bundle),
            Subject::Taker(t) => t.factory(bundle),
            Subject::Python => {
                let program = super::python_connector().expect("the Python connector");
                Box::new(ChildFactory::new(ChildSpec::new([program
                    .display()
                    .to_string()])))
            }
        }
    }
}

/// An engine booted on first use and shared by the trials that hold it, one at a time.
pub type Shared = Arc<Mutex<Option<Engine>>>;

/// The engine a trial judges on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum On {
    One,
    Cluster,
    /// A single TLS engine (SPEC §10).
    Tls,
    /// A Valkey Cluster over TLS (SPEC §10 on §8).
    TlsCluster,
    /// A primary, its replicas and three Sentinels (SPEC §11).
    Sentinel,
    /// The same over TLS (SPEC §10 on §11).
    TlsSentinel,
    /// Another engine of the matrix, by name (`valkey-8.1`, `redis-7.0`).
    Named(&'static str),
}

pub fn boot(on: On) -> Engine {
    match on {
        On::Cluster => super::cluster_engine(),
        On::Tls => super::tls_engine(),
        On::TlsCluster => super::tls_cluster_engine(),
        On::Sentinel => super::named_engine("valkey-9.1-sentinel"),
        On::TlsSentinel => super::named_engine("valkey-9.1-tls-sentinel"),
        On::Named(name) => super::named_engine(name),
        On::One => super::binary_engine(),
    }
}

/// Runs `gates` against `subject` on `engine` (booted here when `None`); `want` FAIL for the
/// gates in `fail`, PASS for the others. The evidence is the failure message, not noise.
pub fn judge(
    subject: Subject,
    engine: &Shared,
    on: On,
    gates: &[GateId],
    fail: &[GateId],
) -> Result<(), Failed> {
    let mut slot = engine.lock().unwrap_or_else(|e| e.into_inner());
    let e = slot.get_or_insert_with(|| boot(on));
    let bundle = super::bundle();
    let factory = subject.factory(&bundle);
    let ctx = GateContext {
        seed: seed(),
        batch: BATCH,
        ..super::gate_context(e, &bundle, factory.as_ref())
    };
    // EMQ_SELFTEST_GATES=G1,G4 narrows the run while working on a gate.
    let only = emq::settings::var(emq::settings::SELFTEST_GATES).unwrap_or_default();
    let mut log = String::new();
    let mut wrong = Vec::new();
    let ids: Vec<GateId> = gates
        .iter()
        .copied()
        .filter(|g| only.is_empty() || only.split(',').any(|o| o.parse() == Ok(*g)))
        .collect();
    // As `emq-gate run` runs them: a part a gate leaves goes on beside later gates.
    let t0 = Instant::now();
    let outcomes = emq::gates::sequence::run_all(
        &ctx,
        &emq::gates::lanes::every_gate(),
        Some(&ids),
        false,
        &mut |_| {},
    );
    for out in outcomes.into_iter().filter(|o| ids.contains(&o.id)) {
        let id = out.id;
        log.push_str(&describe(&out, t0));
        let expected = if fail.contains(&id) {
            Verdict::Fail
        } else {
            Verdict::Pass
        };
        if out.verdict != expected {
            wrong.push(format!(
                "{id} {}: {}, expected {expected}",
                out.name, out.verdict
            ));
        }
        // G1 and G5 wait on purpose on one engine (a held reply, the held windows): a PASS ran
        // them, and the record says so, never more than the gate's whole time.
        let waits = out.verdict == Verdict::Pass
            && matches!(on, On::One)
            && matches!(id, GateId::G1 | GateId::G5);
        // A wait beside the gate is counted where it overlapped (the part's own figure).
        let beside = out
            .figures
            .get("beside_waited_ms")
            .and_then(|v| v.as_u64())
            .is_some_and(|ms| ms > 0);
        if waits && !(beside || out.waited > Duration::ZERO && out.waited <= out.wall) {
            wrong.push(format!(
                "{id} {}: waited {:?} of {:?}: a gate that holds a reply must count that wait",
                out.name, out.waited, out.wall
            ));
        }
    }
    let on = match on {
        On::Cluster => "a cluster",
        On::Tls => "a TLS engine",
        On::TlsCluster => "a TLS cluster",
        On::Sentinel => "a Sentinel engine",
        On::TlsSentinel => "a TLS Sentinel engine",
        On::Named(name) => name,
        On::One => "a single engine",
    };
    if wrong.is_empty() {
        Ok(())
    } else {
        Err(format!("{subject:?} on {on}:\n{}\n\n{log}", wrong.join("\n")).into())
    }
}

/// A gate's outcome as lines for a failure message.
pub fn describe(out: &GateOutcome, t0: Instant) -> String {
    let mut s = format!(
        "{} {}: {} in {:.2?}\n",
        out.id,
        out.name,
        out.verdict,
        t0.elapsed()
    );
    for line in &out.evidence {
        s.push_str(&format!("    {line}\n"));
    }
    s.push_str(&format!("    figures: {:?}\n", out.figures));
    s
}

/// `SkipFence` → `skip_fence`.
pub fn snake(name: &str) -> String {
    let mut s = String::new();
    for (i, c) in name.chars().enumerate() {
        if c.is_ascii_uppercase() {
            if i > 0 {
                s.push('_');
            }
            s.push(c.to_ascii_lowercase());
        } else {
            s.push(c);
        }
    }
    s
}
