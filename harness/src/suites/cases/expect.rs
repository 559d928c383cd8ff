//! Values in cases: `$capture` substitution, matchers, keyspace comparison and the
//! `(-expected|+actual)` diff.

use serde_json::{Map, Value};

use crate::protocol::grammar::{Set, is_job_id};
use crate::protocol::keyspace::Keyspace;

/// The engine's clock read just before and just after one step (`TIME`, in ms, the formula of the
/// scripts): a score the step wrote at engine time `t` plus `ms` has `t` in `[before, after]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Bracket {
    pub before: i64,
    pub after: i64,
    /// 1-based step number.
    pub step: usize,
    pub verb: String,
    /// `file:line` of the step.
    pub location: String,
}

impl Bracket {
    /// How many ms the bracket spans (0 when both reads fell in one millisecond).
    pub fn width(&self) -> i64 {
        self.after - self.before
    }
}

/// Which step last wrote each time-scored member: (queue, set, id) → the bracket of that step.
pub type Writers = std::collections::BTreeMap<(String, Set, String), Bracket>;

/// The offset of a `$now`, `$now+<ms>` or `$now-<ms>` matcher; `None` for anything else.
pub fn now_offset(s: &str) -> Option<i64> {
    let rest = s.strip_prefix("$now")?;
    if rest.is_empty() {
        Some(0)
    } else if let Some(n) = rest.strip_prefix('+') {
        n.parse::<i64>().ok()
    } else {
        rest.strip_prefix('-')
            .and_then(|n| n.parse::<i64>().ok())
            .map(|n| -n)
    }
}

/// Replaces `$name`, `$name.field`, `$repeat:text:n` and `$jobs:payload:first:count`; leaves matchers (`$any`, `$id`, `$now…`).
pub fn resolve(v: &Value, vars: &Map<String, Value>) -> Value {
    match v {
        Value::String(s) if s.starts_with('$') => resolve_str(s, vars).unwrap_or_else(|| v.clone()),
        Value::Array(a) => Value::Array(a.iter().map(|x| resolve(x, vars)).collect()),
        Value::Object(o) => Value::Object(
            o.iter()
                .map(|(k, x)| {
                    let key = match resolve_str(k, vars) {
                        Some(Value::String(s)) => s,
                        _ => k.clone(),
                    };
                    (key, resolve(x, vars))
                })
                .collect(),
        ),
        other => other.clone(),
    }
}

fn resolve_str(s: &str, vars: &Map<String, Value>) -> Option<Value> {
    let name = s.strip_prefix('$')?;
    if let Some(rest) = name.strip_prefix("repeat:") {
        let (text, n) = rest.rsplit_once(':')?;
        return Some(Value::String(text.repeat(n.parse().ok()?)));
    }
    if let Some(rest) = name.strip_prefix("jobs:") {
        return jobs(rest);
    }
    let mut parts = name.split('.');
    let mut cur = vars.get(parts.next()?)?;
    for p in parts {
        cur = cur.get(p)?;
    }
    Some(cur.clone())
}

/// `$jobs:<payload>:<first>:<count>`: the `browse` rows of `count` jobs in a row from the
/// `first`-th id of a queue, each with `payload` — a page past the sizes libraries cut at (10 001
/// rows) without a 10 001-line file.
fn jobs(spec: &str) -> Option<Value> {
    let mut parts = spec.rsplitn(3, ':');
    let count: u64 = parts.next()?.parse().ok()?;
    let first: u64 = parts.next()?.parse().ok()?;
    let payload = parts.next()?;
    Some(Value::Array(
        (first..first.checked_add(count)?)
            .map(|i| serde_json::json!({"id": format!("j{i:016}"), "payload": payload}))
            .collect(),
    ))
}

/// True when `actual` matches `expected` (resolved), honouring `$any` and `$id`.
pub fn matches(expected: &Value, actual: &Value) -> bool {
    match (expected, actual) {
        (Value::String(m), _) if m == "$any" => true,
        (Value::String(m), Value::String(a)) if m == "$id" => is_job_id(a),
        (Value::Object(e), Value::Object(a)) => {
            e.len() == a.len()
                && e.iter()
                    .all(|(k, ev)| a.get(k).is_some_and(|av| matches(ev, av)))
        }
        (Value::Array(e), Value::Array(a)) => {
            e.len() == a.len() && e.iter().zip(a).all(|(x, y)| matches(x, y))
        }
        (Value::Number(e), Value::Number(a)) => e.as_f64() == a.as_f64(),
        (e, a) => e == a,
    }
}

