//! Abstract histories and their proptest strategies. A history is a list of calls whose tokens and
//! ids are *indexes* (into the claims and ids the history has produced so far), resolved against the
//! model when the history runs: shrinking removes and simplifies calls and every index still names
//! something real, so a shrunk history stays meaningful.

use proptest::collection::vec;
use proptest::prelude::*;
use serde::{Deserialize, Serialize};

use crate::connector::Request;
use crate::error::HarnessError;
use crate::protocol::grammar::job_id;
use crate::suites::model::state::Model;

/// A lease, backoff or delay that never comes due while a history runs: one hour.
pub const LATER_MS: i64 = 3_600_000;

/// A short lease, backoff or delay: below one second and not whole seconds, so a connector that
/// rounds to seconds or reads a backoff as seconds writes a different score. A history must end
/// within it (the runner checks, and re-runs a history that took longer): it never comes due
/// either.
pub const SOON_MS: i64 = 750;

// Below one second (a backoff read as seconds changes it) and not whole seconds (rounding does).
const _: () = assert!(SOON_MS > 0 && SOON_MS < 1000);

/// How long a lease, backoff or delay is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", from = "WaitRepr")]
pub enum Wait {
    /// 0 ms: due at once.
    Now,
    /// [`LATER_MS`].
    Later,
    /// [`SOON_MS`].
    Soon,
}

/// What a history file may say: a [`Wait`] by name, or the older `later: true/false`.
#[derive(Deserialize)]
#[serde(untagged)]
enum WaitRepr {
    Later(bool),
    Named(WaitName),
}

#[derive(Deserialize)]
#[serde(rename_all = "snake_case")]
enum WaitName {
    Now,
    Later,
    Soon,
}

impl From<WaitRepr> for Wait {
    fn from(r: WaitRepr) -> Self {
        match r {
            WaitRepr::Later(false) | WaitRepr::Named(WaitName::Now) => Wait::Now,
            WaitRepr::Later(true) | WaitRepr::Named(WaitName::Later) => Wait::Later,
            WaitRepr::Named(WaitName::Soon) => Wait::Soon,
        }
    }
}

impl Wait {
    /// The milliseconds it stands for at time scale 1.
    pub fn ms(self) -> i64 {
        self.ms_at(TimeScale::ONE)
    }

    /// The milliseconds it stands for at `scale`: only [`Wait::Soon`] grows with the machine.
    pub fn ms_at(self, scale: TimeScale) -> i64 {
        match self {
            Wait::Now => 0,
            Wait::Later => LATER_MS,
            Wait::Soon => scale.soon_ms(),
        }
    }
}

/// How much longer than [`SOON_MS`] a short wait is, so that a history can end before it comes
/// due on a machine too slow for 750 ms. A power of two up to [`TimeScale::MAX`]; the runner
/// raises it when a history lasted too long to be judged (and records it), never lowers it within
/// a run. The judgement is exact at any scale: scores are checked against engine-TIME brackets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct TimeScale(u32);

impl Default for TimeScale {
    fn default() -> Self {
        Self::ONE
    }
}

impl TimeScale {
    pub const ONE: TimeScale = TimeScale(1);
    /// The stated bound: a short wait of 12 250 ms. A machine on which 80 calls take longer is
    /// too slow to judge, and the gate says so (ERROR).
    pub const MAX: TimeScale = TimeScale(16);

    /// The factor.
    pub fn get(self) -> u32 {
        self.0
    }

    /// The short wait at this scale: `SOON_MS × scale`, moved off whole seconds (by 250 ms) so a
    /// connector that rounds to seconds still writes a different score.
    pub fn soon_ms(self) -> i64 {
        let ms = SOON_MS * i64::from(self.0);
        if ms % 1000 == 0 { ms + 250 } else { ms }
    }

    /// The smallest scale above this one whose short wait is at least twice `span_ms` (how long,
    /// in engine ms, the void history ran), capped at [`TimeScale::MAX`].
    pub fn after_void(self, span_ms: i64) -> TimeScale {
        let mut s = TimeScale((self.0 * 2).min(Self::MAX.0));
        while s < Self::MAX && s.soon_ms() < span_ms.saturating_mul(2) {
            s = TimeScale(s.0 * 2);
        }
        s
    }
}

