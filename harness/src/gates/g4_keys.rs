//! G4 declared-keys (SPEC §2, §6). Statically: every key a script's `redis.call` names is a
//! `KEYS[n]` within the manifest's count or rooted on `ARGV[1]`. On the engine: every key touched
//! inside each script call (`lua` lines of `MONITOR`) is one of that call's KEYS or under its
//! `ARGV[1]` root, all in one hash slot; afterwards the keyspace parses by §3 with no violation.

use std::collections::{BTreeMap, BTreeSet};

use crate::connector::Verbs;
use crate::gates::{GateContext, GateDb, GateError, GateOutcome};
use crate::observe::{Observed, ScriptCall, Watch, every_transition, keys_of, stable};
use crate::protocol::bundle::Script;
use crate::protocol::grammar::hash_slot;

/// Commands a script may call without a key.
const KEYLESS_IN_SCRIPTS: &[&str] = &["TIME"];

/// The argument list of the call that opens at `open` (the index just after `(`), split at
/// top-level commas.
fn call_args(src: &str, open: usize) -> Option<Vec<String>> {
    let mut depth = 0;
    let mut args = Vec::new();
    let mut cur = String::new();
    let mut quote: Option<char> = None;
    let mut chars = src[open..].chars();
    while let Some(ch) = chars.next() {
        if let Some(q) = quote {
            cur.push(ch);
            if ch == '\\' {
                cur.extend(chars.next());
            } else if ch == q {
                quote = None;
            }
            continue;
        }
        match ch {
            '\'' | '"' => {
                quote = Some(ch);
                cur.push(ch);
            }
            '(' | '{' | '[' => {
                depth += 1;
                cur.push(ch);
            }
            ')' | '}' | ']' if depth > 0 => {
                depth -= 1;
                cur.push(ch);
            }
            ')' => {
                args.push(cur.trim().to_string());
                return Some(args);
            }
            ',' if depth == 0 => args.push(std::mem::take(&mut cur).trim().to_string()),
            _ => cur.push(ch),
        }
    }
    None
}

/// `KEYS[n]` → n.
fn keys_index(expr: &str) -> Option<usize> {
    expr.strip_prefix("KEYS[")?
        .strip_suffix(']')?
        .trim()
        .parse()
        .ok()
}

/// True for an expression that starts from the root: `ARGV[1] .. <anything>`.
fn rooted(expr: &str) -> bool {
    let e: String = expr.chars().filter(|c| !c.is_whitespace()).collect();
    e.starts_with("ARGV[1]..")
}

/// Judges one script's source; returns (key accesses, problems).
pub fn static_check(script: &Script) -> (usize, Vec<String>) {
    let src = String::from_utf8_lossy(&script.source);
    let nkeys = script.entry.keys.len();
    // local <name> = <expr>, one per line (the bundle's style).
    let mut vars: BTreeMap<String, String> = BTreeMap::new();
    for line in src.lines() {
        let l = line.trim();
        if let Some(rest) = l.strip_prefix("local ")
            && let Some((name, expr)) = rest.split_once('=')
        {
            let name = name.trim();
            if name.chars().all(|c| c.is_alphanumeric() || c == '_') {
                vars.insert(name.to_string(), expr.trim().to_string());
            }
        }
    }
    let mut problems = Vec::new();
    let mut accesses = 0;
    for pat in ["redis.call(", "redis.pcall("] {
        for (at, _) in src.match_indices(pat) {
            let Some(args) = call_args(&src, at + pat.len()) else {
                problems.push(format!("unbalanced call at byte {at}"));
                continue;
            };
            let cmd = args[0].trim_matches(['\'', '"']).to_ascii_uppercase();
            if KEYLESS_IN_SCRIPTS.contains(&cmd.as_str()) {
                continue;
            }
            accesses += 1;
            let Some(key) = args.get(1) else {
                problems.push(format!("{cmd} without a key"));
                continue;
            };
            let resolved = vars.get(key.as_str()).map_or(key.as_str(), String::as_str);
            let ok = match keys_index(resolved) {
                Some(n) => (1..=nkeys).contains(&n),
                None => rooted(resolved),
            };
            if !ok {
                problems.push(format!(
                    "{cmd} on {key} (neither KEYS[1..={nkeys}] nor rooted on ARGV[1])"
                ));
            }
        }
    }
    (accesses, problems)
}

/// The gate's check; an `Err` is the gate's ERROR ([`crate::gates::run_gate`] records it).
pub fn check(ctx: &GateContext<'_>, out: &mut GateOutcome) -> Result<(), GateError> {
    static_phase(ctx, out);
    let GateDb { db, url, mut admin } = ctx.database(crate::gates::GateId::G4)?;
    let by_sha: BTreeMap<&str, &str> = ctx
        .bundle
        .scripts
        .iter()
        .map(|s| (s.entry.sha1.as_str(), s.entry.name.as_str()))
        .collect();
    let obs = live_workload(ctx, db, &url, &mut admin, out)?;
    let mut found = Findings::default();
    for call in &obs.scripts {
        found.add(call, &by_sha);
    }
    out.figure("script_calls_observed", found.calls);
    if found.calls == 0 {
        return Err(GateError::Unobserved(
            "showed no command run inside a script",
        ));
    }
    found.judge(out);
    keyspace_after(&mut admin, out)
}

