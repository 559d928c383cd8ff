//! Deliberately broken connectors (wrappers that rewrite requests on their way to a correct one),
//! so G7's self-tests prove the gate catches real classes of bug.

use std::collections::HashMap;
use std::sync::Arc;

use crate::connector::reference::Reference;
use crate::connector::{Connector, Reply, Request};
use crate::error::{ConnectorError, HarnessError};
use crate::protocol::bundle::Bundle;

/// One way to be wrong.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Breakage {
    /// `retry` never buries: it sends `max_attempts = i32::MAX`.
    RetryIgnoresMaxAttempts,
    /// `reap` moves every expired lease: it sends `limit = 1_000_000`.
    ReapIgnoresLimit,
    /// `complete` ignores the caller's token: it sends the latest attempts it saw claimed.
    CompleteIgnoresToken,
}

impl Breakage {
    pub const ALL: [Breakage; 3] = [
        Self::RetryIgnoresMaxAttempts,
        Self::ReapIgnoresLimit,
        Self::CompleteIgnoresToken,
    ];
}

/// A connector that rewrites requests according to one [`Breakage`].
pub struct Broken<C> {
    inner: C,
    breakage: Breakage,
    /// (queue, id) → the attempts of the latest claim reply seen.
    seen: HashMap<(String, String), i64>,
}

impl<C: Connector> Broken<C> {
    pub fn new(inner: C, breakage: Breakage) -> Self {
        Self {
            inner,
            breakage,
            seen: HashMap::new(),
        }
    }
}

impl<C: Connector> Connector for Broken<C> {
    fn call(&mut self, request: &Request) -> Result<Reply, ConnectorError> {
        let mut req = request.clone();
        match (&mut req, self.breakage) {
            (Request::Retry { max_attempts, .. }, Breakage::RetryIgnoresMaxAttempts) => {
                *max_attempts = i64::from(i32::MAX);
            }
            (Request::Reap { limit, .. }, Breakage::ReapIgnoresLimit) => *limit = 1_000_000,
            (
                Request::Complete {
                    queue,
                    id,
                    attempts,
                    ..
                },
                Breakage::CompleteIgnoresToken,
            ) => {
                if let Some(a) = self.seen.get(&(queue.clone(), id.clone())) {
                    *attempts = *a;
                }
            }
            _ => {}
        }
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

/// A factory of reference connectors broken by `breakage`.
pub fn factory(
    bundle: &Arc<Bundle>,
    breakage: Breakage,
) -> impl Fn() -> Result<Box<dyn Connector + Send>, HarnessError> + Send + Sync + use<> {
    let bundle = bundle.clone();
    move || Ok(Box::new(Broken::new(Reference::new(&bundle), breakage)) as Box<dyn Connector + Send>)
}
