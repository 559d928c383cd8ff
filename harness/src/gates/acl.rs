//! SPEC R4.19 for every gate: after the gate, the `ACL LOG` of every node (read by the admin
//! user, then reset) must hold no command refused to a connector and no failed `AUTH` but the
//! harness's own. The engine is the witness, not `MONITOR`: a managed Valkey refuses the same
//! commands to a least-privilege user, and a refused command never reaches `MONITOR` at all.

use crate::engine::Engine;
use crate::engine::admin::Admin;
use crate::engine::admin::acl_log::AclLogEntry;
use crate::protocol::commands::spelt;

use super::{GateContext, GateId, GateOutcome};

/// The FAIL line of one entry, or `None` for the harness's own (its admin user's: G8's unclean
/// failover cuts a replica off with a wrong `masterauth`, on purpose). Pure.
pub fn violation(
    entry: &AclLogEntry,
    admin: Option<&str>,
    connector: Option<&str>,
) -> Option<String> {
    if admin.is_some_and(|a| a == entry.username) {
        return None;
    }
    let times = if entry.count > 1 {
        format!(" ({} times)", entry.count)
    } else {
        String::new()
    };
    let client = if entry.lib_name.is_empty() {
        format!("client {}", entry.addr)
    } else {
        format!("client {} ({})", entry.addr, entry.lib_name)
    };
    let url_user = connector.unwrap_or("(none)");
    Some(match entry.reason.as_str() {
        "auth" => format!(
            "R4.19: AUTH failed as user {:?}{times}, {client}: a connector authenticates as the url's user ({url_user:?}) with AUTH user password",
            entry.username
        ),
        // Only a Sentinel knows `SENTINEL`: what a connector asks there is R11.4's.
        "command" if entry.object.starts_with("sentinel") => format!(
            "R11.4: a Sentinel refused {} to user {:?}{times} ({}), {client}: a Sentinel is asked only what a client asks",
            spelt(&entry.object),
            entry.username,
            entry.context
        ),
        "command" => format!(
            "R4.19: the engine refused {} to user {:?}{times} ({}), {client}: only the commands SPEC R4.19 lists may be sent",
            spelt(&entry.object),
            entry.username,
            entry.context
        ),
        "database" => format!(
            "R8.5: the engine refused database {:?} to user {:?}{times} ({}), {client}: every connection of a session works in the url's database (SELECT on each node connection, the ones that follow a redirect or replace a failed one too)",
            entry.object, entry.username, entry.context
        ),
        other => format!(
            "R4.19: the engine refused {other} {:?} to user {:?}{times} ({}), {client}",
            entry.object, entry.username, entry.context
        ),
    })
}

/// Every node's admin connection: each node of a cluster (replicas too: a connector that reads
/// from one is refused there), or the one engine.
fn nodes(engine: &Engine) -> Vec<Result<Admin, crate::error::HarnessError>> {
    if engine.kind == crate::engine::EngineKind::Sentinel {
        // Every data node, and every Sentinel: what a connector asks a Sentinel is judged
        // there (SPEC R11.4).
        let data = engine.nodes().into_iter().map(|n| engine.node_admin(n));
        let sentinels = engine
            .sentinels()
            .into_iter()
            .map(|s| engine.sentinel_admin(s));
        data.chain(sentinels).collect()
    } else if engine.is_cluster() {
        engine
            .nodes()
            .into_iter()
            .map(|n| engine.node_admin(n))
            .collect()
    } else {
        vec![engine.admin(0)]
    }
}

/// Reads and resets every node's `ACL LOG`, failing `out` with one line per entry that is not
/// the harness's own. An engine the harness did not boot (`--url`) keeps what its url says: it
/// is not judged. A log that cannot be read is an ERROR line (the instrument failed). An entry
/// of another gate's side database belongs to that gate's part still running beside this gate:
/// it is held for it ([`judge_part`]).
pub fn judge_acl(ctx: &GateContext<'_>, out: &mut GateOutcome) {
    judge_acl_except(ctx, out, |_| false);
}

