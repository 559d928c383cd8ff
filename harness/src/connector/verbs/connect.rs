//! `connect` built from a [`Target`] and read back into one, in one place: the verb's fields
//! are a session and a target's, so a field added to `connect` is added to [`Target`] and
//! here, and every caller (the doubles that rewrite a connect among them) follows untouched.

use crate::connector::verbs::Request;
use crate::engine::Target;

impl Request {
    /// `connect` of `session` on `target`.
    pub fn connect(session: impl Into<String>, target: &Target) -> Self {
        // Spelt out, not `..`: a field added to `Target` is a compile error here until placed.
        let Target {
            url,
            cluster,
            ca_file,
            sentinel,
        } = target.clone();
        Self::Connect {
            session: session.into(),
            url,
            cluster,
            ca_file,
            sentinel,
        }
    }

    /// A `connect`'s session and target; `None` for every other verb.
    pub fn as_connect(&self) -> Option<(&str, Target)> {
        match self {
            Self::Connect {
                session,
                url,
                cluster,
                ca_file,
                sentinel,
            } => Some((
                session,
                Target {
                    url: url.clone(),
                    cluster: *cluster,
                    ca_file: ca_file.clone(),
                    sentinel: sentinel.clone(),
                },
            )),
            _ => None,
        }
    }

    /// The same `connect` on the target `f` makes of its own: how a double rewrites a connect
    /// (drops its cluster flag, its CA, the url's user). `None` when this is no `connect` or `f`
    /// leaves it alone (returns `None`), so a caller sends `request` itself then.
    pub fn map_connect(&self, f: impl FnOnce(Target) -> Option<Target>) -> Option<Self> {
        let (session, target) = self.as_connect()?;
        f(target).map(|t| Self::connect(session, &t))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tls() -> Target {
        Target {
            url: "rediss://:pw@localhost:7000/0".into(),
            cluster: true,
            ca_file: Some("/ca.pem".into()),
            sentinel: None,
        }
    }

    #[test]
    fn a_connect_is_built_from_a_target_and_read_back_whole() {
        let r = Request::connect("s", &tls());
        assert_eq!(
            r,
            Request::Connect {
                session: "s".into(),
                url: "rediss://:pw@localhost:7000/0".into(),
                cluster: true,
                ca_file: Some("/ca.pem".into()),
                sentinel: None,
            }
        );
        assert_eq!(r.as_connect(), Some(("s", tls())));
        assert_eq!(
            Request::Disconnect {
                session: "s".into()
            }
            .as_connect(),
            None
        );
    }

    #[test]
    fn map_connect_rewrites_the_target_and_keeps_the_session() {
        let r = Request::connect("s", &tls());
        let plain = r.map_connect(|t| {
            Some(Target {
                cluster: false,
                ca_file: None,
                ..t
            })
        });
        assert_eq!(
            plain,
            Some(Request::connect(
                "s",
                &Target::single("rediss://:pw@localhost:7000/0")
            ))
        );
        assert_eq!(r.map_connect(|_| None), None, "f left it alone");
        let other = Request::Disconnect {
            session: "s".into(),
        };
        assert_eq!(other.map_connect(Some), None, "not a connect");
    }
}
