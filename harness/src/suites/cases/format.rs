//! Parsing and checking case files (`cases/README.md`). Every error names `file:line:col`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_json::{Map, Value};
use serde_saphyr::Spanned;

use crate::connector::Cmd;
use crate::connector::verbs::{Arg, ArgKind};
use crate::error::{ErrorKind, HarnessError};

/// What a step does.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    /// A connector verb with its arguments (defaults filled, `$refs` unresolved).
    Call {
        verb: String,
        args: Map<String, Value>,
    },
    /// A keyspace assertion read by the harness.
    Keyspace(Map<String, Value>),
}

/// What a step expects.
#[derive(Debug, Clone, PartialEq)]
pub enum Expect {
    /// Only that it succeeds.
    Success,
    Ok(Value),
    Error(ErrorKind),
}

/// One step, with its place in the file.
#[derive(Debug, Clone)]
pub struct Step {
    pub line: u64,
    pub col: u64,
    pub session: String,
    pub action: Action,
    pub capture: Option<String>,
    pub expect: Expect,
}

/// One case file.
#[derive(Debug, Clone)]
pub struct Case {
    pub id: String,
    pub description: String,
    pub tags: Vec<String>,
    pub sessions: Vec<String>,
    pub manual_connect: bool,
    pub fence: Option<BTreeMap<String, String>>,
    /// Raw engine commands the harness sends before any connect (setup, e.g. a key of the wrong type).
    pub setup: Vec<Vec<String>>,
    pub steps: Vec<Step>,
    pub file: PathBuf,
    /// The file as messages name it ([`Corpus::shown`]).
    pub shown: String,
    /// Where the `id` value is, for errors about the id.
    pub id_at: (u64, u64),
}

impl Case {
    /// `file:line` of step `i` (0-based); a file of the embedded corpus is named
    /// `cases/<file>`, never the temp directory it was unpacked to ([`Corpus::shown_as`]).
    pub fn location(&self, i: usize) -> String {
        format!("{}:{}", self.shown, self.steps[i].line)
    }
}

/// A case corpus: its directory, and how its files are named in messages.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Corpus {
    pub dir: PathBuf,
    /// `<name>/<file>` instead of the directory's path, when set.
    shown_as: Option<String>,
}

impl Corpus {
    /// The cases in `dir`, named by their paths.
    pub fn at(dir: impl Into<PathBuf>) -> Self {
        Self {
            dir: dir.into(),
            shown_as: None,
        }
    }

    /// The cases in `dir`, named `<name>/<file>` in messages: the embedded corpus is unpacked to
    /// a temp directory that is gone when the run ends, so its own name is what a reader can find.
    pub fn shown_as(dir: impl Into<PathBuf>, name: &str) -> Self {
        Self {
            dir: dir.into(),
            shown_as: Some(name.to_string()),
        }
    }

    /// How `file` is named in messages.
    pub fn shown(&self, file: &Path) -> String {
        match (&self.shown_as, file.strip_prefix(&self.dir)) {
            (Some(name), Ok(rel)) => format!("{name}/{}", rel.display()),
            _ => file.display().to_string(),
        }
    }

    /// Loads every `*.yaml` directly in the directory, sorted by file name; ids must be unique.
    pub fn load(&self) -> Result<Vec<Case>, HarnessError> {
        let dir = &self.dir;
        let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
            .map_err(|e| HarnessError::io(dir.display().to_string(), e))?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "yaml" || x == "yml"))
            .collect();
        files.sort();
        let mut seen: BTreeMap<String, PathBuf> = BTreeMap::new();
        let mut out = Vec::new();
        for f in files {
            let text = std::fs::read_to_string(&f)
                .map_err(|e| HarnessError::io(f.display().to_string(), e))?;
            let shown = self.shown(&f);
            let case = parse_shown(&f, &shown, &text)?;
            if let Some(prev) = seen.get(&case.id) {
                let (line, col) = case.id_at;
                return Err(bad(
                    &shown,
                    line,
                    col,
                    format!("duplicate id {:?} (also in {})", case.id, prev.display()),
                ));
            }
            seen.insert(case.id.clone(), f);
            out.push(case);
        }
        Ok(out)
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawCase {
    id: Spanned<String>,
    description: String,
    #[serde(default)]
    tags: Vec<String>,
    #[serde(default)]
    sessions: Option<Vec<String>>,
    #[serde(default)]
    connect: Option<Spanned<String>>,
    #[serde(default)]
    fence: Option<BTreeMap<String, String>>,
    #[serde(default)]
    setup: Vec<Vec<String>>,
    steps: Vec<Spanned<Map<String, Value>>>,
}

