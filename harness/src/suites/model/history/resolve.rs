//! An abstract history made concrete: each call's indexes resolved against the model's claims
//! and ids into a request (or one with exactly one bad argument), and a whole history's expected
//! replies. Its own concept: the only part of a history that reads the model.

use super::TimeScale;
use super::{
    Call, GHOST, History, INVALID_KINDS, PAYLOADS, QUEUES, Target, Token, Verb, session_name,
};
use crate::connector::Request;
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

/// A request with exactly one bad argument.
fn invalid(kind: u8, session: String, queue: String) -> Request {
    let id = job_id(1);
    match kind % INVALID_KINDS {
        0 => Request::Claim {
            session,
            queue: "bad queue".into(),
            lease_ms: 0,
        },
        1 => Request::Claim {
            session,
            queue,
            lease_ms: -1,
        },
        2 => Request::Enqueue {
            session,
            queue,
            payload: "x".into(),
            delay_ms: -1,
        },
        3 => Request::Complete {
            session,
            queue,
            id: "nope".into(),
            attempts: 1,
        },
        4 => Request::Retry {
            session,
            queue,
            id,
            attempts: 1,
            backoff_ms: 0,
            max_attempts: 0,
        },
        5 => Request::Reap {
            session,
            queue,
            max_attempts: 3,
            limit: -1,
        },
        6 => Request::Browse {
            session,
            queue,
            offset: -1,
            limit: 1,
        },
        7 => Request::Promote {
            session,
            queue,
            limit: -1,
        },
        8 => Request::PendingSize {
            session,
            queue: String::new(),
        },
        9 => Request::Complete {
            session,
            queue,
            id,
            attempts: -1,
        },
        10 => Request::Enqueue {
            session,
            queue: "q".repeat(129),
            payload: "x".into(),
            delay_ms: 0,
        },
        _ => Request::Retry {
            session,
            queue,
            id,
            attempts: 1,
            backoff_ms: -1,
            max_attempts: 3,
        },
    }
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
