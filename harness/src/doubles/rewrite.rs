//! Doubles that rewrite requests or replies on their way to a correct connector.

use std::collections::HashMap;

use super::time::TimeSkew;
use crate::connector::{Connector, Reply, Request};
use crate::error::ConnectorError;

/// One way to be wrong by rewriting.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rewrite {
    ShortBatch,
    DeepBatch,
    ShallowBatch,
    BrowseOneMore,
    RetryIgnoresMaxAttempts,
    ReapIgnoresLimit,
    CompleteIgnoresToken,
    EnqueueTwice,
    BrowseCapsAt1000,
    PromoteCapsAt100,
    ReapCapsAt100,
    ProbeSplitsAt1000,
    /// A lease, delay or backoff off by a little (`super::time`).
    Skew(TimeSkew),
}

/// The page a library cuts a `browse` at (a paging iterator's default).
pub const BROWSE_PAGE: i64 = 1000;
/// The cap a connector's own "safety" puts on `promote` and `reap` limits.
pub const LIMIT_CAP: i64 = 100;
/// The pipeline a library splits a long `pipeline_probe` into.
pub const PROBE_CHUNK: i64 = 1000;

/// A connector that rewrites requests according to one [`Rewrite`].
pub struct Rewriter<C> {
    inner: C,
    rewrite: Rewrite,
    /// (queue, id) → the attempts of the latest claim reply seen.
    seen: HashMap<(String, String), i64>,
}

impl<C: Connector> Rewriter<C> {
    pub fn new(inner: C, rewrite: Rewrite) -> Self {
        Self {
            inner,
            rewrite,
            seen: HashMap::new(),
        }
    }
}

impl<C: Connector> Rewriter<C> {
    /// The rewrites that answer the call themselves (fewer enqueues, split probes, an enqueue
    /// sent twice); `None`: the call goes on, rewritten.
    fn answered(&mut self, request: &Request) -> Option<Result<Reply, ConnectorError>> {
        match (request, self.rewrite) {
            (Request::Batch { .. }, Rewrite::ShortBatch) => Some(self.short_batch(request)),
            (Request::PipelineProbe { session, key, n }, Rewrite::ProbeSplitsAt1000) => {
                Some(self.split_probe(request, session, key, *n))
            }
            (Request::Enqueue { .. }, Rewrite::EnqueueTwice) => {
                Some(self.inner.call(request).and_then(|reply| {
                    self.inner.call(request)?;
                    Ok(reply)
                }))
            }
            _ => None,
        }
    }

    /// It checks what it was asked (a batch past R4.6's bound is refused, not shortened into one
    /// that runs), then sends one enqueue fewer and reports the count asked.
    fn short_batch(&mut self, request: &Request) -> Result<Reply, ConnectorError> {
        crate::connector::args::validate(request)?;
        let mut req = request.clone();
        let Request::Batch { n, .. } = &mut req else {
            unreachable!("a batch")
        };
        let asked = *n;
        *n -= 1;
        match self.inner.call(&req)? {
            Reply::Count(_) => Ok(Reply::Count(asked)),
            other => Ok(other),
        }
    }

    /// Pipelines of at most 1 000, one after another: the replies are all right, but past 1 000
    /// the probe is not one pipeline.
    fn split_probe(
        &mut self,
        request: &Request,
        session: &str,
        key: &str,
        n: i64,
    ) -> Result<Reply, ConnectorError> {
        crate::connector::args::validate(request)?;
        let mut replies = Vec::new();
        let mut left = n;
        while left > 0 {
            let chunk = Request::PipelineProbe {
                session: session.to_string(),
                key: key.to_string(),
                n: left.min(PROBE_CHUNK),
            };
            left -= left.min(PROBE_CHUNK);
            match self.inner.call(&chunk)? {
                Reply::Probe(r) => replies.extend(r),
                other => return Ok(other),
            }
        }
        Ok(Reply::Probe(replies))
    }

    /// The request with its arguments rewritten (checked first where a real connector would).
    fn rewritten(&self, request: &Request) -> Result<Request, ConnectorError> {
        let mut req = request.clone();
        match (&mut req, self.rewrite) {
            (Request::Batch { depth, .. }, Rewrite::DeepBatch) => {
                crate::connector::args::validate(request)?;
                *depth = depth.saturating_mul(2).min(100_000);
            }
            (Request::Batch { depth, .. }, Rewrite::ShallowBatch) => {
                crate::connector::args::validate(request)?;
                *depth = (*depth / 2).max(1);
            }
            (Request::Browse { limit, .. }, Rewrite::BrowseOneMore) => {
                // `ZRANGE key offset offset+limit`: the end index is inclusive, so one id more
                // (and for limit 0, one id where none was asked for).
                crate::connector::args::validate(request)?;
                *limit += 1;
            }
            (Request::Retry { max_attempts, .. }, Rewrite::RetryIgnoresMaxAttempts) => {
                *max_attempts = i64::from(i32::MAX);
            }
            (Request::Reap { limit, .. }, Rewrite::ReapIgnoresLimit) => *limit = 1_000_000,
            // Each caps what it was asked after checking it (R4.4's bounds hold), as a library's
            // page size or a connector's own ceiling does: every answer below the cap is right.
            (Request::Browse { limit, .. }, Rewrite::BrowseCapsAt1000) => {
                crate::connector::args::validate(request)?;
                *limit = (*limit).min(BROWSE_PAGE);
            }
            (Request::Promote { limit, .. }, Rewrite::PromoteCapsAt100)
            | (Request::Reap { limit, .. }, Rewrite::ReapCapsAt100) => {
                crate::connector::args::validate(request)?;
                *limit = (*limit).min(LIMIT_CAP);
            }
            (
                Request::Complete {
                    queue,
                    id,
                    attempts,
                    ..
                },
                Rewrite::CompleteIgnoresToken,
            ) => {
                if let Some(a) = self.seen.get(&(queue.clone(), id.clone())) {
                    *attempts = *a;
                }
            }
            (_, Rewrite::Skew(skew)) => req = skew.rewrite(request),
            _ => {}
        }
        Ok(req)
    }
}

impl<C: Connector> Connector for Rewriter<C> {
    fn call(&mut self, request: &Request) -> Result<Reply, ConnectorError> {
        if let Some(answer) = self.answered(request) {
            return answer;
        }
        let req = self.rewritten(request)?;
        let reply = self.inner.call(&req)?;
        if let (Request::Claim { queue, .. }, Reply::Claim(Some(c))) = (&req, &reply) {
            self.seen.insert((queue.clone(), c.id.clone()), c.attempts);
        }
        Ok(reply)
    }

    fn kill(&mut self) -> bool {
        self.inner.kill()
    }

    fn log_tail(&self) -> String {
        self.inner.log_tail()
    }
}