fn bad(shown: &str, line: u64, col: u64, msg: impl std::fmt::Display) -> HarnessError {
    HarnessError::located(shown.to_string(), line, col, msg)
}

/// Parses one case file's text (named by its path in messages).
pub fn parse(file: &Path, text: &str) -> Result<Case, HarnessError> {
    parse_shown(file, &file.display().to_string(), text)
}

/// [`parse`], the file named `shown` in messages.
fn parse_shown(file: &Path, shown: &str, text: &str) -> Result<Case, HarnessError> {
    let raw = read_yaml(shown, text)?;
    let id_loc = raw.id.referenced;
    let id = raw.id.value;
    let at_id = |msg: String| bad(shown, id_loc.line(), id_loc.column(), msg);
    if id.is_empty()
        || !id
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
    {
        return Err(at_id(format!("id {id:?} must be [a-z0-9-]+")));
    }
    let sessions = raw.sessions.unwrap_or_else(|| vec!["main".into()]);
    if sessions.is_empty() {
        return Err(at_id("sessions must not be empty".into()));
    }
    let manual_connect = manual_connect(shown, raw.connect)?;
    if raw.steps.is_empty() {
        return Err(at_id("a case needs at least one step".into()));
    }
    let steps = parse_steps(shown, raw.steps, &sessions)?;
    Ok(Case {
        id,
        description: raw.description,
        tags: raw.tags,
        sessions,
        manual_connect,
        fence: raw.fence,
        setup: raw.setup,
        steps,
        file: file.to_path_buf(),
        shown: shown.to_string(),
        id_at: (id_loc.line(), id_loc.column()),
    })
}

/// The case file's YAML, located errors naming the line once.
fn read_yaml(shown: &str, text: &str) -> Result<RawCase, HarnessError> {
    // YAML 1.2 booleans only: `payload: y` is the string "y", not true.
    let options = serde_saphyr::options! { strict_booleans: true, with_snippet: false };
    serde_saphyr::from_str_with_options(text, options).map_err(|e| {
        let (line, col) = e.location().map_or((1, 1), |l| (l.line(), l.column()));
        let msg = e.to_string();
        let first = msg.lines().next().unwrap_or("invalid YAML");
        // The location leads the line already; drop the parser's own " at line N, column M".
        let first = first.split(" at line ").next().unwrap_or(first).to_string();
        bad(shown, line, col, first)
    })
}

/// `connect:`: `auto` (the default) or `manual`.
fn manual_connect(shown: &str, connect: Option<Spanned<String>>) -> Result<bool, HarnessError> {
    match connect {
        None => Ok(false),
        Some(c) if c.value == "auto" => Ok(false),
        Some(c) if c.value == "manual" => Ok(true),
        Some(c) => Err(bad(
            shown,
            c.referenced.line(),
            c.referenced.column(),
            format!("connect must be auto or manual, not {:?}", c.value),
        )),
    }
}

