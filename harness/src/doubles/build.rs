//! What a double's make expression in [`TABLE`](super::TABLE) is given: the bundle, and the
//! few ways a double is built over the reference connector, so each entry is one short line.

use std::sync::Arc;

use crate::connector::Connector;
use crate::connector::reference::{Quirks, Reference};
use crate::error::HarnessError;
use crate::protocol::bundle::Bundle;

use super::broken::{Check, Lenient, Strict, Strictness};
use super::rewrite::{Rewrite, Rewriter};
use super::time::TimeSkew;

/// A boxed connector, what every double is.
pub type Made = Box<dyn Connector + Send>;

/// The context of one `Double::make`.
pub struct Build<'a> {
    /// The bundle the double runs.
    pub bundle: &'a Bundle,
}

impl Build<'_> {
    /// A fresh reference connector over the bundle.
    pub fn reference(&self) -> Reference {
        Reference::new(self.bundle)
    }

    /// A double that wraps a fresh reference (`wire::SkipFence`, `faults::AckUnsent::new`).
    pub fn wrap<C: Connector + Send + 'static>(&self, wrap: impl FnOnce(Reference) -> C) -> Made {
        Box::new(wrap(self.reference()))
    }

    /// The reference with one departure of its `Quirks` switched on.
    pub fn quirked(&self, set: fn(&mut Quirks)) -> Made {
        let mut q = Quirks::default();
        set(&mut q);
        Box::new(self.reference().with_quirks(q))
    }

    /// The reference behind one [`Rewrite`].
    pub fn rewrite(&self, rewrite: Rewrite) -> Made {
        Box::new(Rewriter::new(self.reference(), rewrite))
    }

    /// The reference with one argument `check` skipped.
    pub fn lenient(&self, check: Check) -> Made {
        self.wrap(|inner| Lenient { inner, check })
    }

    /// The reference refusing valid input beyond SPEC, `what` way.
    pub fn strict(&self, what: Strictness) -> Made {
        self.wrap(|inner| Strict { inner, what })
    }

    /// The reference with its leases, delays or backoffs off by one [`TimeSkew`].
    pub fn skewed(&self, skew: TimeSkew) -> Made {
        self.rewrite(Rewrite::Skew(skew))
    }
}

/// A factory of reference connectors skewed by `skew` (the time doubles' self-tests).
pub fn skewed_factory(
    bundle: &Arc<Bundle>,
    skew: TimeSkew,
) -> impl Fn() -> Result<Made, HarnessError> + Send + Sync + use<> {
    let bundle = bundle.clone();
    move || Ok(Build { bundle: &bundle }.skewed(skew))
}
