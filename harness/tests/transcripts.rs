//! `bundle/transcripts/*.jsonl`: recorded wire sessions, one per verb and per error kind, beside
//! `bundle/wire-v1.schema.json`. Every line must read as the types that schema is generated from
//! read it (requests as a `Request`, replies as `reply.<cmd>` of the request with the same seq:
//! `emq::connector::schema::{check_request, check_reply}`).
//!
//! `EMQ_BLESS=1 cargo test -p emq-harness --test transcripts` records them again from the
//! reference connector on a binary engine (urls and passwords are replaced by placeholders).
//! `error-internal` cannot be provoked from a correct connector; it is recorded from a stand-in
//! that fails the way a buggy connector does.

mod common;

use std::collections::BTreeMap;
use std::path::PathBuf;

use emq::connector::reference::Reference;
use emq::connector::schema::{check_reply, check_request};
use emq::connector::{Connector, Reply, Request};
use emq::error::{ConnectorError, ErrorKind};
use serde_json::{Value, json};

fn dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../bundle/transcripts")
}

/// One transcript per verb (the schema's list) and per error kind.
const ERROR_FILES: [&str; 5] = [
    "error-fence",
    "error-invalid",
    "error-engine",
    "error-unsupported",
    "error-internal",
];

fn files() -> Vec<&'static str> {
    emq::connector::schema::CMDS
        .into_iter()
        .chain(ERROR_FILES)
        .collect()
}

#[test]
fn every_transcript_line_validates() {
    for name in files() {
        let path = dir().join(format!("{name}.jsonl"));
        let text = std::fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("{}: {e} (record with EMQ_BLESS=1)", path.display()));
        let mut cmds: BTreeMap<u64, String> = BTreeMap::new();
        let mut replies = 0;
        for (i, line) in text.lines().enumerate() {
            let at = format!("{}:{}", path.display(), i + 1);
            let v: Value = serde_json::from_str(line).unwrap_or_else(|e| panic!("{at}: {e}"));
            let seq = v["seq"].as_u64();
            if let Some(cmd) = v.get("cmd").and_then(Value::as_str) {
                check_request(&v).unwrap_or_else(|e| panic!("{at}: {e}"));
                if let Some(s) = seq {
                    cmds.insert(s, cmd.to_string());
                }
            } else {
                let cmd = seq
                    .and_then(|s| cmds.get(&s))
                    .unwrap_or_else(|| panic!("{at}: a reply to no request"));
                check_reply(cmd, &v).unwrap_or_else(|e| panic!("{at}: {e}"));
                replies += 1;
            }
        }
        assert!(replies > 0, "{}: no replies", path.display());
        if let Some(kind) = name.strip_prefix("error-") {
            assert!(
                text.contains(&format!("\"kind\":\"{kind}\"")),
                "{}: no error of kind {kind}",
                path.display()
            );
        }
    }
}

/// Writes what passes through as wire lines.
struct Recorder<'a> {
    inner: &'a mut dyn Connector,
    seq: u64,
    lines: Vec<String>,
}

impl Connector for Recorder<'_> {
    fn call(&mut self, request: &Request) -> Result<Reply, ConnectorError> {
        self.seq += 1;
        let mut req = serde_json::to_value(request).unwrap();
        req["seq"] = json!(self.seq);
        self.lines.push(req.to_string());
        let r = self.inner.call(request);
        let reply = match &r {
            Ok(ok) => json!({"seq": self.seq, "ok": ok.to_json()}),
            Err(e) => json!({"seq": self.seq, "error": e}),
        };
        self.lines.push(reply.to_string());
        r
    }
}

/// A stand-in for a connector with a bug: everything but hello is `internal`.
struct Buggy;

impl Connector for Buggy {
    fn call(&mut self, request: &Request) -> Result<Reply, ConnectorError> {
        match request {
            Request::Hello { .. } => Ok(Reply::Hello(emq::connector::Identity {
                name: "buggy".into(),
                version: "0.0.0".into(),
                language: "none".into(),
                bundle: "1.0.0".into(),
                scripts: Default::default(),
            })),
            // A connected session, so the claim below is not `invalid` (R4.8) but a bug.
            Request::Connect { .. } => Ok(Reply::Unit),
            _ => Err(ConnectorError::new(
                ErrorKind::Internal,
                "KeyError: 'attempts' (a bug in the connector)",
            )),
        }
    }
}