/// [`judge_acl`] in the middle of a gate, but for the entries `expected` picks (a refusal the
/// gate asked the engine for, such as G1's connect to a database the user is not granted):
/// those are not judged, and their number is returned.
pub fn judge_acl_except(
    ctx: &GateContext<'_>,
    out: &mut GateOutcome,
    expected: impl Fn(&AclLogEntry) -> bool,
) -> usize {
    let mut seen = 0;
    for e in take(ctx, out) {
        if expected(&e) {
            seen += 1;
            continue;
        }
        match e.db.and_then(GateId::of_side_db) {
            Some(other) if other != out.id => ctx.engine.hold_acl(e),
            _ => judge(ctx.engine, &e, out),
        }
    }
    seen
}

/// The `ACL LOG` of a part that ran beside later gates (`gates/beside.rs`), judged into its
/// own outcome once it ended: what the gates in front held for it, and what the log holds now
/// (no other gate is running: all of it came from the part).
pub fn judge_part(ctx: &GateContext<'_>, out: &mut GateOutcome) {
    let mut entries = ctx.engine.take_held_acl(out.id.side_db());
    entries.extend(take(ctx, out));
    for e in entries {
        judge(ctx.engine, &e, out);
    }
}

/// Every node's log, oldest first, emptied; none where the harness made no users.
fn take(ctx: &GateContext<'_>, out: &mut GateOutcome) -> Vec<AclLogEntry> {
    let engine = ctx.engine;
    if !engine.has_acl_users() {
        return Vec::new();
    }
    let mut all = Vec::new();
    for node in nodes(engine) {
        match node.and_then(|mut a| a.acl_log_take()) {
            Ok(entries) => all.extend(entries.into_iter().rev()),
            Err(e) => out.error(format!("ACL LOG could not be read (R4.19): {e}")),
        }
    }
    all
}

fn judge(engine: &Engine, e: &AclLogEntry, out: &mut GateOutcome) {
    if let Some(line) = violation(e, engine.admin_user(), engine.connector_user()) {
        out.fail(line);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(reason: &str, object: &str, user: &str) -> AclLogEntry {
        AclLogEntry {
            count: 1,
            reason: reason.into(),
            context: "toplevel".into(),
            object: object.into(),
            username: user.into(),
            addr: "127.0.0.1:5000".into(),
            name: String::new(),
            lib_name: String::new(),
            db: None,
        }
    }

    #[test]
    fn a_refused_command_names_the_rule_the_command_and_the_user_in_one_line() {
        let line = violation(
            &entry("command", "config|get", "emq"),
            Some("emq-admin"),
            Some("emq"),
        )
        .unwrap();
        assert_eq!(
            line,
            "R4.19: the engine refused CONFIG GET to user \"emq\" (toplevel), client 127.0.0.1:5000: only the commands SPEC R4.19 lists may be sent"
        );
        assert!(!line.contains('\n'));
    }

    #[test]
    fn a_failed_auth_as_another_user_fails_and_the_harness_own_entries_do_not() {
        let line = violation(
            &entry("auth", "AUTH", "default"),
            Some("emq-admin"),
            Some("emq"),
        )
        .unwrap();
        assert!(
            line.starts_with("R4.19: AUTH failed as user \"default\""),
            "{line}"
        );
        assert!(line.contains("the url's user (\"emq\")"), "{line}");
        // G8's unclean failover cuts a replica off with a wrong masterauth: the admin's entry.
        assert_eq!(
            violation(
                &entry("auth", "AUTH", "emq-admin"),
                Some("emq-admin"),
                Some("emq")
            ),
            None
        );
        let mut many = entry("command", "info", "emq");
        many.count = 4;
        many.lib_name = "redis-py".into();
        let line = violation(&many, Some("emq-admin"), Some("emq")).unwrap();
        assert!(line.contains("INFO to user \"emq\" (4 times)"), "{line}");
        assert!(line.contains("(redis-py)"), "{line}");
    }
}