/// 1. Static: every script's key accesses.
fn static_phase(ctx: &GateContext<'_>, out: &mut GateOutcome) {
    for s in &ctx.bundle.scripts {
        let (n, problems) = static_check(s);
        if problems.is_empty() {
            out.pass(format!(
                "{}: {n} key accesses, each KEYS[1..={}] or rooted on ARGV[1]",
                s.entry.name,
                s.entry.keys.len()
            ));
        }
        for p in problems {
            out.fail(format!("{}: {p}", s.entry.name));
        }
    }
}

/// 2. Live: every transition on two queues, watched; a failure of the workload is recorded.
fn live_workload(
    ctx: &GateContext<'_>,
    db: u32,
    url: &crate::engine::Target,
    admin: &mut crate::engine::Admin,
    out: &mut GateOutcome,
) -> Result<Observed, GateError> {
    let mut c = ctx.factory.make()?;
    let watch = Watch::start(admin, db, &[])?;
    let work = c.connect("s", url).and_then(|()| {
        every_transition(&mut *c, "s", "g4")?;
        every_transition(&mut *c, "s", "g4.b-2")
    });
    let obs = watch.stop()?;
    if let Err(e) = work {
        // On a cluster the engine itself refuses a script that touches a key of another slot.
        let cross = ["non local key", "CROSSSLOT", "different slot"]
            .iter()
            .any(|m| e.message.contains(m));
        if cross {
            out.fail(format!(
                "the engine refused a script call that touched a key outside its slot ({}): the keys of one call are not in one slot",
                e.evidence()
            ));
        } else {
            out.fail(format!("the workload failed ({})", e.evidence()));
        }
        out.figure("workload_error", e.message);
    }
    Ok(obs)
}

/// What the observed script calls showed: the bundle's scripts seen, keys touched that were not
/// declared, calls whose keys span slots.
#[derive(Default)]
struct Findings<'a> {
    calls: u64,
    seen: BTreeSet<&'a str>,
    undeclared: BTreeSet<String>,
    split: BTreeSet<String>,
}

impl<'a> Findings<'a> {
    fn add(&mut self, call: &ScriptCall, by_sha: &BTreeMap<&'a str, &'a str>) {
        if call.inner.is_empty() {
            return; // NOSCRIPT, or a script that touched nothing
        }
        self.calls += 1;
        let name = by_sha
            .get(call.sha.as_str())
            .copied()
            .unwrap_or("a foreign script");
        if by_sha.contains_key(call.sha.as_str()) {
            self.seen.insert(name);
        }
        let root = call.argv.first().map(String::as_str).unwrap_or("");
        let mut slots = BTreeSet::new();
        for k in &call.keys {
            slots.insert(hash_slot(k));
        }
        for inner in &call.inner {
            let keys: Vec<&str> = match keys_of(inner) {
                Some(k) => k,
                None => inner.iter().skip(1).take(1).map(String::as_str).collect(),
            };
            for k in keys {
                slots.insert(hash_slot(k));
                let declared = call.keys.iter().any(|d| d == k);
                if !declared && (root.is_empty() || !k.starts_with(root)) {
                    self.undeclared.insert(format!(
                        "{name}: {} {}",
                        inner[0].to_uppercase(),
                        stable(k)
                    ));
                }
            }
        }
        if slots.len() > 1 {
            let mut all: Vec<String> = call.keys.iter().map(|k| stable(k)).collect();
            all.push(format!("{}<id>", stable(root)));
            self.split.insert(format!(
                "{name}: keys in {} slots ({})",
                slots.len(),
                all.join(", ")
            ));
        }
    }

    fn judge(&self, out: &mut GateOutcome) {
        // Coverage is reported, not judged here: a script that is not the bundle's is G2's and
        // G8's finding, a transition done without its script G3's and G8's.
        out.pass(format!(
            "bundle scripts seen running on the engine: {:?}",
            self.seen
        ));
        out.none_of(
            &self.undeclared,
            "every key touched inside a script call is one of its KEYS or under its ARGV[1] root",
            "not:",
        );
        out.none_of(
            &self.split,
            "every script call's keys share one hash slot",
            "not:",
        );
    }
}

/// Afterwards: the keyspace parses by §3.
fn keyspace_after(
    admin: &mut crate::engine::Admin,
    out: &mut GateOutcome,
) -> Result<(), GateError> {
    let ks = admin.keyspace()?;
    let violations = ks.violations();
    out.check(
        violations.is_empty(),
        format!(
            "afterwards every key parses by §3, every hash has exactly payload/attempts/state, state matches its set{}",
            if violations.is_empty() {
                String::new()
            } else {
                format!(
                    "; violations: {:?}",
                    violations.iter().map(|v| stable(v)).collect::<BTreeSet<_>>()
                )
            }
        ),
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::bundle::{Bundle, ScriptEntry};

    #[test]
    fn committed_scripts_pass_and_a_stray_key_fails() {
        let b = Bundle::load_default().unwrap();
        for s in &b.scripts {
            let (n, p) = static_check(s);
            assert!(n > 0 && p.is_empty(), "{}: {p:?}", s.entry.name);
        }
        let bad = Script {
            entry: ScriptEntry {
                name: "x".into(),
                file: "x.lua".into(),
                sha1: String::new(),
                keys: vec!["a".into()],
                argv: vec!["root".into()],
                key_root_argv: 1,
            },
            source: b"local k = 'emq:{q}:other'\nredis.call('DEL', k)\nredis.call('GET', KEYS[2])\nredis.call('SET', ARGV[1] .. 'x', 1)\n".to_vec(),
            sha1: String::new(),
        };
        let (n, p) = static_check(&bad);
        assert_eq!(n, 3);
        assert_eq!(p.len(), 2, "{p:?}");
    }
}
