//! What a run leaves behind for the gates it did not pass, so an author can judge one failure
//! again on their own machine without reading the harness: the one command line that runs that
//! gate as the run did (its connector command, engine, seed, histories, batch; for G7 the kept
//! history, for G6 the failing cases), and the failing cases' YAML, written where the record is
//! (a connector's author has no `cases/` directory to find them in).
//!
//! Neither is compared by `check`: both name paths of the machine that ran.

use std::path::{Path, PathBuf};

use crate::cmd::cli::Common;
use crate::error::HarnessError;
use crate::gates::{GateId, Verdict};
use crate::report::{Header, Record};
use crate::suites::cases::format::Corpus;

/// How the run was asked for, in the words a command line needs (what the record's header
/// does not keep).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Invocation {
    /// The connector's command and arguments after `--`, as given (empty: the reference).
    pub connector: Vec<String>,
    /// A deliberately broken connector by name (`--double`, test builds only).
    pub double: Option<String>,
    /// `--engine-name`, when given: portable where the engine's path is not.
    pub engine_name: Option<String>,
    /// A child's per-request timeout, seconds, when not the default.
    pub timeout: Option<u64>,
}

impl Invocation {
    /// The invocation of `run`, `record` or `check` with these flags.
    pub fn of(common: &Common) -> Self {
        Self {
            connector: common.connector.clone(),
            double: common.double_name(),
            engine_name: common.engine.engine_name.as_ref().map(|n| n.name.clone()),
            timeout: (common.run.timeout != crate::cmd::cli::TIMEOUT_SECS)
                .then_some(common.run.timeout),
        }
    }
}

/// A word as a POSIX shell reads it back: bare when it is plain, else in single quotes.
fn quote(word: &str) -> String {
    let plain = !word.is_empty()
        && word
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"_./=:,@%+-".contains(&b));
    if plain {
        word.to_string()
    } else {
        format!("'{}'", word.replace('\'', r"'\''"))
    }
}

/// The engine flags that boot what `h` was judged on: by name when the run named it, else the
/// kind and the binary or image it used. A url engine's url is left to `EMQ_ENGINE_URL`: a
/// record keeps no password.
fn engine_flags(h: &Header, inv: &Invocation) -> Vec<String> {
    let kind = h.engine_kind.as_str();
    let mut out = vec!["--engine".to_string(), kind.to_string()];
    match (&inv.engine_name, kind) {
        (_, "url") => {}
        (Some(name), _) => out.extend(["--engine-name".into(), name.clone()]),
        (None, "container") => out.extend(["--image".into(), h.engine_image.clone()]),
        (None, _) => out.extend(["--valkey-server".into(), h.engine_image.clone()]),
    }
    out
}

/// The one command line that judges `gate` again as the record's run did. `cases`: a corpus of
/// the failing cases only (G6); `history`: G7's kept history, replayed first.
pub fn line(
    h: &Header,
    gate: GateId,
    inv: &Invocation,
    cases: Option<&Path>,
    history: Option<&str>,
) -> String {
    let mut words: Vec<String> = Vec::new();
    if let Some(file) = history {
        words.push(format!("{}={}", crate::settings::G7_REPLAY, quote(file)));
    }
    words.push("emq-gate".into());
    if let Some(dir) = cases {
        words.extend(["--cases".into(), quote(&dir.display().to_string())]);
    }
    words.push("run".into());
    words.extend(engine_flags(h, inv).iter().map(|w| quote(w)));
    for (flag, value) in [
        ("--seed", h.seed.to_string()),
        ("--histories", h.histories.to_string()),
        ("--batch", h.batch.to_string()),
        ("--gates", gate.to_string()),
    ] {
        words.extend([flag.to_string(), value]);
    }
    if let Some(t) = inv.timeout {
        words.extend(["--timeout".into(), t.to_string()]);
    }
    if let Some(d) = &inv.double {
        words.extend(["--double".into(), quote(d)]);
    }
    if !inv.connector.is_empty() {
        words.push("--".into());
        words.extend(inv.connector.iter().map(|w| quote(w)));
    }
    words.join(" ")
}

/// Where `run` without `--out` writes a record's failing cases: a directory under the system's
/// temp dir that outlives the run (its own temp dir does not), one per record name, like G7's
/// kept histories.
pub fn temp_cases_dir(stem: &str) -> PathBuf {
    std::env::temp_dir()
        .join("emq-gate-failed-cases")
        .join(stem)
}

/// The directory beside a record `<dir>/<stem>.json` that holds its failing cases.
pub fn cases_dir_beside(dir: &Path, stem: &str) -> PathBuf {
    dir.join(format!("{stem}.failed-cases"))
}

/// Copies the file of each case G6 did not pass into `to` (emptied first, so it holds this
/// run's failures only, and `--cases <to>` replays exactly them). `None` when none failed, and
/// then a `to` left by an earlier run is removed: it describes the record beside it, which this
/// run replaces. Else the files written.
pub fn write_failed_cases(
    r: &Record,
    corpus: &Corpus,
    to: &Path,
) -> Result<Option<Vec<String>>, HarnessError> {
    let failing: Vec<&str> = r
        .gates
        .iter()
        .filter(|g| g.id == GateId::G6)
        .flat_map(|g| &g.cases)
        .filter(|c| c.verdict != Verdict::Pass)
        .map(|c| c.id.as_str())
        .collect();
    let io = |e: std::io::Error| HarnessError::io(to.display().to_string(), e);
    if to.is_dir() {
        std::fs::remove_dir_all(to).map_err(io)?;
    }
    if failing.is_empty() {
        return Ok(None);
    }
    std::fs::create_dir_all(to).map_err(io)?;
    let mut written = Vec::new();
    for case in corpus.load()? {
        if !failing.contains(&case.id.as_str()) {
            continue;
        }
        let name = case.file.file_name().map_or_else(
            || format!("{}.yaml", case.id),
            |n| n.to_string_lossy().into(),
        );
        std::fs::copy(&case.file, to.join(&name)).map_err(io)?;
        written.push(name);
    }
    Ok(Some(written))
}

