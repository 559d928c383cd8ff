//! Wire protocol v1 (SPEC §5) as a JSON Schema, generated from the harness's own types
//! ([`Request`], [`Identity`], [`BrowsedJob`], [`Claimed`], [`RetryOutcome`], [`ConnectorError`],
//! [`ErrorKind`]) with `schemars`, and the check every child reply goes through.
//!
//! The committed copy is `bundle/wire-v1.schema.json`; a test fails when it differs from
//! [`generate`] (`EMQ_BLESS=1` rewrites it). Recorded example sessions live beside it in
//! `bundle/transcripts/`.
//!
//! [`check_ok`] validates a reply's `ok` value against `$defs/ok.<cmd>` with a small validator for
//! the subset of JSON Schema the generator emits (`$ref`, `type`, `properties`, `required`,
//! `additionalProperties`, `enum`, `const`, `anyOf`/`oneOf`, `items`, `pattern`, `minimum`,
//! `minLength`/`maxLength`, `minItems`/`maxItems`, `maxProperties`), so a bad reply is named by field and rule:
//! `claim reply: field "attempts": expected an integer, got "1"`.
//!
//! Why not the `jsonschema` crate (0.61, checked against this schema, issue #22): it gives the
//! same verdicts (the 17 cases of the tests below and all 156 lines of `bundle/transcripts/`
//! alike), but not the same words, and the words are evidence: a reply whose `anyOf`/`oneOf`
//! branch fails (`Option<Claimed>` is `anyOf [null, Claimed]`, a reply is `oneOf [ok, error]`)
//! reads `{...} is not valid under any of the schemas listed in the 'anyOf' keyword`, where this
//! validator picks the branch the value means (`admits`) and names its field and rule
//! (`field "attempts": expected an integer`, `missing field "attempts"`); `{"x": 1}` for
//! `connect` reads `False schema does not allow 1` instead of `unexpected field "x"`. Getting
//! those words back means walking its error context with the same branch choice and a message
//! per error kind, so the code here would stay and 26 crates would join the build (`jsonschema`
//! with `default-features = false`, no HTTP or TLS: a clean build of it and its dependencies
//! took 36 s against 7 s for `serde_json` and `regex` alone on this project's 2-core machine;
//! the `jsonschema` crate itself 16 s of that).

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};

use schemars::SchemaGenerator;
use schemars::generate::SchemaSettings;
use serde_json::{Map, Value, json};

use crate::connector::verbs::{self, Cmd, Shape};
use crate::connector::{BrowsedJob, Claimed, Identity, Request, RetryOutcome};
use crate::error::ConnectorError;

/// The schema's file name inside the bundle directory.
pub const FILE_NAME: &str = "wire-v1.schema.json";

/// Every request `cmd` that has a reply, in SPEC §5's order.
pub const CMDS: [&str; verbs::COUNT] = verbs::NAMES;

/// A job id (SPEC R4.5): no `$`, which lets a trailing newline through in several regex dialects
/// (Python's `re.search`, Ruby, PCRE); the exact length makes the anchor unnecessary.
const JOB_ID: &str = "^j[0-9]{16}";
const JOB_ID_LEN: usize = 17;

fn seq_schema() -> Value {
    json!({"type": "integer", "minimum": 1, "description": "Echoed from the request; 1, 2, 3, ... per process."})
}

