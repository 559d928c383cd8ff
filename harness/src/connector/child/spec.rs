//! What a child connector is: its command line, environment, timeouts and wire log
//! ([`ChildSpec`]), and the defaults they start from. Its own concept: a spec is built and
//! passed around (factories, the CLI, the matrix) long before any process runs.

use std::path::PathBuf;
use std::time::Duration;

use crate::connector::Request;

/// The per-request timeout unless a spec says otherwise.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);
/// What each command of a `batch` or `pipeline_probe` adds to the timeout: 250 µs, so a runtime
/// that pipelines at least 4 000 commands/s is never cut short (the Python connector does about
/// 20 000/s), and a batch of 100 000 gets the base timeout plus 25 s.
pub const PER_COMMAND: Duration = Duration::from_micros(250);
/// How many restarts one connector allows unless told otherwise.
pub const DEFAULT_MAX_RESTARTS: u32 = 3;
/// How many stderr lines [`Connector::log_tail`] keeps.
pub const LOG_LINES: usize = 200;

/// How to start a connector: argv (no shell), per-request timeout, extra environment, directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChildSpec {
    /// Program and arguments; `argv[0]` is looked up on `PATH` as usual.
    pub argv: Vec<String>,
    /// Per request; `batch` and `pipeline_probe` get [`PER_COMMAND`] more per command.
    pub timeout: Duration,
    /// Added to (or overriding) the harness's own environment.
    pub env: Vec<(String, String)>,
    /// Working directory; the harness's own when `None`.
    pub cwd: Option<PathBuf>,
    /// Append every request and reply here as JSON lines (`--wire-log`).
    pub wire_log: Option<PathBuf>,
}

impl Default for ChildSpec {
    fn default() -> Self {
        Self {
            argv: Vec::new(),
            timeout: DEFAULT_TIMEOUT,
            env: Vec::new(),
            cwd: None,
            wire_log: None,
        }
    }
}

impl ChildSpec {
    /// A spec with the default timeout, no extra environment, the current directory.
    pub fn new<I, S>(argv: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        Self {
            argv: argv.into_iter().map(Into::into).collect(),
            ..Self::default()
        }
    }

    /// The same spec with another per-request timeout.
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// The same spec with one more environment variable.
    pub fn with_env(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.env.push((key.into(), value.into()));
        self
    }

    /// The same spec, logging every exchanged line to `path` (see `wirelog`).
    pub fn with_wire_log(mut self, path: impl Into<PathBuf>) -> Self {
        self.wire_log = Some(path.into());
        self
    }

    /// The timeout of one request: the base [`ChildSpec::timeout`], plus [`PER_COMMAND`] per
    /// command for `batch` (`n` enqueues) and `pipeline_probe` (`n` INCR). Only commands the
    /// connector must send count: a request whose arguments it must reject (SPEC §4, e.g. a probe
    /// of more than 1 000 000) gets the base timeout.
    pub fn timeout_for(&self, request: &Request) -> Duration {
        let commands = match request {
            Request::Batch { n, .. } | Request::PipelineProbe { n, .. } => *n,
            _ => 0,
        };
        if commands <= 0 || crate::connector::args::validate(request).is_err() {
            return self.timeout;
        }
        let commands = u32::try_from(commands).unwrap_or(u32::MAX);
        self.timeout
            .saturating_add(PER_COMMAND.saturating_mul(commands))
    }

    pub(super) fn program(&self) -> &str {
        self.argv.first().map_or("", String::as_str)
    }
}
