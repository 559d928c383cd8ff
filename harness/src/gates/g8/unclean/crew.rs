//! The crew that runs through an unclean failover: a producer, two workers and a reaper, each a
//! session of its own connector (the connector under test), each on a thread of its own. A
//! member never reconnects: after an error it goes on with its next call on the same session,
//! as a long-running worker does, so the connector alone must heal (SPEC R8.10, R8.11). Every
//! call goes into the ledger ([`Ledger::call`]) with its reply, and every acknowledged enqueue or
//! complete on the failed-over shard with the old primary's replication position read right
//! after it.

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::connector::{Cmd, Connector, Verbs};
use crate::engine::nodes::SideReader;
use crate::error::ConnectorError;
use crate::gates::g8::ledger::{Call, Ledger};

/// A member's part.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    Producer,
    Worker(usize),
    Reaper,
}

impl Role {
    pub fn name(self) -> String {
        match self {
            Self::Producer => "producer".into(),
            Self::Worker(i) => format!("worker-{i}"),
            Self::Reaper => "reaper".into(),
        }
    }
}

/// The crew of every scenario.
pub const ROLES: [Role; 4] = [
    Role::Producer,
    Role::Worker(1),
    Role::Worker(2),
    Role::Reaper,
];

/// A claim's lease: short, so the reaper brings back what a lost complete left claimed.
pub const LEASE_MS: i64 = 1_000;
/// The reaper's `max_attempts`: high, so no job goes dead in a scenario.
const MAX_ATTEMPTS: i64 = 1_000;

/// What the members share with the scenario.
pub struct Shared {
    pub t0: Instant,
    pub stop: AtomicBool,
    /// Bumped when the old primary answers again (a stopped one woken): side readers reopen.
    pub side_generation: AtomicU64,
    /// Every call of the crew.
    ledger: Mutex<Ledger>,
    /// Acknowledged enqueues minus acknowledged completes: the producer waits above a cap.
    backlog: AtomicI64,
    /// Enqueues acknowledged on the failed-over queue, for the scenario's pacing.
    pub victim_acks: AtomicU64,
    /// The scenario's tag, in every payload.
    pub tag: String,
    pub queues: Vec<String>,
    /// `victim[i]`: `queues[i]` lives on the shard that fails over.
    pub victim: Vec<bool>,
    /// The old primary's url (its real port), for the side reads.
    pub side_url: String,
}

impl Shared {
    pub fn new(tag: &str, queues: Vec<String>, victim: Vec<bool>, side_url: String) -> Self {
        Self {
            t0: Instant::now(),
            stop: AtomicBool::new(false),
            side_generation: AtomicU64::new(0),
            ledger: Mutex::default(),
            backlog: AtomicI64::new(0),
            victim_acks: AtomicU64::new(0),
            tag: tag.to_string(),
            queues,
            victim,
            side_url,
        }
    }

    pub fn ms(&self) -> u64 {
        self.t0.elapsed().as_millis() as u64
    }

    fn ledger(&self) -> std::sync::MutexGuard<'_, Ledger> {
        self.ledger.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A call made: its arguments (its end among them) read before the lock is taken.
    fn push(&self, c: Call) {
        self.ledger().call(c);
    }

    /// Every call so far.
    pub fn calls(&self) -> Vec<Call> {
        self.ledger().calls().to_vec()
    }

    /// How many workers claimed on the failed-over shard in a call begun at or after `since_ms`.
    pub fn claimed_since(&self, since_ms: u64) -> usize {
        let ledger = self.ledger();
        let who: std::collections::BTreeSet<&str> = ledger
            .calls()
            .iter()
            .filter(|c| c.verb == Cmd::Claim && c.victim && c.reply.is_ok())
            .filter(|c| c.start_ms >= since_ms)
            .map(|c| c.member.as_str())
            .collect();
        who.len()
    }
}

