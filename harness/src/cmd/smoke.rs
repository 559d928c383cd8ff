//! `emq-gate smoke`: a few seconds' check for someone writing a new connector. Each step says in
//! plain words what was expected and what came back.

use std::sync::Arc;

use crate::connector::child::{ChildConnector, ChildSpec};
use crate::connector::{Claimed, Connector, RetryOutcome, Verbs};
use crate::engine::EngineOptions;
use crate::error::{ConnectorError, ErrorKind, HarnessError};
use crate::protocol::bundle::Bundle;
use crate::report::output::Progress;

/// One step's result.
pub struct SmokeStep {
    pub what: String,
    pub problem: Option<String>,
}

/// The smoke test's findings.
pub struct SmokeReport {
    pub steps: Vec<SmokeStep>,
    pub log_tail: String,
    /// From the command's start to its last step: "seconds" is the promise, so the total is shown.
    pub total: std::time::Duration,
    /// The part of [`Self::total`] spent starting the engine (not the connector's doing).
    pub engine_start: std::time::Duration,
}

impl SmokeReport {
    pub fn passed(&self) -> bool {
        self.steps.iter().all(|s| s.problem.is_none())
    }

    /// The report as people read it.
    pub fn text(&self) -> String {
        let mut s = String::new();
        for st in &self.steps {
            match &st.problem {
                None => s.push_str(&format!("ok    {}\n", st.what)),
                Some(p) => s.push_str(&format!("FAIL  {}: {p}\n", st.what)),
            }
        }
        let failed = self.steps.iter().filter(|s| s.problem.is_some()).count();
        if failed > 0 && !self.log_tail.is_empty() {
            s.push_str("\nthe connector's stderr (last lines):\n");
            for l in self.log_tail.lines() {
                s.push_str(&format!("    {l}\n"));
            }
        }
        s.push_str(&format!(
            "\nsmoke: {} of {} steps ok in {:.1} s ({:.1} s of it starting the engine){}\n",
            self.steps.len() - failed,
            self.steps.len(),
            self.total.as_secs_f64(),
            self.engine_start.as_secs_f64(),
            if failed == 0 {
                "; next: emq-gate run -- <your command>"
            } else {
                ""
            }
        ));
        s
    }
}

struct Steps<'a> {
    c: &'a mut ChildConnector,
    out: Vec<SmokeStep>,
}

impl Steps<'_> {
    /// Runs one step; stops the smoke test once the process is gone.
    fn step<T: std::fmt::Debug>(
        &mut self,
        what: &str,
        f: impl FnOnce(&mut ChildConnector) -> Result<T, ConnectorError>,
        judge: impl FnOnce(&T) -> Option<String>,
    ) -> Option<T> {
        if self.c.dead_reason().is_some() {
            return None;
        }
        let (value, problem) = match f(self.c) {
            Ok(v) => {
                let p = judge(&v);
                (Some(v), p)
            }
            Err(e) => (
                None,
                Some(format!("answered error kind {} ({})", e.kind, e.message)),
            ),
        };
        self.out.push(SmokeStep {
            what: what.to_string(),
            problem,
        });
        value
    }
}

fn expect<T: PartialEq + std::fmt::Debug>(want: T) -> impl FnOnce(&T) -> Option<String> {
    move |got| (got != &want).then(|| format!("expected {want:?}, got {got:?}"))
}

/// Runs the smoke test of the child connector `spec` on a fresh engine database.
pub fn smoke(
    engine: &EngineOptions,
    spec: &ChildSpec,
    bundle_dir: &std::path::Path,
    progress: &Progress,
) -> Result<SmokeReport, HarnessError> {
    let t0 = std::time::Instant::now();
    let bundle = Arc::new(Bundle::load(bundle_dir)?);
    let engine = crate::cmd::run::boot(engine, progress)?;
    let engine_start = t0.elapsed();
    let db = 1;
    engine.prepare_db(db)?;
    progress.line(&format!("starting {}", spec.argv.join(" ")));
    let mut child = ChildConnector::spawn(spec)?;
    let mut s = Steps {
        c: &mut child,
        out: Vec::new(),
    };
    s.hello(&bundle);
    let url = engine.target(db);
    s.step(
        "connect (reads the fence)",
        |c| c.connect("smoke", &url),
        |_| None,
    );
    let q = "smoke";
    s.first_job(q);
    s.retry_to_dead(q);
    s.pipelines();
    s.step(
        "an invalid queue name is refused with kind invalid",
        |c| Ok(c.claim("smoke", "bad queue", 0)),
        |r| match r {
            Err(e) if e.kind == ErrorKind::Invalid => None,
            other => Some(format!("expected error kind invalid, got {other:?}")),
        },
    );
    s.step("disconnect", |c| c.disconnect("smoke"), |_| None);
    let mut steps = s.out;
    if let Some(reason) = child.dead_reason() {
        steps.push(SmokeStep {
            what: "the process stays up".into(),
            problem: Some(reason.to_string()),
        });
    }
    Ok(SmokeReport {
        steps,
        log_tail: child.log_tail(),
        total: t0.elapsed(),
        engine_start,
    })
}

