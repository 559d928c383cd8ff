//! Error types shared by every layer, and the documented exit codes they map to.

use serde::{Deserialize, Serialize};

/// The five error kinds of the wire protocol (SPEC §5); a connector reports every failure as one.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    Serialize,
    Deserialize,
    schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum ErrorKind {
    /// The fence names another protocol; the connector sent no script.
    Fence,
    /// A bad argument; nothing was sent to the engine.
    Invalid,
    /// The engine replied an error, or the connection failed.
    Engine,
    /// The connector does not implement the request.
    Unsupported,
    /// A bug, a reply the wire cannot carry (over 16 MiB), or a broken child process.
    Internal,
}

impl ErrorKind {
    /// The wire spelling, as used in cases and records.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Fence => "fence",
            Self::Invalid => "invalid",
            Self::Engine => "engine",
            Self::Unsupported => "unsupported",
            Self::Internal => "internal",
        }
    }
}

impl std::fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A failed connector request: a kind the gates judge and a message people read.
#[derive(
    Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema, thiserror::Error,
)]
#[error("{kind}: {message}")]
pub struct ConnectorError {
    pub kind: ErrorKind,
    pub message: String,
}

impl ConnectorError {
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        Self {
            kind,
            message: message.into(),
        }
    }
    pub fn invalid(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Invalid, message)
    }
    pub fn engine(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Engine, message)
    }
    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Internal, message)
    }

    /// The error as a FAIL line shows it: `kind engine`, or for `internal` the kind and its
    /// message. `internal` is a bug or a broken child (a line nobody asked for, a wrong seq), and
    /// then the message is the diagnosis: without it the line blamed the call it broke.
    pub fn evidence(&self) -> String {
        match self.kind {
            ErrorKind::Internal => {
                let mut m: String = self.message.chars().take(300).collect();
                if m.len() < self.message.len() {
                    m.push('…');
                }
                format!("kind internal: {m}")
            }
            kind => format!("kind {kind}"),
        }
    }
}

/// Exit codes of `emq-gate` and the test binaries, documented in the README.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExitCode {
    Pass = 0,
    GateFailed = 1,
    BadInput = 2,
    Infrastructure = 3,
    /// Nothing failed, but a gate (or a cell) could not be judged: its verdict is ERROR.
    NoVerdict = 4,
    /// `--baseline`: gates failed, and the baseline expects every one of those failures. Not 0,
    /// so a CI job can tell "certified" from "known failures only"; not 1, so it can accept
    /// the second without accepting a new failure.
    ExpectedFailures = 5,
}

/// A place in an input file: its path as shown to people, a line and a column (1-based).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Location {
    pub file: std::path::PathBuf,
    pub line: u64,
    pub column: u64,
}

impl std::fmt::Display for Location {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}:{}", self.file.display(), self.line, self.column)
    }
}

/// Errors of the harness itself (not of the connector under test).
#[derive(Debug, thiserror::Error)]
pub enum HarnessError {
    #[error("bad input: {0}")]
    BadInput(String),
    /// Bad input at a place in a file (a record, a matrix, a case): the place is data.
    #[error("bad input: {at}: {message}")]
    Located { at: Location, message: String },
    /// A url the engine client cannot parse.
    #[error("bad input: engine url: {0}")]
    EngineUrl(String),
    /// A connector process that did not start.
    #[error("bad input: cannot start the connector: {0}")]
    ConnectorStart(String),
    #[error("engine: {0}")]
    Engine(String),
    /// No connection to the engine within the connect timeout.
    #[error("engine: cannot reach the engine: {0}")]
    Unreachable(String),
    /// A server the harness started exited before it served: its status and its log's last line.
    #[error("engine: {program} exited ({status}): {last_line}")]
    ServerExited {
        program: &'static str,
        status: String,
        last_line: String,
    },
    #[error("bundle: {0}")]
    Bundle(String),
    #[error("io: {context}: {source}")]
    Io {
        context: String,
        #[source]
        source: std::io::Error,
    },
}

impl HarnessError {
    /// Which documented exit code this error ends the process with.
    pub fn exit_code(&self) -> ExitCode {
        match self {
            Self::BadInput(_)
            | Self::Located { .. }
            | Self::EngineUrl(_)
            | Self::ConnectorStart(_)
            | Self::Bundle(_) => ExitCode::BadInput,
            Self::Engine(_)
            | Self::Unreachable(_)
            | Self::ServerExited { .. }
            | Self::Io { .. } => ExitCode::Infrastructure,
        }
    }

    /// Bad input at `file`:`line`:`column`.
    pub fn located(
        file: impl Into<std::path::PathBuf>,
        line: u64,
        column: u64,
        message: impl std::fmt::Display,
    ) -> Self {
        Self::Located {
            at: Location {
                file: file.into(),
                line,
                column,
            },
            message: message.to_string(),
        }
    }

    /// Where in a file the bad input is, when the error says.
    pub fn location(&self) -> Option<&Location> {
        match self {
            Self::Located { at, .. } => Some(at),
            _ => None,
        }
    }

    pub fn io(context: impl Into<String>, source: std::io::Error) -> Self {
        Self::Io {
            context: context.into(),
            source,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The typed variants read as the text they replaced, and keep their exit codes.
    #[test]
    fn typed_errors_keep_their_messages_and_exit_codes() {
        let located = HarnessError::located("reports/x.json", 3, 7, "not a gate record: eof");
        assert_eq!(
            located.to_string(),
            "bad input: reports/x.json:3:7: not a gate record: eof"
        );
        assert_eq!(located.location().map(|l| l.line), Some(3));
        assert_eq!(located.exit_code(), ExitCode::BadInput);
        for (e, text, code) in [
            (
                HarnessError::EngineUrl("invalid".into()),
                "bad input: engine url: invalid",
                ExitCode::BadInput,
            ),
            (
                HarnessError::ConnectorStart("no such file".into()),
                "bad input: cannot start the connector: no such file",
                ExitCode::BadInput,
            ),
            (
                HarnessError::Unreachable("refused".into()),
                "engine: cannot reach the engine: refused",
                ExitCode::Infrastructure,
            ),
            (
                HarnessError::ServerExited {
                    program: "valkey-server",
                    status: "exit status: 1".into(),
                    last_line: "Bad directive".into(),
                },
                "engine: valkey-server exited (exit status: 1): Bad directive",
                ExitCode::Infrastructure,
            ),
        ] {
            assert_eq!(e.to_string(), text);
            assert_eq!(e.exit_code(), code, "{text}");
            assert!(e.location().is_none());
        }
    }
}
