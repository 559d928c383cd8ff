//! Abstract histories and their proptest strategies. A history is a list of calls whose tokens and
//! ids are *indexes* (into the claims and ids the history has produced so far), resolved against the
//! model when the history runs: shrinking removes and simplifies calls and every index still names
//! something real, so a shrunk history stays meaningful.

use proptest::collection::vec;
use proptest::prelude::*;
use serde::{Deserialize, Serialize};

use crate::error::HarnessError;

mod resolve;
mod wait;

pub use resolve::{expected, resolve, resolve_at};
use wait::wait;
pub use wait::{LATER_MS, SOON_MS, TimeScale, Wait};

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
mod tests;
