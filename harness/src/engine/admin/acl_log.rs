//! `ACL LOG`, read and emptied by the harness's admin user: what the engine refused, and to whom
//! (SPEC R4.19). The parse is pure ([`parse_acl_log`]) and unit-tested; [`super::Admin::acl_log`]
//! is the I/O.

use redis::Value;

/// One entry of `ACL LOG`: a refused command (`reason` `command`, `key` or `channel`) or a failed
/// `AUTH` (`reason` `auth`), grouped by the engine (`count`) while they repeat.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AclLogEntry {
    pub count: u64,
    /// `command`, `key`, `channel` or `auth`.
    pub reason: String,
    /// `toplevel`, `multi`, `lua` or `module`.
    pub context: String,
    /// The command as ACL names it (`info`, `client|list`), the key or channel, or `AUTH`.
    pub object: String,
    /// The user the connection was authenticated as, or (for `auth`) the user it tried.
    pub username: String,
    /// From `client-info`: the client's address (`127.0.0.1:50012`).
    pub addr: String,
    /// From `client-info`: the name and library the client gave (`CLIENT SETNAME`, `SETINFO`).
    pub name: String,
    pub lib_name: String,
    /// From `client-info`: the database the connection had selected, when it says (a part run
    /// beside a gate works on a database of its own, `gates/beside.rs`).
    pub db: Option<u32>,
}

impl AclLogEntry {
    /// True for a failed `AUTH` (a wrong password, a disabled or unknown user).
    pub fn is_auth(&self) -> bool {
        self.reason == "auth"
    }
}

fn text(v: &Value) -> Option<String> {
    match v {
        Value::BulkString(b) => Some(String::from_utf8_lossy(b).into_owned()),
        Value::SimpleString(s) => Some(s.clone()),
        Value::VerbatimString { text, .. } => Some(text.clone()),
        Value::Int(n) => Some(n.to_string()),
        Value::Double(d) => Some(d.to_string()),
        _ => None,
    }
}

/// A field of `client-info` (`addr=127.0.0.1:5 name= ...`): the value after `key=`, up to the
/// next space.
fn client_field(info: &str, key: &str) -> String {
    info.split(' ')
        .find_map(|f| f.strip_prefix(key)?.strip_prefix('='))
        .unwrap_or("")
        .to_string()
}

/// The reply of `ACL LOG`: an array of entries, each an array of field names and values (RESP2)
/// or a map (RESP3). An entry with a field it cannot read is an error naming it.
pub fn parse_acl_log(v: &Value) -> Result<Vec<AclLogEntry>, String> {
    let Value::Array(entries) = v else {
        return Err(format!("ACL LOG replied {v:?}, not an array"));
    };
    entries
        .iter()
        .map(|e| {
            let pairs: Vec<(String, String)> = match e {
                Value::Array(items) => items
                    .chunks(2)
                    .filter_map(|p| Some((text(p.first()?)?, text(p.get(1)?).unwrap_or_default())))
                    .collect(),
                Value::Map(items) => items
                    .iter()
                    .filter_map(|(k, v)| Some((text(k)?, text(v).unwrap_or_default())))
                    .collect(),
                other => return Err(format!("an ACL LOG entry is {other:?}")),
            };
            let field = |k: &str| {
                pairs
                    .iter()
                    .find(|(name, _)| name == k)
                    .map(|(_, v)| v.clone())
            };
            let reason = field("reason").ok_or("an ACL LOG entry without a reason")?;
            let info = field("client-info").unwrap_or_default();
            Ok(AclLogEntry {
                count: field("count").and_then(|c| c.parse().ok()).unwrap_or(1),
                reason,
                context: field("context").unwrap_or_default(),
                object: field("object").unwrap_or_default(),
                username: field("username").unwrap_or_default(),
                addr: client_field(&info, "addr"),
                name: client_field(&info, "name"),
                lib_name: client_field(&info, "lib-name"),
                db: client_field(&info, "db").parse().ok(),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bulk(s: &str) -> Value {
        Value::BulkString(s.as_bytes().to_vec())
    }

    fn entry(reason: &str, object: &str, user: &str) -> Value {
        Value::Array(vec![
            bulk("count"),
            Value::Int(3),
            bulk("reason"),
            bulk(reason),
            bulk("context"),
            bulk("toplevel"),
            bulk("object"),
            bulk(object),
            bulk("username"),
            bulk(user),
            bulk("age-seconds"),
            bulk("0.007"),
            bulk("client-info"),
            bulk(
                "id=10 addr=127.0.0.1:62590 laddr=127.0.0.1:47125 fd=11 name= age=0 db=951 cmd=client|setinfo user=emq lib-name=redis-rs lib-ver=1.8.1",
            ),
            bulk("entry-id"),
            Value::Int(1),
        ])
    }

    #[test]
    fn a_refused_command_and_a_failed_auth_are_read_with_their_user_and_client() {
        let log = Value::Array(vec![
            entry("command", "client|list", "emq"),
            entry("auth", "AUTH", "default"),
        ]);
        let got = parse_acl_log(&log).unwrap();
        assert_eq!(got.len(), 2);
        assert_eq!(
            got[0],
            AclLogEntry {
                count: 3,
                reason: "command".into(),
                context: "toplevel".into(),
                object: "client|list".into(),
                username: "emq".into(),
                addr: "127.0.0.1:62590".into(),
                name: String::new(),
                lib_name: "redis-rs".into(),
                db: Some(951),
            }
        );
        assert!(!got[0].is_auth() && got[1].is_auth());
        assert_eq!(got[1].username, "default");
    }

    #[test]
    fn an_empty_log_is_no_entry_and_a_reply_that_is_not_a_log_is_an_error() {
        assert_eq!(parse_acl_log(&Value::Array(vec![])).unwrap(), vec![]);
        assert!(parse_acl_log(&Value::Okay).is_err());
        assert!(parse_acl_log(&Value::Array(vec![Value::Int(1)])).is_err());
        let no_reason = Value::Array(vec![Value::Array(vec![bulk("count"), Value::Int(1)])]);
        assert!(parse_acl_log(&no_reason).is_err());
    }
}
