//! The commands a connector may send (SPEC R4.13 and R4.19), spelt once: the engine's ACL user
//! for connectors is built from this table (`crate::engine::acl`), the gate names a refused
//! command by it, G8's `MONITOR` check reads which EchoMQ keys each may name (R4.13), and tests
//! keep SPEC's two lists equal to it. Pure.
//!
//! Valkey checks every command a script calls against the user that called the script, and
//! cannot tell a script's call from one sent on the wire. So the connector's user must also hold
//! what the bundle's scripts call inside ([`Why::Script`]); those a connector may not send itself,
//! and G8 judges that by `MONITOR` (R4.13), not by the ACL.

use crate::protocol::grammar::FENCE_KEY;

/// Why a command is in the table: the one reason SPEC gives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Why {
    /// A connector sends it (R4.13's key-naming commands, and the keyless ones of R4.19).
    Sent,
    /// Only a bundle script calls it (inside `EVALSHA`); a connector must not send it.
    Script,
}

/// Which EchoMQ keys a command sent on its own (not inside a script) may name: SPEC R4.13.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Keys {
    /// None as R4.13 reads it: a keyless command, or one judged apart (a script call by its
    /// SHA, the probe's `INCR` by its key, neither an EchoMQ key).
    None,
    /// Any EchoMQ key: the two reads (R2.5, R2.6).
    Any,
    /// `emq:fence` alone: its read and its install (R3.1, R3.2).
    Fence,
}

/// One command of the table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Allowed {
    /// As `ACL LOG` and `ACL SETUSER` spell it: lower case, `command|subcommand`.
    pub name: &'static str,
    pub why: Why,
    /// The EchoMQ keys it may name (R4.13).
    pub keys: Keys,
    /// The engines that do not know it (Redis before 7.2 has no `CLIENT SETINFO`): an ACL rule
    /// naming an unknown command stops the server at boot, and no client can send it there.
    pub since_redis: Option<(u32, u32)>,
}

const fn sent(name: &'static str) -> Allowed {
    Allowed {
        name,
        why: Why::Sent,
        keys: Keys::None,
        since_redis: None,
    }
}

/// One of the two reads' commands, on any EchoMQ key (R4.13).
const fn read(name: &'static str) -> Allowed {
    Allowed {
        keys: Keys::Any,
        ..sent(name)
    }
}

/// The fence's read or install, on `emq:fence` only (R4.13).
const fn fence(name: &'static str) -> Allowed {
    Allowed {
        keys: Keys::Fence,
        ..sent(name)
    }
}

const fn script(name: &'static str) -> Allowed {
    Allowed {
        name,
        why: Why::Script,
        keys: Keys::None,
        since_redis: None,
    }
}

/// SPEC R4.19's list, in its order, then what the scripts call inside. `AUTH`, `HELLO` (and
/// `QUIT`, `RESET`) pass every ACL in Valkey whatever the user holds; they are listed (or not)
/// for SPEC's sake, and granting them changes nothing.
pub const ALLOWED: &[Allowed] = &[
    // The key-naming commands of R4.13 (a script call's keys are judged by its SHA).
    sent("evalsha"),
    sent("script|load"),
    read("zrange"),
    read("zcard"),
    read("hget"),
    read("hmget"),
    fence("hgetall"),
    fence("hsetnx"),
    sent("multi"),
    sent("exec"),
    sent("discard"),
    sent("incr"),
    // Connection set-up.
    sent("auth"),
    sent("hello"),
    sent("select"),
    sent("ping"),
    Allowed {
        since_redis: Some((7, 2)),
        ..sent("client|setinfo")
    },
    sent("client|setname"),
    // A Sentinel deployment's check of the node a Sentinel named (SPEC R11.2).
    sent("role"),
    // A cluster client (SPEC §8).
    sent("cluster|slots"),
    sent("cluster|shards"),
    sent("cluster|nodes"),
    sent("asking"),
    // Inside the bundle's scripts only.
    script("del"),
    script("hincrby"),
    script("hset"),
    script("time"),
    script("zadd"),
    script("zpopmin"),
    script("zrem"),
    script("zscore"),
];

