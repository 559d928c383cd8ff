//! SPEC §10 through the command line: a connector that answers `rediss://` with kind
//! `unsupported` gets a TLS record that says "TLS not certified" (no verdict, exit 4), and the
//! same connector still passes on an engine without TLS.

mod common;

#[test]
fn a_connector_without_tls_is_not_certified_on_tls_and_judged_without() {
    let Some(python) = common::python_connector() else {
        return;
    };
    let run = |engine: &str| common::g1_of_fixture(&python, "no_tls.py", engine);
    let (code, text) = run("valkey-9.1-tls");
    assert_eq!(code, Some(4), "no verdict: {text}");
    assert!(
        text.contains("**TLS not certified**") || text.contains("TLS not certified"),
        "{text}"
    );
    assert!(
        text.contains("answers a rediss:// connect with kind unsupported (SPEC R10.1): this connector has no TLS"),
        "{text}"
    );
    assert!(!text.contains("FAIL"), "not a failure: {text}");
    let (code, text) = run("valkey-9.1");
    // G1 alone: the other gates are NOT RUN, the run judged on G1, which passes (exit 0).
    assert_eq!(code, Some(0), "{text}");
    assert!(text.contains("PASS 1/1 (7 not run)"), "{text}");
    assert!(
        text.contains("| G1 | fence | **PASS** |"),
        "G1 without TLS passes: {text}"
    );
    assert!(!text.contains("TLS not certified"), "{text}");
}

/// A TLS engine in a container (the run's certificates mounted) and as a binary: the reference
/// connector works over `rediss://`, and a connection that begins in plaintext is recorded by
/// the front with its first bytes (R10.2), never forwarded.
#[test]
fn both_tls_engines_take_rediss_and_see_a_plaintext_first_byte() {
    use emq::connector::Verbs;
    use std::io::{Read, Write};
    let name = emq::engine::named::EngineName::resolve("valkey-9.1-tls")
        .unwrap_or_else(|e| panic!("{e} (run ci/provision)"));
    let mut kinds = vec![emq::engine::EngineChoice::Binary];
    if name
        .image
        .as_deref()
        .is_some_and(emq::engine::container::available)
    {
        kinds.push(emq::engine::EngineChoice::Container);
    } else {
        assert!(!emq::settings::in_ci(), "CI builds the TLS image");
    }
    let bundle = common::bundle();
    for kind in kinds {
        let opts = emq::cmd::matrix::engine_options(&name, kind);
        let engine = emq::engine::Engine::start(&opts).expect("a TLS engine");
        let target = engine.target(7);
        assert!(target.url.starts_with("rediss://"), "{target:?}");
        assert!(target.ca_file.is_some());
        let mut c = emq::connector::reference::Reference::boxed(&bundle);
        c.connect("s", &target)
            .expect("rediss:// with the run's CA");
        let id = c
            .enqueue("s", "q", "over tls", 0)
            .expect("an enqueue over TLS");
        assert!(id.starts_with('j'), "{id}");
        let port = emq::protocol::url::EngineUrl::parse(&target.url)
            .unwrap()
            .port
            .unwrap();
        let mut plain = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
        plain.write_all(b"*1\r\n$4\r\nPING\r\n").unwrap();
        let mut buf = [0u8; 16];
        // The front closes it: end of file (or a reset), never a reply.
        assert!(matches!(plain.read(&mut buf), Ok(0) | Err(_)), "{kind:?}");
        let seen = engine.tls().unwrap().take_plaintext();
        assert_eq!(seen.len(), 1, "{kind:?}: {seen:?}");
        assert!(seen[0].describe().contains("PING"), "{:?}", seen[0]);
    }
}

/// SPEC §10's bad input, both ways round: a `rediss://` url (with the run's CA) to a plaintext
/// engine fails the connect with kind `engine` (bounded by the connect timeout), and so does a
/// `redis://` url to a TLS engine's front (which closes a plaintext connection at once).
#[test]
fn rediss_to_plaintext_and_redis_to_tls_fail_with_kind_engine_in_bounded_time() {
    use emq::connector::Verbs;
    use emq::protocol::url::{EngineUrl, Scheme};
    let bundle = common::bundle();
    let tls = common::tls_engine();
    let plain = common::binary_engine();
    let tls_target = tls.target(3);
    let mut to_plain = plain.target(3);
    to_plain.url = EngineUrl {
        scheme: Scheme::Rediss,
        ..EngineUrl::parse(&to_plain.url).unwrap()
    }
    .to_string();
    to_plain.ca_file = tls_target.ca_file.clone();
    let mut to_tls = tls_target.clone();
    to_tls.url = EngineUrl {
        scheme: Scheme::Redis,
        ..EngineUrl::parse(&tls_target.url).unwrap()
    }
    .to_string();
    to_tls.ca_file = None;
    for (what, target) in [
        ("rediss:// to plaintext", to_plain),
        ("redis:// to TLS", to_tls),
    ] {
        let mut c = emq::connector::reference::Reference::boxed(&bundle);
        let e = c
            .connect("s", &target)
            .expect_err(&format!("{what}: the connect must fail"));
        assert_eq!(e.kind, emq::error::ErrorKind::Engine, "{what}: {e:?}");
    }
    assert_eq!(
        tls.tls().unwrap().take_plaintext().len(),
        1,
        "the front saw the plaintext one"
    );
}