/// Gives each gate of `r` that `judged` names and that did not pass its reproduce line, and G6
/// where its failing cases went: `written`, the files [`write_failed_cases`] wrote into
/// `cases_to`.
pub fn annotate(
    r: &mut Record,
    inv: &Invocation,
    judged: &[GateId],
    written: Option<&[String]>,
    cases_to: &Path,
) {
    let history = r
        .volatile
        .figures
        .get(GateId::G7.as_str())
        .and_then(|f| f.get(crate::gates::g7_interleavings::HISTORY_FILE))
        .and_then(|v| v.as_str())
        .map(str::to_string);
    let header = r.header.clone();
    for g in r
        .gates
        .iter_mut()
        .filter(|g| !matches!(g.verdict, Verdict::Pass | Verdict::NotRun) && judged.contains(&g.id))
    {
        let (cases, hist) = match g.id {
            GateId::G6 => (written.map(|_| cases_to), None),
            GateId::G7 => (None, history.as_deref()),
            _ => (None, None),
        };
        g.reproduce = Some(line(&header, g.id, inv, cases, hist));
        if g.id == GateId::G6
            && let Some(files) = written
        {
            g.failed_cases = Some(format!("{} ({})", cases_to.display(), files.join(", ")));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::grid::tests::record;

    fn header() -> Header {
        record("echomq-python", "valkey", "9.1.2", false).header
    }

    #[test]
    fn the_line_names_connector_engine_seed_and_gate() {
        let inv = Invocation {
            connector: vec![
                "python3".into(),
                "/opt/my conn/main.py".into(),
                "it's".into(),
            ],
            ..Invocation::default()
        };
        let h = header();
        assert_eq!(
            line(&h, GateId::G5, &inv, None, None),
            format!(
                "emq-gate run --engine binary --valkey-server {} --seed 1 --histories 256 \
                 --batch 100000 --gates G5 -- python3 '/opt/my conn/main.py' 'it'\\''s'",
                h.engine_image
            )
        );
        let named = Invocation {
            engine_name: Some("valkey-9.1".into()),
            timeout: Some(30),
            ..Invocation::default()
        };
        let l = line(
            &h,
            GateId::G7,
            &named,
            None,
            Some("/tmp/emq-gate-g7/g7-1.history.json"),
        );
        assert_eq!(
            l,
            "EMQ_G7_REPLAY=/tmp/emq-gate-g7/g7-1.history.json emq-gate run --engine binary \
             --engine-name valkey-9.1 --seed 1 --histories 256 --batch 100000 --gates G7 \
             --timeout 30"
        );
        let l = line(
            &h,
            GateId::G6,
            &named,
            Some(Path::new("/r/x.failed-cases")),
            None,
        );
        assert!(
            l.starts_with("emq-gate --cases /r/x.failed-cases run --engine binary"),
            "{l}"
        );
        let mut url = h.clone();
        url.engine_kind = "url".into();
        url.engine_image = "redis://127.0.0.1:6379/0".into();
        assert!(
            line(&url, GateId::G1, &named, None, None)
                .starts_with("emq-gate run --engine url --seed 1 "),
            "a url's password is never in the line"
        );
    }

    #[test]
    fn failing_cases_are_copied_and_only_they() {
        let corpus = Corpus::at(crate::repo_relative("cases"));
        let ids: Vec<String> = corpus
            .load()
            .unwrap()
            .iter()
            .map(|c| c.id.clone())
            .collect();
        let mut r = record("echomq-python", "valkey", "9.1.2", false);
        let g6 = r.gates.iter_mut().find(|g| g.id == GateId::G6).unwrap();
        g6.verdict = Verdict::Fail;
        g6.cases = ids
            .iter()
            .enumerate()
            .map(|(i, id)| crate::report::CaseVerdict {
                id: id.clone(),
                verdict: if i == 1 { Verdict::Fail } else { Verdict::Pass },
                message: None,
            })
            .collect();
        let t = tempfile::tempdir().unwrap();
        let to = cases_dir_beside(t.path(), "python");
        std::fs::create_dir_all(&to).unwrap();
        std::fs::write(to.join("stale.yaml"), "old").unwrap();
        let inv = Invocation::default();
        let written = write_failed_cases(&r, &corpus, &to).unwrap();
        annotate(&mut r, &inv, &GateId::ALL, written.as_deref(), &to);
        let files: Vec<String> = std::fs::read_dir(&to)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(files.len(), 1, "{files:?}");
        let replayed = Corpus::at(&to).load().unwrap();
        assert_eq!(replayed[0].id, ids[1], "the copy is the case that failed");
        let g6 = r.gates.iter().find(|g| g.id == GateId::G6).unwrap();
        assert!(
            g6.reproduce
                .as_deref()
                .unwrap()
                .starts_with(&format!("emq-gate --cases {} run ", to.display())),
            "{g6:?}"
        );
        assert!(
            g6.failed_cases
                .as_deref()
                .unwrap()
                .ends_with(&format!("({})", files[0]))
        );
        let passed = r.gates.iter().filter(|g| g.reproduce.is_some()).count();
        assert_eq!(passed, 1, "only the gate that did not pass");
        // A later run that failed no case leaves no stale directory beside its record.
        let clean = record("echomq-python", "valkey", "9.1.2", false);
        assert_eq!(write_failed_cases(&clean, &corpus, &to).unwrap(), None);
        assert!(!to.exists());
    }
}
