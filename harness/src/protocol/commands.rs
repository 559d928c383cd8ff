//! The commands a connector may send (SPEC R4.13 and R4.19), spelt once: the engine's ACL user
//! for connectors is built from this table (`crate::engine::acl`), the gate names a refused
//! command by it, and a test keeps SPEC's list equal to it. Pure.
//!
//! Valkey checks every command a script calls against the user that called the script, and
//! cannot tell a script's call from one sent on the wire. So the connector's user must also hold
//! what the bundle's scripts call inside ([`Why::Script`]); those a connector may not send itself,
//! and G8 judges that by `MONITOR` (R4.13), not by the ACL.

/// Why a command is in the table: the one reason SPEC gives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Why {
    /// A connector sends it (R4.13's key-naming commands, and the keyless ones of R4.19).
    Sent,
    /// Only a bundle script calls it (inside `EVALSHA`); a connector must not send it.
    Script,
}

/// One command of the table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Allowed {
    /// As `ACL LOG` and `ACL SETUSER` spell it: lower case, `command|subcommand`.
    pub name: &'static str,
    pub why: Why,
    /// The engines that do not know it (Redis before 7.2 has no `CLIENT SETINFO`): an ACL rule
    /// naming an unknown command stops the server at boot, and no client can send it there.
    pub since_redis: Option<(u32, u32)>,
}

const fn sent(name: &'static str) -> Allowed {
    Allowed {
        name,
        why: Why::Sent,
        since_redis: None,
    }
}

const fn script(name: &'static str) -> Allowed {
    Allowed {
        name,
        why: Why::Script,
        since_redis: None,
    }
}

/// SPEC R4.19's list, in its order, then what the scripts call inside. `AUTH`, `HELLO` (and
/// `QUIT`, `RESET`) pass every ACL in Valkey whatever the user holds; they are listed (or not)
/// for SPEC's sake, and granting them changes nothing.
pub const ALLOWED: &[Allowed] = &[
    // The key-naming commands of R4.13.
    sent("evalsha"),
    sent("script|load"),
    sent("zrange"),
    sent("zcard"),
    sent("hget"),
    sent("hmget"),
    sent("hgetall"),
    sent("hsetnx"),
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

/// The commands SPEC R4.19's list names, in its order: the backticked commands that open each
/// of its bullets (before the `:` that gives the reason). Pure; a test keeps it equal to
/// [`sendable`], so SPEC's text and the engine's ACL are one list.
pub fn listed_in_spec(spec: &str) -> Vec<String> {
    let Some(start) = spec.find("**R4.19**") else {
        return Vec::new();
    };
    let rule = &spec[start..];
    let end = rule.find("\n\n").unwrap_or(rule.len());
    let mut out = Vec::new();
    for line in rule[..end].lines() {
        let Some(item) = line.trim_start().strip_prefix("- ") else {
            continue;
        };
        let head = item.split(": ").next().unwrap_or("");
        out.extend(head.split('`').skip(1).step_by(2).map(str::to_string));
    }
    out
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
