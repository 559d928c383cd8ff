//! The argument rules every connector enforces before sending a byte (kind `invalid`).
//! Written once here for in-process connectors; `bundle/SPEC.md` states them for other runtimes.

use crate::connector::Request;
use crate::error::ConnectorError;
use crate::protocol::grammar::{validate_id, validate_queue};

/// Largest lease, delay or backoff: keeps `now + ms` an exact integer in Lua's `%.14g`.
pub const MAX_MS: i64 = 1_000_000_000_000;

fn range(name: &str, v: i64, lo: i64, hi: i64) -> Result<(), ConnectorError> {
    if (lo..=hi).contains(&v) {
        Ok(())
    } else {
        Err(ConnectorError::invalid(format!(
            "{name} must be in {lo}..={hi}, got {v}"
        )))
    }
}

/// Checks one request's arguments (not its session: that is the connector's state).
pub fn validate(req: &Request) -> Result<(), ConnectorError> {
    use Request::*;
    match req {
        Hello { .. } | Disconnect { .. } => Ok(()),
        Connect { url, .. } => {
            if url.starts_with("redis://") {
                Ok(())
            } else {
                Err(ConnectorError::invalid(format!(
                    "url {url:?} must start with redis://"
                )))
            }
        }
        Enqueue {
            queue, delay_ms, ..
        } => {
            validate_queue(queue)?;
            range("delay_ms", *delay_ms, 0, MAX_MS)
        }
        Browse {
            queue,
            offset,
            limit,
            ..
        } => {
            validate_queue(queue)?;
            range("offset", *offset, 0, i64::from(i32::MAX))?;
            range("limit", *limit, 0, i64::from(i32::MAX))
        }
        PendingSize { queue, .. } => validate_queue(queue),
        Claim {
            queue, lease_ms, ..
        } => {
            validate_queue(queue)?;
            range("lease_ms", *lease_ms, 0, MAX_MS)
        }
        Complete {
            queue,
            id,
            attempts,
            ..
        } => {
            validate_queue(queue)?;
            validate_id(id)?;
            range("attempts", *attempts, 0, i64::from(i32::MAX))
        }
        Retry {
            queue,
            id,
            attempts,
            backoff_ms,
            max_attempts,
            ..
        } => {
            validate_queue(queue)?;
            validate_id(id)?;
            range("attempts", *attempts, 0, i64::from(i32::MAX))?;
            range("backoff_ms", *backoff_ms, 0, MAX_MS)?;
            range("max_attempts", *max_attempts, 1, i64::from(i32::MAX))
        }
        Promote { queue, limit, .. } => {
            validate_queue(queue)?;
            range("limit", *limit, 0, i64::from(i32::MAX))
        }
        Reap {
            queue,
            max_attempts,
            limit,
            ..
        } => {
            validate_queue(queue)?;
            range("max_attempts", *max_attempts, 1, i64::from(i32::MAX))?;
            range("limit", *limit, 0, i64::from(i32::MAX))
        }
        PipelineProbe { key, n, .. } => {
            if key.is_empty() || key.starts_with("emq:") {
                return Err(ConnectorError::invalid(format!(
                    "probe key {key:?} must be non-empty and outside emq:"
                )));
            }
            range("n", *n, 1, 1_000_000)
        }
        Batch {
            queue, n, depth, ..
        } => {
            validate_queue(queue)?;
            range("n", *n, 1, 10_000_000)?;
            range("depth", *depth, 1, 100_000)
        }
    }
}
