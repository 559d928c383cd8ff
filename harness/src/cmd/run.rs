//! One gate run, phase by phase: boot the engine, meet the connector, run the gates, assemble the record.

use std::sync::Arc;

use crate::cmd::sources::Dirs;
use crate::connector::Verbs;
use crate::connector::child::{ChildFactory, ChildSpec};
use crate::connector::reference::Reference;
use crate::engine::{Engine, EngineOptions};
use crate::error::HarnessError;
use crate::gates::{ConnectorFactory, GateContext, GateId, GateOutcome};
use crate::protocol::bundle::Bundle;
use crate::report::output::Progress;
use crate::report::{ConnectorName, Header, Record, SCHEMA, now_rfc3339};

/// Which connector to judge.
#[derive(Debug, Clone)]
pub enum Subject {
    /// The in-process reference connector.
    Reference,
    /// A connector in any language, as a child process speaking wire protocol v1.
    Child(ChildSpec),
    /// A deliberately broken connector (`--double`): the CLI's own tests fail a gate for real.
    #[cfg(feature = "doubles")]
    Double(crate::doubles::Double),
}

/// Everything a run needs.
#[derive(Debug, Clone)]
pub struct RunOptions {
    pub engine: EngineOptions,
    pub subject: Subject,
    pub seed: u64,
    pub histories: u32,
    pub batch: i64,
    /// Only these gates (ids like `G3`); the others are NOT RUN ("not selected").
    pub only: Option<Vec<crate::gates::GateId>>,
    /// Stop at the first gate that is not PASS; the rest are NOT RUN (`--fail-fast`).
    pub fail_fast: bool,
    /// Every gate on one engine, one after another (`--one-engine`, and a matrix cell without
    /// `matrix --lanes`); else in lanes, the default of `run` (`gates/lanes.rs`).
    pub one_engine: bool,
    /// The bundle and cases judged by.
    pub dirs: Dirs,
}

/// The factory for `subject`.
pub fn factory(subject: &Subject, bundle: &Arc<Bundle>) -> Box<dyn ConnectorFactory> {
    match subject {
        Subject::Reference => {
            let b = bundle.clone();
            Box::new(move || Ok(Reference::boxed(&b)))
        }
        Subject::Child(spec) => Box::new(ChildFactory::new(spec.clone())),
        #[cfg(feature = "doubles")]
        Subject::Double(d) => d.factory(bundle),
    }
}

fn header(
    opts: &RunOptions,
    bundle: &Bundle,
    engine: &Engine,
    factory: &dyn ConnectorFactory,
) -> Result<Header, HarnessError> {
    // A connector that cannot even be started is bad input; one that starts but cannot say
    // hello is judged (and fails) like any other.
    let mut connector = factory
        .make()
        .map_err(|e| HarnessError::ConnectorStart(e.to_string()))?;
    let (name, version, language) = match connector.hello() {
        Ok(i) => (
            ConnectorName::from_hello(Ok::<_, String>(i.name)),
            i.version,
            i.language,
        ),
        Err(e) => (
            ConnectorName::from_hello(Err(e)),
            String::new(),
            String::new(),
        ),
    };
    Ok(Header {
        schema: SCHEMA.into(),
        harness_version: env!("CARGO_PKG_VERSION").into(),
        contract_version: Some(crate::gates::contract::current()),
        catalogue_digest: Some(crate::gates::contract::catalogue_digest()),
        bundle_version: bundle.manifest.bundle.clone(),
        bundle_protocol: bundle.manifest.protocol,
        bundle_digest: bundle.computed_digest(),
        scripts: bundle
            .scripts
            .iter()
            .map(|s| (s.entry.name.clone(), s.sha1.clone()))
            .collect(),
        engine_kind: format!("{:?}", engine.kind).to_lowercase(),
        engine_image: engine.source.clone(),
        engine_tls: engine.tls().is_some(),
        engine_product: engine.product.clone(),
        engine_version: engine.valkey_version.clone(),
        engine_source: engine.provenance.clone(),
        connector_name: name,
        connector_version: version,
        connector_language: language,
        seed: opts.seed,
        histories: opts.histories,
        batch: opts.batch,
        started: now_rfc3339(),
    })
}

