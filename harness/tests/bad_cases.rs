//! Malformed case files: each gives one clear error with `file:line:col`, snapshotted in a sibling
//! `.expected` file (`EMQ_BLESS=1` rewrites the snapshots). The `cases` test binary exits 2 on them,
//! not 101 (a failing case).

use std::path::{Path, PathBuf};
use std::process::Command;

use emq::suites::cases::format::{load_dir, parse};

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
    let bless = std::env::var("EMQ_BLESS").is_ok_and(|v| v == "1");
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

#[test]
fn bad_input_exits_2_and_a_failing_case_exits_101() {
    let me = std::env::current_exe().unwrap();
    let deps = me.parent().unwrap();
    let cases_bin = std::fs::read_dir(deps)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            let n = p.file_name().unwrap().to_string_lossy().to_string();
            n.starts_with("cases-") && p.extension().is_none() && p.is_file()
        })
        .max_by_key(|p| std::fs::metadata(p).and_then(|m| m.modified()).ok());
    let Some(cases_bin) = cases_bin else {
        eprintln!("skipped: the cases test binary is not built (run the whole suite)");
        return;
    };
    // A directory of bad files: exit 2 with one line naming the place.
    let out = Command::new(&cases_bin)
        .env_remove("EMQ_BLESS")
        .env("EMQ_CASES_DIR", dir())
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains(".yaml:"), "{err}");

    // A well-formed case that fails: the libtest failure code, not 2.
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(
        tmp.path().join("wrong.yaml"),
        "id: wrong-on-purpose\ndescription: expects the wrong id\nsteps:\n  - enqueue: {queue: q, payload: x}\n    ok: j0000000000000002\n",
    )
    .unwrap();
    let out = Command::new(&cases_bin)
        .env_remove("EMQ_BLESS")
        .env("EMQ_CASES_DIR", tmp.path())
        .env("EMQ_ENGINE", "binary")
        .env_remove("EMQ_PYTHON_CONNECTOR")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(101), "{stdout}");
    assert!(
        stdout.contains("wrong.yaml:4: case wrong-on-purpose, step 1 (enqueue): reply differs"),
        "{stdout}"
    );
    assert!(
        stdout.contains("-\"j0000000000000002\"") && stdout.contains("+\"j0000000000000001\""),
        "{stdout}"
    );

    // An empty selection is an error too.
    let out = Command::new(&cases_bin)
        .env_remove("EMQ_BLESS")
        .env("EMQ_CASES_DIR", tmp.path())
        .arg("no-such-case")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
}