/// The whole schema document (what `bundle/wire-v1.schema.json` holds).
pub fn generate() -> Value {
    let mut g = SchemaSettings::draft2020_12().into_generator();
    g.subschema_for::<Request>();
    let error = g.subschema_for::<ConnectorError>();
    // The ok value of each cmd, by the shape its declaration names.
    let oks: Vec<(&str, Value)> = Cmd::ALL
        .into_iter()
        .map(|c| (c.name(), ok_schema(&mut g, c.shape())))
        .collect();
    let mut defs = g.take_definitions(true);
    // On the wire every request carries `seq`; `stop` is the one request without a reply.
    if let Some(Value::Array(variants)) = defs.get_mut("Request").and_then(|r| r.get_mut("oneOf")) {
        for v in variants.iter_mut() {
            if let Some(Value::Object(props)) = v.get_mut("properties") {
                props.insert("seq".into(), seq_schema());
            }
            if let Some(Value::Array(req)) = v.get_mut("required") {
                req.insert(0, Value::from("seq"));
            }
        }
        variants.push(json!({
            "description": "Ends the process (exit 0); no reply. The harness may send it without a seq.",
            "type": "object",
            "properties": {"seq": seq_schema(), "cmd": {"type": "string", "const": "stop"}},
            "required": ["cmd"],
            "additionalProperties": false
        }));
    }
    let mut replies = Vec::new();
    for (cmd, ok) in oks {
        defs.insert(format!("ok.{cmd}"), ok);
        defs.insert(
            format!("reply.{cmd}"),
            json!({
                "description": format!("The reply to `{cmd}`: exactly one of ok and error."),
                "type": "object",
                "properties": {
                    "seq": seq_schema(),
                    "ok": {"$ref": format!("#/$defs/ok.{cmd}")},
                    "error": error.clone().to_value()
                },
                "required": ["seq"],
                "additionalProperties": false,
                "oneOf": [{"required": ["ok"]}, {"required": ["error"]}]
            }),
        );
        replies.push(json!({"$ref": format!("#/$defs/reply.{cmd}")}));
    }
    defs.insert(
        "Reply".into(),
        json!({
            "description": "Any reply; which `ok` shape is right depends on the request's cmd (`reply.<cmd>`).",
            "anyOf": replies
        }),
    );
    json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "EchoMQ wire protocol v1",
        "description": "JSON lines between the harness (requests, on the connector's stdin) and a connector \
                        (replies, on its stdout), one reply per request, in order, echoing seq (bundle/SPEC.md §5). \
                        Generated from the harness's types (harness/src/connector/schema.rs); do not edit by hand.",
        "anyOf": [{"$ref": "#/$defs/Request"}, {"$ref": "#/$defs/Reply"}],
        "$defs": defs
    })
}

/// The schema of an `ok` value of `shape`, mirroring [`Shape::decode`].
fn ok_schema(g: &mut SchemaGenerator, shape: Shape) -> Value {
    match shape {
        Shape::Hello => g.subschema_for::<Identity>().to_value(),
        Shape::Unit => json!({
            "description": "An empty object (null is tolerated).",
            "type": ["object", "null"],
            "additionalProperties": false
        }),
        Shape::Id => json!({
            "description": "The new job's id.",
            "type": "string",
            "pattern": JOB_ID,
            "minLength": JOB_ID_LEN,
            "maxLength": JOB_ID_LEN
        }),
        Shape::Jobs => g.subschema_for::<Vec<BrowsedJob>>().to_value(),
        Shape::Count => g.subschema_for::<u64>().to_value(),
        Shape::Claim => g.subschema_for::<Option<Claimed>>().to_value(),
        Shape::Done => g.subschema_for::<bool>().to_value(),
        Shape::Retry => g.subschema_for::<RetryOutcome>().to_value(),
        Shape::Probe => g.subschema_for::<Vec<i64>>().to_value(),
    }
}

/// The committed file's text for `schema`: pretty JSON with a final newline.
pub fn render(schema: &Value) -> String {
    let mut s = serde_json::to_string_pretty(schema).expect("schemas serialize");
    s.push('\n');
    s
}

fn schema() -> &'static Value {
    static S: OnceLock<Value> = OnceLock::new();
    S.get_or_init(generate)
}

/// Checks the `ok` value of a reply to `cmd`; `Err` names the field and the rule.
pub fn check_ok(cmd: &str, ok: &Value) -> Result<(), String> {
    let root = schema();
    let s = json!({"$ref": format!("#/$defs/ok.{cmd}")});
    check(root, &s, ok, "").map_err(|e| format!("{cmd} reply: {e}"))
}

/// Checks one whole request line (with `seq`).
pub fn check_request(line: &Value) -> Result<(), String> {
    check(schema(), &json!({"$ref": "#/$defs/Request"}), line, "")
        .map_err(|e| format!("request: {e}"))
}

/// Checks one whole reply line to `cmd` (with `seq`, and `ok` or `error`).
pub fn check_reply(cmd: &str, line: &Value) -> Result<(), String> {
    let s = json!({"$ref": format!("#/$defs/reply.{cmd}")});
    check(schema(), &s, line, "").map_err(|e| format!("{cmd} reply: {e}"))
}