/// Waits drawn with weights (now, later, soon); shrinks towards now, then later.
fn wait(now: u32, later: u32, soon: u32) -> impl Strategy<Value = Wait> {
    prop_oneof![
        now => Just(Wait::Now),
        later => Just(Wait::Later),
        soon => Just(Wait::Soon),
    ]
}

/// Queue names histories use (the charset of §3: letters, digits, `.`, `_`, `-`).
/// Names that use the grammar's `.`, `_` and `-`, and whose slots (105, 7648, 14934) fall in the
/// three thirds a three-primary cluster splits the slots into, so on a cluster the histories
/// span every shard (SPEC §8).
pub const QUEUES: [&str; 3] = ["orders", "mail.v3", "Q_2-x"];

/// Payloads histories use (empty, spaces, non-ASCII).
pub const PAYLOADS: [&str; 4] = ["hello", "", "two words", "ünï ✓"];

/// The session a call names when it names one that was never connected.
pub const GHOST: &str = "ghost";

/// The name of session `i` (0-based).
pub fn session_name(i: u8) -> String {
    format!("s{}", i + 1)
}

/// Which job (and token) a `complete` or `retry` names.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Target {
    /// A claim made earlier in the history (live or stale), with its token or one beside it.
    Claim { index: u16, token: Token },
    /// An id minted earlier in the history, with any attempts.
    Minted { index: u16, attempts: u8 },
    /// An id never minted (`j0…0` or beyond any counter).
    Never { n: u8, attempts: u8 },
}

/// The token presented relative to a claim's attempts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Token {
    Same,
    Below,
    Above,
}

/// One verb with abstract arguments.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verb {
    Enqueue {
        #[serde(alias = "later")]
        wait: Wait,
        payload: u8,
    },
    Browse {
        offset: u8,
        limit: u8,
    },
    PendingSize,
    Claim {
        #[serde(alias = "later")]
        wait: Wait,
    },
    Complete {
        target: Target,
    },
    Retry {
        target: Target,
        #[serde(alias = "later")]
        wait: Wait,
        max_attempts: u8,
    },
    Promote {
        limit: u8,
    },
    Reap {
        max_attempts: u8,
        limit: u8,
    },
    /// A request with one argument out of range (kind `invalid`, nothing sent).
    Invalid {
        kind: u8,
    },
}

/// One call: a session (index, or the ghost), a queue index, a verb.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Call {
    /// `None`: a session that was never connected.
    pub session: Option<u8>,
    pub queue: u8,
    pub verb: Verb,
}

/// A history: how many sessions and queues it uses, and its calls.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct History {
    pub sessions: u8,
    pub queues: u8,
    pub calls: Vec<Call>,
}

impl History {
    /// The names of the sessions connected before the first call.
    pub fn session_names(&self) -> Vec<String> {
        (0..self.sessions.max(1)).map(session_name).collect()
    }

    /// True when some call names the ghost session.
    pub fn uses_ghost(&self) -> bool {
        self.calls.iter().any(|c| c.session.is_none())
    }
}

/// The number of invalid-request shapes [`resolve`] knows.
pub const INVALID_KINDS: u8 = 12;

fn target() -> impl Strategy<Value = Target> {
    prop_oneof![
        6 => (any::<u16>(), prop_oneof![
            4 => Just(Token::Same), 1 => Just(Token::Below), 1 => Just(Token::Above)
        ])
            .prop_map(|(index, token)| Target::Claim { index, token }),
        2 => (any::<u16>(), 0u8..4).prop_map(|(index, attempts)| Target::Minted { index, attempts }),
        1 => (0u8..3, 0u8..3).prop_map(|(n, attempts)| Target::Never { n, attempts }),
    ]
}