/// The steps in order, each repeated `times`, each located at its own line; a step may use only
/// the captures of the steps before it.
fn parse_steps(
    shown: &str,
    raw: Vec<Spanned<Map<String, Value>>>,
    sessions: &[String],
) -> Result<Vec<Step>, HarnessError> {
    let mut captured = BTreeSet::new();
    let mut steps = Vec::new();
    for (i, s) in raw.into_iter().enumerate() {
        let (line, col) = (s.referenced.line(), s.referenced.column());
        let mut value = s.value;
        let times = take_times(&mut value)
            .map_err(|m| bad(shown, line, col, format!("step {}: {m}", i + 1)))?;
        let step = parse_step(value, sessions, &captured)
            .map_err(|m| bad(shown, line, col, format!("step {}: {m}", i + 1)))?;
        if times > 1 && step.capture.is_some() {
            return Err(bad(
                shown,
                line,
                col,
                format!("step {}: a repeated step captures nothing", i + 1),
            ));
        }
        if let Some(c) = &step.capture {
            captured.insert(c.clone());
        }
        steps.extend(std::iter::repeat_n(Step { line, col, ..step }, times));
    }
    Ok(steps)
}

const STEP_KEYS: [&str; 4] = ["session", "as", "ok", "error"];

/// The most a step may be repeated: enough for a queue past the largest page a library cuts at
/// (10 000), few enough that a typo cannot stall a run.
const MAX_TIMES: u64 = 100_000;

/// Takes a step's optional `times: n` (1 to [`MAX_TIMES`]; 1 when absent): the step runs `n`
/// times, each meeting its expectation, so a case can fill a set past a bound (1 001 delayed
/// jobs for a promote of 1 000) without 1 001 lines.
fn take_times(step: &mut Map<String, Value>) -> Result<usize, String> {
    match step.remove("times") {
        None => Ok(1),
        Some(Value::Number(n)) if n.as_u64().is_some_and(|n| (1..=MAX_TIMES).contains(&n)) => {
            Ok(n.as_u64().unwrap_or(1) as usize)
        }
        Some(other) => Err(format!("times: expected 1..={MAX_TIMES}, got {other}")),
    }
}

fn parse_step(
    mut m: Map<String, Value>,
    sessions: &[String],
    captured: &BTreeSet<String>,
) -> Result<Step, String> {
    let verbs: Vec<String> = m
        .keys()
        .filter(|k| !STEP_KEYS.contains(&k.as_str()))
        .cloned()
        .collect();
    let verb = match verbs.as_slice() {
        [v] => v.clone(),
        [] => return Err("no verb (expected one of enqueue, claim, ..., keyspace)".into()),
        many => return Err(format!("one verb per step, found {}", many.join(", "))),
    };
    let session = match m.remove("session") {
        None => sessions[0].clone(),
        Some(Value::String(s)) if sessions.contains(&s) => s,
        Some(other) => return Err(format!("session {other} is not one of {sessions:?}")),
    };
    let capture = match m.remove("as") {
        None => None,
        Some(Value::String(s)) if !s.is_empty() => Some(s),
        Some(other) => return Err(format!("as: expected a name, got {other}")),
    };
    let expect = match (m.remove("ok"), m.remove("error")) {
        (Some(_), Some(_)) => return Err("a step expects ok or error, not both".into()),
        (Some(v), None) => {
            check_refs(&v, captured, true)?;
            Expect::Ok(v)
        }
        (None, Some(Value::String(k))) => Expect::Error(
            serde_json::from_value(Value::String(k.clone())).map_err(|_| {
                format!("unknown error kind {k:?} (fence, invalid, engine, unsupported, internal)")
            })?,
        ),
        (None, Some(other)) => return Err(format!("error: expected a kind, got {other}")),
        (None, None) => Expect::Success,
    };
    let body = m.remove(&verb).unwrap_or(Value::Null);
    let action = if verb == "keyspace" {
        let Value::Object(ks) = body else {
            return Err("keyspace: expected a map".into());
        };
        check_refs(&Value::Object(ks.clone()), captured, true)?;
        if capture.is_some() || expect != Expect::Success {
            return Err("keyspace takes no ok/error/as".into());
        }
        Action::Keyspace(ks)
    } else {
        let args = call_args(&verb, body, captured)?;
        Action::Call { verb, args }
    };
    Ok(Step {
        line: 0,
        col: 0,
        session,
        action,
        capture,
        expect,
    })
}

