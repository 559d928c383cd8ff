//! Doubles that break what a call answers or how it is sent: wrong read results, an engine error
//! of the wrong kind, commands sent one per round trip where they must be pipelined.

use crate::connector::args::validate;
use crate::connector::reference::Reference;
use crate::connector::{Connector, Reply, Request};
use crate::error::{ConnectorError, ErrorKind};
use crate::protocol::grammar::key;

/// R4.11/R4.12 broken: `pipeline_probe` and `batch` one command per round trip. The replies
/// (1..=n, the count) are still right; only the engine sees the difference.
pub struct Unpipelined(pub Reference);

impl Connector for Unpipelined {
    fn call(&mut self, request: &Request) -> Result<Reply, ConnectorError> {
        validate(request)?;
        match request {
            Request::PipelineProbe { session, key, n } => {
                let mut replies = Vec::with_capacity(*n as usize);
                for _ in 0..*n {
                    let v = self.0.raw(session, &["INCR", key])?;
                    replies.push(v.and_then(|v| v.parse().ok()).unwrap_or_default());
                }
                Ok(Reply::Probe(replies))
            }
            Request::Batch {
                session,
                queue,
                n,
                payload,
                ..
            } => {
                for _ in 0..*n {
                    self.0.call(&Request::Enqueue {
                        session: session.clone(),
                        queue: queue.clone(),
                        payload: payload.clone(),
                        delay_ms: 0,
                    })?;
                }
                Ok(Reply::Count(*n))
            }
            other => self.0.call(other),
        }
    }
}

/// R5.4 broken: an engine error (an error reply, a failed connection) is reported as `internal`.
pub struct EngineAsInternal(pub Reference);

impl Connector for EngineAsInternal {
    fn call(&mut self, request: &Request) -> Result<Reply, ConnectorError> {
        self.0.call(request).map_err(|mut e| {
            if e.kind == ErrorKind::Engine {
                e.kind = ErrorKind::Internal;
            }
            e
        })
    }
}

/// R2.5 broken: `browse` lists the window in reverse claim order.
pub struct BrowseReversed(pub Reference);

impl Connector for BrowseReversed {
    fn call(&mut self, request: &Request) -> Result<Reply, ConnectorError> {
        match self.0.call(request)? {
            Reply::Jobs(mut jobs) => {
                jobs.reverse();
                Ok(Reply::Jobs(jobs))
            }
            other => Ok(other),
        }
    }
}

/// R2.6 broken: `pending_size` counts the active set too.
pub struct PendingSizeCountsActive(pub Reference);

impl Connector for PendingSizeCountsActive {
    fn call(&mut self, request: &Request) -> Result<Reply, ConnectorError> {
        let reply = self.0.call(request)?;
        match (request, reply) {
            (Request::PendingSize { session, queue }, Reply::Count(n)) => {
                let active = self.0.raw(session, &["ZCARD", &key(queue, "active")])?;
                Ok(Reply::Count(
                    n + active.and_then(|a| a.parse::<i64>().ok()).unwrap_or(0),
                ))
            }
            (_, other) => Ok(other),
        }
    }
}
