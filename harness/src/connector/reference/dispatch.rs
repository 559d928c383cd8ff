//! The reference connector's answer to each verb ([`Handler`]): one method a verb, so no
//! function holds them all. Part of the seam: the raw client is allowed here by the `#[expect]`
//! on the parent module.

use redis::Value;

use super::{Reference, engine_err, int, shape, text};
use crate::connector::verbs::{Handler, fields};
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

    fn hello(&mut self, a: fields::Hello<'_>) -> Answer {
        if *a.protocol != self.protocol {
            return Err(ConnectorError::new(
                ErrorKind::Unsupported,
                format!("wire protocol {} (this connector speaks 1)", a.protocol),
            ));
        }
        Ok(Reply::Hello(self.identity()))
    }

    fn connect(&mut self, a: fields::Connect<'_>) -> Answer {
        let target = crate::engine::Target {
            url: a.url.clone(),
            cluster: *a.cluster,
            ca_file: a.ca_file.clone(),
            sentinel: a.sentinel.clone(),
        };
        self.open_session(a.session, &target)?;
        Ok(Reply::Unit)
    }

    fn disconnect(&mut self, a: fields::Disconnect<'_>) -> Answer {
        self.session(a.session)?;
        if let Some(link) = self.sessions.remove(a.session)
            && self.quirks.leak_on_disconnect
        {
            self.leaked.push(link);
        }
        Ok(Reply::Unit)
    }

    fn enqueue(&mut self, a: fields::Enqueue<'_>) -> Answer {
        let delay = a.delay_ms.to_string();
        let sets = ["pending", "delayed", "seq"];
        let v = self.script(a.session, "enqueue", a.queue, &sets, &[a.payload, &delay])?;
        Ok(Reply::Id(text(&v).ok_or_else(|| shape("enqueue", &v))?))
    }

    fn browse(&mut self, a: fields::Browse<'_>) -> Answer {
        let jobs = self.browse_pending(a.session, a.queue, *a.offset, *a.limit)?;
        Ok(Reply::Jobs(jobs))
    }

    fn pending_size(&mut self, a: fields::PendingSize<'_>) -> Answer {
        let v = self
            .live(a.session)?
            .send(redis::cmd("ZCARD").arg(key(a.queue, "pending")))
            .map_err(engine_err)?;
        Ok(Reply::Count(
            int(&v).ok_or_else(|| shape("pending_size", &v))?,
        ))
    }

    fn claim(&mut self, a: fields::Claim<'_>) -> Answer {
        let lease = a.lease_ms.to_string();
        let sets = ["pending", "active"];
        let v = self.script(a.session, "claim", a.queue, &sets, &[&lease])?;
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

    fn complete(&mut self, a: fields::Complete<'_>) -> Answer {
        let att = a.attempts.to_string();
        let v = self.script(a.session, "complete", a.queue, &["active"], &[a.id, &att])?;
        Ok(Reply::Done(
            int(&v).ok_or_else(|| shape("complete", &v))? == 1,
        ))
    }

    fn retry(&mut self, a: fields::Retry<'_>) -> Answer {
        let (att, backoff, max) = (
            a.attempts.to_string(),
            a.backoff_ms.to_string(),
            a.max_attempts.to_string(),
        );
        let sets = ["active", "delayed", "dead"];
        let args = [a.id.as_str(), &att, &backoff, &max];
        let v = self.script(a.session, "retry", a.queue, &sets, &args)?;
        Ok(Reply::Retry(match text(&v).as_deref() {
            Some("delayed") => RetryOutcome::Delayed,
            Some("dead") => RetryOutcome::Dead,
            Some("stale") => RetryOutcome::Stale,
            _ => return Err(shape("retry", &v)),
        }))
    }

    fn promote(&mut self, a: fields::Promote<'_>) -> Answer {
        let lim = a.limit.to_string();
        let sets = ["delayed", "pending"];
        let v = self.script(a.session, "promote", a.queue, &sets, &[&lim])?;
        Ok(Reply::Count(int(&v).ok_or_else(|| shape("promote", &v))?))
    }

    fn reap(&mut self, a: fields::Reap<'_>) -> Answer {
        let (max, lim) = (a.max_attempts.to_string(), a.limit.to_string());
        let sets = ["active", "pending", "dead"];
        let v = self.script(a.session, "reap", a.queue, &sets, &[&max, &lim])?;
        Ok(Reply::Count(int(&v).ok_or_else(|| shape("reap", &v))?))
    }

    fn pipeline_probe(&mut self, a: fields::PipelineProbe<'_>) -> Answer {
        let mut p = redis::pipe();
        for _ in 0..*a.n {
            if self.quirks.incrby_probe {
                p.add_command(redis::cmd("INCRBY").arg(a.key).arg(1).to_owned());
            } else {
                p.add_command(redis::cmd("INCR").arg(a.key).to_owned());
            }
        }
        let count = usize::try_from(*a.n).unwrap_or(0);
        let replies = self
            .live(a.session)?
            .pipeline(a.key, &p, count)
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

    fn batch(&mut self, a: fields::Batch<'_>) -> Answer {
        let queues = a.queues.clone().unwrap_or_else(|| vec![a.queue.clone()]);
        let n = self.batch_over(a.session, &queues, *a.n, *a.depth, a.payload)?;
        Ok(Reply::Count(n))
    }
}