/// Validates `v` against `s` within the document `root`.
pub fn check(root: &Value, s: &Value, v: &Value, path: &str) -> Result<(), String> {
    let at = |msg: String| {
        if path.is_empty() {
            msg
        } else {
            format!("field \"{path}\": {msg}")
        }
    };
    let Some(s) = s.as_object() else {
        return Ok(()); // `true`
    };
    if let Some(Value::String(r)) = s.get("$ref") {
        let target = resolve(root, r).ok_or_else(|| at(format!("unresolved $ref {r}")))?;
        check(root, target, v, path)?;
    }
    check_value(s, v, &at)?;
    if let Value::Object(obj) = v {
        check_object(root, s, obj, path, &at)?;
    }
    if let (Some(items), Value::Array(a)) = (s.get("items"), v) {
        for (i, x) in a.iter().enumerate() {
            check(root, items, x, &join(path, &format!("[{i}]")))?;
        }
    }
    for key in ["anyOf", "oneOf"] {
        if let Some(Value::Array(branches)) = s.get(key) {
            check_branches(root, key, branches, v, path, &at)?;
        }
    }
    if let Some(Value::Array(all)) = s.get("allOf") {
        for b in all {
            check(root, b, v, path)?;
        }
    }
    Ok(())
}

/// The keywords that judge a value alone: type, const, enum, pattern, the lengths, minimum and
/// maximum.
fn check_value(
    s: &Map<String, Value>,
    v: &Value,
    at: &dyn Fn(String) -> String,
) -> Result<(), String> {
    if let Some(t) = s.get("type") {
        let allowed: Vec<&str> = match t {
            Value::String(one) => vec![one.as_str()],
            Value::Array(many) => many.iter().filter_map(Value::as_str).collect(),
            _ => vec![],
        };
        if !allowed.iter().any(|t| is_type(v, t)) {
            let want: Vec<String> = allowed.iter().map(|t| article(t)).collect();
            return Err(at(format!(
                "expected {}, got {}",
                want.join(" or "),
                shown(v)
            )));
        }
    }
    if let Some(c) = s.get("const")
        && c != v
    {
        return Err(at(format!("expected {c}, got {}", shown(v))));
    }
    if let Some(Value::Array(options)) = s.get("enum")
        && !options.contains(v)
    {
        let list: Vec<String> = options.iter().map(Value::to_string).collect();
        return Err(at(format!(
            "expected one of {}, got {}",
            list.join(", "),
            shown(v)
        )));
    }
    if let (Some(Value::String(p)), Value::String(text)) = (s.get("pattern"), v)
        && !matches(p, text)
    {
        return Err(at(format!(
            "expected a string matching {p}, got {}",
            shown(v)
        )));
    }
    let len = match v {
        Value::String(t) => Some((t.chars().count(), "characters")),
        Value::Array(a) => Some((a.len(), "items")),
        _ => None,
    };
    if let Some((n, unit)) = len {
        let bound = |k: &str| s.get(k).and_then(Value::as_u64).map(|b| b as usize);
        let (lo, hi) = match v {
            Value::String(_) => (bound("minLength"), bound("maxLength")),
            _ => (bound("minItems"), bound("maxItems")),
        };
        if let Some(lo) = lo.filter(|lo| n < *lo) {
            return Err(at(format!(
                "expected at least {lo} {unit}, got {}",
                shown(v)
            )));
        }
        if let Some(hi) = hi.filter(|hi| n > *hi) {
            return Err(at(format!(
                "expected at most {hi} {unit}, got {}",
                shown(v)
            )));
        }
    }
    if let (Some(min), Some(n)) = (s.get("minimum").and_then(Value::as_f64), v.as_f64())
        && n < min
    {
        return Err(at(format!("expected at least {min}, got {v}")));
    }
    if let (Some(max), Some(n)) = (s.get("maximum").and_then(Value::as_f64), v.as_f64())
        && n > max
    {
        return Err(at(format!("expected at most {max}, got {v}")));
    }
    Ok(())
}

fn check_object(
    root: &Value,
    s: &Map<String, Value>,
    obj: &Map<String, Value>,
    path: &str,
    at: &dyn Fn(String) -> String,
) -> Result<(), String> {
    let props = s.get("properties").and_then(Value::as_object);
    if let Some(Value::Array(req)) = s.get("required") {
        for r in req.iter().filter_map(Value::as_str) {
            if !obj.contains_key(r) {
                return Err(at(format!("missing field \"{r}\"")));
            }
        }
    }
    if let Some(max) = s.get("maxProperties").and_then(Value::as_u64)
        && obj.len() as u64 > max
    {
        return Err(at(format!(
            "expected at most {max} fields, got {}",
            obj.len()
        )));
    }
    for (k, x) in obj {
        match props.and_then(|p| p.get(k)) {
            Some(ps) => check(root, ps, x, &join(path, k))?,
            None => match s.get("additionalProperties") {
                Some(Value::Bool(false)) => {
                    let known: Vec<&String> = props.map(|p| p.keys().collect()).unwrap_or_default();
                    return Err(at(if known.is_empty() {
                        format!("unexpected field \"{k}\" (expected no fields)")
                    } else {
                        format!("unexpected field \"{k}\" (expected only {known:?})")
                    }));
                }
                Some(extra @ Value::Object(_)) => check(root, extra, x, &join(path, k))?,
                _ => {}
            },
        }
    }
    Ok(())
}

