//! `cargo test --test cases`: every YAML case of `cases/` as its own trial, per connector, on one
//! shared live engine. `--bless` (or `EMQ_BLESS=1`) rewrites expectations from the reference
//! connector instead of checking them — for authoring only, never in CI.

use std::process::ExitCode;
use std::sync::{Arc, Mutex, OnceLock};

use emq::connector::Connector;
use emq::connector::child::{ChildConnector, ChildSpec};
use emq::connector::reference::Reference;
use emq::engine::{Engine, EngineOptions};
use emq::error::ExitCode as Code;
use emq::protocol::bundle::Bundle;
use emq::suites::cases::bless;
use emq::suites::cases::format::{Case, default_dir, load_dir};
use emq::suites::cases::runner::{Mode, run_case};
use libtest_mimic::{Arguments, Failed, Trial};

type Shared = Arc<OnceLock<Result<Engine, String>>>;

/// A connector under test: its trial-name prefix and how to make one.
struct Subject {
    name: &'static str,
    make: fn(&Bundle) -> Result<Box<dyn Connector + Send>, String>,
    pool: Pool,
}

/// The Python connector, when `ci/provision` installed it (`EMQ_PYTHON_CONNECTOR`).
fn python_connector() -> Option<String> {
    std::env::var("EMQ_PYTHON_CONNECTOR")
        .ok()
        .filter(|p| std::path::Path::new(p).is_file())
}

fn subjects() -> Vec<Subject> {
    let mut out = vec![Subject {
        name: "reference",
        make: |b| Ok(Box::new(Reference::new(b))),
        pool: Pool::default(),
    }];
    if python_connector().is_some() {
        out.push(Subject {
            name: "python",
            make: |_| {
                let cmd = python_connector().ok_or("EMQ_PYTHON_CONNECTOR vanished")?;
                ChildConnector::spawn(&ChildSpec::new([cmd]))
                    .map(|c| Box::new(c) as Box<dyn Connector + Send>)
                    .map_err(|e| e.to_string())
            },
            pool: Pool::default(),
        });
    }
    out
}

fn engine(shared: &Shared) -> Result<&Engine, Failed> {
    shared
        .get_or_init(|| {
            EngineOptions::from_env()
                .and_then(|o| Engine::start(&o))
                .map_err(|e| e.to_string())
        })
        .as_ref()
        .map_err(|e| Failed::from(e.clone()))
}

/// Idle connectors, reused across trials: a child process starts once per test thread, not once
/// per case. Only connectors whose last case passed come back.
type Pool = Arc<Mutex<Vec<Box<dyn Connector + Send>>>>;

fn trial(
    subject: &Subject,
    case: Case,
    db: u32,
    bundle: Arc<Bundle>,
    shared: Shared,
    mode: Mode,
) -> Trial {
    let make = subject.make;
    let pool = subject.pool.clone();
    let name = format!("{}::{}", subject.name, case.id);
    Trial::test(name, move || {
        let engine = engine(&shared)?;
        let idle = pool.lock().unwrap_or_else(|e| e.into_inner()).pop();
        let mut connector = match idle {
            Some(c) => c,
            None => make(&bundle)?,
        };
        let result = run_case(&case, engine, db, connector.as_mut(), mode);
        if result.failure.is_none() {
            pool.lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(connector);
        }
        if mode == Mode::Bless {
            let text = std::fs::read_to_string(&case.file).map_err(|e| e.to_string())?;
            if let Some(new) = bless::rewrite(&case, &text, &result.observed) {
                bless::write(&case, &new).map_err(|e| e.to_string())?;
                eprintln!("blessed {}", case.file.display());
            }
            return Ok(());
        }
        match result.failure {
            None => Ok(()),
            Some(f) => Err(f.to_string().into()),
        }
    })
}

fn main() -> ExitCode {
    let mut bless_flag = std::env::var("EMQ_BLESS").is_ok_and(|v| v == "1");
    let argv: Vec<String> = std::env::args()
        .filter(|a| {
            let b = a == "--bless";
            bless_flag |= b;
            !b
        })
        .collect();
    let args = Arguments::from_iter(argv);
    let mode = if bless_flag { Mode::Bless } else { Mode::Check };
    let cases = match load_dir(&default_dir()) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(Code::BadInput as u8);
        }
    };
    let bundle = match Bundle::load_default() {
        Ok(b) => Arc::new(b),
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(Code::BadInput as u8);
        }
    };
    let shared: Shared = Arc::new(OnceLock::new());
    let subjects = if mode == Mode::Bless {
        subjects().into_iter().take(1).collect()
    } else {
        subjects()
    };
    let mut trials = Vec::new();
    for (si, s) in subjects.iter().enumerate() {
        for (i, case) in cases.iter().enumerate() {
            // Each connector's trials own their databases: trials run in parallel.
            let db = 1 + (si * cases.len() + i) as u32;
            trials.push(trial(
                s,
                case.clone(),
                db,
                bundle.clone(),
                shared.clone(),
                mode,
            ));
        }
    }
    // `--list` (nextest asks with `--ignored` too) may legitimately list nothing.
    if !args.list && !args.ignored && trials.iter().all(|t| args.is_filtered_out(t)) {
        eprintln!(
            "error: no case matches the selection {:?}",
            args.filter.as_deref().unwrap_or("")
        );
        return ExitCode::from(Code::BadInput as u8);
    }
    let conclusion = libtest_mimic::run(&args, trials);
    let code = conclusion.exit_code();
    if let Some(Err(e)) = Arc::try_unwrap(shared).ok().and_then(|l| l.into_inner()) {
        eprintln!("error: engine: {e}");
        return ExitCode::from(Code::Infrastructure as u8);
    }
    code
}