/// A call step's arguments, by its verb's declared table: each given one checked for its kind,
/// the missing ones defaulted (`$refs` stay unresolved).
fn call_args(
    verb: &str,
    body: Value,
    captured: &BTreeSet<String>,
) -> Result<Map<String, Value>, String> {
    let spec = Cmd::from_name(verb)
        .ok_or_else(|| format!("unknown verb {verb:?}"))?
        .args();
    let given = match body {
        Value::Object(o) => o,
        Value::Null => Map::new(),
        other => return Err(format!("{verb}: arguments must be a map, got {other}")),
    };
    let mut args = Map::new();
    for a in &spec {
        if let Some(v) = given.get(a.name) {
            args.insert(a.name.into(), v.clone());
        }
    }
    if let Some(extra) = given.keys().find(|k| !spec.iter().any(|a| a.name == *k)) {
        return Err(format!("{verb}: unknown argument {extra:?}"));
    }
    for Arg {
        name,
        kind,
        default,
        ..
    } in spec
    {
        match (args.get(name), default) {
            (None, Some(d)) => {
                args.insert(name.into(), d);
            }
            (None, None) => return Err(format!("{verb}: missing argument {name:?}")),
            (Some(v), _) => {
                let is_ref = v.as_str().is_some_and(|s| s.starts_with('$'));
                if is_ref {
                    check_refs(v, captured, false)?;
                } else if kind == ArgKind::Str && !v.is_string() {
                    return Err(format!("{verb}: {name} must be a string, got {v}"));
                } else if kind == ArgKind::Int && !v.is_i64() {
                    return Err(format!("{verb}: {name} must be an integer, got {v}"));
                } else if kind == ArgKind::StrList
                    && !v.as_array().is_some_and(|a| a.iter().all(Value::is_string))
                {
                    return Err(format!("{verb}: {name} must be a list of strings, got {v}"));
                }
            }
        }
    }
    Ok(args)
}

/// Every `$...` string must be a captured name, `$repeat:..`, or (in expectations) a matcher.
fn check_refs(v: &Value, captured: &BTreeSet<String>, matchers: bool) -> Result<(), String> {
    match v {
        Value::String(s) if s.starts_with('$') => {
            let name = &s[1..];
            let root = name.split('.').next().unwrap_or(name);
            let known = captured.contains(root)
                || name.starts_with("repeat:")
                || name.starts_with("jobs:")
                || (matchers
                    && (name == "any"
                        || name == "id"
                        || crate::suites::cases::expect::now_offset(s).is_some()));
            if known {
                Ok(())
            } else {
                Err(format!("unknown matcher or capture {s:?}"))
            }
        }
        Value::Array(a) => a.iter().try_for_each(|x| check_refs(x, captured, matchers)),
        Value::Object(o) => o.iter().try_for_each(|(k, x)| {
            if k.starts_with('$') {
                check_refs(&Value::String(k.clone()), captured, matchers)?;
            }
            check_refs(x, captured, matchers)
        }),
        _ => Ok(()),
    }
}

/// Loads every `*.yaml` directly in `dir` ([`Corpus::load`], files named by their paths).
pub fn load_dir(dir: &Path) -> Result<Vec<Case>, HarnessError> {
    Corpus::at(dir).load()
}

/// The corpus when nobody chose one: `EMQ_CASES_DIR`, else this repository's `cases/` (tests
/// and library callers, run inside the checkout). `emq-gate` passes its own choice
/// (`cmd::sources`) to what needs it instead.
pub fn default_dir() -> PathBuf {
    crate::settings::cases_dir().unwrap_or_else(|| crate::repo_relative("cases"))
}
