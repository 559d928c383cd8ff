//! The reference connector's answer to each verb ([`Handler`]): one method a verb, so no
//! function holds them all. Part of the seam: the raw client is allowed here by the `#[expect]`
//! on the parent module.

use redis::Value;

use super::{Reference, engine_err, int, shape, text};
use crate::connector::verbs::Handler;
use crate::connector::{Claimed, Reply, RetryOutcome};
use crate::error::{ConnectorError, ErrorKind};
use crate::protocol::grammar::key;

type Answer = Result<Reply, ConnectorError>;

impl Reference {
    /// Runs script `name` on `queue`: its keys are the queue's `sets` (in the script's order),
    /// its arguments the job root and then `args`.
    fn script(
        &mut self,
        session: &str,
        name: &str,
        queue: &str,
        sets: &[&str],
        args: &[&str],
    ) -> Result<Value, ConnectorError> {
        let root = self.root(queue);
        let keys: Vec<String> = sets.iter().map(|set| key(queue, set)).collect();
        let argv: Vec<&[u8]> = std::iter::once(root.as_str())
            .chain(args.iter().copied())
            .map(str::as_bytes)
            .collect();
        self.run(session, name, &keys, &argv)
    }
}

impl Handler for Reference {
    type Out = Answer;

    fn hello(&mut self, protocol: &u32) -> Answer {
        if *protocol != self.protocol {
            return Err(ConnectorError::new(
                ErrorKind::Unsupported,
                format!("wire protocol {protocol} (this connector speaks 1)"),
            ));
        }
        Ok(Reply::Hello(self.identity()))
    }

    fn connect(&mut self, session: &String, url: &String, cluster: &bool) -> Answer {
        self.open_session(session, url, *cluster)?;
        Ok(Reply::Unit)
    }

    fn disconnect(&mut self, session: &String) -> Answer {
        self.session(session)?;
        self.sessions.remove(session);
        Ok(Reply::Unit)
    }

    fn enqueue(
        &mut self,
        session: &String,
        queue: &String,
        payload: &String,
        delay_ms: &i64,
    ) -> Answer {
        let delay = delay_ms.to_string();
        let sets = ["pending", "delayed", "seq"];
        let v = self.script(session, "enqueue", queue, &sets, &[payload, &delay])?;
        Ok(Reply::Id(text(&v).ok_or_else(|| shape("enqueue", &v))?))
    }

    fn browse(&mut self, session: &String, queue: &String, offset: &i64, limit: &i64) -> Answer {
        Ok(Reply::Jobs(
            self.browse_pending(session, queue, *offset, *limit)?,
        ))
    }

    fn pending_size(&mut self, session: &String, queue: &String) -> Answer {
        let v = self
            .live(session)?
            .send(redis::cmd("ZCARD").arg(key(queue, "pending")))
            .map_err(engine_err)?;
        Ok(Reply::Count(
            int(&v).ok_or_else(|| shape("pending_size", &v))?,
        ))
    }

    fn claim(&mut self, session: &String, queue: &String, lease_ms: &i64) -> Answer {
        let lease = lease_ms.to_string();
        let v = self.script(session, "claim", queue, &["pending", "active"], &[&lease])?;
        Ok(Reply::Claim(match &v {
            Value::Array(a) if a.is_empty() => None,
            Value::Array(a) if a.len() == 3 => Some(Claimed {
                id: text(&a[0]).ok_or_else(|| shape("claim", &v))?,
                payload: text(&a[1]).unwrap_or_default(),
                attempts: int(&a[2]).ok_or_else(|| shape("claim", &v))?,
            }),
            _ => return Err(shape("claim", &v)),
        }))
    }

    fn complete(
        &mut self,
        session: &String,
        queue: &String,
        id: &String,
        attempts: &i64,
    ) -> Answer {
        let att = attempts.to_string();
        let v = self.script(session, "complete", queue, &["active"], &[id, &att])?;
        Ok(Reply::Done(
            int(&v).ok_or_else(|| shape("complete", &v))? == 1,
        ))
    }

    fn retry(
        &mut self,
        session: &String,
        queue: &String,
        id: &String,
        attempts: &i64,
        backoff_ms: &i64,
        max_attempts: &i64,
    ) -> Answer {
        let (att, backoff, max) = (
            attempts.to_string(),
            backoff_ms.to_string(),
            max_attempts.to_string(),
        );
        let sets = ["active", "delayed", "dead"];
        let v = self.script(session, "retry", queue, &sets, &[id, &att, &backoff, &max])?;
        Ok(Reply::Retry(match text(&v).as_deref() {
            Some("delayed") => RetryOutcome::Delayed,
            Some("dead") => RetryOutcome::Dead,
            Some("stale") => RetryOutcome::Stale,
            _ => return Err(shape("retry", &v)),
        }))
    }

    fn promote(&mut self, session: &String, queue: &String, limit: &i64) -> Answer {
        let lim = limit.to_string();
        let v = self.script(session, "promote", queue, &["delayed", "pending"], &[&lim])?;
        Ok(Reply::Count(int(&v).ok_or_else(|| shape("promote", &v))?))
    }

    fn reap(
        &mut self,
        session: &String,
        queue: &String,
        max_attempts: &i64,
        limit: &i64,
    ) -> Answer {
        let (max, lim) = (max_attempts.to_string(), limit.to_string());
        let sets = ["active", "pending", "dead"];
        let v = self.script(session, "reap", queue, &sets, &[&max, &lim])?;
        Ok(Reply::Count(int(&v).ok_or_else(|| shape("reap", &v))?))
    }

    fn pipeline_probe(&mut self, session: &String, key: &String, n: &i64) -> Answer {
        let mut p = redis::pipe();
        for _ in 0..*n {
            p.add_command(redis::cmd("INCR").arg(key).to_owned());
        }
        let count = usize::try_from(*n).unwrap_or(0);
        let replies = self
            .live(session)?
            .pipeline(key, &p, count)
            .map_err(engine_err)?;
        if let Some(Value::ServerError(e)) =
            replies.iter().find(|v| matches!(v, Value::ServerError(_)))
        {
            return Err(ConnectorError::engine(format!("{e:?}")));
        }
        let ints: Option<Vec<i64>> = replies.iter().map(int).collect();
        Ok(Reply::Probe(ints.ok_or_else(|| {
            shape("pipeline_probe", &Value::Array(replies))
        })?))
    }

    fn batch(
        &mut self,
        session: &String,
        queue: &String,
        n: &i64,
        depth: &i64,
        payload: &String,
        queues: &Option<Vec<String>>,
    ) -> Answer {
        let queues = queues.clone().unwrap_or_else(|| vec![queue.clone()]);
        Ok(Reply::Count(
            self.batch_over(session, &queues, *n, *depth, payload)?,
        ))
    }
}