fn script(name: &str, url: &str, bad_url: &str) -> Vec<Request> {
    let s = || "w1".to_string();
    let q = || "orders".to_string();
    let id = |n: u32| format!("j{n:016}");
    let enq = |p: &str, d: i64| Request::Enqueue {
        session: s(),
        queue: q(),
        payload: p.into(),
        delay_ms: d,
    };
    let claim = |l: i64| Request::Claim {
        session: s(),
        queue: q(),
        lease_ms: l,
    };
    let mut r = vec![Request::Hello { protocol: 1 }];
    let connect = Request::connect(s(), &url.into());
    match name {
        "hello" => {}
        "error-internal" => r.push(connect),
        "error-unsupported" => r = vec![Request::Hello { protocol: 2 }],
        "error-fence" => r.push(connect),
        "error-engine" => r.push(Request::connect(s(), &bad_url.into())),
        _ => r.push(connect),
    }
    let more: Vec<Request> = match name {
        "disconnect" => vec![Request::Disconnect { session: s() }],
        "enqueue" => vec![enq("hello", 0), enq("later", 60_000)],
        "browse" => vec![
            enq("a", 0),
            enq("b", 0),
            Request::Browse {
                session: s(),
                queue: q(),
                offset: 0,
                limit: 10,
            },
        ],
        "pending_size" => vec![
            enq("a", 0),
            Request::PendingSize {
                session: s(),
                queue: q(),
            },
        ],
        "claim" => vec![enq("hello", 0), claim(30_000), claim(30_000)],
        "complete" => {
            let c = || Request::Complete {
                session: s(),
                queue: q(),
                id: id(1),
                attempts: 1,
            };
            vec![enq("hello", 0), claim(30_000), c(), c()]
        }
        "retry" | "promote" => {
            let retry = |a, m| Request::Retry {
                session: s(),
                queue: q(),
                id: id(1),
                attempts: a,
                backoff_ms: 0,
                max_attempts: m,
            };
            let promote = Request::Promote {
                session: s(),
                queue: q(),
                limit: 10,
            };
            if name == "promote" {
                vec![enq("hello", 0), claim(0), retry(1, 3), promote]
            } else {
                vec![
                    enq("hello", 0),
                    claim(0),
                    retry(1, 3),
                    promote,
                    claim(0),
                    retry(2, 2),
                    retry(2, 2),
                ]
            }
        }
        "reap" => vec![
            enq("hello", 0),
            claim(0),
            Request::Reap {
                session: s(),
                queue: q(),
                max_attempts: 3,
                limit: 10,
            },
        ],
        "pipeline_probe" => vec![Request::PipelineProbe {
            session: s(),
            key: "emq-transcript-probe".into(),
            n: 5,
        }],
        "batch" => vec![Request::Batch {
            session: s(),
            queue: q(),
            n: 10,
            depth: 4,
            payload: "x".into(),
            queues: None,
        }],
        "error-invalid" => vec![
            claim(-1),
            Request::Enqueue {
                session: s(),
                queue: "bad queue".into(),
                payload: "p".into(),
                delay_ms: 0,
            },
            Request::PendingSize {
                session: "nobody".into(),
                queue: q(),
            },
        ],
        "error-internal" => vec![claim(30_000)],
        _ => vec![],
    };
    r.extend(more);
    r
}

#[test]
fn record_transcripts_when_blessing() {
    if !emq::settings::bless() {
        return;
    }
    let engine = common::binary_engine();
    let bundle = common::bundle();
    std::fs::create_dir_all(dir()).unwrap();
    for (i, name) in files().iter().enumerate() {
        let db = 100 + i as u32;
        let mut admin = engine.prepare_db(db).unwrap();
        if *name == "error-fence" {
            admin
                .hset(
                    "emq:fence",
                    &[("protocol", "2"), ("bundle", "2.0.0"), ("digest", "x")],
                )
                .unwrap();
        }
        let url = engine.url(db);
        let (host_port_db, _) = (url.rsplit('@').next().unwrap().to_string(), ());
        // The url's user with a wrong password (SPEC R4.19: the url names a user).
        let bad_url = format!("redis://emq:wrong-password@{host_port_db}");
        let mut reference = Reference::new(&bundle);
        let mut buggy = Buggy;
        let inner: &mut dyn Connector = if *name == "error-internal" {
            &mut buggy
        } else {
            &mut reference
        };
        let mut rec = Recorder {
            inner,
            seq: 0,
            lines: Vec::new(),
        };
        for req in script(name, &url, &bad_url) {
            let _ = rec.call(&req);
        }
        let stop = json!({"seq": rec.seq + 1, "cmd": "stop"}).to_string();
        rec.lines.push(stop);
        let mut text = rec.lines.join("\n") + "\n";
        text = text
            .replace(&url, "redis://emq:PASSWORD@127.0.0.1:PORT/0")
            .replace(&bad_url, "redis://emq:wrong-password@127.0.0.1:PORT/0")
            .replace(&host_port_db, "127.0.0.1:PORT/0");
        std::fs::write(dir().join(format!("{name}.jsonl")), text).unwrap();
    }
}
