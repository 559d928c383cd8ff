//! The reference connector's pipelined paths: `browse` (ZRANGE, then the payloads in one
//! pipeline) and `batch` (EVALSHA enqueues repeated as bytes, over one queue or several). Part of
//! the seam: the raw client is allowed here by the `#[expect]` on the parent module.

use std::collections::{BTreeMap, VecDeque};

use redis::cluster_routing::Slot;
use redis::{ServerErrorKind, Value};

use super::link::Link;
use super::{Quirks, Reference, engine_err, resp};
use crate::connector::BrowsedJob;
use crate::error::ConnectorError;
use crate::protocol::grammar::key;

impl Reference {
    pub(super) fn browse_pending(
        &mut self,
        session: &str,
        q: &str,
        offset: i64,
        limit: i64,
    ) -> Result<Vec<BrowsedJob>, ConnectorError> {
        let root = self.root(q);
        let link = self.live(session)?;
        if limit == 0 {
            return Ok(Vec::new());
        }
        let ids = link
            .send(
                redis::cmd("ZRANGE")
                    .arg(key(q, "pending"))
                    .arg(offset)
                    .arg(offset + limit - 1),
            )
            .map_err(engine_err)?;
        let ids: Vec<String> =
            redis::from_redis_value(ids).map_err(|e| ConnectorError::internal(e.to_string()))?;
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let hmget = self.permits.hmget;
        let read = |id: &str| {
            // One `HGET` per job, or one `HMGET` of the one field (P4.3: both are permitted).
            let mut c = redis::cmd(if hmget { "HMGET" } else { "HGET" });
            c.arg(format!("{root}{id}")).arg("payload");
            c
        };
        let link = self.sessions.get_mut(session).expect("live() kept it");
        let mut p = redis::pipe();
        for id in &ids {
            p.add_command(read(id));
        }
        let replies = link
            .pipeline(&key(q, "pending"), &p, ids.len())
            .map_err(engine_err)?;
        let mut out = Vec::new();
        for (id, v) in ids.into_iter().zip(replies) {
            // A redirect inside the pipeline (a slot in migration answers `ASK`): that read did
            // not run, so it goes again alone, following the redirect (a read; R8.6).
            let v = match v {
                Value::ServerError(_) => link.send(&read(&id)).map_err(engine_err)?,
                v => v,
            };
            let v = match v {
                Value::Array(mut one) if hmget && one.len() == 1 => one.remove(0),
                v => v,
            };
            match v {
                Value::Nil => {}
                Value::ServerError(e) => return Err(ConnectorError::engine(format!("{e:?}"))),
                other => out.push(BrowsedJob {
                    id,
                    payload: super::text(&other).unwrap_or_default(),
                }),
            }
        }
        Ok(out)
    }

    /// `n` enqueues as pipelines of `depth` EVALSHA, enqueue `i` to `queues[i % len]`. A
    /// pipeline holds one slot's commands (on a cluster; on one engine, all of them), so each
    /// goes whole to the node that serves it (R8.3). A `NOSCRIPT` or a redirect inside a
    /// pipeline means those calls did not run: the script is loaded (or the slot map read
    /// again) and exactly those calls are sent again.
    pub(super) fn batch_over(
        &mut self,
        session: &str,
        queues: &[String],
        n: i64,
        depth: i64,
        payload: &str,
    ) -> Result<i64, ConnectorError> {
        let sha = self.scripts["enqueue"].sha.clone();
        let ungrouped = self.quirks.ungrouped_batches;
        // One command per queue, encoded once: a pipeline is a concatenation of these bytes,
        // with no per-command encoding or allocation.
        let encoded: Vec<Vec<u8>> = queues
            .iter()
            .map(|q| {
                let mut one = Vec::with_capacity(256);
                let root = self.root(q);
                resp::encode_evalsha(
                    &mut one,
                    &sha,
                    &Self::enqueue_keys(q),
                    &[root.as_bytes(), payload.as_bytes(), b"0"],
                );
                one
            })
            .collect();
        let cluster = self.live(session)?.is_cluster();
        self.fence_before_script(session)?;
        // The queues of each pipeline group: by slot on a cluster, all together on one engine.
        let mut groups: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
        let mut slots: Vec<Slot> = Vec::new();
        for (qi, q) in queues.iter().enumerate() {
            let g = if cluster && !ungrouped {
                let s = Slot::for_key(key(q, "pending"));
                slots.iter().position(|x| *x == s).unwrap_or_else(|| {
                    slots.push(s);
                    slots.len() - 1
                })
            } else {
                0
            };
            groups.entry(g).or_default().push(qi);
        }
        let len = queues.len() as i64;
        let lanes: Vec<Lane> = groups
            .values()
            .map(|members| Lane {
                // This group's enqueues, in order: `i` with `queues[i % len]` in the group.
                todo: (0..n)
                    .filter(|i| members.contains(&((i % len) as usize)))
                    .map(|i| (i % len) as usize)
                    .collect(),
                anchor: key(&queues[members[0]], "pending"),
                idle: 0,
            })
            .collect();
        self.batch_lanes(session, &encoded, lanes, depth)
    }

