//! Replays one case against a connector on a live engine, in a database of its own.

use serde_json::{Map, Value};

use crate::connector::{Connector, Reply, Request};
use crate::engine::{Admin, Engine};
use crate::error::{ConnectorError, ErrorKind, HarnessError};
use crate::suites::cases::expect::{check_keyspace, diff, matches, resolve};
use crate::suites::cases::format::{Action, Case, Expect};

/// Why a case failed: where, what, and the `(-expected|+actual)` diff.
#[derive(Debug, Clone)]
pub struct CaseFailure {
    pub location: String,
    pub case_id: String,
    pub step: usize,
    pub what: String,
    pub message: String,
    pub diff: Option<String>,
}

impl std::fmt::Display for CaseFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}: case {}, step {} ({}): {}",
            self.location, self.case_id, self.step, self.what, self.message
        )?;
        if let Some(d) = &self.diff {
            write!(f, "\n{d}")?;
        }
        Ok(())
    }
}

/// What one step really answered (for `--bless`).
#[derive(Debug, Clone, PartialEq)]
pub enum Observed {
    Ok(Value),
    Error(ErrorKind),
}

/// The outcome of one case.
#[derive(Debug)]
pub struct CaseResult {
    pub failure: Option<CaseFailure>,
    /// Per step, what the connector answered (`None` for keyspace steps and steps not reached).
    pub observed: Vec<Option<Observed>>,
}

/// How the runner treats a mismatch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Stop at the first mismatch.
    Check,
    /// Keep going past reply mismatches, recording what was observed.
    Bless,
}

struct Run<'a> {
    case: &'a Case,
    engine: &'a Engine,
    db: u32,
    admin: Admin,
    admin_id: u64,
    vars: Map<String, Value>,
}

impl Run<'_> {
    fn fail(
        &self,
        step: usize,
        what: &str,
        message: impl Into<String>,
        diff: Option<String>,
    ) -> Box<CaseFailure> {
        Box::new(CaseFailure {
            location: self.case.location(step),
            case_id: self.case.id.clone(),
            step: step + 1,
            what: what.to_string(),
            message: message.into(),
            diff,
        })
    }

    /// Bytes the engine has received so far from each of this case's connections (not the
    /// admin's), by client id.
    fn bytes_in(&mut self) -> Result<std::collections::BTreeMap<u64, u64>, HarnessError> {
        Ok(self
            .admin
            .client_list()?
            .iter()
            .filter(|c| c.db == self.db && c.id != self.admin_id)
            .map(|c| (c.id, c.tot_net_in))
            .collect())
    }

    fn request(
        &self,
        verb: &str,
        session: &str,
        args: &Map<String, Value>,
    ) -> Result<Request, String> {
        let mut obj = resolve(&Value::Object(args.clone()), &self.vars);
        let map = obj.as_object_mut().expect("args are a map");
        map.insert("cmd".into(), Value::String(verb.into()));
        if verb != "hello" {
            map.insert("session".into(), Value::String(session.into()));
        }
        let given = map.get("url").and_then(Value::as_str).unwrap_or("");
        if verb == "connect" && given.is_empty() {
            map.insert("url".into(), Value::String(self.engine.url(self.db)));
        }
        serde_json::from_value(obj)
            .map_err(|e| format!("arguments do not form a {verb} request: {e}"))
    }
}

fn observed(r: &Result<Reply, ConnectorError>) -> Observed {
    match r {
        Ok(reply) => Observed::Ok(reply.to_json()),
        Err(e) => Observed::Error(e.kind),
    }
}

/// Runs `case` in database `db` of `engine` against `connector`.
pub fn run_case(
    case: &Case,
    engine: &Engine,
    db: u32,
    connector: &mut dyn Connector,
    mode: Mode,
) -> CaseResult {
    let mut observed_steps = vec![None; case.steps.len()];
    let failure = run_steps(case, engine, db, connector, mode, &mut observed_steps)
        .err()
        .map(|b| *b);
    for s in &case.sessions {
        let _ = connector.call(&Request::Disconnect { session: s.clone() });
    }
    CaseResult {
        failure,
        observed: observed_steps,
    }
}

