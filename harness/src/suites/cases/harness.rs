//! The case corpus as libtest trials: every YAML case is its own trial per connector, on one
//! shared live engine, filterable and listable like any cargo test. It lives in the library (as
//! sqllogictest-rs keeps its file-per-trial harness) so a test target is one call and the exit
//! codes are testable in process.

use std::sync::{Arc, Mutex, OnceLock};

use libtest_mimic::{Arguments, Failed, Trial};

use crate::connector::Connector;
use crate::engine::{Engine, EngineOptions};
use crate::error::{ExitCode, HarnessError};
use crate::protocol::bundle::Bundle;
use crate::suites::cases::bless;
use crate::suites::cases::format::Case;
use crate::suites::cases::runner::{Mode, run_case};

/// Makes a fresh connector of one subject.
pub type Make = Arc<dyn Fn(&Bundle) -> Result<Box<dyn Connector + Send>, String> + Send + Sync>;

/// A connector under test: its trial-name prefix and how to make one.
#[derive(Clone)]
pub struct Subject {
    pub name: String,
    pub make: Make,
}

/// What one run of the corpus needs.
pub struct Setup {
    /// libtest arguments (filter, `--list`, `--test-threads`, ...); `--bless` is taken out first.
    pub argv: Vec<String>,
    /// Rewrite expectations from the first subject instead of checking them (authoring only).
    pub bless: bool,
    pub cases: crate::suites::cases::format::Corpus,
    pub bundle: Result<Bundle, HarnessError>,
    pub engine: Result<EngineOptions, HarnessError>,
    /// In order; with `bless`, only the first is run.
    pub subjects: Vec<Subject>,
}

type Shared = Arc<OnceLock<Result<Engine, String>>>;

/// Idle connectors, reused across trials: a child process starts once per test thread, not once
/// per case. Only connectors whose last case passed come back.
type Pool = Arc<Mutex<Vec<Box<dyn Connector + Send>>>>;

fn engine<'a>(shared: &'a Shared, opts: &EngineOptions) -> Result<&'a Engine, Failed> {
    shared
        .get_or_init(|| Engine::start(opts).map_err(|e| e.to_string()))
        .as_ref()
        .map_err(|e| Failed::from(e.clone()))
}

struct TrialInput {
    case: Case,
    db: u32,
    bundle: Arc<Bundle>,
    shared: Shared,
    opts: EngineOptions,
    mode: Mode,
}

fn trial(subject: &Subject, pool: Pool, t: TrialInput) -> Trial {
    let make = subject.make.clone();
    let name = format!("{}::{}", subject.name, t.case.id);
    Trial::test(name, move || {
        let engine = engine(&t.shared, &t.opts)?;
        let idle = pool.lock().unwrap_or_else(|e| e.into_inner()).pop();
        let mut connector = match idle {
            Some(c) => c,
            None => make(&t.bundle)?,
        };
        let result = run_case(&t.case, engine, t.db, connector.as_mut(), t.mode);
        if result.failure.is_none() {
            pool.lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(connector);
        }
        if t.mode == Mode::Bless {
            let text = std::fs::read_to_string(&t.case.file).map_err(|e| e.to_string())?;
            if let Some(new) = bless::rewrite(&t.case, &text, &result.observed) {
                bless::write(&t.case, &new).map_err(|e| e.to_string())?;
                eprintln!("blessed {}", t.case.file.display());
            }
            return Ok(());
        }
        match result.failure {
            None => Ok(()),
            Some(f) => Err(f.to_string().into()),
        }
    })
}

/// Splits `--bless` out of `argv`; true when it was there.
pub fn take_bless(argv: &mut Vec<String>) -> bool {
    let before = argv.len();
    argv.retain(|a| a != "--bless");
    argv.len() != before
}

/// How a run of the corpus ended: the process exit code (0 all passed, 101 a case failed, as
/// libtest says it, 2 bad input: a malformed case file, an empty selection, no bundle; 3 no
/// engine) and, for 2 and 3, the one line that says why (the caller prints it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ending {
    pub code: u8,
    pub error: Option<String>,
}

impl Ending {
    fn refused(code: ExitCode, why: &dyn std::fmt::Display) -> Self {
        Self {
            code: code as u8,
            error: Some(why.to_string()),
        }
    }
}

/// Runs the corpus of `setup.cases_dir`; libtest prints each trial.
pub fn run(setup: Setup) -> Ending {
    let mut args = Arguments::from_iter(setup.argv);
    let mode = if setup.bless {
        Mode::Bless
    } else {
        Mode::Check
    };
    let bad = |e: &dyn std::fmt::Display| Ending::refused(ExitCode::BadInput, e);
    let cases = match setup.cases.load() {
        Ok(c) => c,
        Err(e) => return bad(&e),
    };
    let bundle = match setup.bundle {
        Ok(b) => Arc::new(b),
        Err(e) => return bad(&e),
    };
    let opts = match setup.engine {
        Ok(o) => o,
        Err(e) => return bad(&e),
    };
    // An engine with one database (a url, a cluster) is flushed by every trial: one at a time.
    if matches!(
        opts.choice,
        crate::engine::EngineChoice::Url | crate::engine::EngineChoice::Cluster
    ) || opts.url.is_some()
    {
        args.test_threads = Some(1);
    }
    let shared: Shared = Arc::new(OnceLock::new());
    let subjects: Vec<Subject> = if mode == Mode::Bless {
        setup.subjects.into_iter().take(1).collect()
    } else {
        setup.subjects
    };
    let mut trials = Vec::new();
    for (si, s) in subjects.iter().enumerate() {
        let pool = Pool::default();
        for (i, case) in cases.iter().enumerate() {
            // Each connector's trials own their databases: trials run in parallel.
            let input = TrialInput {
                case: case.clone(),
                db: 1 + (si * cases.len() + i) as u32,
                bundle: bundle.clone(),
                shared: shared.clone(),
                opts: opts.clone(),
                mode,
            };
            trials.push(trial(s, pool.clone(), input));
        }
    }
    // `--list` (nextest asks with `--ignored` too) may legitimately list nothing.
    if !args.list && !args.ignored && trials.iter().all(|t| args.is_filtered_out(t)) {
        let filter = args.filter.as_deref().unwrap_or("");
        return bad(&format!("no case matches the selection {filter:?}"));
    }
    let conclusion = libtest_mimic::run(&args, trials);
    if let Some(Err(e)) = Arc::try_unwrap(shared).ok().and_then(|l| l.into_inner()) {
        return Ending::refused(ExitCode::Infrastructure, &format!("engine: {e}"));
    }
    Ending {
        // libtest's code for a failed test.
        code: if conclusion.has_failed() { 101 } else { 0 },
        error: None,
    }
}
