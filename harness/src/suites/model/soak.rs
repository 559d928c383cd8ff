//! The concurrent soak beside the sequential model: real worker threads, each with its own
//! connector and session, claim and complete or retry while a producer enqueues and a reaper reaps
//! and promotes, for a bounded time. Then exact accounting on the engine: every enqueued job was
//! completed exactly once or sits in exactly one set, no lease was granted twice, and every hash's
//! attempts equals the claims seen for it.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::connector::{Connector, Verbs};
use crate::error::{ConnectorError, HarnessError};
use crate::protocol::grammar::Set;
use crate::protocol::keyspace::Keyspace;
use crate::suites::model::runner::Env;

/// The soak's queue.
pub const QUEUE: &str = "soak";

/// How long and how wide.
#[derive(Debug, Clone)]
pub struct SoakOptions {
    pub workers: usize,
    pub duration: Duration,
    pub seed: u64,
}

/// What the soak did and what it found.
#[derive(Debug, Clone, Default)]
pub struct SoakReport {
    pub jobs: u64,
    pub calls: u64,
    pub claims: u64,
    pub completed: u64,
    pub elapsed: Duration,
    /// Empty when the accounting holds.
    pub violations: Vec<String>,
}

/// xorshift64*: a tiny deterministic generator per thread.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
}

#[derive(Default)]
struct Shared {
    enqueued: Vec<String>,
    /// (id, attempts) of every claim.
    claims: Vec<(String, i64)>,
    /// (id, attempts) of every complete that returned true.
    completed: Vec<(String, i64)>,
    violations: Vec<String>,
}

fn lock(m: &Mutex<Shared>) -> std::sync::MutexGuard<'_, Shared> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Runs the soak on a flushed database of `env`.
pub fn soak(env: &Env<'_>, opts: &SoakOptions) -> Result<SoakReport, HarnessError> {
    let mut admin = env.engine.prepare_db(env.db)?;
    let shared = Mutex::new(Shared::default());
    let calls = AtomicU64::new(0);
    let (producer, reaper, workers) = connect_all(env, opts)?;
    // The clock starts once everyone is connected: a slow-starting child process must not eat
    // the soak's time.
    let t0 = Instant::now();
    let crew = Crew {
        shared: &shared,
        calls: &calls,
        deadline: t0 + opts.duration,
    };
    std::thread::scope(|scope| {
        scope.spawn(move || crew.produce(producer, opts.seed));
        scope.spawn(move || crew.reap(reaper));
        for (i, c) in workers.into_iter().enumerate() {
            let name = format!("w{}", i + 1);
            let rng = Rng((opts.seed ^ (0x51ED_2701 * (i as u64 + 1))) | 1);
            scope.spawn(move || crew.work(&name, c, rng));
        }
    });
    let elapsed = t0.elapsed();
    let ks = admin.keyspace()?;
    let sh = shared.into_inner().unwrap_or_else(|e| e.into_inner());
    let mut violations = sh.violations.clone();
    violations.extend(account(&sh, &ks));
    Ok(SoakReport {
        jobs: sh.enqueued.len() as u64,
        calls: calls.load(Ordering::Relaxed),
        claims: sh.claims.len() as u64,
        completed: sh.completed.len() as u64,
        elapsed,
        violations,
    })
}

type Soaker = Box<dyn Connector + Send>;

/// The producer, the reaper and the workers, each connected as its own session.
fn connect_all(
    env: &Env<'_>,
    opts: &SoakOptions,
) -> Result<(Soaker, Soaker, Vec<Soaker>), HarnessError> {
    // The connect target, flagged on a cluster (R8.1): a plain url would reach the seed only.
    let url = env.engine.target(env.db);
    // Everyone's process starts at once (issue #24), then everyone connects, so a failing
    // factory stops the soak before it starts.
    env.factory.warm(
        opts.workers + 2,
        crate::connector::starts::StartReason::Concurrent,
    );
    let connect = |name: &str| -> Result<Soaker, HarnessError> {
        let mut c = env.factory.make()?;
        if let Err(e) = c.connect(name, &url) {
            return Err(HarnessError::Engine(format!(
                "soak: session {name} could not connect: {e}"
            )));
        }
        Ok(c)
    };
    let producer = connect("producer")?;
    let reaper = connect("reaper")?;
    let workers: Vec<_> = (0..opts.workers)
        .map(|i| connect(&format!("w{}", i + 1)))
        .collect::<Result<_, _>>()?;
    Ok((producer, reaper, workers))
}

/// What every soak thread shares: the tally, the call count and the deadline.
#[derive(Clone, Copy)]
struct Crew<'a> {
    shared: &'a Mutex<Shared>,
    calls: &'a AtomicU64,
    deadline: Instant,
}

