//! The argument rules every connector enforces before sending a byte (kind `invalid`).
//! Each verb's declaration (`verbs.rs`) names its rules; the ones beyond a
//! plain range live here. `bundle/SPEC.md` states them for other runtimes.

use crate::connector::Request;
use crate::error::ConnectorError;
use crate::protocol::grammar::validate_queue;
use crate::protocol::url::EngineUrl;

/// Largest lease, delay or backoff: keeps `now + ms` an exact integer in Lua's `%.14g`.
pub const MAX_MS: i64 = 1_000_000_000_000;

/// `v` within `lo..=hi`, else `invalid` naming the argument.
pub fn range(name: &str, v: i64, lo: i64, hi: i64) -> Result<(), ConnectorError> {
    if (lo..=hi).contains(&v) {
        Ok(())
    } else {
        Err(ConnectorError::invalid(format!(
            "{name} must be in {lo}..={hi}, got {v}"
        )))
    }
}

/// Checks one request's arguments (not its session: that is the connector's state), by the
/// rules its declaration names (`verbs.rs`).
pub fn validate(req: &Request) -> Result<(), ConnectorError> {
    req.check_args()
}

/// `connect`'s url: SPEC R9.1 ([`EngineUrl`]: `redis://` or `rediss://`, a decimal port
/// and `/db`, on a cluster too: the engine refuses a database it lacks, R8.5), and a `ca_file` only with `rediss://`
/// (R10.1; whether the file reads is the connector's to find, when it opens the session).
pub fn connect_url(
    url: &str,
    cluster: bool,
    ca_file: Option<&str>,
    sentinel: Option<&crate::protocol::sentinel::Sentinels>,
) -> Result<(), ConnectorError> {
    let u = EngineUrl::parse(url).map_err(|e| ConnectorError::invalid(e.to_string()))?;
    if let Some(s) = sentinel {
        if cluster {
            return Err(ConnectorError::invalid(
                "a connect names a cluster or a Sentinel deployment, not both",
            ));
        }
        s.addrs().map_err(ConnectorError::invalid)?;
    }
    if ca_file.is_some() && u.scheme != crate::protocol::url::Scheme::Rediss {
        return Err(ConnectorError::invalid(
            "ca_file is for a rediss:// url only (SPEC R10.1)",
        ));
    }
    Ok(())
}

/// `pipeline_probe`'s key: non-empty and outside EchoMQ's keys.
pub fn probe_key(key: &str) -> Result<(), ConnectorError> {
    if key.is_empty() || key.starts_with("emq:") {
        return Err(ConnectorError::invalid(format!(
            "probe key {key:?} must be non-empty and outside emq:"
        )));
    }
    Ok(())
}

/// `batch`'s `queues`, when given: 1 to 64 valid names, led by `queue` (SPEC R4.12).
pub fn batch_queues(queue: &str, queues: &Option<Vec<String>>) -> Result<(), ConnectorError> {
    let Some(qs) = queues else {
        return Ok(());
    };
    if qs.is_empty() || qs.len() > 64 {
        return Err(ConnectorError::invalid(format!(
            "queues must name 1 to 64 queues, not {}",
            qs.len()
        )));
    }
    for q in qs {
        validate_queue(q)?;
    }
    if qs[0] != *queue {
        return Err(ConnectorError::invalid(format!(
            "queue {queue:?} must be queues[0] ({:?})",
            qs[0]
        )));
    }
    Ok(())
}

#[cfg(test)]
mod cluster_args {
    use super::validate;
    use crate::connector::Request;
    use crate::engine::Target;

    fn connect(url: &str, cluster: bool) -> bool {
        connect_ca(url, cluster, None)
    }

    fn connect_ca(url: &str, cluster: bool, ca_file: Option<&str>) -> bool {
        validate(&Request::connect(
            "s",
            &Target {
                url: url.into(),
                cluster,
                ca_file: ca_file.map(String::from),
                sentinel: None,
            },
        ))
        .is_ok()
    }

