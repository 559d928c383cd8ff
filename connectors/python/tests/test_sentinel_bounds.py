"""Behind Sentinel (SPEC §11), the time a node a Sentinel named may cost (R11.1): its whole check
(TCP connect, TLS, AUTH, ROLE, SELECT) ends within PRIMARY_CHECK_TIMEOUT_S, so connect fails with
kind engine well inside R5.8's 10 s when every Sentinel names a node that accepts and never
answers (a stopped primary behind a proxy); and the primary found gets the session's own read
timeout back, not what was left of the check.

No engine needed: fake Sentinels and nodes on loopback (`Fake` of test_sentinel_live.py), driving
`SentinelSession` directly. Skipped when redis-py is missing.
"""

from __future__ import annotations

import sys
import time
import unittest
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

try:
    from echomq_connector.bundle import load_bundle
    from echomq_connector.errors import EngineError
    from echomq_connector.seam import PRIMARY_CHECK_TIMEOUT_S, SentinelSession
except ImportError:  # pragma: no cover - redis-py missing
    SentinelSession = None

from test_sentinel_live import Fake, bulk_array, sentinel_naming  # noqa: E402

BUNDLE = Path(__file__).resolve().parent.parent.parent.parent / "bundle"
ROLE_MASTER = b"*3\r\n$6\r\nmaster\r\n:0\r\n*0\r\n"


@unittest.skipIf(SentinelSession is None, "redis-py is not importable (run with the provisioned venv)")
class SentinelBounds(unittest.TestCase):
    def setUp(self):
        self.enterContext(warnings.catch_warnings())
        warnings.simplefilter("ignore", DeprecationWarning)
        self.bundle = load_bundle(BUNDLE)
        self.fakes: list[Fake] = []
        self.sessions: list[SentinelSession] = []

    def tearDown(self):
        for s in self.sessions:
            s.close()
        for f in self.fakes:
            f.close()

    def fake(self, answer) -> Fake:
        f = Fake(answer)
        self.fakes.append(f)
        return f

    def session(self, sentinels: list[Fake], db: int = 3) -> SentinelSession:
        s = SentinelSession(self.bundle, f"redis://emq:pw@127.0.0.1:{sentinels[0].port}/{db}", None, "emq",
                            [("127.0.0.1", f.port) for f in sentinels])
        self.sessions.append(s)
        return s

    def test_silent_named_nodes_fail_connect_in_time(self):
        silent = self.fake(lambda argv: None)  # accepts, reads every command, answers none

        def mute(argv):  # answers AUTH and ROLE master, then nothing
            return {"AUTH": b"+OK\r\n", "ROLE": ROLE_MASTER}.get(argv[0].upper())

        stalled = self.fake(mute)
        sentinels = [self.fake(sentinel_naming(lambda n=n: ("127.0.0.1", n.port))) for n in (silent, stalled, silent)]
        s = self.session(sentinels)
        start = time.monotonic()
        with self.assertRaises(EngineError) as caught:
            s.open()
        took = time.monotonic() - start
        self.assertIn("no Sentinel named a primary", str(caught.exception))
        self.assertLess(took, 8.0, f"connect took {took:.1f}s with three Sentinels naming silent nodes")
        self.assertEqual(silent.commands, [["AUTH", "emq", "pw"]] * 2)
        self.assertEqual(stalled.commands, [["AUTH", "emq", "pw"], ["ROLE"], ["SELECT", "3"]])
        for f in (silent, stalled):
            deadline = time.monotonic() + 2
            while len(f.held) < f.connections and time.monotonic() < deadline:
                time.sleep(0.02)  # the fake sees the close a moment later
            self.assertEqual(len(f.held), f.connections, "a named node's connection was left open")
            for held in f.held:
                self.assertLess(held, PRIMARY_CHECK_TIMEOUT_S + 0.5, f"a named node's check lasted {held:.1f}s")

    def test_the_primary_gets_the_session_read_timeout_back(self):
        b = self.bundle
        fence = bulk_array("protocol", b.protocol, "bundle", b.version, "digest", b.digest)
        held = PRIMARY_CHECK_TIMEOUT_S + 0.5  # past the check's bound, within the session's timeout

        def primary(argv):
            cmd = argv[0].upper()
            if cmd == "EVALSHA":
                time.sleep(held)
                return b"$17\r\nj0000000000000001\r\n"
            return {"AUTH": b"+OK\r\n", "ROLE": ROLE_MASTER, "SELECT": b"+OK\r\n", "HGETALL": fence}.get(cmd)

        node = self.fake(primary)
        s = self.session([self.fake(sentinel_naming(lambda: ("127.0.0.1", node.port)))])
        s.open()
        self.assertEqual(s.enqueue("q", "x", 0), "j0000000000000001")
        self.assertEqual([a[0] for a in node.commands], ["AUTH", "ROLE", "SELECT", "HGETALL", "EVALSHA"])


if __name__ == "__main__":
    unittest.main()