/// One member's loop until [`Shared::stop`]: its calls, on `session` of `c`.
pub fn run(role: Role, mut c: Box<dyn Connector + Send>, session: &str, s: &Shared) {
    let mut side = SideReader::new(s.side_url.clone(), Duration::from_millis(500));
    let mut generation = 0;
    let mut n: usize = 0;
    let mut failures = 0u32;
    let cap = 20 * s.queues.len() as i64;
    while !s.stop.load(Ordering::SeqCst) {
        let g = s.side_generation.load(Ordering::SeqCst);
        if g != generation {
            generation = g;
            side.reopen();
        }
        n += 1;
        let i = match role {
            Role::Worker(w) => (n + w) % s.queues.len(),
            _ => n % s.queues.len(),
        };
        let (q, victim) = (&s.queues[i], s.victim[i]);
        let ok = match role {
            Role::Producer => {
                if s.backlog.load(Ordering::SeqCst) > cap {
                    std::thread::sleep(Duration::from_millis(2));
                    continue;
                }
                produce(&mut *c, session, s, &mut side, q, victim, n)
            }
            Role::Worker(_) => work(&mut *c, session, s, &mut side, q, victim),
            Role::Reaper => {
                let ok = step(s, &role, Cmd::Reap, q, victim, None, None, || {
                    c.reap(session, q, MAX_ATTEMPTS, 100)
                        .map(|k| (format!("{k} reaped"), None, None, false))
                });
                if i + 1 == s.queues.len() {
                    std::thread::sleep(Duration::from_millis(LEASE_MS as u64 / 4));
                }
                ok
            }
        };
        // A member that meets errors backs off a little, as a worker loop does, and goes on.
        failures = if ok { 0 } else { failures + 1 };
        if failures > 0 {
            std::thread::sleep(Duration::from_millis(u64::from(failures.min(20)) * 5));
        }
    }
    let _ = c.disconnect(session);
}

fn produce(
    c: &mut (dyn Connector + Send),
    session: &str,
    s: &Shared,
    side: &mut SideReader,
    q: &str,
    victim: bool,
    n: usize,
) -> bool {
    let payload = format!("{}:{n}", s.tag);
    let start = s.ms();
    let r = c.enqueue(session, q, &payload, 0);
    let pos = match (&r, victim) {
        (Ok(_), true) => side.position(),
        _ => None,
    };
    let ok = r.is_ok();
    if ok {
        s.backlog.fetch_add(1, Ordering::SeqCst);
        if victim {
            s.victim_acks.fetch_add(1, Ordering::SeqCst);
        }
    }
    s.push(Call {
        member: Role::Producer.name(),
        verb: Cmd::Enqueue,
        queue: q.to_string(),
        victim,
        payload: Some(payload),
        id: r.as_ref().ok().cloned(),
        reply: r,
        done: false,
        start_ms: start,
        end_ms: s.ms(),
        pos,
    });
    ok
}

fn work(
    c: &mut (dyn Connector + Send),
    session: &str,
    s: &Shared,
    side: &mut SideReader,
    q: &str,
    victim: bool,
) -> bool {
    let role = Role::Worker(session_index(session));
    let mut job = None;
    let claimed = step(s, &role, Cmd::Claim, q, victim, None, None, || {
        c.claim(session, q, LEASE_MS).map(|j| {
            job = j.clone();
            match j {
                Some(j) => (
                    format!("{} attempts {}", j.id, j.attempts),
                    Some(j.payload),
                    Some(j.id),
                    false,
                ),
                None => ("none".into(), None, None, false),
            }
        })
    });
    let Some(j) = job else {
        return claimed;
    };
    let start = s.ms();
    let r = c.complete(session, q, &j.id, j.attempts);
    let pos = match (&r, victim) {
        (Ok(true), true) => side.position(),
        _ => None,
    };
    let ok = r.is_ok();
    if let Ok(true) = r {
        s.backlog.fetch_sub(1, Ordering::SeqCst);
    }
    s.push(Call {
        member: role.name(),
        verb: Cmd::Complete,
        queue: q.to_string(),
        victim,
        payload: Some(j.payload),
        id: Some(j.id),
        done: r.as_ref().is_ok_and(|d| *d),
        reply: r.map(|d| d.to_string()),
        start_ms: start,
        end_ms: s.ms(),
        pos,
    });
    ok
}

/// Worker sessions are named `worker-<i>`.
fn session_index(session: &str) -> usize {
    session
        .rsplit('-')
        .next()
        .and_then(|i| i.parse().ok())
        .unwrap_or(0)
}

/// One call without a side read: its reply in words, payload, id and whether it completed.
type Said = (String, Option<String>, Option<String>, bool);

#[allow(clippy::too_many_arguments)]
fn step(
    s: &Shared,
    role: &Role,
    verb: Cmd,
    q: &str,
    victim: bool,
    payload: Option<String>,
    id: Option<String>,
    call: impl FnOnce() -> Result<Said, ConnectorError>,
) -> bool {
    let start = s.ms();
    let r = call();
    let ok = r.is_ok();
    let (reply, payload, id, done) = match r {
        Ok((said, p, i, d)) => (Ok(said), p.or(payload), i.or(id), d),
        Err(e) => (Err(e), payload, id, false),
    };
    s.push(Call {
        member: role.name(),
        verb,
        queue: q.to_string(),
        victim,
        payload,
        id,
        reply,
        done,
        start_ms: start,
        end_ms: s.ms(),
        pos: None,
    });
    ok
}
