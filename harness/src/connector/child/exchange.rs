//! One request's round trip with a live child: written as a JSON line, its reply awaited within
//! the timeout, and judged (the right `seq`, exactly one of `ok` and `error`, a known shape).
//! Its own concept: everything a child can get wrong about a single reply is caught here.

use std::sync::mpsc::{self, RecvTimeoutError};
use std::time::{Duration, Instant};

use serde_json::Value;

use super::lines::{self, Line};
use super::wire::{decode_error, encode};
use super::words::{quote, secs};
use super::{ChildConnector, factory, first_hang, hung_reason};
use crate::connector::starts::StartReason;
use crate::connector::{Reply, Request};
use crate::error::ConnectorError;

impl ChildConnector {
    pub(super) fn exchange(&mut self, request: &Request) -> Result<Reply, ConnectorError> {
        self.refuse_if_dead(request)?;
        factory::settle(self)?;
        self.seq += 1;
        let seq = self.seq;
        let what = format!("{} (seq {seq})", request.cmd());
        let line = encode(request, seq, &what)?;
        let text = self.round_trip(request, &what, line)?;
        self.answered = Some(what.clone());
        let reply = self.parse_reply(request, seq, &text)?;
        self.decode_reply(request, &what, reply, &text)
    }

    /// A dead child, or one whose sibling hung, is not sent anything.
    fn refuse_if_dead(&mut self, request: &Request) -> Result<(), ConnectorError> {
        if self.dead.is_none()
            && let Some(first) = first_hang(&self.common)
        {
            // A sibling timed out: this one is not waited on either.
            self.death = Some(StartReason::Timeout);
            self.die(hung_reason(&first));
        }
        if let Some(why) = &self.dead {
            return Err(ConnectorError::internal(format!(
                "connector is dead ({why}); not sending {}",
                request.cmd()
            )));
        }
        Ok(())
    }

    /// Sends one line and waits, within the request's timeout, for one line back.
    fn round_trip(
        &mut self,
        request: &Request,
        what: &str,
        line: Vec<u8>,
    ) -> Result<String, ConnectorError> {
        let Some(p) = self.proc.as_mut() else {
            return Err(self.die(format!("connector is not running; not sending {what}")));
        };
        // A line nobody asked for (a second answer, a stray print) breaks the protocol. The
        // message names the line and where it came: the FAIL line of the call it broke shows it.
        match p.stdout.try_recv() {
            Ok(extra) => {
                let after = match &self.answered {
                    Some(a) => format!("after its answer to {a}, "),
                    None => String::new(),
                };
                return Err(self.die(format!(
                    "connector printed a line nobody asked for ({after}before {what}): {}",
                    quote(&extra.shown())
                )));
            }
            Err(mpsc::TryRecvError::Disconnected) => {
                return Err(self.exited(&format!("before {what}"), false));
            }
            Err(mpsc::TryRecvError::Empty) => {}
        }
        if let Some(w) = self.wire_log.as_mut() {
            w.line(Some(p.pid), "send", &line);
        }
        let sent = p.stdin.as_ref().is_some_and(|tx| tx.send(line).is_ok());
        if !sent {
            return Err(self.exited(&format!("before {what}"), true));
        }
        let timeout = self.spec.timeout_for(request);
        let (answer, held) = wait_for_answer(&p.stdout, timeout, &self.common);
        match answer {
            Ok(Line::TooLong(len)) => Err(self.die(format!(
                "connector answered {what} with a line of {len} bytes, over the limit of {} bytes (SPEC §5)",
                lines::MAX_LINE
            ))),
            Ok(Line::Text(text)) => {
                if let Some(w) = self.wire_log.as_mut() {
                    w.line(Some(p.pid), "recv", text.as_bytes());
                }
                Ok(text)
            }
            Err(RecvTimeoutError::Timeout) => {
                let mut message = format!("no answer to {what} within {}", secs(timeout));
                if !held.is_zero() {
                    message += &format!(
                        " (and the {} the harness held a node stopped meanwhile)",
                        secs(held)
                    );
                }
                super::common(&self.common)
                    .hung
                    .get_or_insert_with(|| message.clone());
                self.death = Some(StartReason::Timeout);
                Err(self.die(message))
            }
            Err(RecvTimeoutError::Disconnected) => {
                Err(self.exited(&format!("during {what}"), false))
            }
        }
    }

    /// The answer line must be a JSON object carrying the request's seq.
    fn parse_reply(
        &mut self,
        request: &Request,
        seq: u64,
        text: &str,
    ) -> Result<serde_json::Map<String, Value>, ConnectorError> {
        let reply: Value = match serde_json::from_str(text) {
            Ok(v @ Value::Object(_)) => v,
            _ => {
                return Err(self.die(format!(
                    "connector printed a non-JSON line: {}",
                    quote(text)
                )));
            }
        };
        match reply.get("seq") {
            Some(Value::Number(n)) if n.as_u64() == Some(seq) => {}
            Some(other) => {
                return Err(self.die(format!(
                    "connector answered seq {other} to request seq {seq} ({})",
                    request.cmd()
                )));
            }
            None => {
                return Err(self.die(format!(
                    "connector answered without a seq to request seq {seq} ({}): {}",
                    request.cmd(),
                    quote(text)
                )));
            }
        }
        let Value::Object(reply) = reply else {
            unreachable!("matched an object above")
        };
        Ok(reply)
    }

    /// Exactly one of "ok" (decoded as the verb's reply) and "error".
    fn decode_reply(
        &mut self,
        request: &Request,
        what: &str,
        mut reply: serde_json::Map<String, Value>,
        text: &str,
    ) -> Result<Reply, ConnectorError> {
        match (reply.remove("ok"), reply.remove("error")) {
            (Some(ok), None) => {
                let shown = quote(&ok.to_string());
                // Decoded once, into the verb's reply: the error names the field and the rule.
                request.decode_ok(ok).map_err(|e| {
                    ConnectorError::internal(format!(
                        "connector answered {what} with a value of the wrong shape: {shown} ({} reply: {e})",
                        request.cmd()
                    ))
                })
            }
            (None, Some(err)) => Err(decode_error(what, err)),
            _ => Err(self.die(format!(
                "connector answered {what} with neither exactly one of \"ok\" and \"error\": {}",
                quote(text)
            ))),
        }
    }
}

/// One answer line, waited for `timeout` plus the part of the harness's holds that falls inside
/// the wait (R5.8); with the held time counted.
fn wait_for_answer(
    stdout: &mpsc::Receiver<Line>,
    timeout: Duration,
    shared: &super::SharedCommon,
) -> (Result<Line, RecvTimeoutError>, Duration) {
    let sent = Instant::now();
    loop {
        let now = Instant::now();
        let held = super::common(shared).holds.within(sent, now);
        let Some(left) = (timeout + held)
            .checked_sub(now - sent)
            .filter(|l| !l.is_zero())
        else {
            return (Err(RecvTimeoutError::Timeout), held);
        };
        match stdout.recv_timeout(left) {
            Err(RecvTimeoutError::Timeout) => continue,
            other => return (other, held),
        }
    }
}
