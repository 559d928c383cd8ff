//! A subscription of the harness's own, on a connection that does nothing else: what a client of
//! the url's user hears on one channel (a Sentinel's `+switch-master`), or the refusal it meets.
//! Part of the instrument, so the raw client is allowed here by the parent module's `#[expect]`.

use std::time::Duration;

use redis::Value;

use super::{command, err, open};
use crate::error::HarnessError;

/// A connection subscribed to one channel (or pattern).
pub struct Subscription {
    con: redis::Connection,
    what: String,
}

impl Subscription {
    /// `SUBSCRIBE channel` at `url`, as the url's user: an error when it is refused (`NOPERM`
    /// for a channel the user may not hear).
    pub fn channel(url: &str, channel: &str) -> Result<Self, HarnessError> {
        Self::start(url, "SUBSCRIBE", channel)
    }

    /// `PSUBSCRIBE pattern` at `url`, as [`Subscription::channel`].
    pub fn pattern(url: &str, pattern: &str) -> Result<Self, HarnessError> {
        Self::start(url, "PSUBSCRIBE", pattern)
    }

    fn start(url: &str, verb: &str, name: &str) -> Result<Self, HarnessError> {
        let mut con = open(url)?;
        let what = format!("{verb} {name}");
        con.send_packed_command(&command(&[verb, name]).get_packed_command())
            .map_err(err)?;
        match con.recv_response().map_err(err)? {
            Value::Array(a) | Value::Push { data: a, .. } if a.len() == 3 => Ok(Self { con, what }),
            Value::ServerError(e) => Err(HarnessError::Engine(format!("{what}: {e:?}"))),
            other => Err(HarnessError::Engine(format!("{what} answered {other:?}"))),
        }
    }

    /// The payload of the next message, waiting up to `within`. A wait that runs out is an
    /// error, and the subscription is done with then (the client drops a late reply).
    pub fn next_payload(&mut self, within: Duration) -> Result<String, HarnessError> {
        self.con.set_read_timeout(Some(within)).map_err(err)?;
        let message = self.con.recv_response().map_err(|e| {
            HarnessError::Engine(format!("{}: no message within {within:?}: {e}", self.what))
        })?;
        let parts = match message {
            Value::Array(a) | Value::Push { data: a, .. } => a,
            other => {
                return Err(HarnessError::Engine(format!(
                    "{}: not a message: {other:?}",
                    self.what
                )));
            }
        };
        match parts.last() {
            Some(Value::BulkString(b)) => Ok(String::from_utf8_lossy(b).into_owned()),
            _ => Err(HarnessError::Engine(format!(
                "{}: a message without a payload: {parts:?}",
                self.what
            ))),
        }
    }
}