fn run_steps(
    case: &Case,
    engine: &Engine,
    db: u32,
    connector: &mut dyn Connector,
    mode: Mode,
    observed_steps: &mut [Option<Observed>],
) -> Result<(), Box<CaseFailure>> {
    let setup_fail = |message: String| CaseFailure {
        location: format!("{}:1", case.file.display()),
        case_id: case.id.clone(),
        step: 0,
        what: "setup".into(),
        message,
        diff: None,
    };
    let mut admin = engine
        .prepare_db(db)
        .map_err(|e| Box::new(setup_fail(e.to_string())))?;
    let admin_id = admin
        .client_id()
        .map_err(|e| Box::new(setup_fail(e.to_string())))?;
    if let Some(f) = &case.fence {
        let fields: Vec<(&str, &str)> = f.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        admin
            .hset("emq:fence", &fields)
            .map_err(|e| Box::new(setup_fail(e.to_string())))?;
    }
    for command in &case.setup {
        let args: Vec<&str> = command.iter().map(String::as_str).collect();
        if args.is_empty() {
            return Err(Box::new(setup_fail("an empty setup command".into())));
        }
        admin
            .query::<()>(&args)
            .map_err(|e| Box::new(setup_fail(format!("setup {args:?}: {e}"))))?;
    }
    if !case.manual_connect {
        for s in &case.sessions {
            connector
                .call(&Request::Connect {
                    session: s.clone(),
                    url: engine.url(db),
                })
                .map_err(|e| Box::new(setup_fail(format!("connect {s}: {e}"))))?;
        }
    }
    let mut run = Run {
        case,
        engine,
        db,
        admin,
        admin_id,
        vars: Map::new(),
    };
    for (i, step) in case.steps.iter().enumerate() {
        match &step.action {
            Action::Keyspace(spec) => {
                let now = run
                    .admin
                    .time_ms()
                    .map_err(|e| run.fail(i, "keyspace", e.to_string(), None))?;
                let ks = run
                    .admin
                    .keyspace()
                    .map_err(|e| run.fail(i, "keyspace", e.to_string(), None))?;
                let spec = resolve(&Value::Object(spec.clone()), &run.vars);
                if let Err((exp, act)) = check_keyspace(spec.as_object().expect("map"), &ks, now) {
                    return Err(run.fail(
                        i,
                        "keyspace",
                        "keyspace differs",
                        Some(diff(&exp, &act)),
                    ));
                }
            }
            Action::Call { verb, args } => {
                let req = run
                    .request(verb, &step.session, args)
                    .map_err(|m| run.fail(i, verb, m, None))?;
                let expects_invalid = step.expect == Expect::Error(ErrorKind::Invalid);
                let before = if expects_invalid {
                    Some(
                        run.bytes_in()
                            .map_err(|e| run.fail(i, verb, e.to_string(), None))?,
                    )
                } else {
                    None
                };
                let result = connector.call(&req);
                observed_steps[i] = Some(observed(&result));
                if let Some(before) = before {
                    let after = run
                        .bytes_in()
                        .map_err(|e| run.fail(i, verb, e.to_string(), None))?;
                    // Per connection: one closed meanwhile (a disconnect) sent nothing new, and
                    // one opened meanwhile counts whole.
                    let sent: u64 = after
                        .iter()
                        .map(|(id, n)| n.saturating_sub(before.get(id).copied().unwrap_or(0)))
                        .sum();
                    if sent > 0 && mode == Mode::Check {
                        return Err(run.fail(
                            i,
                            verb,
                            format!("an invalid request reached the engine ({sent} bytes sent)"),
                            None,
                        ));
                    }
                }
                let mismatch = match (&step.expect, &result) {
                    (Expect::Success, Ok(_)) => None,
                    (Expect::Ok(want), Ok(reply)) => {
                        let want = resolve(want, &run.vars);
                        let got = reply.to_json();
                        (!matches(&want, &got))
                            .then(|| ("reply differs".to_string(), Some(diff(&want, &got))))
                    }
                    (Expect::Error(kind), Err(e)) if e.kind == *kind => None,
                    (Expect::Error(kind), Err(e)) => {
                        Some((format!("expected error {kind}, got {e}"), None))
                    }
                    (Expect::Error(kind), Ok(reply)) => Some((
                        format!("expected error {kind}, got ok {}", reply.to_json()),
                        None,
                    )),
                    (_, Err(e)) => Some((format!("unexpected error {e}"), None)),
                };
                if let Some((message, d)) = mismatch {
                    let fatal = mode == Mode::Check || result.is_err() && step.capture.is_some();
                    if fatal {
                        return Err(run.fail(i, verb, message, d));
                    }
                }
                if let (Some(name), Ok(reply)) = (&step.capture, &result) {
                    run.vars.insert(name.clone(), reply.to_json());
                }
            }
        }
    }
    Ok(())
}
