//! G2 sha1 (SPEC §2, §6): for all six scripts sha1(file bytes) = manifest = the engine's
//! `SCRIPT LOAD` reply; the bytes are clean and the digest matches; the connector announces the
//! bundle's SHAs and, on the engine, sends no other (every `EVALSHA` SHA and every `SCRIPT LOAD`
//! or `EVAL` body is a bundle script).

use std::collections::{BTreeMap, BTreeSet};

use crate::connector::{Connector, Verbs};
use crate::engine::Admin;
use crate::gates::{GateContext, GateDb, GateError, GateOutcome};
use crate::observe::{Observed, Watch, every_transition};
use crate::protocol::bundle::sha1_hex;

/// The gate's check; an `Err` is the gate's ERROR ([`crate::gates::run_gate`] records it).
pub fn check(ctx: &GateContext<'_>, out: &mut GateOutcome) -> Result<(), GateError> {
    let GateDb { db, url, mut admin } = ctx.database(crate::gates::GateId::G2)?;
    let bundle_shas = bundle_itself(ctx, &mut admin, out)?;
    let known: BTreeSet<&str> = bundle_shas.values().map(String::as_str).collect();
    let mut c = ctx.factory.make()?;
    announced(&mut *c, &bundle_shas, out);

    // 3. What it sends: after a SCRIPT FLUSH, so its loads are seen too.
    admin.script_flush()?;
    let watch = Watch::start(&mut admin, db, &[])?;
    let work = c
        .connect("s", &url)
        .and_then(|()| every_transition(&mut *c, "s", "g2"));
    let obs = watch.stop()?;
    if let Err(e) = work {
        out.fail(format!("the workload failed ({})", e.evidence()));
        out.figure("workload_error", e.message);
    }
    let seen = Sent::of(&obs, &known);
    out.figure("script_loads_seen", seen.bodies);
    if seen.known.is_empty() && seen.foreign.is_empty() {
        return Err(GateError::Unobserved("saw no script from the connector"));
    }
    out.none_of(
        &seen.foreign,
        "every SHA the connector sent (EVALSHA) or loaded (SCRIPT LOAD, EVAL body) is a bundle SHA",
        "foreign:",
    );
    // Which scripts were used is reported, not judged: a transition done without its script is
    // G3's and G8's finding.
    let names: Vec<&str> = ctx
        .bundle
        .scripts
        .iter()
        .filter(|s| seen.known.contains(&s.entry.sha1))
        .map(|s| s.entry.name.as_str())
        .collect();
    out.pass(format!("bundle scripts the connector sent: {names:?}"));
    Ok(())
}

/// 1. The bundle itself: files, manifest, engine. Returns each script's SHA by name.
fn bundle_itself(
    ctx: &GateContext<'_>,
    admin: &mut Admin,
    out: &mut GateOutcome,
) -> Result<BTreeMap<String, String>, GateError> {
    let bundle = ctx.bundle;
    let problems = bundle.problems();
    for p in &problems {
        out.fail(format!("bundle: {p}"));
    }
    if problems.is_empty() {
        out.pass(format!(
            "bundle {}: bytes clean (UTF-8, no CR, no BOM, one final LF), digest {} matches the files",
            bundle.manifest.bundle, bundle.manifest.digest
        ));
    }
    for s in &bundle.scripts {
        let file = sha1_hex(&s.source);
        let engine = admin.script_load(&s.source)?;
        out.check(
            file == s.entry.sha1 && engine == file,
            format!(
                "{}: sha1(file) {file}, manifest {}, SCRIPT LOAD {engine}",
                s.entry.name, s.entry.sha1
            ),
        );
    }
    Ok(bundle
        .scripts
        .iter()
        .map(|s| (s.entry.name.clone(), s.entry.sha1.clone()))
        .collect())
}

/// 2. What the connector announces: the bundle's SHAs, and no other script.
fn announced(
    c: &mut (dyn Connector + Send),
    bundle_shas: &BTreeMap<String, String>,
    out: &mut GateOutcome,
) {
    match c.hello() {
        Ok(id) => {
            for (name, sha) in bundle_shas {
                let theirs = id.scripts.get(name).map_or("<missing>", String::as_str);
                out.check(
                    theirs == sha,
                    format!("hello: {name} is {theirs} (bundle {sha})"),
                );
            }
            let extra: Vec<&String> = id
                .scripts
                .keys()
                .filter(|k| !bundle_shas.contains_key(*k))
                .collect();
            out.check(
                extra.is_empty(),
                format!("hello names no script outside the bundle (extra: {extra:?})"),
            );
        }
        Err(e) => out.fail(format!("hello failed ({})", e.evidence())),
    }
}

/// The scripts the connector's commands named: bundle SHAs, anything else, and how many
/// `SCRIPT LOAD`s.
struct Sent {
    known: BTreeSet<String>,
    foreign: BTreeSet<String>,
    bodies: u64,
}

impl Sent {
    fn of(obs: &Observed, known: &BTreeSet<&str>) -> Self {
        let mut seen = Sent {
            known: BTreeSet::new(),
            foreign: BTreeSet::new(),
            bodies: 0,
        };
        for (_, a) in obs.every_command() {
            let cmd = a[0].to_ascii_uppercase();
            let sha = match cmd.as_str() {
                "EVALSHA" | "EVALSHA_RO" => a.get(1).map(|s| s.to_ascii_lowercase()),
                "EVAL" | "EVAL_RO" => a.get(1).map(|b| sha1_hex(b.as_bytes())),
                "SCRIPT" if a.get(1).is_some_and(|s| s.eq_ignore_ascii_case("LOAD")) => {
                    seen.bodies += 1;
                    a.get(2).map(|b| sha1_hex(b.as_bytes()))
                }
                _ => None,
            };
            let Some(sha) = sha else { continue };
            if known.contains(sha.as_str()) {
                seen.known.insert(sha);
            } else {
                seen.foreign.insert(format!(
                    "{} {sha}",
                    if cmd == "SCRIPT" {
                        "SCRIPT LOAD"
                    } else {
                        cmd.as_str()
                    }
                ));
            }
        }
        seen
    }
}