/// Shortens huge strings (1 MiB payloads) so diffs stay readable.
fn abbreviate(v: &Value) -> Value {
    match v {
        Value::String(s) if s.len() > 200 => {
            let head: String = s.chars().take(40).collect();
            Value::String(format!("{head}… ({} bytes)", s.len()))
        }
        Value::Array(a) => Value::Array(a.iter().map(abbreviate).collect()),
        Value::Object(o) => {
            Value::Object(o.iter().map(|(k, x)| (k.clone(), abbreviate(x))).collect())
        }
        other => other.clone(),
    }
}

/// The `(-expected|+actual)` line diff of two values, pretty-printed.
pub fn diff(expected: &Value, actual: &Value) -> String {
    let e = serde_json::to_string_pretty(&abbreviate(expected)).unwrap_or_default() + "\n";
    let a = serde_json::to_string_pretty(&abbreviate(actual)).unwrap_or_default() + "\n";
    let mut out = String::from("(-expected|+actual)\n");
    for change in similar::TextDiff::from_lines(&e, &a).iter_all_changes() {
        let sign = match change.tag() {
            similar::ChangeTag::Delete => '-',
            similar::ChangeTag::Insert => '+',
            similar::ChangeTag::Equal => ' ',
        };
        out.push(sign);
        out.push_str(change.value());
    }
    out
}

/// Judges one score against its expectation. A `$now±ms` matcher means "the engine's time of the
/// step that wrote this member, plus ms, exactly": `score - ms` must lie in that step's bracket.
/// `Err` explains a miss: the step, its bracket and the score found.
fn score_matches(expected: &Value, actual: i64, writer: Option<&Bracket>) -> Result<(), String> {
    match expected {
        Value::String(s) if s == "$any" => Ok(()),
        Value::String(s) if s.starts_with("$now") => {
            let Some(o) = now_offset(s) else {
                return Err(format!("{s} is not a score matcher"));
            };
            let Some(w) = writer else {
                return Err(format!(
                    "score {actual}, but no step of this case wrote it, so {s} has no time"
                ));
            };
            let (lo, hi) = (w.before + o, w.after + o);
            if (lo..=hi).contains(&actual) {
                return Ok(());
            }
            let off = if actual < lo {
                format!("{} ms early", lo - actual)
            } else {
                format!("{} ms late", actual - hi)
            };
            Err(format!(
                "score {actual}, but step {} ({} at {}) ran at engine ms [{}, {}] ({} ms wide), so \
                 {s} wants [{lo}, {hi}]: {off}",
                w.step,
                w.verb,
                w.location,
                w.before,
                w.after,
                w.width()
            ))
        }
        other if other.as_i64() == Some(actual) => Ok(()),
        other => Err(format!("score {actual}, not {other}")),
    }
}

fn as_text(v: &Value) -> Value {
    match v {
        Value::Number(n) => Value::String(n.to_string()),
        Value::Bool(b) => Value::String(b.to_string()),
        other => other.clone(),
    }
}

fn text_map(v: &Value) -> Value {
    match v {
        Value::Object(o) => Value::Object(o.iter().map(|(k, x)| (k.clone(), as_text(x))).collect()),
        other => other.clone(),
    }
}

/// Why a keyspace assertion failed: `(expected, actual)` views of the asserted parts, and one line
/// per score that missed its matcher (`queue set id: why`).
#[derive(Debug, Clone)]
pub struct KeyspaceMismatch {
    pub expected: Value,
    pub actual: Value,
    pub scores: Vec<String>,
}