impl Crew<'_> {
    fn fail(&self, who: &str, e: ConnectorError) {
        lock(self.shared)
            .violations
            .push(format!("{who}: the connector failed: {e}"));
    }

    /// Enqueues until the deadline, holding the queue near 16 pending, one in five delayed.
    fn produce(&self, mut c: Soaker, seed: u64) {
        let mut rng = Rng(seed | 1);
        let mut n = 0u64;
        while Instant::now() < self.deadline {
            self.calls.fetch_add(1, Ordering::Relaxed);
            match c.pending_size("producer", QUEUE) {
                Ok(size) if size >= 16 => {
                    std::thread::sleep(Duration::from_millis(1));
                    continue;
                }
                Ok(_) => {}
                Err(e) => return self.fail("producer", e),
            }
            n += 1;
            let delay = if rng.next().is_multiple_of(5) { 5 } else { 0 };
            self.calls.fetch_add(1, Ordering::Relaxed);
            match c.enqueue("producer", QUEUE, &format!("job {n}"), delay) {
                Ok(id) => lock(self.shared).enqueued.push(id),
                Err(e) => return self.fail("producer", e),
            }
        }
    }

    /// Reaps expired leases and promotes due jobs until the deadline.
    fn reap(&self, mut c: Soaker) {
        while Instant::now() < self.deadline {
            self.calls.fetch_add(2, Ordering::Relaxed);
            if let Err(e) = c.reap("reaper", QUEUE, 3, 4) {
                return self.fail("reaper", e);
            }
            if let Err(e) = c.promote("reaper", QUEUE, 4) {
                return self.fail("reaper", e);
            }
            std::thread::sleep(Duration::from_millis(2));
        }
    }

    /// Claims until the deadline; completes most, retries some, stalls past the lease on a few.
    fn work(&self, name: &str, mut c: Soaker, mut rng: Rng) {
        while Instant::now() < self.deadline {
            self.calls.fetch_add(1, Ordering::Relaxed);
            let got = match c.claim(name, QUEUE, 25) {
                Ok(Some(got)) => got,
                Ok(None) => {
                    std::thread::sleep(Duration::from_millis(1));
                    continue;
                }
                Err(e) => return self.fail(name, e),
            };
            lock(self.shared)
                .claims
                .push((got.id.clone(), got.attempts));
            let roll = rng.next() % 100;
            if roll >= 85 {
                // Stall past the lease: the reaper takes the job back, this token goes stale.
                std::thread::sleep(Duration::from_millis(40));
            }
            self.calls.fetch_add(1, Ordering::Relaxed);
            if (60..85).contains(&roll) {
                let backoff = if roll.is_multiple_of(2) { 0 } else { 5 };
                if let Err(e) = c.retry(name, QUEUE, &got.id, got.attempts, backoff, 3) {
                    return self.fail(name, e);
                }
            } else {
                match c.complete(name, QUEUE, &got.id, got.attempts) {
                    Ok(true) => lock(self.shared).completed.push((got.id, got.attempts)),
                    Ok(false) => {}
                    Err(e) => return self.fail(name, e),
                }
            }
        }
    }
}

/// The exact accounting of a finished soak against the engine's keyspace.
fn account(sh: &Shared, ks: &Keyspace) -> Vec<String> {
    let mut out = ks.violations();
    let empty = Default::default();
    let q = ks.queues.get(QUEUE).unwrap_or(&empty);
    let mut homes: BTreeMap<&str, Vec<Set>> = BTreeMap::new();
    for set in Set::ALL {
        for (id, _) in q.set(set) {
            homes.entry(id.as_str()).or_default().push(set);
        }
    }
    let mut claims_of: BTreeMap<&str, Vec<i64>> = BTreeMap::new();
    let mut leases = BTreeSet::new();
    for (id, a) in &sh.claims {
        claims_of.entry(id.as_str()).or_default().push(*a);
        if !leases.insert((id.as_str(), *a)) {
            out.push(format!("lease {id} attempts {a} was granted twice"));
        }
    }
    let mut done: BTreeMap<&str, Vec<i64>> = BTreeMap::new();
    for (id, a) in &sh.completed {
        done.entry(id.as_str()).or_default().push(*a);
    }
    let enqueued: BTreeSet<&str> = sh.enqueued.iter().map(String::as_str).collect();
    for id in &enqueued {
        let completions = done.get(id).map_or(0, Vec::len);
        let sets = homes.get(id).map_or(&[][..], Vec::as_slice);
        if completions + sets.len() != 1 {
            out.push(format!(
                "{id}: completed {completions} times and in sets {sets:?} (exactly one place expected)"
            ));
        }
        let claimed = claims_of.get(id).map_or(&[][..], Vec::as_slice);
        if let Some(tokens) = done.get(id) {
            let latest = claimed.iter().max().copied().unwrap_or(0);
            if tokens.iter().any(|t| *t != latest) {
                out.push(format!(
                    "{id}: completed with token {tokens:?} though its latest lease was {latest}"
                ));
            }
            if q.jobs.contains_key(*id) {
                out.push(format!("{id}: completed, yet its hash remains"));
            }
        } else if let Some(h) = q.jobs.get(*id) {
            let attempts = h.get("attempts").and_then(|a| a.parse::<usize>().ok());
            if attempts != Some(claimed.len()) {
                out.push(format!(
                    "{id}: attempts {attempts:?}, but {} claims were granted",
                    claimed.len()
                ));
            }
        }
    }
    for id in homes
        .keys()
        .chain(q.jobs.keys().map(String::as_str).collect::<Vec<_>>().iter())
    {
        if !enqueued.contains(id) {
            out.push(format!("{id} is on the engine but was never enqueued"));
        }
    }
    if q.seq != Some(sh.enqueued.len() as i64) && !sh.enqueued.is_empty() {
        out.push(format!(
            "seq is {:?} after {} enqueues",
            q.seq,
            sh.enqueued.len()
        ));
    }
    out.sort();
    out.dedup();
    out
}
