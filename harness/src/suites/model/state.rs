//! The pure reference model of EchoMQ (SPEC §1, §2): per queue the four sets, the three-field
//! job hashes and the id counter, with every verb's reply predicted — `invalid` errors included.
//!
//! Time is abstracted. A score is a [`Stamp`]: the lease, backoff or delay it was written with
//! (`ms`) and the logical tick of the call that wrote it; the engine's score is that call's `TIME`
//! plus `ms`, exactly (SPEC §1), and the runner judges it against the engine-time bracket it read
//! around that call. A stamp is *due* when `ms` is 0 and *not due* for any positive ms (histories
//! use 750 ms and one hour, and the runner re-runs a history that lasted long enough for a positive
//! ms to come due). A runner that keeps time-writing calls at least one server millisecond apart
//! makes the engine's score order equal the model's `(ms, tick, id)` order, so reap and promote
//! pick exactly the jobs the model picks.

use std::collections::{BTreeMap, BTreeSet};

use crate::connector::args::validate;
use crate::connector::verbs::{Handler, fields};
use crate::connector::{BrowsedJob, Claimed, Reply, Request, RetryOutcome};
use crate::error::{ConnectorError, ErrorKind};
use crate::protocol::grammar::{Set, job_id};

/// The abstract score of a time-scored set member.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Stamp {
    /// The lease, backoff or delay added to the engine's time (0 for due, and for death).
    pub ms: i64,
    /// The logical time of the call that wrote it.
    pub tick: u64,
}

impl Stamp {
    /// True when the score lies in the future for the whole history (not due).
    pub fn later(&self) -> bool {
        self.ms > 0
    }
}

/// One job hash.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Job {
    pub payload: String,
    pub attempts: i64,
    pub state: Set,
}

/// One queue of the model.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Queue {
    pub pending: BTreeSet<String>,
    pub active: BTreeMap<String, Stamp>,
    pub delayed: BTreeMap<String, Stamp>,
    pub dead: BTreeMap<String, Stamp>,
    pub jobs: BTreeMap<String, Job>,
    pub seq: Option<i64>,
}

/// Members of a time-scored set in the engine's order (score, then id).
pub fn ordered(set: &BTreeMap<String, Stamp>) -> Vec<(String, Stamp)> {
    let mut v: Vec<(String, Stamp)> = set.iter().map(|(k, s)| (k.clone(), *s)).collect();
    v.sort_by(|a, b| (a.1, &a.0).cmp(&(b.1, &b.0)));
    v
}

impl Queue {
    /// True when the queue has no key on the engine.
    pub fn is_empty(&self) -> bool {
        self.seq.is_none()
            && self.pending.is_empty()
            && self.active.is_empty()
            && self.delayed.is_empty()
            && self.dead.is_empty()
            && self.jobs.is_empty()
    }

    /// The ids of `set` in the engine's order.
    pub fn ids(&self, set: Set) -> Vec<String> {
        match set {
            Set::Pending => self.pending.iter().cloned().collect(),
            Set::Active => ordered(&self.active).into_iter().map(|(k, _)| k).collect(),
            Set::Delayed => ordered(&self.delayed).into_iter().map(|(k, _)| k).collect(),
            Set::Dead => ordered(&self.dead).into_iter().map(|(k, _)| k).collect(),
        }
    }

    /// Due members of a time-scored set, in the order `ZRANGE BYSCORE -inf now` returns them.
    fn due(set: &BTreeMap<String, Stamp>) -> Vec<String> {
        ordered(set)
            .into_iter()
            .filter(|(_, s)| !s.later())
            .map(|(k, _)| k)
            .collect()
    }
}

/// What the model predicts for one request.
pub type Predicted = Result<Reply, ErrorKind>;

/// The whole model: queues, connected sessions, the logical clock, and what the history has seen
/// (claims and minted ids, so abstract histories can name real tokens and ids).
#[derive(Debug, Clone, Default)]
pub struct Model {
    pub queues: BTreeMap<String, Queue>,
    pub sessions: BTreeSet<String>,
    /// Every successful claim so far: (queue, claim).
    pub claims: Vec<(String, Claimed)>,
    /// Every id minted so far: (queue, id).
    pub minted: Vec<(String, String)>,
    tick: u64,
    wrote_time: bool,
    /// (queue, set, id) of every time-scored member the last call wrote.
    written: Vec<(String, Set, String)>,
}