/// Starts, all at once, as many connector processes as the gates hold side by side (G7's soak:
/// its workers, a producer and a reaper), so a connector with a slow start-up pays it about once
/// for all of them (issue #24); the gates take them as they need them, and they are stopped when
/// the run ends. G8 starts the replacements of its planned process kills itself, as it begins:
/// started here, their start-ups would compete for the CPU with every gate before it. An
/// in-process connector starts nothing. A lane without G7 needs one.
fn warm_up(factory: &dyn ConnectorFactory, lane: &[GateId]) {
    use crate::connector::starts::StartReason;
    factory.warm(1, StartReason::First);
    if lane.contains(&GateId::G7) {
        factory.warm(
            crate::gates::g7_interleavings::SOAK_WORKERS + 2,
            StartReason::Concurrent,
        );
    }
}

/// Boots the engine, saying so.
pub fn boot(opts: &EngineOptions, progress: &Progress) -> Result<Engine, HarnessError> {
    progress.line("booting the engine");
    let engine = Engine::start(opts)?;
    if let Some(swept) = &engine.swept {
        progress.line(swept);
    }
    progress.line(&format!(
        "engine up: {} in {} ms",
        engine.describe(),
        engine.boot_time.as_millis()
    ));
    Ok(engine)
}

/// Runs the gates of `lane` in order on `ctx`'s engine, saying each verdict as it lands
/// (`gates/sequence.rs`: a gate whose waiting part goes on beside later gates lands when it
/// ends); gates outside `only`, and after a `fail_fast` stop, are NOT RUN: no verdict, neither
/// PASS nor ERROR (the run is judged on the gates it ran).
pub fn run_gates(
    ctx: &GateContext<'_>,
    lane: &[GateId],
    only: Option<&[GateId]>,
    fail_fast: bool,
    progress: &Progress,
) -> Vec<GateOutcome> {
    crate::gates::sequence::run_all(ctx, lane, only, fail_fast, &mut |o| progress.gate(o))
}

/// A lane after the first: its gates, and an engine and connector factory of its own.
struct Lane {
    gates: Vec<GateId>,
    engine: Engine,
    factory: Box<dyn ConnectorFactory>,
}

/// Boots the engines of the lanes after the first, all at once, while `first` boots the first
/// lane's in this thread; a failed boot is the run's error (the engines already up are dropped,
/// so nothing is left running).
fn boot_lanes(
    opts: &RunOptions,
    bundle: &Arc<Bundle>,
    plan: &[Vec<GateId>],
    progress: &Progress,
    first: impl FnOnce() -> Result<Engine, HarnessError>,
) -> Result<(Engine, Vec<Lane>), HarnessError> {
    std::thread::scope(|s| {
        let handles: Vec<_> = plan
            .iter()
            .skip(1)
            .map(|gates| s.spawn(move || (gates, Engine::start(&opts.engine))))
            .collect();
        let first = first();
        let mut lanes = Vec::new();
        for h in handles {
            let (gates, engine) = h.join().expect("a lane's engine boot panicked");
            let engine = engine?;
            crate::cmd::preflight::engine_usable(&engine)?;
            progress.line(&format!(
                "engine for {} up in {} ms",
                lane_name(gates),
                engine.boot_time.as_millis()
            ));
            let factory = factory(&opts.subject, bundle);
            warm_up(factory.as_ref(), gates);
            lanes.push(Lane {
                gates: gates.clone(),
                engine,
                factory,
            });
        }
        Ok((first?, lanes))
    })
}

/// `G2 G3 G4 G5`.
fn lane_name(gates: &[GateId]) -> String {
    let names: Vec<&str> = gates.iter().map(|g| g.as_str()).collect();
    names.join(" ")
}

