//! SPEC §5's and §4's answers about the shape of a request, which the typed case format cannot express
//! (a `cmd` that is not a string, a string where an integer goes, `queues: null`, a number with a
//! non-zero fraction, unknown fields), sent as raw JSON lines to every connector in another runtime that
//! `ci/provision` installed: each must answer as SPEC says. The in-process reference has no JSON
//! front end (its requests are typed), so it is not in this test. Outside CI a connector that is
//! not provisioned is skipped with a line; in CI its absence is a failure.

mod common;

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::{Value, json};

/// Each raw request (without `seq`) and the error kind SPEC gives it (`None`: it succeeds;
/// `a|b`: either, where `ok` is a success).
fn script(url: &str) -> Vec<(Value, Option<&'static str>)> {
    vec![
        (
            json!({"cmd": "hello", "protocol": "1"}),
            Some("unsupported"),
        ),
        // SPEC §5: `1.0` is 1 where a runtime cannot tell them apart, else `unsupported`; never
        // `invalid` (hello's protocol is the one field whose bad value is `unsupported`).
        (
            json!({"cmd": "hello", "protocol": 1.0}),
            Some("ok|unsupported"),
        ),
        (json!({"cmd": "hello", "protocol": 2}), Some("unsupported")),
        (json!({"cmd": 5, "session": "s"}), Some("invalid")),
        (
            json!({"cmd": "connect", "session": "s", "url": url, "cluster": false}),
            None,
        ),
        (
            json!({"cmd": "pending_size", "session": "s", "queue": "q", "colour": "blue"}),
            None,
        ),
        (
            json!({"cmd": "claim", "session": "s", "queue": "q", "lease_ms": 1.5}),
            Some("invalid"),
        ),
        (
            json!({"cmd": "claim", "session": "s", "queue": "q", "lease_ms": "5"}),
            Some("invalid"),
        ),
        (
            json!({"cmd": "batch", "session": "s", "queue": "q", "n": 1, "depth": 1,
                   "payload": "", "queues": null}),
            Some("invalid"),
        ),
        (
            json!({"cmd": "pending_size", "session": "s", "queue": "q"}),
            None,
        ),
        // SPEC §5's url rule: a `/` with nothing after it names database 0.
        (
            json!({"cmd": "connect", "session": "d", "url": empty_db(url)}),
            None,
        ),
        (
            json!({"cmd": "pending_size", "session": "d", "queue": "q"}),
            None,
        ),
        (
            json!({"cmd": "batch", "session": "s", "queue": "q", "n": 1, "depth": 1,
                   "payload": "", "queues": []}),
            Some("invalid"),
        ),
    ]
}

/// `url` with its `/db` emptied: `redis://...:port/`.
fn empty_db(url: &str) -> String {
    let (head, _db) = url.rsplit_once('/').expect("a url with a /db");
    format!("{head}/")
}

fn connectors() -> Vec<(&'static str, PathBuf)> {
    [
        ("python", "EMQ_PYTHON_CONNECTOR"),
        ("node", "EMQ_NODE_CONNECTOR"),
        ("go", "EMQ_GO_CONNECTOR"),
        ("elixir", "EMQ_ELIXIR_CONNECTOR"),
    ]
    .into_iter()
    .filter_map(|(name, var)| Some((name, common::provisioned(var)?)))
    .collect()
}

/// Runs `script` through the connector at `path`; returns one line per request that was not
/// answered as SPEC says.
fn wrong_answers(path: &Path, url: &str) -> Vec<String> {
    let bundle = Path::new(env!("CARGO_MANIFEST_DIR")).join("../bundle");
    let version = emq::protocol::bundle::Bundle::load_default()
        .expect("the repository's bundle")
        .manifest
        .bundle
        .clone();
    let mut child = Command::new(path)
        .env("EMQ_BUNDLE_DIR", &bundle)
        .env("EMQ_BUNDLE_VERSION", version)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("the connector starts");
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut wrong = Vec::new();
    for (seq, (mut req, want)) in script(url).into_iter().enumerate() {
        req["seq"] = json!(seq + 1);
        writeln!(stdin, "{req}").unwrap();
        let mut line = String::new();
        stdout.read_line(&mut line).unwrap();
        let reply: Value = serde_json::from_str(&line).unwrap_or(Value::Null);
        let kind = reply["error"]["kind"].as_str();
        let ok = match want {
            Some(k) => k.split('|').any(|k| match k {
                "ok" => reply.get("ok").is_some(),
                k => kind == Some(k),
            }),
            None => reply.get("ok").is_some(),
        };
        if !ok {
            wrong.push(format!(
                "{req} answered {} (SPEC: {})",
                line.trim(),
                want.map_or("success".to_string(), |k| format!("kind {k}"))
            ));
        }
    }
    let _ = writeln!(stdin, "{}", json!({"cmd": "stop", "seq": 99}));
    drop(stdin);
    let _ = child.wait();
    wrong
}

#[test]
fn every_other_runtime_answers_the_request_shapes_as_spec_says() {
    let found = connectors();
    if found.is_empty() {
        return;
    }
    let engine = common::binary_engine();
    let url = engine.url(7);
    let mut wrong = Vec::new();
    for (name, path) in found {
        wrong.extend(
            wrong_answers(&path, &url)
                .into_iter()
                .map(|w| format!("{name}: {w}")),
        );
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}