impl Steps<'_> {
    /// hello: the connector carries this bundle, with the same script SHAs.
    fn hello(&mut self, bundle: &Bundle) {
        let shas: std::collections::BTreeMap<String, String> = bundle
            .scripts
            .iter()
            .map(|x| (x.entry.name.clone(), x.sha1.clone()))
            .collect();
        self.step(
            "hello (protocol 1)",
            |c| c.hello(),
            |i| {
                if i.bundle != bundle.manifest.bundle {
                    Some(format!(
                        "bundle {:?}, expected {:?}",
                        i.bundle, bundle.manifest.bundle
                    ))
                } else if i.scripts != shas {
                    Some(format!(
                        "script SHAs {:?} differ from the bundle's {shas:?}",
                        i.scripts
                    ))
                } else {
                    None
                }
            },
        );
    }

    /// One job's happy path: enqueue, see it, claim it, complete it.
    fn first_job(&mut self, q: &str) {
        self.step(
            "enqueue",
            |c| c.enqueue("smoke", q, "hello", 0),
            expect("j0000000000000001".to_string()),
        );
        self.step("pending_size", |c| c.pending_size("smoke", q), expect(1));
        self.step(
            "browse",
            |c| c.browse("smoke", q, 0, 10),
            |v| {
                (v.len() != 1 || v[0].payload != "hello")
                    .then(|| format!("expected one job with payload hello, got {v:?}"))
            },
        );
        let job = Claimed {
            id: "j0000000000000001".into(),
            payload: "hello".into(),
            attempts: 1,
        };
        self.step("claim", |c| c.claim("smoke", q, 30_000), expect(Some(job)));
        self.step(
            "complete",
            |c| c.complete("smoke", q, "j0000000000000001", 1),
            expect(true),
        );
    }

    /// A second job through retry, promote and a second claim until reap marks it dead.
    fn retry_to_dead(&mut self, q: &str) {
        self.step(
            "enqueue a second job",
            |c| c.enqueue("smoke", q, "again", 0),
            expect("j0000000000000002".to_string()),
        );
        self.step(
            "claim with lease 0",
            |c| c.claim("smoke", q, 0),
            |v| {
                v.as_ref()
                    .is_none_or(|j| j.attempts != 1)
                    .then(|| format!("expected attempts 1, got {v:?}"))
            },
        );
        self.step(
            "retry with backoff 0",
            |c| c.retry("smoke", q, "j0000000000000002", 1, 0, 5),
            expect(RetryOutcome::Delayed),
        );
        self.step("promote", |c| c.promote("smoke", q, 10), expect(1));
        self.step(
            "claim again with lease 0",
            |c| c.claim("smoke", q, 0),
            |v| {
                v.as_ref()
                    .is_none_or(|j| j.attempts != 2)
                    .then(|| format!("expected attempts 2, got {v:?}"))
            },
        );
        self.step(
            "reap (attempts 2 == max 2 -> dead)",
            |c| c.reap("smoke", q, 2, 10),
            expect(1),
        );
    }

    /// The pipelined verbs: a probe of INCRs and a batch of enqueues.
    fn pipelines(&mut self) {
        self.step(
            "pipeline_probe of 100 INCR",
            |c| c.pipeline_probe("smoke", "emq-smoke-probe", 100),
            expect((1..=100).collect::<Vec<i64>>()),
        );
        self.step(
            "batch of 1000 enqueues, depth 100",
            |c| c.batch("smoke", "smoke-batch", 1000, 100, "x"),
            expect(1000),
        );
    }
}