/// The commands a connector may send, as SPEC R4.19 lists them (upper case, a space before a
/// subcommand: `CLIENT SETINFO`), in the table's order.
pub fn sendable() -> Vec<String> {
    ALLOWED
        .iter()
        .filter(|a| a.why == Why::Sent)
        .map(|a| spelt(a.name))
        .collect()
}

/// `client|setinfo` → `CLIENT SETINFO`: how SPEC and the evidence spell a command.
pub fn spelt(acl_name: &str) -> String {
    acl_name.replace('|', " ").to_ascii_uppercase()
}

/// The ACL rules of the connector's user on an engine: every key (`~*`), no channel, no command
/// but the table's. `redis` is the engine's Redis version when it is Redis (`None` for Valkey,
/// which knows every command of the table).
pub fn acl_rules(redis: Option<(u32, u32)>) -> Vec<String> {
    let mut rules: Vec<String> = ["~*", "resetchannels", "-@all"].map(String::from).to_vec();
    for a in ALLOWED {
        let known = match (a.since_redis, redis) {
            (Some(since), Some(version)) => version >= since,
            _ => true,
        };
        if known {
            rules.push(format!("+{}", a.name));
        }
    }
    rules
}

/// True when a connector may send `acl_name` (as `ACL LOG` names it: `info`, `client|list`).
pub fn may_send(acl_name: &str) -> bool {
    let name = acl_name.to_ascii_lowercase();
    ALLOWED.iter().any(|a| a.why == Why::Sent && a.name == name)
}

/// True when SPEC R4.13 lets a connector send `cmd` (a command's first word, any case) on its
/// own naming the EchoMQ keys `keys`: a read on any, the fence's read and install on
/// `emq:fence` alone. A script call (`EVALSHA`) is judged by its SHA, not here.
pub fn may_name(cmd: &str, keys: &[&str]) -> bool {
    match keys_allowed(cmd) {
        Keys::Any => true,
        Keys::Fence => keys == [FENCE_KEY],
        Keys::None => false,
    }
}

/// The EchoMQ keys R4.13 lets `cmd` (a command's first word, any case) name on its own:
/// [`Keys::Any`] for a read's command; [`Keys::None`] for one the table does not hold.
pub fn keys_allowed(cmd: &str) -> Keys {
    let name = cmd.to_ascii_lowercase();
    ALLOWED
        .iter()
        .find(|a| a.name == name)
        .map_or(Keys::None, |a| a.keys)
}

/// The commands SPEC R4.19's list names, in its order: the backticked commands that open each
/// of its bullets (before the `:` that gives the reason). Pure; a test keeps it equal to
/// [`sendable`], so SPEC's text and the engine's ACL are one list.
pub fn listed_in_spec(spec: &str) -> Vec<String> {
    bullets(spec, "R4.19")
        .into_iter()
        .flat_map(|item| backticked(item.split(": ").next().unwrap_or("")))
        .collect()
}

/// The bullets of SPEC rule `id` (`R4.19`): the lines after its heading that open with `- `, up
/// to the first blank line (a bullet's first line only).
fn bullets<'s>(spec: &'s str, id: &str) -> Vec<&'s str> {
    let Some(start) = spec.find(&format!("**{id}**")) else {
        return Vec::new();
    };
    let rule = &spec[start..];
    let end = rule.find("\n\n").unwrap_or(rule.len());
    rule[..end]
        .lines()
        .filter_map(|line| line.trim_start().strip_prefix("- "))
        .collect()
}

