//! Wire protocol v1 (SPEC §5) as a JSON Schema, generated from the harness's own types
//! ([`Request`], each verb's reply wire type as `verbs!` declares it, [`ConnectorError`],
//! [`crate::error::ErrorKind`]) with `schemars`, and the check of a whole recorded wire line.
//!
//! The committed copy is `bundle/wire-v1.schema.json`; a test fails when it differs from
//! [`generate`] (`EMQ_BLESS=1` rewrites it). Recorded example sessions live beside it in
//! `bundle/transcripts/`.
//!
//! The schema is published for connector authors; the harness itself does not validate against
//! it. A reply is decoded once, by serde, into the same types the schema is generated from (see
//! [`crate::connector::replies`]), which names a bad field by its path and the rule it breaks:
//! `claim reply: field "attempts": invalid type: string "1", expected i64`. (Until issue #30 a
//! hand-written validator of the schema's keywords ran first; no test or case needed a word only
//! it gave, so it went.)

use schemars::generate::SchemaSettings;
use serde_json::{Map, Value, json};

use crate::connector::Request;
use crate::connector::replies::de;
use crate::connector::verbs::{self, Cmd};
use crate::error::ConnectorError;

/// The schema's file name inside the bundle directory.
pub const FILE_NAME: &str = "wire-v1.schema.json";

/// Every request `cmd` that has a reply, in SPEC §5's order.
pub const CMDS: [&str; verbs::COUNT] = verbs::NAMES;

fn seq_schema() -> Value {
    json!({"type": "integer", "minimum": 1, "description": "Echoed from the request; 1, 2, 3, ... per process."})
}

/// The whole schema document (what `bundle/wire-v1.schema.json` holds).
pub fn generate() -> Value {
    let mut g = SchemaSettings::draft2020_12().into_generator();
    g.subschema_for::<Request>();
    let error = g.subschema_for::<ConnectorError>();
    // The ok value of each cmd, by the reply its declaration names.
    let oks: Vec<(&str, Value)> = Cmd::ALL
        .into_iter()
        .map(|c| (c.name(), c.ok_schema(&mut g).to_value()))
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
            "description": "Ends the process (exit 0); no reply (R5.9). The harness sends it with a seq, like every request.",
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

/// The committed file's text for `schema`: pretty JSON with a final newline.
pub fn render(schema: &Value) -> String {
    let mut s = serde_json::to_string_pretty(schema).expect("schemas serialize");
    s.push('\n');
    s
}

/// The `seq` of a wire line: an integer from 1 (required unless the line may go without).
fn check_seq(line: &Map<String, Value>, required: bool) -> Result<(), String> {
    match line.get("seq") {
        Some(s) if s.as_u64().is_some_and(|n| n >= 1) => Ok(()),
        Some(s) => Err(format!("field \"seq\": expected an integer >= 1, got {s}")),
        None if required => Err("missing field \"seq\"".into()),
        None => Ok(()),
    }
}

fn object<'a>(line: &'a Value, what: &str) -> Result<&'a Map<String, Value>, String> {
    line.as_object()
        .ok_or_else(|| format!("{what}: expected an object, got {line}"))
}

/// Checks one whole request line (with `seq`; `stop` may go without), as the harness's own
/// [`Request`] type reads it: its fields and their types (the bounds are the connector's to
/// judge: SPEC §4's `invalid`).
pub fn check_request(line: &Value) -> Result<(), String> {
    let fail = |e: String| format!("request: {e}");
    let obj = object(line, "request")?;
    let stop = obj.get("cmd") == Some(&json!("stop"));
    check_seq(obj, !stop).map_err(fail)?;
    let mut rest = obj.clone();
    rest.remove("seq");
    if stop {
        return match rest.keys().find(|k| *k != "cmd") {
            Some(k) => Err(fail(format!("unexpected field \"{k}\" in stop"))),
            None => Ok(()),
        };
    }
    de::<Request>(Value::Object(rest)).map(drop).map_err(fail)
}

/// Checks one whole reply line to `cmd`: `seq`, and exactly one of `ok` (decoded as the verb's
/// reply) and `error` (a [`ConnectorError`] of a known kind), nothing else.
pub fn check_reply(cmd: &str, line: &Value) -> Result<(), String> {
    let fail = |e: String| format!("{cmd} reply: {e}");
    let verb = Cmd::from_name(cmd).ok_or_else(|| fail("no such cmd".into()))?;
    let obj = object(line, &format!("{cmd} reply"))?;
    check_seq(obj, true).map_err(fail)?;
    if let Some(k) = obj
        .keys()
        .find(|k| !["seq", "ok", "error"].contains(&k.as_str()))
    {
        return Err(fail(format!("unexpected field \"{k}\"")));
    }
    match (obj.get("ok"), obj.get("error")) {
        (Some(ok), None) => verb.decode_ok(ok.clone()).map(drop).map_err(fail),
        (None, Some(e)) => de::<ConnectorError>(e.clone())
            .map(drop)
            .map_err(|e| fail(format!("field \"error\": {e}"))),
        _ => Err(fail("expected exactly one of \"ok\" and \"error\"".into())),
    }
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

    /// SPEC §5 and R4.12 as the published schema says them: `queues` is absent or a list of 1 to
    /// 64 names, never null; a job id is 17 characters without a `$` anchor (SPEC R4.5).
    #[test]
    fn the_schema_states_the_narrow_rules() {
        let s = generate();
        let batch = s["$defs"]["Request"]["oneOf"]
            .as_array()
            .unwrap()
            .iter()
            .find(|v| v["properties"]["cmd"]["const"] == "batch")
            .unwrap();
        let q = &batch["properties"]["queues"];
        assert_eq!(
            (&q["type"], &q["minItems"], &q["maxItems"]),
            (&json!("array"), &json!(1), &json!(64))
        );
        let id = &s["$defs"]["ok.enqueue"];
        assert_eq!(
            (&id["pattern"], &id["minLength"], &id["maxLength"]),
            (&json!("^j[0-9]{16}"), &json!(17), &json!(17))
        );
        assert_eq!(s["$defs"]["ok.promote"]["minimum"], json!(0));
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
