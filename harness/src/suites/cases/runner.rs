//! Replays one case against a connector on a live engine, in a database of its own.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use crate::connector::{Connector, Reply, Request};
use crate::engine::{Admin, Engine};
use crate::error::{ConnectorError, ErrorKind, HarnessError};
use crate::protocol::grammar::{ParsedKey, Set, parse_key};
use crate::suites::cases::expect::{Bracket, Writers, check_keyspace, diff, matches, resolve};
use crate::suites::cases::format::{Action, Case, Expect, Step};

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
    /// The widest bracket (engine ms between `TIME` before and after) of a step that wrote a
    /// time score, when the case asserts scores (`None` otherwise).
    pub widest_bracket_ms: Option<i64>,
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
    /// Set when the case asserts a time-scored set: every call step before the last such
    /// assertion is then bracketed.
    timing: Option<Timing>,
}

/// What the runner tracks to judge `$now` matchers exactly: every time score the engine holds,
/// and which step last wrote each one.
#[derive(Default)]
struct Timing {
    scores: BTreeMap<(String, Set, String), i64>,
    writers: Writers,
    widest: Option<i64>,
    /// The last keyspace step that asserts scores: no later call step needs a bracket (each
    /// reads every score, so a case that fills a set past a bound afterwards stays linear).
    until: usize,
}

/// The last keyspace step of `case` that asserts an active, delayed or dead set.
fn last_scored(case: &Case) -> Option<usize> {
    case.steps.iter().rposition(|s| match &s.action {
        Action::Keyspace(spec) => [Set::Active, Set::Delayed, Set::Dead]
            .iter()
            .any(|set| spec.contains_key(set.name())),
        Action::Call { .. } => false,
    })
}