/// `anyOf`/`oneOf`: the branches whose type and `const` discriminators admit `v` are tried; when
/// exactly one does, its own error is reported (the precise one), else a summary.
fn check_branches(
    root: &Value,
    key: &str,
    branches: &[Value],
    v: &Value,
    path: &str,
    at: &dyn Fn(String) -> String,
) -> Result<(), String> {
    let passing = branches
        .iter()
        .filter(|b| check(root, b, v, path).is_ok())
        .count();
    if passing >= 1 && (key == "anyOf" || passing == 1) {
        return Ok(());
    }
    if passing > 1 {
        return Err(at(format!("matches {passing} alternatives, expected one")));
    }
    let plausible: Vec<&Value> = branches.iter().filter(|b| admits(root, b, v)).collect();
    if let [only] = plausible.as_slice() {
        return check(root, only, v, path);
    }
    let kinds: Vec<String> = branches
        .iter()
        .filter_map(|b| deref(root, b).get("type").and_then(Value::as_str))
        .map(article)
        .collect();
    Err(at(if kinds.is_empty() {
        format!("{} matches none of the alternatives", shown(v))
    } else {
        format!("expected {}, got {}", kinds.join(" or "), shown(v))
    }))
}

/// Whether branch `b` is the one `v` means: its type admits `v`, and its `const` properties agree.
fn admits(root: &Value, b: &Value, v: &Value) -> bool {
    let b = deref(root, b);
    if let Some(t) = b.get("type").and_then(Value::as_str)
        && !is_type(v, t)
    {
        return false;
    }
    if let (Some(Value::Object(props)), Value::Object(obj)) = (b.get("properties"), v) {
        for (k, ps) in props {
            if let (Some(c), Some(x)) = (ps.get("const"), obj.get(k))
                && c != x
            {
                return false;
            }
        }
    }
    // Only `required` lists that name exactly one field discriminate (`ok` vs `error`).
    if let (Some(Value::Array(req)), Value::Object(obj)) = (b.get("required"), v)
        && b.get("type").is_none()
        && !req
            .iter()
            .filter_map(Value::as_str)
            .all(|r| obj.contains_key(r))
    {
        return false;
    }
    true
}

fn deref<'a>(root: &'a Value, s: &'a Value) -> &'a Value {
    match s.get("$ref").and_then(Value::as_str) {
        Some(r) => resolve(root, r).unwrap_or(s),
        None => s,
    }
}

fn resolve<'a>(root: &'a Value, r: &str) -> Option<&'a Value> {
    let name = r.strip_prefix("#/$defs/")?;
    root.get("$defs")?.get(name)
}

fn is_type(v: &Value, t: &str) -> bool {
    match t {
        "null" => v.is_null(),
        "boolean" => v.is_boolean(),
        "object" => v.is_object(),
        "array" => v.is_array(),
        "string" => v.is_string(),
        "number" => v.is_number(),
        "integer" => v.is_i64() || v.is_u64(),
        _ => true,
    }
}

fn article(t: &str) -> String {
    match t {
        "integer" | "object" | "array" => format!("an {t}"),
        "null" => "null".into(),
        "boolean" => "a boolean".into(),
        other => format!("a {other}"),
    }
}

fn shown(v: &Value) -> String {
    let s = v.to_string();
    if s.chars().count() > 80 {
        format!("{}...", s.chars().take(80).collect::<String>())
    } else {
        s
    }
}

fn join(path: &str, k: &str) -> String {
    match (path.is_empty(), k.starts_with('[')) {
        (true, _) => k.to_string(),
        (false, true) => format!("{path}{k}"),
        (false, false) => format!("{path}.{k}"),
    }
}

