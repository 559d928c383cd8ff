//! What the proxy is told to do: a [`Fault`], the [`Matcher`] that picks its command, the
//! [`Rule`] that arms it, and what [`Fired`].

use std::time::Duration;

use super::resp::Command;

/// What the proxy does to the command a rule picks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// Forward the command, read the engine's whole reply, close the client without it.
    LostReply,
    /// Close the connection before the command is forwarded.
    DropBefore,
    /// Forward the first half of the reply's bytes, then close.
    CutReply,
    /// Hold the reply this long, then forward it.
    Delay(Duration),
    /// Close the next new connection before reading a byte (matchers do not apply).
    ResetOnConnect,
}

impl Fault {
    /// A short stable name for evidence.
    pub fn name(&self) -> &'static str {
        match self {
            Self::LostReply => "lost reply",
            Self::DropBefore => "dropped before forwarding",
            Self::CutReply => "reply cut in the middle",
            Self::Delay(_) => "reply delayed",
            Self::ResetOnConnect => "reset on connect",
        }
    }
}

/// Which commands a rule counts. Every field given must match.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Matcher {
    /// The command name, any case (`EVALSHA`).
    pub name: Option<String>,
    /// The first argument, any case (a script SHA).
    pub arg1: Option<String>,
    /// The 1-based index of the command on its connection.
    pub nth_of_connection: Option<u64>,
}

impl Matcher {
    /// `EVALSHA <sha>`.
    pub fn evalsha(sha: &str) -> Self {
        Self {
            name: Some("EVALSHA".into()),
            arg1: Some(sha.to_ascii_lowercase()),
            nth_of_connection: None,
        }
    }

    /// The n-th command (1-based) of any connection.
    pub fn nth(n: u64) -> Self {
        Self {
            nth_of_connection: Some(n),
            ..Self::default()
        }
    }

    pub(super) fn matches(&self, c: &Command, index: u64) -> bool {
        self.name
            .as_ref()
            .is_none_or(|n| c.name() == n.to_ascii_uppercase())
            && self
                .arg1
                .as_ref()
                .is_none_or(|a| c.arg1().as_deref() == Some(&a.to_ascii_lowercase()))
            && self.nth_of_connection.is_none_or(|n| n == index)
    }
}

/// One armed fault: it fires once, on the `skip + 1`-th matching command (counted from arming,
/// over every connection), and is then gone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rule {
    pub matcher: Matcher,
    pub skip: u32,
    pub fault: Fault,
}

/// A fault that fired: on which connection, which command, and what was done.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fired {
    /// The proxy's connection number, from 1.
    pub conn: u64,
    /// The command's 1-based index on that connection (0 for [`Fault::ResetOnConnect`]).
    pub index: u64,
    /// The command as it arrived; `None` for [`Fault::ResetOnConnect`], which fires before any.
    /// Kept whole, not as a label: the proxy knows no bundle to name a script by (the engine
    /// starts a cluster's and a TLS engine's proxies), so whoever shows it labels it
    /// ([`Fired::label`]).
    pub command: Option<Command>,
    pub fault: Fault,
}

impl Fired {
    /// `EVALSHA d9fec2bf… (enqueue)`, `INCR k`, or `connect` for a reset on connect.
    pub fn label(&self, bundle: &crate::protocol::bundle::Bundle) -> String {
        self.command
            .as_ref()
            .map_or_else(|| "connect".into(), |c| c.label(bundle))
    }
}
