//! A connector whose failure does not reproduce: the reference connector, except that one
//! `pending_size` reply in a factory's whole life (the [`FAIL_AT`]th) is off by one. It stands
//! for the failures that depend on timing or load: G7 must FAIL it, say that the failure did not
//! reproduce on replay, and keep the original history on disk.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::connector::reference::Reference;
use crate::connector::{Connector, ConnectorFactory, Reply, Request};
use crate::error::{ConnectorError, HarnessError};
use crate::protocol::bundle::Bundle;

/// Which `pending_size` call, counted over every connector of one factory, answers wrong.
pub const FAIL_AT: u64 = 25;

/// The reference connector with a shared count of `pending_size` calls.
pub struct Flaky {
    inner: Box<dyn Connector + Send>,
    calls: Arc<AtomicU64>,
}

impl Connector for Flaky {
    fn call(&mut self, request: &Request) -> Result<Reply, ConnectorError> {
        let reply = self.inner.call(request)?;
        if matches!(request, Request::PendingSize { .. })
            && self.calls.fetch_add(1, Ordering::SeqCst) + 1 == FAIL_AT
            && let Reply::Count(n) = reply
        {
            return Ok(Reply::Count(n + 1));
        }
        Ok(reply)
    }
}

/// Makes [`Flaky`] connectors that share one count.
pub struct FlakyFactory {
    bundle: Arc<Bundle>,
    calls: Arc<AtomicU64>,
}

impl FlakyFactory {
    pub fn new(bundle: &Arc<Bundle>) -> Self {
        Self {
            bundle: bundle.clone(),
            calls: Arc::default(),
        }
    }
}

impl ConnectorFactory for FlakyFactory {
    fn make(&self) -> Result<Box<dyn Connector + Send>, HarnessError> {
        Ok(Box::new(Flaky {
            inner: Reference::boxed(&self.bundle),
            calls: self.calls.clone(),
        }))
    }
}
