//! Malformed case files: each gives one clear error with `file:line:col`, snapshotted in a sibling
//! `.expected` file (`EMQ_BLESS=1` rewrites the snapshots). The case harness ends 2 on them, not
//! 101 (a failing case), tested in process.

mod common;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use emq::connector::Connector;
use emq::connector::reference::Reference;
use emq::engine::{EngineChoice, EngineOptions};
use emq::protocol::bundle::Bundle;
use emq::suites::cases::format::{load_dir, parse};
use emq::suites::cases::harness::{Ending, Setup, Subject, run};
use emq::suites::cases::runner::{Mode, run_case};

fn dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/bad_cases")
}

/// The error for one bad input, with the path shown relative to `tests/` so snapshots are stable.
fn error_of(path: &Path) -> String {
    let shown = path
        .strip_prefix(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests"))
        .unwrap();
    let result = if path.is_dir() {
        load_dir(path).map(|_| ()).map_err(|e| e.to_string())
    } else {
        let text = std::fs::read_to_string(path).unwrap();
        parse(shown, &text).map(|_| ()).map_err(|e| e.to_string())
    };
    let msg = result.expect_err("a bad case file must be refused");
    msg.replace(&path.display().to_string(), &shown.display().to_string())
}

fn inputs() -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_dir() || p.extension().is_some_and(|x| x == "yaml"))
        .collect();
    v.sort();
    v
}

#[test]
fn every_bad_file_gives_its_snapshotted_one_line_error() {
    let bless = emq::settings::bless();
    let inputs = inputs();
    assert!(
        inputs.len() >= 8,
        "the bad-case corpus shrank to {}",
        inputs.len()
    );
    let mut mismatches = Vec::new();
    for p in inputs {
        let got = error_of(&p);
        assert_eq!(
            got.lines().count(),
            1,
            "{}: not one line: {got}",
            p.display()
        );
        assert!(
            got.contains(".yaml:")
                && got
                    .split(':')
                    .filter(|s| s.trim().parse::<u32>().is_ok())
                    .count()
                    >= 2,
            "{}: no file:line:col in {got}",
            p.display()
        );
        let snap = p.with_extension("expected");
        if bless {
            std::fs::write(&snap, format!("{got}\n")).unwrap();
            continue;
        }
        let want = std::fs::read_to_string(&snap).unwrap_or_default();
        if want.trim_end() != got {
            mismatches.push(format!("{}\n  -{}\n  +{got}", p.display(), want.trim_end()));
        }
    }
    assert!(
        mismatches.is_empty(),
        "(-expected|+actual); EMQ_BLESS=1 to accept:\n{}",
        mismatches.join("\n")
    );
}

/// `log` takes libtest's own report, so this test's output has one `test result` line: its own.
fn setup(dir: &Path, filter: Option<&str>, log: &Path) -> Setup {
    let mut argv = vec![
        "cases".to_string(),
        "--test-threads=1".to_string(),
        format!("--logfile={}", log.display()),
    ];
    argv.extend(filter.map(str::to_string));
    Setup {
        argv,
        bless: false,
        cases: emq::suites::cases::format::Corpus::at(dir),
        bundle: Bundle::load_default(),
        engine: Ok(EngineOptions {
            choice: EngineChoice::Binary,
            // EMQ_VALKEY_SERVER, read where the command line reads it.
            valkey_server: emq::cmd::cli::engine_options_from_env()
                .ok()
                .and_then(|o| o.valkey_server),
            ..EngineOptions::default()
        }),
        subjects: vec![Subject {
            name: "reference".into(),
            make: Arc::new(|b| Ok(Box::new(Reference::new(b)) as Box<dyn Connector + Send>)),
        }],
    }
}

/// The case harness in process (the code `tests/cases.rs` exits with): 2 and one line naming the
/// place for bad files, 101 for a well-formed case that fails, 2 for an empty selection.
#[test]
fn bad_input_exits_2_and_a_failing_case_exits_101() {
    let tmp = tempfile::tempdir().unwrap();
    let log = tmp.path().join("libtest.log");
    let ending = run(setup(&dir(), None, &log));
    assert_eq!(ending.code, 2, "{ending:?}");
    let err = ending.error.unwrap();
    assert!(err.contains(".yaml:") && err.lines().count() == 1, "{err}");

    let wrong = "id: wrong-on-purpose\ndescription: expects the wrong id\nsteps:\n  - enqueue: {queue: q, payload: x}\n    ok: j0000000000000002\n";
    let cases = tmp.path().join("cases");
    std::fs::create_dir(&cases).unwrap();
    std::fs::write(cases.join("wrong.yaml"), wrong).unwrap();
    let ending = run(setup(&cases, None, &log));
    assert_eq!(
        ending,
        Ending {
            code: 101,
            error: None
        }
    );
    let report = std::fs::read_to_string(&log).unwrap();
    assert!(report.contains("1 failed"), "{report}");

    // The failure names file:line and shows the diff.
    let case = parse(&cases.join("wrong.yaml"), wrong).unwrap();
    let engine = common::binary_engine();
    let bundle = Bundle::load_default().unwrap();
    let mut c = Reference::new(&bundle);
    let failure = run_case(&case, &engine, 1, &mut c, Mode::Check)
        .failure
        .expect("the case must fail")
        .to_string();
    assert!(
        failure.contains("wrong.yaml:4: case wrong-on-purpose, step 1 (enqueue): reply differs"),
        "{failure}"
    );
    assert!(
        failure.contains("-\"j0000000000000002\"") && failure.contains("+\"j0000000000000001\""),
        "{failure}"
    );

    // An empty selection is an error too.
    let ending = run(setup(&cases, Some("no-such-case"), &log));
    assert_eq!(ending.code, 2, "{ending:?}");
    assert!(ending.error.unwrap().contains("no case matches"));
}