/// Every member of every active, delayed and dead set of the database, with its score.
fn time_scores(admin: &mut Admin) -> Result<BTreeMap<(String, Set, String), i64>, HarnessError> {
    let mut out = BTreeMap::new();
    for k in admin.keys()? {
        // A set key of another type (a case's setup can plant one) holds no score.
        if let Some(ParsedKey::Set { queue, set }) = parse_key(&k)
            && set != Set::Pending
            && admin.key_type(&k)? == "zset"
        {
            for (id, score) in admin.zrange_withscores(&k)? {
                out.insert((queue.clone(), set, id), score);
            }
        }
    }
    Ok(out)
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

    /// After call step `i` (begun at engine ms `before`): reads the clock and every time score,
    /// and makes step `i` the writer of each member it added or changed.
    fn note_writes(&mut self, i: usize, verb: &str, before: i64) -> Result<(), HarnessError> {
        let after = self.admin.time_ms_latest()?;
        let now = time_scores(&mut self.admin)?;
        let bracket = Bracket {
            before,
            after,
            step: i + 1,
            verb: verb.to_string(),
            location: self.case.location(i),
        };
        let t = self.timing.as_mut().expect("timing is on");
        t.writers.retain(|k, _| now.contains_key(k));
        let mut wrote = false;
        for (k, score) in &now {
            if t.scores.get(k) != Some(score) {
                t.writers.insert(k.clone(), bracket.clone());
                wrote = true;
            }
        }
        if wrote {
            t.widest = Some(t.widest.map_or(bracket.width(), |w| w.max(bracket.width())));
        }
        t.scores = now;
        Ok(())
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
            let target = self.engine.target(self.db);
            map.insert("url".into(), Value::String(target.url));
            if self.engine.is_cluster() {
                map.insert("cluster".into(), Value::Bool(true));
            }
            if let Some(ca) = target.ca_file
                && map.get("ca_file").is_none_or(Value::is_null)
            {
                map.insert("ca_file".into(), Value::String(ca));
            }
            if let Some(sentinel) = target.sentinel {
                map.insert("sentinel".into(), serde_json::json!(sentinel));
            }
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
    let mut widest = None;
    let failure = run_steps(
        case,
        engine,
        db,
        connector,
        mode,
        &mut observed_steps,
        &mut widest,
    )
    .err()
    .map(|b| *b);
    for s in &case.sessions {
        let _ = connector.call(&Request::Disconnect { session: s.clone() });
    }
    CaseResult {
        failure,
        observed: observed_steps,
        widest_bracket_ms: widest,
    }
}

fn run_steps(
    case: &Case,
    engine: &Engine,
    db: u32,
    connector: &mut dyn Connector,
    mode: Mode,
    observed_steps: &mut [Option<Observed>],
    widest: &mut Option<i64>,
) -> Result<(), Box<CaseFailure>> {
    let setup_fail = |message: String| CaseFailure {
        location: format!("{}:1", case.shown),
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
                .call(&Request::connect(s.as_str(), &engine.target(db)))
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
        timing: None,
    };
    if let Some(until) = last_scored(case) {
        let scores =
            time_scores(&mut run.admin).map_err(|e| Box::new(setup_fail(e.to_string())))?;
        run.timing = Some(Timing {
            scores,
            until,
            ..Timing::default()
        });
    }
    let result = replay(&mut run, connector, mode, observed_steps);
    *widest = run.timing.and_then(|t| t.widest);
    result
}

fn replay(
    run: &mut Run<'_>,
    connector: &mut dyn Connector,
    mode: Mode,
    observed_steps: &mut [Option<Observed>],
) -> Result<(), Box<CaseFailure>> {
    let case = run.case;
    for (i, step) in case.steps.iter().enumerate() {
        match &step.action {
            Action::Keyspace(spec) => keyspace_step(run, i, spec)?,
            Action::Call { .. } => {
                call_step(run, connector, mode, i, step, &mut observed_steps[i])?
            }
        }
    }
    Ok(())
}

/// A `keyspace` step: the whole database against the expected spec.
fn keyspace_step(
    run: &mut Run<'_>,
    i: usize,
    spec: &Map<String, Value>,
) -> Result<(), Box<CaseFailure>> {
    let ks = run
        .admin
        .keyspace()
        .map_err(|e| run.fail(i, "keyspace", e.to_string(), None))?;
    let spec = resolve(&Value::Object(spec.clone()), &run.vars);
    let empty = Writers::new();
    let writers = run.timing.as_ref().map_or(&empty, |t| &t.writers);
    if let Err(m) = check_keyspace(spec.as_object().expect("map"), &ks, writers) {
        let message = if m.scores.is_empty() {
            "keyspace differs".to_string()
        } else {
            format!("keyspace differs: {}", m.scores.join("; "))
        };
        return Err(run.fail(i, "keyspace", message, Some(diff(&m.expected, &m.actual))));
    }
    Ok(())
}

/// A call step: the request, its reply judged against `expect`, and any capture.
fn call_step(
    run: &mut Run<'_>,
    connector: &mut dyn Connector,
    mode: Mode,
    i: usize,
    step: &Step,
    seen: &mut Option<Observed>,
) -> Result<(), Box<CaseFailure>> {
    let Action::Call { verb, args } = &step.action else {
        unreachable!("replay sends only call steps here")
    };
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
    let t_before = match &run.timing {
        Some(t) if i < t.until => Some(
            run.admin
                .time_ms_earliest()
                .map_err(|e| run.fail(i, verb, e.to_string(), None))?,
        ),
        _ => None,
    };
    let result = connector.call(&req);
    let sent_as = sent_as(connector, &req);
    if let Some(before) = t_before {
        run.note_writes(i, verb, before)
            .map_err(|e| run.fail(i, verb, e.to_string(), None))?;
    }
    *seen = Some(observed(&result));
    if let Some(before) = before {
        nothing_sent(run, mode, i, verb, &before, &sent_as)?;
    }
    if let Some((message, d)) = mismatch(run, step, &result, &sent_as) {
        let fatal = mode == Mode::Check || result.is_err() && step.capture.is_some();
        if fatal {
            return Err(run.fail(i, verb, message, d));
        }
    }
    if let (Some(name), Ok(reply)) = (&step.capture, &result) {
        run.vars.insert(name.clone(), reply.to_json());
    }
    Ok(())
}

/// The request named as the wire carried it, for failures: the line and its seq.
fn sent_as(connector: &dyn Connector, req: &Request) -> String {
    match connector.last_seq() {
        Some(seq) => format!(
            "wire seq {seq}: {}",
            serde_json::to_string(req).unwrap_or_default()
        ),
        None => serde_json::to_string(req).unwrap_or_default(),
    }
}

/// An invalid request must not reach the engine: no connection's input grew meanwhile.
fn nothing_sent(
    run: &mut Run<'_>,
    mode: Mode,
    i: usize,
    verb: &str,
    before: &BTreeMap<u64, u64>,
    sent_as: &str,
) -> Result<(), Box<CaseFailure>> {
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
            format!("an invalid request reached the engine ({sent} bytes sent): {sent_as}"),
            None,
        ));
    }
    Ok(())
}

/// How the reply differs from the step's `expect`, with a diff where one helps.
fn mismatch(
    run: &Run<'_>,
    step: &Step,
    result: &Result<Reply, ConnectorError>,
    sent_as: &str,
) -> Option<(String, Option<String>)> {
    match (&step.expect, result) {
        (Expect::Success, Ok(_)) => None,
        (Expect::Ok(want), Ok(reply)) => {
            let want = resolve(want, &run.vars);
            let got = reply.to_json();
            (!matches(&want, &got)).then(|| {
                (
                    format!("reply differs (request {sent_as})"),
                    Some(diff(&want, &got)),
                )
            })
        }
        (Expect::Error(kind), Err(e)) if e.kind == *kind => None,
        (Expect::Error(kind), Err(e)) => Some((
            format!("expected error {kind}, got {e} (request {sent_as})"),
            None,
        )),
        (Expect::Error(kind), Ok(reply)) => Some((
            format!(
                "expected error {kind}, got ok {} (request {sent_as})",
                reply.to_json()
            ),
            None,
        )),
        (_, Err(e)) => Some((format!("unexpected error {e} (request {sent_as})"), None)),
    }
}