fn err(e: ConnectorError) -> ErrorKind {
    e.kind
}

impl Model {
    pub fn new() -> Self {
        Self::default()
    }

    /// True when the last [`Model::apply`] wrote a time score (the engine read `TIME` and stored it).
    pub fn wrote_time(&self) -> bool {
        self.wrote_time
    }

    /// The logical time of the last call.
    pub fn tick(&self) -> u64 {
        self.tick
    }

    /// (queue, set, id) of every time-scored member the last call wrote.
    pub fn written(&self) -> &[(String, Set, String)] {
        &self.written
    }

    /// Members of time-scored `set` of `queue` whose order against `id` (same due-ness, larger id)
    /// would flip if the engine stamped both in one millisecond: their ticks.
    pub fn order_hazards(&self, queue: &str, set: Set, id: &str) -> Vec<u64> {
        let Some(q) = self.queues.get(queue) else {
            return Vec::new();
        };
        let m = match set {
            Set::Active => &q.active,
            Set::Delayed => &q.delayed,
            Set::Dead => &q.dead,
            _ => return Vec::new(),
        };
        let Some(mine) = m.get(id) else {
            return Vec::new();
        };
        m.range::<str, _>((std::ops::Bound::Excluded(id), std::ops::Bound::Unbounded))
            .filter(|(_, s)| s.ms == mine.ms && s.tick != mine.tick)
            .map(|(_, s)| s.tick)
            .collect()
    }

    fn note(&mut self, queue: &str, set: Set, id: &str) {
        self.written.push((queue.to_string(), set, id.to_string()));
    }

    fn session(&self, s: &str) -> Result<(), ErrorKind> {
        if self.sessions.contains(s) {
            Ok(())
        } else {
            Err(ErrorKind::Invalid)
        }
    }

    fn queue(&mut self, q: &str) -> &mut Queue {
        self.queues.entry(q.to_string()).or_default()
    }

    fn stamp(&mut self, ms: i64) -> Stamp {
        self.wrote_time = true;
        Stamp {
            ms,
            tick: self.tick,
        }
    }

    /// The stamp of `id` in time-scored `set` of `queue`.
    pub fn stamp_of(&self, queue: &str, set: Set, id: &str) -> Option<Stamp> {
        let q = self.queues.get(queue)?;
        match set {
            Set::Active => q.active.get(id).copied(),
            Set::Delayed => q.delayed.get(id).copied(),
            Set::Dead => q.dead.get(id).copied(),
            Set::Pending => None,
        }
    }

    /// Applies one request; returns the reply (or error kind) a correct connector gives.
    pub fn apply(&mut self, req: &Request) -> Predicted {
        self.tick += 1;
        self.wrote_time = false;
        self.written.clear();
        validate(req).map_err(err)?;
        req.handle(self)
    }
}

/// Each verb's prediction, its arguments already valid.
impl Handler for Model {
    type Out = Predicted;

    fn hello(&mut self, _: fields::Hello<'_>) -> Predicted {
        Err(ErrorKind::Unsupported)
    }

    fn connect(&mut self, a: fields::Connect<'_>) -> Predicted {
        self.sessions.insert(a.session.clone());
        Ok(Reply::Unit)
    }

    fn disconnect(&mut self, a: fields::Disconnect<'_>) -> Predicted {
        self.session(a.session)?;
        self.sessions.remove(a.session);
        Ok(Reply::Unit)
    }

    fn enqueue(&mut self, a: fields::Enqueue<'_>) -> Predicted {
        self.session(a.session)?;
        let stamp = (*a.delay_ms > 0).then(|| self.stamp(*a.delay_ms));
        let qs = self.queue(a.queue);
        let n = qs.seq.unwrap_or(0) + 1;
        qs.seq = Some(n);
        let id = job_id(n as u64);
        let state = match stamp {
            Some(s) => {
                qs.delayed.insert(id.clone(), s);
                Set::Delayed
            }
            None => {
                qs.pending.insert(id.clone());
                Set::Pending
            }
        };
        qs.jobs.insert(
            id.clone(),
            Job {
                payload: a.payload.clone(),
                attempts: 0,
                state,
            },
        );
        if stamp.is_some() {
            self.note(a.queue, Set::Delayed, &id);
        }
        self.minted.push((a.queue.clone(), id.clone()));
        Ok(Reply::Id(id))
    }

