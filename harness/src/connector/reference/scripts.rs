//! SPEC §4's script calls: `EVALSHA` first, one `SCRIPT LOAD` on the node that said `NOSCRIPT`,
//! then the same call again. Its own concept: the one path by which every transition reaches the
//! engine, with the cluster's and the quirks' departures in one place.

use redis::Value;

use super::link::Link;
use super::{Loaded, Quirks, Reference, engine_err, is_noscript, text};
use crate::error::ConnectorError;

impl Reference {
    /// `SCRIPT LOAD` of `script` on the node that serves `key` (R4.9, R8.2).
    pub(super) fn load(
        link: &mut Link,
        key: &str,
        script: &Loaded,
        quirks: Quirks,
    ) -> Result<(), ConnectorError> {
        let reply = if quirks.load_on_seed {
            link.load_on_seed(&script.source)
        } else {
            link.load_for(key, &script.source)
        };
        let sha = text(&reply.map_err(engine_err)?).unwrap_or_default();
        if sha != script.sha {
            return Err(ConnectorError::internal(format!(
                "engine says sha {sha}, expected {}",
                script.sha
            )));
        }
        Ok(())
    }

    /// EVALSHA-first: one `SCRIPT LOAD` on a `NOSCRIPT` miss, then the same call again.
    pub(super) fn run(
        &mut self,
        session: &str,
        name: &str,
        keys: &[String],
        args: &[&[u8]],
    ) -> Result<Value, ConnectorError> {
        let quirks = self.quirks;
        self.live(session)?;
        self.fence_before_script(session)?;
        let script = &self.scripts[name];
        let link = self
            .sessions
            .get_mut(session)
            .expect("live() kept the session");
        if quirks.silent_node_reconnect && link.is_cluster() {
            // The double's pool check: a dead node connection is replaced, no fence read.
            if link.ping_for(&keys[0]).is_err() {
                let _ = link.reconnect();
            }
        }
        let mut cmd = redis::cmd("EVALSHA");
        cmd.arg(&script.sha).arg(keys.len()).arg(keys);
        for a in args {
            cmd.arg(*a);
        }
        let sent = link.send(&cmd);
        let sent = self.permits.again_after_tryagain(link, &cmd, sent);
        if (quirks.abandon_on_timeout || self.permits.short_timeout)
            && let Err(e) = &sent
            && e.is_timeout()
        {
            self.abandon(session)?;
            return sent.map_err(engine_err);
        }
        match sent {
            Err(e) if is_noscript(&e, quirks) && quirks.preload_only => Err(engine_err(e)),
            Err(e) if is_noscript(&e, quirks) && quirks.eval_on_noscript => {
                let mut eval = redis::cmd("EVAL");
                eval.arg(&script.source[..]).arg(keys.len()).arg(keys);
                for a in args {
                    eval.arg(*a);
                }
                link.send(&eval).map_err(engine_err)
            }
            Err(e) if is_noscript(&e, quirks) => {
                Self::load(link, &keys[0], script, quirks)?;
                link.send(&cmd).map_err(engine_err)
            }
            other => other.map_err(engine_err),
        }
    }
}