/// Runs every lane at once, each on its own engine, and returns the outcomes in the record's
/// order. `first` is the first lane's context (the engine the header describes).
fn run_lanes(
    first: &GateContext<'_>,
    first_gates: &[GateId],
    lanes: &[Lane],
    opts: &RunOptions,
    progress: &Progress,
) -> Vec<GateOutcome> {
    let only = opts.only.as_deref();
    let mut outcomes: Vec<GateOutcome> = std::thread::scope(|s| {
        let handles: Vec<_> = lanes
            .iter()
            .map(|lane| {
                s.spawn(move || {
                    let ctx = GateContext {
                        engine: &lane.engine,
                        factory: lane.factory.as_ref(),
                        cases: first.cases.clone(),
                        ..*first
                    };
                    run_gates(&ctx, &lane.gates, only, opts.fail_fast, progress)
                })
            })
            .collect();
        let mut all = run_gates(first, first_gates, only, opts.fail_fast, progress);
        for h in handles {
            all.extend(
                h.join()
                    .expect("a lane's thread panicked outside its gates"),
            );
        }
        all
    });
    outcomes.sort_by_key(|o| o.id);
    outcomes
}

/// A TLS record's footer when the connector has no TLS (SPEC R10.1): no verdict, said as such.
pub const NOT_CERTIFIED: &str = "TLS not certified";

/// A Sentinel record's footer when the connector has no Sentinel support (SPEC P11.2).
pub const SENTINEL_NOT_CERTIFIED: &str = "Sentinel not certified";

/// A cluster record's footer when the connector has no cluster support (SPEC P8.5); on a TLS
/// cluster, when it has no cluster or no TLS support (one `unsupported` answers both).
pub const CLUSTER_NOT_CERTIFIED: &str = "cluster not certified";

/// What a connector left out, said in a record's footer and every gate's line.
struct LeftOut {
    footer: &'static str,
    rule: &'static str,
    why: String,
}

/// On a TLS, a cluster or a Sentinel engine, the connector's answer to one `connect` when it is
/// kind `unsupported` (SPEC R10.1, P8.5, P11.2: a connector without TLS, cluster or Sentinel
/// support says so); `None` otherwise, and always on a plain single engine. The probe session
/// is closed again.
fn left_out(
    engine: &crate::engine::Engine,
    factory: &dyn crate::gates::ConnectorFactory,
) -> Option<LeftOut> {
    use crate::connector::Verbs;
    let sentinel = engine.kind == crate::engine::EngineKind::Sentinel;
    let cluster = engine.is_cluster();
    if engine.tls().is_none() && !sentinel && !cluster {
        return None;
    }
    let mut c = factory.make().ok()?;
    match c.connect("probe", engine.target(0)) {
        Err(e) if e.kind == crate::error::ErrorKind::Unsupported => Some(if sentinel {
            LeftOut {
                footer: SENTINEL_NOT_CERTIFIED,
                rule: "a connect that names a Sentinel deployment with kind unsupported (SPEC P11.2)",
                why: e.message,
            }
        } else if cluster && (engine.tls().is_none() || has_tls(engine, factory)) {
            LeftOut {
                footer: CLUSTER_NOT_CERTIFIED,
                rule: "a connect with \"cluster\": true with kind unsupported (SPEC P8.5)",
                why: e.message,
            }
        } else {
            LeftOut {
                footer: NOT_CERTIFIED,
                rule: "a rediss:// connect with kind unsupported (SPEC R10.1)",
                why: e.message,
            }
        }),
        Ok(()) => {
            let _ = c.call(&crate::connector::Request::Disconnect {
                session: "probe".into(),
            });
            None
        }
        Err(_) => None,
    }
}

