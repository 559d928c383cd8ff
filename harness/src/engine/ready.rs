//! A booted engine's first answer. A server that listens may still drop its first clients on a
//! loaded machine (a connection reset before the first reply, seen in CI beside busy tests):
//! that is no engine failure, so the first admin request is asked again, within a bound.

use std::time::{Duration, Instant};

use crate::error::HarnessError;

/// How long a booted engine may take to answer its first admin request.
const FIRST_ANSWER: Duration = Duration::from_secs(20);

/// `ask()`, again while its connection is refused, reset or cut; any other error, a success or
/// the bound ends it.
pub(crate) fn retry_transient<T>(
    mut ask: impl FnMut() -> Result<T, HarnessError>,
) -> Result<T, HarnessError> {
    let t0 = Instant::now();
    loop {
        match ask() {
            Err(e) if is_transient(&e) && t0.elapsed() < FIRST_ANSWER => {
                std::thread::sleep(Duration::from_millis(50));
            }
            other => return other,
        }
    }
}

/// A connection refused, reset or cut before its reply: what a loaded machine does to a new
/// server's first clients.
fn is_transient(e: &HarnessError) -> bool {
    is_closed(e) || message(e).is_some_and(|m| m.contains("os error 111"))
}

/// A connection the server closed under an admin request: reset, a broken pipe, or an end of
/// file (what a harness-side TLS back gives for every one of them). A poll opens a fresh one.
pub(crate) fn is_closed(e: &HarnessError) -> bool {
    message(e).is_some_and(|m| {
        [
            "os error 104",
            "os error 32",
            "broken pipe",
            "reset by peer",
            "end of file",
        ]
        .iter()
        .any(|s| m.contains(s))
    })
}

/// The text of an error that may say the connection went, lowercased.
fn message(e: &HarnessError) -> Option<String> {
    match e {
        HarnessError::Unreachable(m) | HarnessError::Engine(m) => Some(m.to_lowercase()),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reset_is_asked_again_and_a_refusal_by_the_engine_is_not() {
        let reset = HarnessError::Unreachable("Connection reset by peer (os error 104)".into());
        let refused = HarnessError::Unreachable("Connection refused (os error 111)".into());
        let auth = HarnessError::Engine("WRONGPASS invalid username-password pair".into());
        assert!(is_transient(&reset) && is_transient(&refused));
        assert!(!is_transient(&auth));
        assert!(!is_transient(&HarnessError::BadInput("x".into())));
        let eof = HarnessError::Unreachable("unexpected end of file".into());
        assert!(is_closed(&eof) && is_closed(&reset) && !is_closed(&refused) && !is_closed(&auth));
        assert!(
            is_transient(&eof),
            "a TLS back's end of file is a reset too"
        );
        let mut tries = 0;
        let got = retry_transient(|| {
            tries += 1;
            if tries < 3 {
                Err(HarnessError::Unreachable(
                    "Connection reset by peer (os error 104)".into(),
                ))
            } else {
                Ok(tries)
            }
        });
        assert_eq!(got.unwrap(), 3);
        let mut tries = 0;
        let got: Result<(), _> = retry_transient(|| {
            tries += 1;
            Err(HarnessError::Engine("WRONGPASS".into()))
        });
        assert!(got.is_err() && tries == 1);
    }
}