/// The words of `text` in backticks, in order.
fn backticked(text: &str) -> Vec<String> {
    text.split('`')
        .skip(1)
        .step_by(2)
        .map(str::to_string)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spec_lists_exactly_the_commands_the_connector_user_may_send() {
        let spec = include_str!("../../../bundle/SPEC.md");
        assert_eq!(listed_in_spec(spec), sendable());
    }

    #[test]
    fn spec_r4_13_names_the_reads_and_the_fence_commands_of_the_table() {
        let spec = include_str!("../../../bundle/SPEC.md");
        let of = |keys: Keys| -> Vec<String> {
            ALLOWED
                .iter()
                .filter(|a| a.keys == keys)
                .map(|a| spelt(a.name))
                .collect()
        };
        let items = bullets(spec, "R4.13");
        assert_eq!(items.len(), 3, "{items:?}");
        assert_eq!(backticked(items[1]), of(Keys::Any), "the two reads");
        let fence_bullet = backticked(items[2]);
        assert!(fence_bullet.contains(&FENCE_KEY.to_string()));
        for c in of(Keys::Fence) {
            assert!(fence_bullet.contains(&c), "{c} is not in {fence_bullet:?}");
        }
        assert_eq!(of(Keys::Fence), ["HGETALL", "HSETNX"]);
    }

    #[test]
    fn r4_13_lets_the_reads_name_any_key_and_the_fence_commands_the_fence_alone() {
        for read in ["ZRANGE", "zcard", "HGET", "HMGET"] {
            assert!(may_name(read, &["emq:{q}:pending"]), "{read}");
            assert!(may_name(read, &[FENCE_KEY]), "{read}");
        }
        for f in ["HGETALL", "hsetnx"] {
            assert!(may_name(f, &[FENCE_KEY]), "{f}");
            assert!(!may_name(f, &["emq:{q}:job:j1"]), "{f}");
            assert!(!may_name(f, &[FENCE_KEY, FENCE_KEY]), "{f}");
        }
        for other in [
            "EVALSHA", "SCRIPT", "INCR", "HSET", "DEL", "ZADD", "MULTI", "INFO",
        ] {
            assert!(!may_name(other, &[FENCE_KEY]), "{other}");
        }
        assert_eq!(keys_allowed("hmget"), Keys::Any);
        assert_eq!(keys_allowed("HSETNX"), Keys::Fence);
        assert_eq!(keys_allowed("KEYS"), Keys::None);
    }

    #[test]
    fn the_connector_user_holds_the_table_and_nothing_else() {
        let rules = acl_rules(None);
        assert_eq!(rules[..3], ["~*", "resetchannels", "-@all"]);
        assert!(rules.contains(&"+evalsha".to_string()));
        assert!(rules.contains(&"+client|setinfo".to_string()));
        assert!(rules.contains(&"+zadd".to_string()), "the scripts call it");
        assert!(
            !rules
                .iter()
                .any(|r| r == "+info" || r == "+client" || r == "+@all")
        );
        assert_eq!(rules.len(), 3 + ALLOWED.len());
    }

    #[test]
    fn a_redis_without_client_setinfo_gets_a_user_without_it() {
        let old = acl_rules(Some((7, 0)));
        assert!(!old.contains(&"+client|setinfo".to_string()));
        assert!(old.contains(&"+client|setname".to_string()));
        assert!(acl_rules(Some((7, 2))).contains(&"+client|setinfo".to_string()));
    }

    #[test]
    fn what_a_script_calls_is_granted_but_not_sendable() {
        assert!(may_send("evalsha") && may_send("CLIENT|SETINFO") && may_send("cluster|slots"));
        for refused in [
            "info",
            "zadd",
            "del",
            "keys",
            "config|get",
            "client|list",
            "command",
        ] {
            assert!(!may_send(refused), "{refused}");
        }
        assert_eq!(spelt("client|setinfo"), "CLIENT SETINFO");
        assert!(sendable().contains(&"SCRIPT LOAD".to_string()));
        assert!(!sendable().contains(&"ZADD".to_string()));
    }
}
