//! [`URL`]: the rule of SPEC §9 (connecting: the url), in SPEC's order.

use super::{How, Rule, RuleId, Way};
use crate::doubles::Double;
use crate::gates::GateId;

/// Every rule of SPEC §9, in SPEC's order.
pub const URL: &[Rule] = &[Rule {
    id: RuleId::new(9, 1),
    summary: "connect's url is redis://[[user]:password@]host:port[/db] or rediss://: every connection authenticates as its user; no /db or an empty one is database 0; another scheme, or a port or /db that is not a decimal integer, is invalid and nothing is sent",
    checks: &[
        "G1: the url names the connector user emq and the default user is off, so a connector that drops the user fails every connect, and the ACL LOG names the failed AUTH",
        "G6: connect-url-scheme-redis-only (unix:// and http:// are invalid, nothing sent) and connect-url-not-numeric (a /db or port that is not a decimal integer is invalid, nothing sent)",
    ],
    cases: &["connect-url-scheme-redis-only", "connect-url-not-numeric"],
    gates: &[GateId::G1],
    ways: &[
        Way::by(
            How::Otherwise,
            "the url's user dropped: AUTH with the password alone, as the default user, which is off",
            &[Double::AuthWithoutUser],
        ),
        Way::not(
            How::Accepted,
            "a scheme other than redis:// or rediss:// accepted (unix://, http://)",
            "no double: the connector's own url parser is what takes it, and G6's connect-url-scheme-redis-only refuses it on every run of every connector, as the Lenient doubles' cases do for the other arguments",
        ),
        Way::not(
            How::Accepted,
            "a /db or port that is not a decimal integer accepted (redis-py ignores a bad /db and connects)",
            "no double: the connector's own url parser is what takes it, and G6's connect-url-not-numeric refuses it on every run of every connector",
        ),
        Way::not(
            How::Refused,
            "an empty /db (…:6379/) refused instead of read as database 0",
            "no gate can see it: the harness always names the database, so no url it sends ends in an empty /",
        ),
        Way::not(
            How::Otherwise,
            "the url's /db ignored, or another database used",
            "that is R5.12's way, judged there (fixture wrong_db.py)",
        ),
        Way::not(
            How::OnAnother,
            "a rediss:// url dialled by address where it names localhost",
            "no certificate names an address: that is R10.4's way, judged there (NameUnchecked, TrustOnSeedOnly)",
        ),
    ],
    unbreakable: "",
}];
