//! The reference connector's pipelined paths: `browse` (ZRANGE, then the payloads in one
//! pipeline) and `batch` (EVALSHA enqueues repeated as bytes). Part of the seam: the raw client is
//! allowed here by the `#[expect]` on the parent module.

use redis::{ConnectionLike, ServerErrorKind, Value};

use super::{Reference, engine_err, resp};
use crate::connector::BrowsedJob;
use crate::error::ConnectorError;
use crate::protocol::grammar::key;

impl Reference {
    pub(super) fn browse(
        &mut self,
        session: &str,
        q: &str,
        offset: i64,
        limit: i64,
    ) -> Result<Vec<BrowsedJob>, ConnectorError> {
        let root = self.root(q);
        let con = self.session(session)?;
        if limit == 0 {
            return Ok(Vec::new());
        }
        let ids: Vec<String> = redis::cmd("ZRANGE")
            .arg(key(q, "pending"))
            .arg(offset)
            .arg(offset + limit - 1)
            .query(con)
            .map_err(engine_err)?;
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let mut p = redis::pipe();
        for id in &ids {
            p.add_command(
                redis::cmd("HGET")
                    .arg(format!("{root}{id}"))
                    .arg("payload")
                    .to_owned(),
            );
        }
        let payloads: Vec<Option<String>> = p.query(con).map_err(engine_err)?;
        Ok(ids
            .into_iter()
            .zip(payloads)
            .filter_map(|(id, payload)| {
                Some(BrowsedJob {
                    id,
                    payload: payload?,
                })
            })
            .collect())
    }

    /// `n` enqueues as pipelines of `depth` EVALSHA; a `NOSCRIPT` inside a pipeline reloads once
    /// and resends exactly the calls that missed.
    pub(super) fn batch(
        &mut self,
        session: &str,
        q: &str,
        n: i64,
        depth: i64,
        payload: &str,
    ) -> Result<i64, ConnectorError> {
        let keys = Self::enqueue_keys(q);
        let root = self.root(q);
        let script = &self.scripts["enqueue"];
        let con = self
            .sessions
            .get_mut(session)
            .ok_or_else(|| ConnectorError::invalid(format!("unknown session {session:?}")))?;
        // One command encoded once, repeated `depth` times into one buffer: a pipeline is one
        // write of a slice of it, with no per-command encoding or allocation.
        let mut one = Vec::with_capacity(256);
        resp::encode_evalsha(
            &mut one,
            &script.sha,
            &keys,
            &[root.as_bytes(), payload.as_bytes(), b"0"],
        );
        let per = one.len();
        let full = usize::try_from(depth.clamp(1, n.max(1))).unwrap_or(1);
        let packed = one.repeat(full);
        let mut done = 0;
        let mut left = n;
        while left > 0 {
            let chunk = left.min(depth);
            let count = usize::try_from(chunk).unwrap_or(0);
            let replies = con
                .req_packed_commands(&packed[..per * count], 0, count)
                .map_err(engine_err)?;
            let mut missed = 0;
            for v in &replies {
                if let Value::ServerError(e) = v {
                    if e.kind() == Some(ServerErrorKind::NoScript) {
                        missed += 1;
                    } else {
                        return Err(ConnectorError::engine(format!("{e:?}")));
                    }
                }
            }
            done += chunk - missed;
            left -= chunk - missed;
            if missed > 0 {
                Self::load(con, script)?;
            }
        }
        Ok(done)
    }
}