    /// Sends every lane's enqueues (indexes into `encoded`) in pipelines of `depth` on its
    /// node: each round writes one pipeline per lane before it reads any reply, so the nodes of a
    /// cluster work at once. Calls that did not run (`NOSCRIPT`, a redirect) go first into their
    /// lane's next pipeline, after every reply of the round is read (a script load or a slot map
    /// read never lands between a pipeline and its replies); a lane in which nothing ran three
    /// rounds in a row is an error, never a loop.
    fn batch_lanes(
        &mut self,
        session: &str,
        encoded: &[Vec<u8>],
        mut lanes: Vec<Lane>,
        depth: i64,
    ) -> Result<i64, ConnectorError> {
        let quirks = self.quirks;
        let per_command = self.permits.write_per_command;
        let depth = usize::try_from(depth.max(1)).unwrap_or(1);
        // P4.3: the first enqueue of each lane alone, then pipelines of `depth`.
        let mut lone = self.permits.lone_first;
        let mut done = 0;
        let mut packed = Vec::new();
        loop {
            let link = self.live(session)?;
            let d = if std::mem::take(&mut lone) { 1 } else { depth };
            let round = send_round(link, &mut lanes, encoded, d, &mut packed, per_command)?;
            if round.is_empty() {
                return Ok(done);
            }
            let replies = recv_round(link, &lanes, &round, encoded, quirks)?;
            let (missed_script, redirected) = tally(&mut lanes, round, replies, &mut done, quirks)?;
            if quirks.preload_only && !missed_script.is_empty() {
                return Err(ConnectorError::engine(format!(
                    "NOSCRIPT in a batch after {done} enqueues landed"
                )));
            }
            for l in missed_script {
                let script = &self.scripts["enqueue"];
                let link = self.sessions.get_mut(session).expect("live() kept it");
                Self::load(link, &lanes[l].anchor, script, quirks)?;
            }
            if redirected {
                self.sessions
                    .get_mut(session)
                    .expect("live() kept it")
                    .mark_stale();
            }
        }
    }
}

/// One pipeline group of a batch: the enqueues left to send to the node of `anchor`'s slot.
struct Lane {
    todo: VecDeque<usize>,
    anchor: String,
    /// Rounds in a row in which none of its pipeline ran.
    idle: u32,
}

/// Each lane's chunk of one round: (lane, the enqueues it sent).
type Round = Vec<(usize, Vec<usize>)>;

/// Sends up to `depth` of each lane's enqueues, packed as one write per lane (or one write per
/// command: [`super::Permits::write_per_command`]).
fn send_round(
    link: &mut Link,
    lanes: &mut [Lane],
    encoded: &[Vec<u8>],
    depth: usize,
    packed: &mut Vec<u8>,
    per_command: bool,
) -> Result<Round, ConnectorError> {
    let mut round: Round = Vec::new();
    for (l, lane) in lanes.iter_mut().enumerate() {
        if lane.todo.is_empty() {
            continue;
        }
        let chunk: Vec<usize> = lane.todo.drain(..depth.min(lane.todo.len())).collect();
        if per_command {
            for &q in &chunk {
                link.send_packed(&lane.anchor, &encoded[q])
                    .map_err(engine_err)?;
            }
            round.push((l, chunk));
            continue;
        }
        packed.clear();
        for &q in &chunk {
            packed.extend_from_slice(&encoded[q]);
        }
        link.send_packed(&lane.anchor, packed).map_err(engine_err)?;
        round.push((l, chunk));
    }
    Ok(round)
}

/// Reads each lane's replies, in the order the round was sent.
fn recv_round(
    link: &mut Link,
    lanes: &[Lane],
    round: &Round,
    encoded: &[Vec<u8>],
    quirks: Quirks,
) -> Result<Vec<Vec<Value>>, ConnectorError> {
    let mut replies = Vec::with_capacity(round.len());
    for (l, chunk) in round {
        let got = match link.recv_packed(&lanes[*l].anchor, chunk.len()) {
            // The ClusterPipeline double: the node's whole share again, on a new connection.
            Err(_) if quirks.resend_pipelines => {
                let bytes: Vec<u8> = chunk.iter().flat_map(|&q| encoded[q].clone()).collect();
                link.packed(&lanes[*l].anchor, &bytes, chunk.len())
            }
            other => other,
        };
        replies.push(got.map_err(engine_err)?);
    }
    Ok(replies)
}

/// Counts what ran and puts back what must run again (NOSCRIPT, a redirect); returns the lanes
/// whose node lacks the script and whether the slot map went stale.
fn tally(
    lanes: &mut [Lane],
    round: Round,
    replies: Vec<Vec<Value>>,
    done: &mut i64,
    quirks: Quirks,
) -> Result<(Vec<usize>, bool), ConnectorError> {
    let (mut missed_script, mut redirected) = (Vec::new(), false);
    for ((l, chunk), replies) in round.into_iter().zip(replies) {
        let lane = &mut lanes[l];
        let mut again = Vec::new();
        for (&q, v) in chunk.iter().zip(&replies) {
            match v {
                Value::ServerError(e) => match e.kind() {
                    Some(ServerErrorKind::NoScript) if !quirks.takes_miss(e.details()) => {
                        return Err(ConnectorError::engine(format!("{e:?}")));
                    }
                    Some(ServerErrorKind::NoScript) if quirks.noscript_lands => *done += 1,
                    Some(ServerErrorKind::NoScript) => {
                        if !missed_script.contains(&l) {
                            missed_script.push(l);
                        }
                        again.push(q);
                    }
                    Some(ServerErrorKind::Moved | ServerErrorKind::Ask) => {
                        redirected = true;
                        again.push(q);
                    }
                    _ => return Err(ConnectorError::engine(format!("{e:?}"))),
                },
                _ => *done += 1,
            }
        }
        lane.idle = if again.len() == chunk.len() {
            lane.idle + 1
        } else {
            0
        };
        if lane.idle > 2 {
            return Err(ConnectorError::engine(format!(
                "a pipeline of {} enqueues ran none of them three times in a row (NOSCRIPT or a redirect after the script was loaded and the slot map read)",
                chunk.len()
            )));
        }
        for q in again.into_iter().rev() {
            lane.todo.push_front(q);
        }
    }
    Ok((missed_script, redirected))
}