    fn browse(&mut self, a: fields::Browse<'_>) -> Predicted {
        self.session(a.session)?;
        let qs = self.queues.get(a.queue).cloned().unwrap_or_default();
        Ok(Reply::Jobs(
            qs.pending
                .iter()
                .skip(*a.offset as usize)
                .take(*a.limit as usize)
                .map(|id| BrowsedJob {
                    id: id.clone(),
                    payload: qs.jobs[id].payload.clone(),
                })
                .collect(),
        ))
    }

    fn pending_size(&mut self, a: fields::PendingSize<'_>) -> Predicted {
        self.session(a.session)?;
        Ok(Reply::Count(
            self.queues
                .get(a.queue)
                .map_or(0, |q| q.pending.len() as i64),
        ))
    }

    fn claim(&mut self, a: fields::Claim<'_>) -> Predicted {
        self.session(a.session)?;
        let Some(id) = self
            .queues
            .get(a.queue)
            .and_then(|q| q.pending.first().cloned())
        else {
            return Ok(Reply::Claim(None));
        };
        let stamp = self.stamp(*a.lease_ms);
        let qs = self.queue(a.queue);
        qs.pending.remove(&id);
        qs.active.insert(id.clone(), stamp);
        let job = qs.jobs.get_mut(&id).expect("pending ids have a hash");
        job.attempts += 1;
        job.state = Set::Active;
        let claimed = Claimed {
            id,
            payload: job.payload.clone(),
            attempts: job.attempts,
        };
        self.note(a.queue, Set::Active, &claimed.id);
        self.claims.push((a.queue.clone(), claimed.clone()));
        Ok(Reply::Claim(Some(claimed)))
    }

    fn complete(&mut self, a: fields::Complete<'_>) -> Predicted {
        self.session(a.session)?;
        let Some(qs) = self.queues.get_mut(a.queue) else {
            return Ok(Reply::Done(false));
        };
        if !qs.active.contains_key(a.id) || qs.jobs[a.id].attempts != *a.attempts {
            return Ok(Reply::Done(false));
        }
        qs.active.remove(a.id);
        qs.jobs.remove(a.id);
        Ok(Reply::Done(true))
    }

    fn retry(&mut self, a: fields::Retry<'_>) -> Predicted {
        self.session(a.session)?;
        let live = self.queues.get(a.queue).is_some_and(|qs| {
            qs.active.contains_key(a.id) && qs.jobs[a.id].attempts == *a.attempts
        });
        if !live {
            return Ok(Reply::Retry(RetryOutcome::Stale));
        }
        let dead = *a.attempts >= *a.max_attempts;
        let stamp = self.stamp(if dead { 0 } else { *a.backoff_ms });
        let qs = self.queue(a.queue);
        qs.active.remove(a.id);
        let job = qs.jobs.get_mut(a.id).expect("active ids have a hash");
        let (set, outcome) = if dead {
            qs.dead.insert(a.id.clone(), stamp);
            (Set::Dead, RetryOutcome::Dead)
        } else {
            qs.delayed.insert(a.id.clone(), stamp);
            (Set::Delayed, RetryOutcome::Delayed)
        };
        job.state = set;
        self.note(a.queue, set, a.id);
        Ok(Reply::Retry(outcome))
    }

    fn promote(&mut self, a: fields::Promote<'_>) -> Predicted {
        self.session(a.session)?;
        let Some(qs) = self.queues.get_mut(a.queue) else {
            return Ok(Reply::Count(0));
        };
        let due: Vec<String> = Queue::due(&qs.delayed)
            .into_iter()
            .take(*a.limit as usize)
            .collect();
        for id in &due {
            qs.delayed.remove(id);
            qs.pending.insert(id.clone());
            qs.jobs.get_mut(id).expect("delayed ids have a hash").state = Set::Pending;
        }
        Ok(Reply::Count(due.len() as i64))
    }

