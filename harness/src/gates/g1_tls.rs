//! G1 on a TLS engine (SPEC §10): a connector refuses a server it cannot verify. For one
//! `connect` each, the engine's TLS front presents a certificate from another CA, one of the
//! run's CA for another name, and an expired one (R10.3, R10.4); each `connect` must fail with
//! kind `engine` and no handshake may complete. A `ca_file` that cannot be read is `invalid`,
//! and no connection is opened (R10.1).

use crate::connector::{Connector, Verbs};
use crate::engine::Target;
use crate::error::ErrorKind;
use crate::gates::{GateContext, GateError, GateOutcome};
use crate::tls::relay::{Front, Present};

/// The lies, and the rule each one's refusal keeps.
const LIES: [(Present, &str); 3] = [
    (Present::OtherCa, "R10.3"),
    (Present::OtherName, "R10.4"),
    (Present::Expired, "R10.3"),
];

/// The checks; nothing on an engine without TLS. On a cluster the seed's front presents the
/// lies at `connect`, then a node the session discovers presents them at its first call.
pub fn check(ctx: &GateContext<'_>, out: &mut GateOutcome, url: &Target) -> Result<(), GateError> {
    let seed = ctx.engine.tls().and(
        ctx.engine
            .tls_proxy()
            .or_else(|| ctx.engine.proxy_of(ctx.engine.seed()).ok()),
    );
    let Some(front) = seed.and_then(|p| p.front()) else {
        return Ok(());
    };
    (ctx.progress)("G1: certificates that must be refused (TLS)");
    for (lie, rule) in LIES {
        refused(ctx, out, front, url, lie, rule)?;
    }
    unreadable_ca(ctx, out, front, url)?;
    if ctx.engine.is_cluster() {
        super::g1_tls_nodes::reached_by_name(ctx, out, url)?;
        for (lie, rule) in &LIES[..2] {
            super::g1_tls_nodes::refused_on_discovered(ctx, out, url, *lie, rule)?;
        }
    }
    Ok(())
}

/// One `connect` while the front presents `lie` to every connection.
fn refused(
    ctx: &GateContext<'_>,
    out: &mut GateOutcome,
    front: &Front,
    url: &Target,
    lie: Present,
    rule: &str,
) -> Result<(), GateError> {
    let mut c = ctx.factory.make()?;
    let _ = front.take_presented();
    let since = front.mark();
    front.present(lie);
    let t0 = std::time::Instant::now();
    let r = c.connect("tls-refuse", url);
    let took = t0.elapsed();
    front.present(Present::Good);
    let seen = front.settled(since, took).map_err(GateError::instrument)?;
    let what = lie.describe();
    let accepted: Vec<_> = seen.iter().filter(|p| p.completed).collect();
    match r {
        Ok(()) => out.fail(format!(
            "connect succeeded while the server presented {what}: it must be refused ({rule}), the connection fail with kind engine"
        )),
        Err(e) if e.kind != ErrorKind::Engine => out.fail(format!(
            "connect while the server presented {what} failed with kind {}, not engine (R5.4): {}",
            e.kind, e.message
        )),
        Err(_) if seen.is_empty() => out.fail(format!(
            "connect failed with kind engine while the server presented {what}, but no TLS handshake reached the server: the refusal must come from verifying it ({rule})"
        )),
        Err(_) if !accepted.is_empty() => out.fail(format!(
            "{} of {} TLS handshakes completed while the server presented {what}: the client accepted it ({rule})",
            accepted.len(),
            seen.len()
        )),
        // The connector's words name ports and clocks: a figure, not the held line.
        Err(e) => {
            out.pass(format!(
                "{what} refused at the handshake ({rule}), connect kind engine"
            ));
            out.figure(&format!("tls_refused_{}", lie.key()), e.message);
        }
    }
    let _ = c.call(&crate::connector::Request::Disconnect {
        session: "tls-refuse".into(),
    });
    Ok(())
}

/// `ca_file` naming no file: `invalid`, and no connection opened (R10.1).
fn unreadable_ca(
    ctx: &GateContext<'_>,
    out: &mut GateOutcome,
    front: &Front,
    url: &Target,
) -> Result<(), GateError> {
    let mut c = ctx.factory.make()?;
    let missing = Target {
        ca_file: Some("/nonexistent/emq-gate/ca.pem".into()),
        ..url.clone()
    };
    let before = front.conns();
    let r = c.connect("tls-no-ca", &missing);
    let opened = front.conns() - before;
    match r {
        Err(e) if e.kind == ErrorKind::Invalid && opened == 0 => out.pass(
            "a ca_file that cannot be read is refused with kind invalid, no connection opened (R10.1)",
        ),
        Err(e) if e.kind == ErrorKind::Invalid => out.fail(format!(
            "a ca_file that cannot be read was refused (kind invalid) only after {opened} connection(s) were opened: nothing may be sent (R10.1)"
        )),
        Err(e) => out.fail(format!(
            "a ca_file that cannot be read must be kind invalid (R10.1), got kind {}: {}",
            e.kind, e.message
        )),
        Ok(()) => out.fail(
            "connect succeeded with a ca_file that cannot be read: it must be kind invalid (R10.1)",
        ),
    }
    Ok(())
}
