//! SPEC §3, the fence: read before a session's first verb, installed whole when absent, and its
//! protocol judged. Its own concept: every connection (first, redialed or reopened after a
//! timeout) passes through it, whatever opened it.

use std::collections::HashMap;

use super::link::Link;
use super::{Reference, engine_err};
use crate::error::{ConnectorError, ErrorKind};
use crate::protocol::grammar::FENCE_KEY;

impl Reference {
    fn read_fence(link: &mut Link) -> Result<HashMap<String, String>, ConnectorError> {
        let v = link
            .send(redis::cmd("HGETALL").arg(FENCE_KEY))
            .map_err(engine_err)?;
        redis::from_redis_value(v).map_err(|e| ConnectorError::internal(e.to_string()))
    }

    /// SPEC §3: read; install with `HSETNX` in one `MULTI`/`EXEC` when absent; judge the protocol.
    pub(super) fn check_fence(&mut self, link: &mut Link) -> Result<(), ConnectorError> {
        let mut fence = Self::read_fence(link)?;
        if fence.is_empty() {
            let mut p = redis::pipe();
            p.atomic();
            for (field, value) in [
                ("protocol", self.protocol.to_string()),
                ("bundle", self.bundle_version.clone()),
                ("digest", self.digest.clone()),
            ] {
                p.add_command(
                    redis::cmd("HSETNX")
                        .arg(FENCE_KEY)
                        .arg(field)
                        .arg(value)
                        .to_owned(),
                );
            }
            link.transaction(FENCE_KEY, &p, 3).map_err(engine_err)?;
            fence = Self::read_fence(link)?;
        }
        let theirs = fence
            .get("protocol")
            .map(String::as_str)
            .unwrap_or("<none>");
        if theirs != self.protocol.to_string() {
            return Err(ConnectorError::new(
                ErrorKind::Fence,
                format!(
                    "fence protocol {theirs} (bundle {}) does not match connector protocol {}",
                    fence.get("bundle").map(String::as_str).unwrap_or("<none>"),
                    self.protocol
                ),
            ));
        }
        if fence.get("digest") != Some(&self.digest) {
            self.log.push(format!(
                "warning: fence digest {:?} differs from ours {}",
                fence.get("digest"),
                self.digest
            ));
        }
        Ok(())
    }
}