    fn reap(&mut self, a: fields::Reap<'_>) -> Predicted {
        self.session(a.session)?;
        let due: Vec<String> = self.queues.get(a.queue).map_or_else(Vec::new, |qs| {
            Queue::due(&qs.active)
                .into_iter()
                .take(*a.limit as usize)
                .collect()
        });
        let buries = due
            .iter()
            .any(|id| self.queues[a.queue.as_str()].jobs[id].attempts >= *a.max_attempts);
        let stamp = if buries { Some(self.stamp(0)) } else { None };
        let qs = self.queue(a.queue);
        let mut buried = Vec::new();
        for id in &due {
            qs.active.remove(id);
            let job = qs.jobs.get_mut(id).expect("active ids have a hash");
            if job.attempts >= *a.max_attempts {
                job.state = Set::Dead;
                qs.dead
                    .insert(id.clone(), stamp.expect("a burial has a stamp"));
                buried.push(id.clone());
            } else {
                job.state = Set::Pending;
                qs.pending.insert(id.clone());
            }
        }
        for id in &buried {
            self.note(a.queue, Set::Dead, id);
        }
        Ok(Reply::Count(due.len() as i64))
    }

    /// Not modelled: histories never send it.
    fn pipeline_probe(&mut self, _: fields::PipelineProbe<'_>) -> Predicted {
        Err(ErrorKind::Unsupported)
    }

    /// Not modelled: histories never send it.
    fn batch(&mut self, _: fields::Batch<'_>) -> Predicted {
        Err(ErrorKind::Unsupported)
    }
}

pub(super) fn show_req(r: &Request) -> String {
    serde_json::to_string(r).unwrap_or_else(|_| format!("{r:?}"))
}

pub(super) fn show(p: &Result<Reply, ConnectorError>) -> String {
    match p {
        Ok(r) => format!("ok {}", r.to_json()),
        Err(e) => format!("error {} ({})", e.kind, e.message),
    }
}

pub(super) fn show_predicted(p: &Predicted) -> String {
    match p {
        Ok(r) => format!("ok {}", r.to_json()),
        Err(k) => format!("error {k}"),
    }
}

pub(super) fn agrees(want: &Predicted, got: &Result<Reply, ConnectorError>) -> bool {
    match (want, got) {
        (Ok(a), Ok(b)) => a == b,
        (Err(k), Err(e)) => *k == e.kind,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s() -> String {
        "s".into()
    }
    fn q() -> String {
        "q".into()
    }

    #[test]
    fn lifecycle_matches_the_scripts() {
        let mut m = Model::new();
        let enq = |p: &str, d| Request::Enqueue {
            session: s(),
            queue: q(),
            payload: p.into(),
            delay_ms: d,
        };
        assert_eq!(m.apply(&enq("a", 0)), Err(ErrorKind::Invalid), "no session");
        m.apply(&Request::connect(s(), &"redis://x:1/0".into()))
            .unwrap();
        assert_eq!(m.apply(&enq("a", 0)), Ok(Reply::Id(job_id(1))));
        assert_eq!(m.apply(&enq("b", 3_600_000)), Ok(Reply::Id(job_id(2))));
        assert!(m.wrote_time());
        let claim = Request::Claim {
            session: s(),
            queue: q(),
            lease_ms: 0,
        };
        let Ok(Reply::Claim(Some(c))) = m.apply(&claim) else {
            panic!()
        };
        assert_eq!((c.id.as_str(), c.attempts), ("j0000000000000001", 1));
        assert_eq!(m.apply(&claim), Ok(Reply::Claim(None)));
        let reap = |max, limit| Request::Reap {
            session: s(),
            queue: q(),
            max_attempts: max,
            limit,
        };
        assert_eq!(m.apply(&reap(3, 0)), Ok(Reply::Count(0)));
        assert_eq!(m.apply(&reap(1, 5)), Ok(Reply::Count(1)));
        assert_eq!(m.queues["q"].jobs[&c.id].state, Set::Dead);
        let retry = Request::Retry {
            session: s(),
            queue: q(),
            id: c.id.clone(),
            attempts: 1,
            backoff_ms: 0,
            max_attempts: 0,
        };
        assert_eq!(m.apply(&retry), Err(ErrorKind::Invalid));
    }
}