fn verb() -> impl Strategy<Value = Verb> {
    prop_oneof![
        6 => (wait(17, 2, 1), 0u8..4)
            .prop_map(|(wait, payload)| Verb::Enqueue { wait, payload }),
        1 => (0u8..3, 0u8..3).prop_map(|(offset, limit)| Verb::Browse { offset, limit }),
        1 => Just(Verb::PendingSize),
        6 => wait(5, 4, 1).prop_map(|wait| Verb::Claim { wait }),
        4 => target().prop_map(|target| Verb::Complete { target }),
        4 => (target(), wait(5, 3, 2), 1u8..4).prop_map(|(target, wait, max_attempts)| Verb::Retry {
            target,
            wait,
            max_attempts
        }),
        2 => (0u8..3).prop_map(|limit| Verb::Promote { limit }),
        2 => (1u8..4, 0u8..3).prop_map(|(max_attempts, limit)| Verb::Reap { max_attempts, limit }),
        1 => (0..INVALID_KINDS).prop_map(|kind| Verb::Invalid { kind }),
    ]
}

fn call() -> impl Strategy<Value = Call> {
    (
        prop_oneof![30 => (0u8..4).prop_map(Some), 1 => Just(None)],
        0u8..3,
        verb(),
    )
        .prop_map(|(session, queue, verb)| Call {
            session,
            queue,
            verb,
        })
}

/// Histories of 1–80 calls over 1–4 sessions and 1–3 queues.
pub fn histories() -> impl Strategy<Value = History> {
    (1u8..=4, 1u8..=3, vec(call(), 1..=80)).prop_map(|(sessions, queues, calls)| History {
        sessions,
        queues,
        calls,
    })
}

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

/// The queue names a history can touch.
pub fn queues_of(h: &History) -> &'static [&'static str] {
    &QUEUES[..usize::from(h.queues.clamp(1, 3))]
}

/// The 32-byte ChaCha seed for a gate seed.
pub fn seed_bytes(seed: u64) -> [u8; 32] {
    let mut b = [0u8; 32];
    for (i, chunk) in b.chunks_mut(8).enumerate() {
        let word = seed
            .wrapping_add(i as u64)
            .wrapping_mul(0x9E37_79B9_7F4A_7C15);
        chunk.copy_from_slice(&word.to_le_bytes());
    }
    b
}

/// Parses a regressions file: one JSON history per line; `#` comments and blank lines skipped.
pub fn parse_regressions(text: &str) -> Result<Vec<History>, HarnessError> {
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty() && !l.trim_start().starts_with('#'))
        .map(|(i, l)| {
            serde_json::from_str(l).map_err(|e| {
                HarnessError::BadInput(format!("interleavings regressions line {}: {e}", i + 1))
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waits_read_old_and_new_spellings() {
        let v: Verb = serde_json::from_str(r#"{"claim":{"later":true}}"#).unwrap();
        assert_eq!(v, Verb::Claim { wait: Wait::Later });
        let v: Verb = serde_json::from_str(r#"{"claim":{"later":false}}"#).unwrap();
        assert_eq!(v, Verb::Claim { wait: Wait::Now });
        let v: Verb = serde_json::from_str(r#"{"claim":{"wait":"soon"}}"#).unwrap();
        assert_eq!(v, Verb::Claim { wait: Wait::Soon });
        let back = serde_json::to_string(&Verb::Claim { wait: Wait::Soon }).unwrap();
        assert_eq!(back, r#"{"claim":{"wait":"soon"}}"#);
        assert_eq!((Wait::Now.ms(), Wait::Soon.ms()), (0, SOON_MS));
    }

    #[test]
    fn a_scaled_short_wait_grows_and_never_lands_on_whole_seconds() {
        let mut s = TimeScale::ONE;
        let mut seen = vec![s.soon_ms()];
        while s < TimeScale::MAX {
            s = s.after_void(0);
            seen.push(s.soon_ms());
        }
        assert_eq!(seen, [750, 1500, 3250, 6250, 12250]);
        assert!(seen.iter().all(|ms| ms % 1000 != 0));
        assert_eq!(Wait::Soon.ms_at(TimeScale::MAX), 12_250);
        assert_eq!(Wait::Later.ms_at(TimeScale::MAX), LATER_MS);
        // A void history that ran 2 s goes straight to a wait of at least 4 s.
        assert_eq!(TimeScale::ONE.after_void(2_000).soon_ms(), 6_250);
        assert_eq!(TimeScale::MAX.after_void(1_000_000), TimeScale::MAX);
    }
}
