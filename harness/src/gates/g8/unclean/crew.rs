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
use crate::engine::nodes::{ReplPosition, SideReader};
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
        let t = Turn {
            s,
            role,
            session,
            q: &s.queues[i],
            victim: s.victim[i],
        };
        let ok = match role {
            Role::Producer => {
                if s.backlog.load(Ordering::SeqCst) > cap {
                    std::thread::sleep(Duration::from_millis(2));
                    continue;
                }
                produce(&mut *c, &t, &mut side, n)
            }
            Role::Worker(_) => work(&mut *c, &t, &mut side),
            Role::Reaper => {
                let ok = t.step(Cmd::Reap, None, None, || {
                    c.reap(session, t.q, MAX_ATTEMPTS, 100)
                        .map(|k| said(format!("{k} reaped")))
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

/// One call's place: the member making it, on which session and queue, and whether the queue
/// is on the failed-over shard.
struct Turn<'a> {
    s: &'a Shared,
    role: Role,
    session: &'a str,
    q: &'a str,
    victim: bool,
}

fn produce(c: &mut (dyn Connector + Send), t: &Turn<'_>, side: &mut SideReader, n: usize) -> bool {
    let (s, payload) = (t.s, format!("{}:{n}", t.s.tag));
    t.step(Cmd::Enqueue, Some(payload.clone()), None, || {
        let id = c.enqueue(t.session, t.q, &payload, 0)?;
        let pos = if t.victim { side.position() } else { None };
        s.backlog.fetch_add(1, Ordering::SeqCst);
        if t.victim {
            s.victim_acks.fetch_add(1, Ordering::SeqCst);
        }
        Ok(Said {
            id: Some(id.clone()),
            pos,
            ..said(id)
        })
    })
}

fn work(c: &mut (dyn Connector + Send), t: &Turn<'_>, side: &mut SideReader) -> bool {
    let mut job = None;
    let claimed = t.step(Cmd::Claim, None, None, || {
        c.claim(t.session, t.q, LEASE_MS).map(|j| {
            job = j.clone();
            match j {
                Some(j) => Said {
                    payload: Some(j.payload),
                    id: Some(j.id.clone()),
                    ..said(format!("{} attempts {}", j.id, j.attempts))
                },
                None => said("none".into()),
            }
        })
    });
    let Some(j) = job else {
        return claimed;
    };
    t.step(Cmd::Complete, Some(j.payload), Some(j.id.clone()), || {
        let done = c.complete(t.session, t.q, &j.id, j.attempts)?;
        let pos = if done && t.victim {
            side.position()
        } else {
            None
        };
        if done {
            t.s.backlog.fetch_sub(1, Ordering::SeqCst);
        }
        Ok(Said {
            done,
            pos,
            ..said(done.to_string())
        })
    })
}

/// What one call said: its reply in words, the payload and id it returned, whether it completed
/// a job, and the old primary's position read right after an acknowledged write on the
/// failed-over shard (before the crew's counters move, so the scenario's pacing never outruns it).
#[derive(Default)]
struct Said {
    words: String,
    payload: Option<String>,
    id: Option<String>,
    done: bool,
    pos: Option<ReplPosition>,
}

/// A call that said only `words`.
fn said(words: String) -> Said {
    Said {
        words,
        ..Said::default()
    }
}

impl Turn<'_> {
    /// One call into the ledger, timed: `payload` and `id` are what it sent, unless it said others.
    fn step(
        &self,
        verb: Cmd,
        payload: Option<String>,
        id: Option<String>,
        call: impl FnOnce() -> Result<Said, ConnectorError>,
    ) -> bool {
        let start = self.s.ms();
        let r = call();
        let ok = r.is_ok();
        let (reply, said) = match r {
            Ok(said) => (Ok(said.words.clone()), said),
            Err(e) => (Err(e), Said::default()),
        };
        self.s.push(Call {
            member: self.role.name(),
            verb,
            queue: self.q.to_string(),
            victim: self.victim,
            payload: said.payload.or(payload),
            id: said.id.or(id),
            reply,
            done: said.done,
            start_ms: start,
            end_ms: self.s.ms(),
            pos: said.pos,
        });
        ok
    }
}
