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
    /// A bug or a broken child process.
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
}

/// Exit codes of `emq-gate` and the test binaries, documented in the README.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExitCode {
    Pass = 0,
    GateFailed = 1,
    BadInput = 2,
    Infrastructure = 3,
}

/// Errors of the harness itself (not of the connector under test).
#[derive(Debug, thiserror::Error)]
pub enum HarnessError {
    #[error("bad input: {0}")]
    BadInput(String),
    #[error("engine: {0}")]
    Engine(String),
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
            Self::BadInput(_) | Self::Bundle(_) => ExitCode::BadInput,
            Self::Engine(_) | Self::Io { .. } => ExitCode::Infrastructure,
        }
    }
    pub fn io(context: impl Into<String>, source: std::io::Error) -> Self {
        Self::Io {
            context: context.into(),
            source,
        }
    }
}