    #[test]
    fn a_ca_file_goes_with_rediss_only() {
        assert!(connect_ca(
            "rediss://:pw@localhost:7000/0",
            false,
            Some("/ca.pem")
        ));
        assert!(connect_ca("rediss://:pw@localhost:7000/0", false, None));
        assert!(!connect_ca(
            "redis://:pw@localhost:7000/0",
            false,
            Some("/ca.pem")
        ));
        assert!(connect_ca(
            "rediss://:pw@localhost:7000/0",
            true,
            Some("/ca.pem")
        ));
    }

    fn batch(queue: &str, queues: Vec<&str>) -> bool {
        validate(&Request::Batch {
            session: "s".into(),
            queue: queue.into(),
            n: 1,
            depth: 1,
            payload: String::new(),
            queues: Some(queues.into_iter().map(String::from).collect()),
        })
        .is_ok()
    }

    #[test]
    fn a_cluster_url_names_any_database() {
        assert!(connect("redis://:pw@127.0.0.1:7000/0", true));
        assert!(connect("redis://:pw@127.0.0.1:7000", true));
        // The engine says whether it has database 3 (R8.5), never the client.
        assert!(connect("redis://:pw@127.0.0.1:7000/3", true));
        assert!(connect("redis://:pw@127.0.0.1:7000/16", true));
        assert!(connect("redis://:pw@127.0.0.1:7000/3", false));
        assert!(connect("redis://:pw@127.0.0.1:7000/", true));
    }

    #[test]
    fn a_url_is_redis_with_a_decimal_port_and_database() {
        assert!(connect("redis://model", false));
        assert!(connect("rediss://127.0.0.1:6379/0", false));
        for bad in [
            "unix:///tmp/valkey.sock",
            "http://127.0.0.1:6379/0",
            "redis://127.0.0.1:6379/abc",
            "redis://127.0.0.1:6379/1x",
            "redis://127.0.0.1:notaport/0",
        ] {
            assert!(!connect(bad, false), "{bad}");
        }
    }

    #[test]
    fn queues_are_one_to_sixty_four_names_led_by_queue() {
        assert!(batch("a", vec!["a", "b", "a"]));
        assert!(!batch("b", vec!["a", "b"]));
        assert!(!batch("a", vec![]));
        assert!(!batch("a", vec!["a", "bad name"]));
        let many: Vec<String> = (0..65).map(|i| format!("q{i}")).collect();
        assert!(!batch("q0", many.iter().map(String::as_str).collect()));
        assert!(batch("q0", many[..64].iter().map(String::as_str).collect()));
    }
}

/// SPEC §4 states every bound this module enforces (R4.1–R4.6), and this module enforces every
/// bound SPEC states: each range is read from SPEC's text and tried at both ends and one past.
#[cfg(test)]
mod spec_bounds {
    use serde_json::{Value, json};

    use super::validate;
    use crate::connector::{Cmd, Request};
    use crate::error::ErrorKind;

    /// The `nth` range `lo..=hi` after `` `field` `` in rule `rule`'s text.
    fn bounds(spec: &str, rule: &str, field: &str, nth: usize) -> (i64, i64) {
        let start = spec
            .find(&format!("**{rule}**"))
            .unwrap_or_else(|| panic!("SPEC has no {rule}"));
        let text = &spec[start + 2..];
        let end = text.find("**R").unwrap_or(text.len());
        let text = &text[..end];
        let tick = format!("`{field}`");
        let at = text
            .match_indices(&tick)
            .nth(nth)
            .unwrap_or_else(|| panic!("{rule} names no `{field}` (#{nth})"))
            .0;
        let after = &text[at..];
        let dots = after.find("..=").expect("a range");
        let num = |s: &str| -> i64 {
            s.chars()
                .filter(|c| c.is_ascii_digit())
                .collect::<String>()
                .parse()
                .unwrap()
        };
        let lo_start = after[..dots]
            .rfind(|c: char| !(c.is_ascii_digit() || c == ' '))
            .map_or(0, |i| i + 1);
        let lo = num(&after[lo_start..dots]);
        let hi_text: String = after[dots + 3..]
            .chars()
            .take_while(|c| c.is_ascii_digit() || *c == ' ')
            .collect();
        (lo, num(hi_text.trim_end()))
    }