/// A connector that, its TLS handshake refused, dials the same url again in plaintext (R10.2
/// broken after a refusal): each refusal of G1 opens one TLS connection and one plaintext one.
struct FallBackToPlaintext(emq::connector::reference::Reference);

impl emq::connector::Connector for FallBackToPlaintext {
    fn call(
        &mut self,
        request: &emq::connector::Request,
    ) -> Result<emq::connector::Reply, emq::error::ConnectorError> {
        let first = self.0.call(request);
        match (emq::doubles::tls::in_plaintext(request), &first) {
            (Some(plain), Err(_)) => self.0.call(&plain),
            _ => first,
        }
    }
}

/// Issue item 2's G1: plaintext after a refused handshake is a proven breach (R10.2), so G1 is
/// FAIL, not ERROR; and the front counts the plaintext connection as the connection it is, so
/// no "recorded 1 of the 2 handshakes" ERROR stands beside it. `PlaintextOnRediss` (plaintext
/// from the first connect) is FAIL the same way.
#[test]
fn plaintext_at_a_tls_front_fails_g1_and_is_no_error() {
    use emq::gates::{GateId, Severity, Verdict};
    let engine = common::tls_engine();
    let bundle = common::bundle();
    let b = bundle.clone();
    let fallback =
        move || -> Result<Box<dyn emq::connector::Connector + Send>, emq::error::HarnessError> {
            Ok(Box::new(FallBackToPlaintext(
                emq::connector::reference::Reference::new(&b),
            )))
        };
    let double = emq::doubles::Double::PlaintextOnRediss.factory(&bundle);
    let makers: [(&str, &dyn emq::gates::ConnectorFactory); 2] = [
        ("fallback", &fallback),
        ("PlaintextOnRediss", double.as_ref()),
    ];
    for (name, make) in makers {
        let ctx = common::gate_context(&engine, &bundle, make);
        let out = common::run(&ctx, GateId::G1);
        let lines: Vec<String> = out.evidence.iter().map(ToString::to_string).collect();
        assert_eq!(out.verdict, Verdict::Fail, "{name}: {lines:#?}");
        assert!(
            out.evidence
                .iter()
                .any(|e| e.severity == Severity::Fail && e.text.contains("R10.2")),
            "{name}: {lines:#?}"
        );
        assert!(
            !lines
                .iter()
                .any(|l| l.contains("handshakes it was presented")
                    || l.contains("connections it was given end")),
            "{name}: the plaintext connection is no missing handshake: {lines:#?}"
        );
    }
}

/// `CLUSTER SHARDS` on the TLS cluster, as a client reads it (P4.9, R10.4): every node's
/// `endpoint` is the host name the certificates name, its address is in `ip` only, it has no
/// plaintext `port`, and each primary's `tls-port` and ranges are what `CLUSTER SLOTS` names
/// (the node's front). The double `ShardsIpOnly` dials that `ip`.
#[test]
fn cluster_shards_on_the_tls_cluster_names_the_host_and_the_fronts() {
    use emq::engine::admin::shards::{SlotRange, parse_cluster_slots};
    use emq::engine::topology::shards::parse_shards;
    let engine = common::tls_cluster_engine();
    let mut admin = engine.admin(0).unwrap();
    let v: redis::Value = admin.query(&["CLUSTER", "SLOTS"]).unwrap();
    let slots = parse_cluster_slots(&v).unwrap();
    let v: redis::Value = admin.query(&["CLUSTER", "SHARDS"]).unwrap();
    let shards = parse_shards(&v).unwrap();
    for n in shards.iter().flat_map(|s| &s.nodes) {
        assert_eq!(n.host(), Some("localhost"), "{n:?}");
        assert_eq!((n.ip.as_str(), n.port), ("127.0.0.1", None), "{n:?}");
    }
    let mut primaries: Vec<(u16, Vec<SlotRange>)> = shards
        .iter()
        .filter(|s| !s.ranges.is_empty())
        .map(|s| (s.primary().unwrap().tls_port.unwrap(), s.ranges.clone()))
        .collect();
    primaries.sort_by_key(|(_, r)| r[0]);
    let named: Vec<(u16, Vec<SlotRange>)> = slots.iter().map(|(p, r, _)| (*p, r.clone())).collect();
    assert_eq!(primaries, named);
}
