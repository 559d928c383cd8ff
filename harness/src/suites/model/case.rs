//! A history as a ready-to-commit YAML case (the format of `cases/README.md`): every step's
//! expectation is the model's, so the case fails on the connector that broke it and passes on a
//! correct one.

use std::fmt::Write as _;

use serde_json::Value;

use crate::connector::Request;
use crate::suites::model::history::{GHOST, History, expected, queues_of};
use crate::suites::model::state::{Model, Predicted, Stamp, ordered};

fn j(v: &impl serde::Serialize) -> String {
    serde_json::to_string(v).expect("json")
}

/// The step's verb and its arguments, as a YAML flow map (JSON is YAML).
fn verb_args(req: &Request) -> (String, &str) {
    let mut v = serde_json::to_value(req).expect("requests serialize");
    let Value::Object(m) = &mut v else {
        unreachable!("a request is an object")
    };
    m.remove("cmd");
    let session = req.session().unwrap_or("");
    m.remove("session");
    (format!("{}: {}", req.cmd(), j(&v)), session)
}

fn score(s: Option<Stamp>) -> String {
    match s {
        None => "0".into(),
        Some(s) if s.ms > 0 => j(&format!("$now+{}", s.ms)),
        Some(_) => j(&"$now"),
    }
}

/// The case id and the YAML text of history `h`; `why` (the observed disagreement) goes into a
/// comment and the description.
pub fn yaml_case(h: &History, why: &str) -> (String, String) {
    let (steps, model) = expected(h);
    let sessions = h.session_names();
    let mut body = String::new();
    if h.uses_ghost() {
        for s in &sessions {
            let _ = writeln!(body, "  - connect: {{}}\n    session: {s}\n    ok: {{}}");
        }
    }
    for (req, want) in &steps {
        call_step(&mut body, req, want);
    }
    for q in queues_of(h) {
        keyspace_step(&mut body, q, &model);
    }
    let hash = crate::protocol::bundle::sha1_hex(body.as_bytes());
    let id = format!("g7-regression-{}", &hash[..10]);
    let text = header(h, why, &id, steps.len(), sessions) + &body;
    (id, text)
}

/// One call and the model's answer to it.
fn call_step(body: &mut String, req: &Request, want: &Predicted) {
    let (verb, session) = verb_args(req);
    let _ = writeln!(body, "  - {verb}\n    session: {session}");
    match want {
        Ok(r) => {
            let _ = writeln!(body, "    ok: {}", j(&r.to_json()));
        }
        Err(k) => {
            let _ = writeln!(body, "    error: {k}");
        }
    }
}

/// The final `keyspace` step of queue `q`: its sets, its minted jobs and its seq, as modelled.
fn keyspace_step(body: &mut String, q: &str, model: &Model) {
    let m = model.queues.get(q).cloned().unwrap_or_default();
    let _ = writeln!(body, "  - keyspace:\n      queue: {}", j(&q));
    let pending: Vec<String> = m
        .pending
        .iter()
        .map(|id| format!("{id}: {}", score(None)))
        .collect();
    let _ = writeln!(body, "      pending: {{{}}}", pending.join(", "));
    for (name, set) in [
        ("active", &m.active),
        ("delayed", &m.delayed),
        ("dead", &m.dead),
    ] {
        let members: Vec<String> = ordered(set)
            .into_iter()
            .map(|(id, s)| format!("{id}: {}", score(Some(s))))
            .collect();
        let _ = writeln!(body, "      {name}: {{{}}}", members.join(", "));
    }
    let mut ids: Vec<String> = model
        .minted
        .iter()
        .filter(|(mq, _)| mq == q)
        .map(|(_, id)| id.clone())
        .collect();
    ids.sort();
    ids.dedup();
    if ids.is_empty() {
        let _ = writeln!(body, "      jobs: {{}}");
    } else {
        let _ = writeln!(body, "      jobs:");
        for id in ids {
            match m.jobs.get(&id) {
                Some(job) => {
                    let _ = writeln!(
                        body,
                        "        {id}: {{payload: {}, attempts: {}, state: {}}}",
                        j(&job.payload),
                        job.attempts,
                        job.state
                    );
                }
                None => {
                    let _ = writeln!(body, "        {id}: null");
                }
            }
        }
    }
    match m.seq {
        Some(n) => {
            let _ = writeln!(body, "      seq: {n}");
        }
        None => {
            let _ = writeln!(body, "      seq: null");
        }
    }
}

/// The comment naming the disagreement and the history, then the case's header fields.
fn header(h: &History, why: &str, id: &str, steps: usize, sessions: Vec<String>) -> String {
    let first = why.lines().next().unwrap_or_default();
    let mut all_sessions = sessions;
    let mut text = String::new();
    let _ = writeln!(
        text,
        "# Shrunk by gate G7 (interleavings). The connector disagreed with the model:"
    );
    for line in why.lines() {
        let _ = writeln!(text, "#   {line}");
    }
    let _ = writeln!(
        text,
        "# History (replay with the G7 regressions file): {}",
        j(h)
    );
    let _ = writeln!(text, "id: {id}");
    let _ = writeln!(
        text,
        "description: {}",
        j(&format!("G7 counterexample, {steps} steps: {first}"))
    );
    let _ = writeln!(text, "tags: [g7, regression]");
    if h.uses_ghost() {
        all_sessions.push(GHOST.to_string());
        let _ = writeln!(text, "connect: manual");
    }
    let _ = writeln!(text, "sessions: [{}]", all_sessions.join(", "));
    let _ = writeln!(text, "steps:");
    text
}