    fn ok(r: &Request) -> bool {
        match validate(r) {
            Ok(()) => true,
            Err(e) => {
                assert_eq!(e.kind, ErrorKind::Invalid, "{r:?}");
                false
            }
        }
    }

    /// A valid `cmd` request (case defaults, and a valid value for each required argument)
    /// with `field` set to `v`.
    fn with(cmd: Cmd, field: &str, v: i64) -> Request {
        let mut m = serde_json::Map::new();
        m.insert("cmd".into(), json!(cmd.name()));
        m.insert("session".into(), json!("s"));
        for a in cmd.args() {
            let valid = match a.name {
                "queue" => json!("q"),
                "id" => json!("j0000000000000001"),
                "key" => json!("k"),
                _ => a.default.unwrap_or(json!(1)),
            };
            m.insert(a.name.into(), valid);
        }
        m.insert(field.into(), json!(v));
        serde_json::from_value(Value::Object(m)).unwrap()
    }

    #[test]
    fn spec_states_every_bound_the_code_enforces() {
        let spec = std::fs::read_to_string(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../bundle/SPEC.md"),
        )
        .unwrap();
        // (rule, field, which mention of the field in the rule's text, a verb it bounds)
        let stated = [
            ("R4.1", "delay_ms", 0, Cmd::Enqueue),
            ("R4.1", "lease_ms", 0, Cmd::Claim),
            ("R4.1", "backoff_ms", 0, Cmd::Retry),
            ("R4.2", "attempts", 0, Cmd::Complete),
            ("R4.3", "max_attempts", 0, Cmd::Reap),
            ("R4.4", "limit", 0, Cmd::Promote),
            ("R4.4", "offset", 0, Cmd::Browse),
            ("R4.6", "n", 0, Cmd::PipelineProbe),
            ("R4.6", "n", 1, Cmd::Batch),
            ("R4.6", "depth", 0, Cmd::Batch),
        ];
        for (rule, field, nth, cmd) in stated {
            let (lo, hi) = bounds(&spec, rule, field, nth);
            let what = format!("{rule} {field} in {lo}..={hi}");
            let make = |v| with(cmd, field, v);
            assert!(ok(&make(lo)) && ok(&make(hi)), "{what}: an end is refused");
            assert!(
                !ok(&make(lo - 1)) && !ok(&make(hi + 1)),
                "{what}: one past is accepted"
            );
        }
        // Every declared bound is one SPEC states (a field SPEC names for one verb has the same
        // bound on every verb that takes it).
        for cmd in Cmd::ALL {
            for a in cmd.args() {
                let Some(declared) = a.range else { continue };
                let (rule, _, nth, _) = stated
                    .iter()
                    .find(|(_, f, _, c)| *f == a.name && (*c == cmd || *f != "n"))
                    .unwrap_or_else(|| panic!("{cmd} {}: a bound SPEC does not state", a.name));
                assert_eq!(
                    bounds(&spec, rule, a.name, *nth),
                    declared,
                    "{cmd} {}",
                    a.name
                );
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::connect_url;

    /// SPEC R9.1: no `/db` and an empty one both name database 0, on a cluster too.
    #[test]
    fn an_empty_db_is_database_zero() {
        for cluster in [false, true] {
            assert!(connect_url("redis://:pw@127.0.0.1:6379/", cluster, None, None).is_ok());
            assert!(connect_url("redis://:pw@127.0.0.1:6379", cluster, None, None).is_ok());
        }
        assert!(connect_url("redis://127.0.0.1:6379/3", true, None, None).is_ok());
    }
}