fn matches(pattern: &str, text: &str) -> bool {
    static CACHE: OnceLock<Mutex<HashMap<String, regex::Regex>>> = OnceLock::new();
    let mut cache = CACHE
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    if !cache.contains_key(pattern) {
        match regex::Regex::new(pattern) {
            Ok(re) => {
                cache.insert(pattern.to_string(), re);
            }
            Err(_) => return true,
        }
    }
    cache[pattern].is_match(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The committed `bundle/wire-v1.schema.json` is what the code generates; `EMQ_BLESS=1`
    /// rewrites it.
    #[test]
    fn committed_schema_has_no_drift() {
        let path = crate::repo_relative("bundle").join(FILE_NAME);
        let want = render(&generate());
        if crate::settings::bless() {
            std::fs::write(&path, &want).unwrap();
            eprintln!("blessed {}", path.display());
            return;
        }
        let have = std::fs::read_to_string(&path).unwrap_or_default();
        if have != want {
            let diff = similar::TextDiff::from_lines(&have, &want)
                .unified_diff()
                .header("committed", "generated")
                .to_string();
            panic!(
                "{} differs from what the code generates; regenerate with \
                 EMQ_BLESS=1 cargo test -p emq-harness --lib schema\n{diff}",
                path.display()
            );
        }
    }

    #[test]
    fn every_cmd_has_a_reply_schema_and_every_request_variant_a_cmd() {
        let s = generate();
        for cmd in CMDS {
            assert!(s["$defs"].get(format!("reply.{cmd}")).is_some(), "{cmd}");
        }
        let variants = s["$defs"]["Request"]["oneOf"].as_array().unwrap();
        assert_eq!(variants.len(), CMDS.len() + 1, "13 requests and stop");
    }

    #[test]
    fn bad_replies_are_named_by_field_and_rule() {
        let e = check_ok(
            "claim",
            &json!({"id": "j0000000000000001", "payload": "p", "attempts": "1"}),
        )
        .unwrap_err();
        assert_eq!(
            e,
            "claim reply: field \"attempts\": expected an integer, got \"1\""
        );
        assert_eq!(
            check_ok("pending_size", &json!("lots")).unwrap_err(),
            "pending_size reply: expected an integer, got \"lots\""
        );
        assert_eq!(
            check_ok("retry", &json!("Dead")).unwrap_err(),
            "retry reply: expected one of \"delayed\", \"dead\", \"stale\", got \"Dead\""
        );
        assert_eq!(
            check_ok("browse", &json!([{"id": "j1", "payload": ""}])).unwrap_err(),
            "browse reply: field \"[0].id\": expected a string matching ^j[0-9]{16}, got \"j1\""
        );
        // SPEC R4.5: the id a `$`-anchored pattern lets through in several dialects.
        assert_eq!(
            check_ok("enqueue", &json!("j0000000000000001\n")).unwrap_err(),
            "enqueue reply: expected at most 17 characters, got \"j0000000000000001\\n\""
        );
        // SPEC §5: `queues` is absent or a list of 1 to 64 names, never null.
        let batch = |queues: Value| {
            json!({"seq": 1, "cmd": "batch", "session": "s", "queue": "q", "n": 1, "depth": 1,
                   "payload": "", "queues": queues})
        };
        assert!(check_request(&batch(json!(["q"]))).is_ok());
        assert!(check_request(&batch(Value::Null)).is_err());
        assert!(check_request(&batch(json!([]))).is_err());
        assert_eq!(
            check_ok("claim", &json!({"id": "j0000000000000001", "payload": "p"})).unwrap_err(),
            "claim reply: missing field \"attempts\""
        );
        assert!(check_ok("claim", &Value::Null).is_ok());
        assert!(check_ok("connect", &json!({})).is_ok());
        assert!(check_ok("connect", &json!({"x": 1})).is_err());
        assert!(check_ok("pipeline_probe", &json!([1, 2, 3])).is_ok());
        assert!(check_ok("promote", &json!(-1)).is_err());
    }

    #[test]
    fn requests_and_whole_replies_validate() {
        let r = Request::Claim {
            session: "w1".into(),
            queue: "q".into(),
            lease_ms: 1,
        };
        let mut v = serde_json::to_value(&r).unwrap();
        assert!(check_request(&v).is_err(), "seq is required on the wire");
        v["seq"] = json!(3);
        check_request(&v).unwrap();
        check_request(&json!({"cmd": "stop"})).unwrap();
        check_reply("claim", &json!({"seq": 3, "ok": null})).unwrap();
        check_reply(
            "claim",
            &json!({"seq": 3, "error": {"kind": "invalid", "message": "m"}}),
        )
        .unwrap();
        assert!(check_reply("claim", &json!({"seq": 3})).is_err());
        assert!(
            check_reply(
                "claim",
                &json!({"seq": 3, "error": {"kind": "cosmic", "message": "m"}})
            )
            .is_err()
        );
    }
}