/// On a TLS cluster whose `connect` the connector refused: false when it refuses a single
/// `rediss://` connection to the seed too (it has no TLS, R10.1), true when it takes it (it has
/// no cluster support, P8.5). That connection is closed again.
fn has_tls(engine: &crate::engine::Engine, factory: &dyn crate::gates::ConnectorFactory) -> bool {
    use crate::connector::Verbs;
    let Ok(mut c) = factory.make() else {
        return false;
    };
    let mut one = engine.target(0);
    one.cluster = false;
    let refused = matches!(
        c.connect("probe", one),
        Err(e) if e.kind == crate::error::ErrorKind::Unsupported
    );
    let _ = c.call(&crate::connector::Request::Disconnect {
        session: "probe".into(),
    });
    !refused
}

/// Every gate ERROR, saying why: the connector answered with kind `unsupported`.
fn not_certified(left: &LeftOut, progress: &Progress) -> Vec<GateOutcome> {
    crate::gates::ALL
        .iter()
        .map(|gate| {
            let mut o = GateOutcome::new(gate.id, gate.name);
            o.error(format!(
                "{}: the connector answers {}: {}",
                left.footer, left.rule, left.why
            ));
            progress.gate(&o);
            o
        })
        .collect()
}

/// Runs the gates and returns the record; `Err` only when nothing could be judged (no engine, no bundle).
pub fn run(opts: &RunOptions, progress: &Progress) -> Result<Record, HarnessError> {
    let bundle = Arc::new(opts.dirs.load_bundle()?);
    let kind = opts.engine.planned_kind();
    let plan =
        crate::gates::lanes::plan(kind, opts.only.as_deref(), opts.fail_fast, opts.one_engine);
    let t0 = std::time::Instant::now();
    let (engine, lanes) = boot_lanes(opts, &bundle, &plan, progress, || {
        let engine = boot(&opts.engine, progress)?;
        crate::cmd::preflight::engine_usable(&engine)?;
        Ok(engine)
    })?;
    let factory = factory(&opts.subject, &bundle);
    warm_up(factory.as_ref(), &plan[0]);
    let header = header(opts, &bundle, &engine, factory.as_ref())?;
    progress.line(&format!(
        "connector: {} {}",
        header.connector_name, header.connector_version
    ));
    if plan.len() > 1 {
        let names: Vec<String> = plan.iter().map(|l| lane_name(l)).collect();
        progress.line(&format!(
            "{} lanes at once, each on an engine of its own: {}",
            plan.len(),
            names.join(" | ")
        ));
    }
    let say = |m: &str| progress.line(m);
    let ctx = GateContext {
        engine: &engine,
        bundle: &bundle,
        cases: opts.dirs.cases.clone(),
        factory: factory.as_ref(),
        seed: opts.seed,
        histories: opts.histories,
        batch: opts.batch,
        progress: &say,
    };
    let left = left_out(&engine, factory.as_ref());
    let outcomes = match &left {
        Some(left) => not_certified(left, progress),
        None => run_lanes(&ctx, &plan[0], &lanes, opts, progress),
    };
    let mut record = Record::new(header, &outcomes, engine.boot_time.as_millis() as u64);
    record.volatile.lanes = plan.iter().map(|l| lane_name(l)).collect();
    record.volatile.gates_wall_ms = t0.elapsed().as_millis() as u64;
    if let Some(left) = &left {
        record.footer.summary = left.footer.to_string();
    }
    record.volatile.connector_starts = starts(factory.as_ref(), &lanes);
    if let Some(s) = &record.volatile.connector_starts {
        progress.line(&format!("connector processes started: {}", s.describe()));
    }
    // Dropping the factories stops their idle processes, and the lanes' engines go with them:
    // nothing is left running.
    drop(factory);
    drop(lanes);
    Ok(record)
}

/// The processes every lane's factory started; `None` for a connector that starts none.
fn starts(
    first: &dyn ConnectorFactory,
    lanes: &[Lane],
) -> Option<crate::connector::starts::Starts> {
    let mut all = first.starts()?;
    for lane in lanes {
        if let Some(s) = lane.factory.starts() {
            all.merge(&s);
        }
    }
    Some(all)
}
