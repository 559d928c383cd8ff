//! The doubles' lowering API: the reference connector's escape hatches (no fence, a raw
//! command, another job root), compiled only with the `doubles` feature so the production
//! connector has none. Its own concept: nothing in the connector itself calls it.

use redis::Value;

use super::{Permits, Quirks, Reference, engine_err, int, text};
use crate::connector::{Reply, Request};
use crate::error::ConnectorError;

/// The lowering a double needs to break one rule on the wire (`crate::doubles`), compiled only
/// with the `doubles` feature: the production connector has no fault branch and no raw escape.
impl Reference {
    /// Replaces the job-root builder (a double sends an untagged root).
    pub fn with_root(mut self, root: fn(&str) -> String) -> Self {
        self.root = root;
        self
    }

    /// Answers `request` without validating its arguments first (a double that skips one check).
    pub fn call_unvalidated(&mut self, request: &Request) -> Result<Reply, ConnectorError> {
        self.dispatch(request)
    }

    /// Breaks SPEC the way `quirks` says (a cluster double, or the probe's `INCRBY`).
    pub fn with_quirks(mut self, quirks: Quirks) -> Self {
        self.quirks = quirks;
        self
    }

    /// Takes the permitted paths `permits` names (a permission double: it must PASS).
    pub fn with_permits(mut self, permits: Permits) -> Self {
        self.permits = permits;
        self
    }

    /// Connects `session` to `target` without reading the fence.
    pub fn connect_unfenced(
        &mut self,
        session: &str,
        target: &crate::engine::Target,
    ) -> Result<(), ConnectorError> {
        let dial = self.dial(target)?;
        let link = Self::open(&dial)?;
        self.sessions.insert(session.to_string(), link);
        Ok(())
    }

    /// `SCRIPT LOAD` of script `name` on `session` (on a cluster, on the node of `key`).
    pub fn script_load(
        &mut self,
        session: &str,
        name: &str,
        key: &str,
    ) -> Result<(), ConnectorError> {
        let quirks = self.quirks;
        let script = &self.scripts[name];
        let link = self
            .sessions
            .get_mut(session)
            .ok_or_else(|| ConnectorError::invalid(format!("unknown session {session:?}")))?;
        Self::load(link, key, script, quirks)
    }

    /// Any command on `session`; the reply as text (`None` for nil; an array's items one a line).
    pub fn raw(&mut self, session: &str, args: &[&str]) -> Result<Option<String>, ConnectorError> {
        let link = self.session(session)?;
        let mut cmd = redis::cmd(args[0]);
        for a in &args[1..] {
            cmd.arg(*a);
        }
        let v: Value = link.send(&cmd).map_err(engine_err)?;
        Ok(match v {
            Value::Nil => None,
            Value::Array(items) => Some(
                items
                    .iter()
                    .map(|i| text(i).or_else(|| int(i).map(|n| n.to_string())))
                    .map(Option::unwrap_or_default)
                    .collect::<Vec<_>>()
                    .join("\n"),
            ),
            other => Some(
                text(&other)
                    .or_else(|| int(&other).map(|n| n.to_string()))
                    .unwrap_or_default(),
            ),
        })
    }
}
