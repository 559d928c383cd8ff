//! An abstract history made concrete: each call's indexes resolved against the model's claims
//! and ids into a request (or one with exactly one bad argument), and a whole history's expected
//! replies. Its own concept: the only part of a history that reads the model.

use super::TimeScale;
use super::{
    Call, GHOST, History, INVALID_KINDS, PAYLOADS, QUEUES, Target, Token, Verb, session_name,
};
use serde_json::{Value, json};

use crate::connector::{Cmd, Request};
use crate::protocol::grammar::job_id;
use crate::suites::model::state::Model;

/// Turns one abstract call into a concrete request, naming claims and ids the model has seen.
pub fn resolve(h: &History, call: &Call, model: &Model) -> Request {
    resolve_at(h, call, model, TimeScale::ONE)
}

/// [`resolve`] with short waits at `scale`.
pub fn resolve_at(h: &History, call: &Call, model: &Model, scale: TimeScale) -> Request {
    let session = match call.session {
        Some(i) => session_name(i % h.sessions.max(1)),
        None => GHOST.to_string(),
    };
    let queue = QUEUES[usize::from(call.queue % h.queues.clamp(1, 3))].to_string();
    match &call.verb {
        Verb::Enqueue { wait, payload } => Request::Enqueue {
            session,
            queue,
            payload: PAYLOADS[usize::from(*payload) % PAYLOADS.len()].to_string(),
            delay_ms: wait.ms_at(scale),
        },
        Verb::Browse { offset, limit } => Request::Browse {
            session,
            queue,
            offset: i64::from(*offset),
            limit: i64::from(*limit),
        },
        Verb::PendingSize => Request::PendingSize { session, queue },
        Verb::Claim { wait } => Request::Claim {
            session,
            queue,
            lease_ms: wait.ms_at(scale),
        },
        Verb::Complete { target } => {
            let (queue, id, attempts) = pick(target, model, &queue);
            Request::Complete {
                session,
                queue,
                id,
                attempts,
            }
        }
        Verb::Retry {
            target,
            wait,
            max_attempts,
        } => {
            let (queue, id, attempts) = pick(target, model, &queue);
            Request::Retry {
                session,
                queue,
                id,
                attempts,
                backoff_ms: wait.ms_at(scale),
                max_attempts: i64::from(*max_attempts),
            }
        }
        Verb::Promote { limit } => Request::Promote {
            session,
            queue,
            limit: i64::from(*limit),
        },
        Verb::Reap {
            max_attempts,
            limit,
        } => Request::Reap {
            session,
            queue,
            max_attempts: i64::from(*max_attempts),
            limit: i64::from(*limit),
        },
        Verb::Invalid { kind } => invalid(*kind, session, queue),
    }
}

/// The (queue, id, attempts) a target names: a claim or a minted id the model has seen, or one
/// that never existed (in `queue`).
fn pick(t: &Target, model: &Model, queue: &str) -> (String, String, i64) {
    match t {
        Target::Claim { index, token } if !model.claims.is_empty() => {
            let (q, c) = &model.claims[usize::from(*index) % model.claims.len()];
            let a = match token {
                Token::Same => c.attempts,
                Token::Below => c.attempts - 1,
                Token::Above => c.attempts + 1,
            };
            (q.clone(), c.id.clone(), a)
        }
        Target::Minted { index, attempts } if !model.minted.is_empty() => {
            let (q, id) = &model.minted[usize::from(*index) % model.minted.len()];
            (q.clone(), id.clone(), i64::from(*attempts))
        }
        Target::Claim { index, .. } | Target::Minted { index, .. } => {
            (queue.to_string(), job_id(0), i64::from(*index % 3))
        }
        Target::Never { n, attempts } => {
            let id = if *n == 0 {
                job_id(0)
            } else {
                job_id(1000 + u64::from(*n))
            };
            (queue.to_string(), id, i64::from(*attempts))
        }
    }
}

/// A request with exactly one bad argument: its verb, and its fields besides the session and
/// the queue (a `queue` among them replaces the history's).
fn invalid(kind: u8, session: String, queue: String) -> Request {
    let id = job_id(1);
    let (cmd, fields) = match kind % INVALID_KINDS {
        0 => (Cmd::Claim, json!({"queue": "bad queue", "lease_ms": 0})),
        1 => (Cmd::Claim, json!({"lease_ms": -1})),
        2 => (Cmd::Enqueue, json!({"payload": "x", "delay_ms": -1})),
        3 => (Cmd::Complete, json!({"id": "nope", "attempts": 1})),
        4 => (
            Cmd::Retry,
            json!({"id": id, "attempts": 1, "backoff_ms": 0, "max_attempts": 0}),
        ),
        5 => (Cmd::Reap, json!({"max_attempts": 3, "limit": -1})),
        6 => (Cmd::Browse, json!({"offset": -1, "limit": 1})),
        7 => (Cmd::Promote, json!({"limit": -1})),
        8 => (Cmd::PendingSize, json!({"queue": ""})),
        9 => (Cmd::Complete, json!({"id": id, "attempts": -1})),
        10 => (
            Cmd::Enqueue,
            json!({"queue": "q".repeat(129), "payload": "x", "delay_ms": 0}),
        ),
        _ => (
            Cmd::Retry,
            json!({"id": id, "attempts": 1, "backoff_ms": -1, "max_attempts": 3}),
        ),
    };
    let mut r = json!({"cmd": cmd.name(), "session": session, "queue": queue});
    if let (Value::Object(r), Value::Object(fields)) = (&mut r, fields) {
        r.extend(fields);
    }
    serde_json::from_value(r).expect("each kind is a well-formed request")
}

/// Resolves a whole history against a fresh model: the concrete requests, the model's replies, and
/// the model's final state.
pub fn expected(
    h: &History,
) -> (
    Vec<(Request, crate::suites::model::state::Predicted)>,
    Model,
) {
    let mut model = Model::new();
    for s in h.session_names() {
        let _ = model.apply(&Request::connect(
            s,
            &crate::engine::Target::single("redis://model"),
        ));
    }
    let steps = h
        .calls
        .iter()
        .map(|c| {
            let req = resolve(h, c, &model);
            let got = model.apply(&req);
            (req, got)
        })
        .collect();
    (steps, model)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_invalid_kind_breaks_one_argument() {
        for kind in 0..INVALID_KINDS {
            let r = invalid(kind, "s".into(), "q".into());
            assert!(r.check_args().is_err(), "{kind}: {r:?}");
            assert_eq!(r.session(), Some("s"));
        }
    }
}