/// Compares a `keyspace` assertion with the engine's keyspace; `writers` says which step last
/// wrote each time-scored member (the bracket a `$now` matcher is judged by).
pub fn check_keyspace(
    spec: &Map<String, Value>,
    ks: &Keyspace,
    writers: &Writers,
) -> Result<(), KeyspaceMismatch> {
    let mut scores = Vec::new();
    let mut exp = Map::new();
    let mut act = Map::new();
    if let Some(f) = spec.get("fence") {
        exp.insert("fence".into(), text_map(f));
        act.insert(
            "fence".into(),
            serde_json::to_value(&ks.fence).unwrap_or(Value::Null),
        );
    }
    let empty = Default::default();
    let queue = spec.get("queue").and_then(Value::as_str);
    let st = queue.and_then(|q| ks.queues.get(q)).unwrap_or(&empty);
    for set in Set::ALL {
        let Some(Value::Object(want)) = spec.get(set.name()) else {
            continue;
        };
        let mut got = Map::new();
        for (id, score) in st.set(set) {
            let writer = queue.and_then(|q| writers.get(&(q.to_string(), set, id.clone())));
            let shown = match want.get(id).map(|w| (w, score_matches(w, *score, writer))) {
                Some((w, Ok(()))) => w.clone(),
                Some((_, Err(why))) => {
                    scores.push(format!("{} {set} {id}: {why}", queue.unwrap_or("?")));
                    Value::from(*score)
                }
                None => Value::from(*score),
            };
            got.insert(id.clone(), shown);
        }
        exp.insert(set.name().into(), Value::Object(want.clone()));
        act.insert(set.name().into(), Value::Object(got));
    }
    if let Some(Value::Object(jobs)) = spec.get("jobs") {
        let mut e = Map::new();
        let mut a = Map::new();
        for (id, want) in jobs {
            e.insert(id.clone(), text_map(want));
            a.insert(
                id.clone(),
                st.jobs.get(id).map_or(Value::Null, |h| {
                    serde_json::to_value(h).unwrap_or(Value::Null)
                }),
            );
        }
        exp.insert("jobs".into(), Value::Object(e));
        act.insert("jobs".into(), Value::Object(a));
    }
    if let Some(seq) = spec.get("seq") {
        exp.insert("seq".into(), seq.clone());
        act.insert("seq".into(), st.seq.map_or(Value::Null, Value::from));
    }
    let (exp, act) = (Value::Object(exp), Value::Object(act));
    if matches(&exp, &act) {
        Ok(())
    } else {
        Err(KeyspaceMismatch {
            expected: exp,
            actual: act,
            scores,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn captures_and_matchers() {
        let vars = json!({"c1": {"id": "j0000000000000001", "attempts": 2}});
        let vars = vars.as_object().unwrap();
        assert_eq!(resolve(&json!("$c1.attempts"), vars), json!(2));
        assert_eq!(resolve(&json!("$repeat:ab:3"), vars), json!("ababab"));
        assert_eq!(
            resolve(&json!("$jobs:p:9:2"), vars),
            json!([{"id": "j0000000000000009", "payload": "p"}, {"id": "j0000000000000010", "payload": "p"}])
        );
        assert_eq!(resolve(&json!("$any"), vars), json!("$any"));
        assert!(matches(
            &json!({"id": "$id", "n": "$any"}),
            &json!({"id": "j0000000000000009", "n": 3})
        ));
        assert!(!matches(&json!({"id": "$id"}), &json!({"id": "x"})));
        assert!(!matches(&json!([1, 2]), &json!([1, 2, 3])));
        let w = Bracket {
            before: 1_000_000,
            after: 1_000_002,
            step: 2,
            verb: "claim".into(),
            location: "x.yaml:4".into(),
        };
        assert!(score_matches(&json!("$now+30000"), 1_030_000, Some(&w)).is_ok());
        assert!(score_matches(&json!("$now+30000"), 1_030_002, Some(&w)).is_ok());
        let late = score_matches(&json!("$now+30000"), 1_030_003, Some(&w)).unwrap_err();
        assert!(
            late.contains("wants [1030000, 1030002]: 1 ms late"),
            "{late}"
        );
        assert!(late.contains("step 2 (claim at x.yaml:4)"), "{late}");
        assert!(late.contains("(2 ms wide)"), "{late}");
        let early = score_matches(&json!("$now"), 999_999, Some(&w)).unwrap_err();
        assert!(early.ends_with("1 ms early"), "{early}");
        assert!(score_matches(&json!("$now-5"), 999_995, Some(&w)).is_ok());
        assert!(score_matches(&json!("$now"), 1_000_000, None).is_err());
        assert!(score_matches(&json!("$any"), 7, None).is_ok());
        assert!(score_matches(&json!(0), 0, None).is_ok());
        assert!(score_matches(&json!(0), 1, None).is_err());
        assert_eq!(now_offset("$now+1500"), Some(1500));
        assert_eq!(now_offset("$now-2"), Some(-2));
        assert_eq!(now_offset("$nowx"), None);
        assert!(diff(&json!({"a": 1}), &json!({"a": 2})).contains("-  \"a\": 1"));
    }
}
