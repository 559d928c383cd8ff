//! [`WIRE`]: the rules of SPEC §5 (the wire protocol and the session's life), in SPEC's order,
//! each with the ways to break it.
use super::{How, Rule, RuleId, Way};
use crate::doubles::Double;
use crate::gates::GateId;

/// Every rule of SPEC §5, in SPEC's order.
pub const WIRE: &[Rule] = &[
    Rule {
        id: RuleId::new(5, 1),
        summary: "JSON lines: exactly one response per request, in order, echoing seq",
        checks: &["every gate: a wrong seq, a non-JSON line or silence is a connector failure"],
        cases: &[],
        gates: &[GateId::G1],
        ways: &[
            Way::fixtures(
                How::Otherwise,
                "every response with another seq",
                &["wire_wrong_seq.py"],
            ),
            Way::fixtures(
                How::Twice,
                "two lines for one request (a banner or a log line on stdout)",
                &["chatty.py"],
            ),
            Way::not(
                How::Twice,
                "a second reply to one request",
                "the harness reads one line per request, so a second reply is the line nobody asked for, as chatty.py's banner is, and fails the same way",
            ),
        ],
        unbreakable: "",
    },
    Rule {
        id: RuleId::new(5, 2),
        summary: "each ok value has the shape the table gives for its cmd",
        checks: &["G6: replies compared as typed values"],
        cases: &["complete-active-true", "complete-double"],
        gates: &[GateId::G6],
        ways: &[
            Way::fixtures(
                How::Otherwise,
                "complete answers 1 and 0 instead of true and false",
                &["wire_shapes.py"],
            ),
            Way::not(
                How::Otherwise,
                "an ok value of another type for another cmd",
                "each reply is decoded by its cmd's type before any case compares it, so every shape fails the same way as the fixture's",
            ),
        ],
        unbreakable: "",
    },
    Rule {
        id: RuleId::new(5, 3),
        summary: "hello names the bundle and the sha1 of every script the connector sends",
        checks: &["G2: hello's scripts equal the bundle's SHAs"],
        cases: &[],
        gates: &[GateId::G2],
        ways: &[
            Way::fixtures(
                How::Otherwise,
                "hello announces a wrong sha1 for a script",
                &["wire_hello_shas.py"],
            ),
            Way::not(
                How::TooFew,
                "hello names fewer scripts than six",
                "G2 compares hello's script map with the bundle's as a whole, so a missing name is seen as the fixture's wrong sha is",
            ),
        ],
        unbreakable: "",
    },
    Rule {
        id: RuleId::new(5, 4),
        summary: "an engine error reply or a failed connection is kind engine",
        checks: &[
            "G6: error-engine-* cases (setup gives keys of the wrong type)",
            "G8: every call failed by a fault or a killed connection is kind engine",
        ],
        cases: &[
            "error-engine-wrong-type-pending",
            "error-engine-wrong-type-active",
        ],
        gates: &[GateId::G6, GateId::G8],
        ways: &[
            Way::by(
                How::Otherwise,
                "an engine error reported as kind internal",
                &[Double::EngineAsInternal],
            ),
            Way::not(
                How::Never,
                "a failed connection answered with no error (a made-up reply)",
                "that is R4.16's way, judged there (SwallowConnectionErrors, AckUnsent)",
            ),
        ],
        unbreakable: "",
    },
    Rule {
        id: RuleId::new(5, 5),
        summary: "a command or hello protocol not implemented is kind unsupported",
        checks: &["G6: hello-other-protocol-unsupported"],
        cases: &["hello-other-protocol-unsupported"],
        gates: &[GateId::G6],
        ways: &[
            Way::by(
                How::Accepted,
                "hello of another protocol answered",
                &[Double::HelloAnyProtocol],
            ),
            Way::not(
                How::Otherwise,
                "an unknown cmd answered with kind invalid",
                "no gate can see it: the harness never sends a cmd it did not define, so the answer is only SPEC §5's advice",
            ),
        ],
        unbreakable: "",
    },
    Rule {
        id: RuleId::new(5, 6),
        summary: "kind internal is for anything else: a connector bug, or a reply over 16 MiB",
        checks: &[
            "every case pins the kind of each expected error, so internal never stands in for one",
        ],
        cases: &[],
        gates: &[],
        ways: &[Way::not(
            How::Otherwise,
            "internal where another kind is due",
            "a residual kind: no request can provoke a bug on purpose, and internal where another kind is due breaks that kind's rule (R5.4, R4.1-R4.8, R3.4, R5.5), each with its double",
        )],
        unbreakable: "a residual kind: no request can provoke a bug on purpose. Reporting internal \
                      where another kind is due breaks that kind's rule (R5.4, R4.1–R4.8, R3.4, \
                      R5.5), and each has its double",
    },
    Rule {
        id: RuleId::new(5, 7),
        summary: "several sessions live in one process, each on its own engine connection",
        checks: &["G6: session-* cases with two sessions"],
        cases: &["session-disconnect-one-other-continues"],
        gates: &[GateId::G6],
        ways: &[
            Way::by(
                How::OnThis,
                "every session on the first session's connection",
                &[Double::SharedConnection],
            ),
            Way::not(
                How::OnAnother,
                "a session's commands spread over a pool that other sessions use too",
                "a session sees another's state only through a shared connection, which is SharedConnection's way from the other side, and the two-session cases see it as such",
            ),
        ],
        unbreakable: "",
    },
    Rule {
        id: RuleId::new(5, 8),
        summary: "every request is answered within the harness's timeout",
        checks: &[
            "every gate: silence past the timeout (plus what of it the harness held a node stopped, G8's stall) is a connector failure, and the gate FAILs on R5.8 whatever step it fell in",
        ],
        cases: &[],
        gates: &[GateId::G1],
        ways: &[
            Way::fixtures(How::Never, "a request never answered", &["hang.py"]),
            Way::not(
                How::TooLate,
                "a request answered after its timeout",
                "past the timeout a slow answer and no answer are the same silence to the harness, which hang.py's shows",
            ),
        ],
        unbreakable: "",
    },
    Rule {
        id: RuleId::new(5, 11),
        summary: "a response line is at most 16 MiB; a longer one is a connector failure, skipped unread into memory",
        checks: &[
            "every gate: a longer line kills the connector with the length and the limit named",
        ],
        cases: &[],
        gates: &[GateId::G1],
        ways: &[
            Way::fixtures(
                How::TooMany,
                "a response line over 16 MiB",
                &["huge_line.py"],
            ),
            Way::not(
                How::Otherwise,
                "a reply over 16 MiB cut short instead of answered internal",
                "no gate can see it: the largest response the gates ask for is under 8 MiB",
            ),
        ],
        unbreakable: "",
    },
    Rule {
        id: RuleId::new(5, 9),
        summary: "on stop the connector sends nothing and exits 0",
        checks: &[
            "G1: a connector of its own is connected, disconnected, then sent stop: a line on stdout, an exit other than 0, or no exit within ten times the slowest of those requests or three times the process's start-up (at least 2 s), grown by the time its processes waited for a CPU meanwhile, fails it; the process group is ended either way",
        ],
        cases: &[],
        gates: &[GateId::G1],
        ways: &[
            Way::fixtures(
                How::TooMany,
                "stop answered with a response line",
                &["stop_answers.py"],
            ),
            Way::fixtures(
                How::Otherwise,
                "exits 3 on stop, not 0",
                &["stop_exits_3.py"],
            ),
            Way::fixtures(
                How::Never,
                "stop ignored: the process keeps running and never exits",
                &["stop_ignored.py"],
            ),
            Way::fixtures(
                How::TooLate,
                "exits 0, but 8 s after stop, asleep meanwhile (no wait for a CPU grows its bound)",
                &["stop_lingers.py"],
            ),
            Way::not(
                How::NotClosed,
                "a child process of the connector left running after stop",
                "the harness ends the connector's whole process group when it is done with it (tests/child.rs: grandchild.py), and a child's engine connections are judged where they are held (R5.13)",
            ),
        ],
        unbreakable: "",
    },
    Rule {
        id: RuleId::new(5, 10),
        summary: "after disconnect the session is unknown (every verb invalid, nothing sent); connect makes it afresh",
        checks: &[super::protocol::INVALID_SENDS_NOTHING],
        cases: &["session-disconnect-then-invalid", "accept-session-names"],
        gates: &[GateId::G6],
        ways: &[
            Way::by(
                How::Accepted,
                "a verb after disconnect run on the old connection",
                &[Double::ZombieSession],
            ),
            Way::by(
                How::Refused,
                "a valid session name refused (spaces, unicode, 512 characters)",
                &[Double::StrictSessionName],
            ),
        ],
        unbreakable: "",
    },
    Rule {
        id: RuleId::new(5, 13),
        summary: "a session's connections are closed when it ends (disconnect), is replaced (connect of a connected session) or is given up on (a timed-out call)",
        checks: &[
            "G1: CLIENT LIST (every primary): the connections a connect opened are gone after a second connect of the session, and all its connections after disconnect",
            "G1 (one engine): a call whose reply the proxy holds 3.5 s, then disconnect: every connection the session opened is gone, one its read timeout gave up on included",
        ],
        cases: &[],
        gates: &[GateId::G1],
        ways: &[
            Way::by(
                How::NotClosed,
                "the session ends (disconnect) but its connection is left open",
                &[Double::LeakOnDisconnect],
            ),
            Way::by(
                How::NotClosed,
                "the session is replaced (a connect of a connected session) but the old connection is left open",
                &[Double::LeakOnReconnect],
            ),
            Way::by(
                How::NotClosed,
                "disconnect answers but keeps the session and its connection",
                &[Double::ZombieSession],
            ),
            Way::by(
                How::NotClosed,
                "the session gives one up after a read timeout but leaves it open, gone on over a new one",
                &[Double::AbandonOnTimeout],
            ),
            Way::not(
                How::NotClosed,
                "a connection a failed call dropped left open in the connector",
                "no gate can see it: a connection that failed is gone on the engine's side, so CLIENT LIST has nothing to show, and what the connector keeps of it is its own memory",
            ),
        ],
        unbreakable: "",
    },
    Rule {
        id: RuleId::new(5, 12),
        summary: "a session works in the database its url names",
        checks: &["G8: 300 acknowledged enqueues are found in the url's database"],
        cases: &[],
        gates: &[GateId::G8],
        ways: &[
            Way::fixtures(
                How::Otherwise,
                "every session in the next database over",
                &["wrong_db.py"],
            ),
            Way::not(
                How::Never,
                "the url's /db ignored (database 0 always)",
                "no gate runs in database 0, so ignoring /db is working in another database, the way above",
            ),
        ],
        unbreakable: "",
    },
];
