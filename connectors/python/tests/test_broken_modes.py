"""The broken-on-purpose modes' switches, and what `--silent-node-reconnect` skips (in-process,
over fakes: no engine).

On a cluster the correct session reads the fence again before a node connection that replaces a
dead one says a word, and after a failed call (R3.5, R8.1); the broken mode skips exactly those
reads and nothing else: a first connection to a node still reads it, and the refresh after a
failed call still reads the slot map. Needs redis-py (the seam imports it); skipped without it.
"""

from __future__ import annotations

import contextlib
import io
import sys
import unittest
from pathlib import Path
from unittest import mock

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

try:
    from echomq_connector import seam, wire
except ImportError:  # pragma: no cover - redis-py missing
    seam = wire = None


class FakeConn:
    def __init__(self, host: str, port: int):
        self.host, self.port = host, port


class FakeNodesManager:
    def __init__(self):
        self.refreshes = 0

    def initialize(self):
        self.refreshes += 1


class FakeCluster:
    def __init__(self):
        self.nodes_manager = FakeNodesManager()


@unittest.skipIf(seam is None, "redis-py is not importable")
class Flags(unittest.TestCase):
    def test_every_broken_mode_is_off_by_default_and_on_by_its_flag(self):
        default = wire._parse_args([])
        for flag, dest in [
            ("--retry-on-error", "retry_on_error"),
            ("--silent-reconnect", "silent_reconnect"),
            ("--cluster-retry", "cluster_retry"),
            ("--silent-node-reconnect", "silent_node_reconnect"),
        ]:
            self.assertFalse(getattr(default, dest), flag)
            self.assertTrue(getattr(wire._parse_args([flag]), dest), flag)

    def test_the_help_says_silent_node_reconnect_is_broken_on_purpose(self):
        out = io.StringIO()
        with contextlib.redirect_stdout(out), self.assertRaises(SystemExit):
            wire._parse_args(["--help"])
        text = " ".join(out.getvalue().split())
        self.assertIn("--silent-node-reconnect", text)
        self.assertIn("EMQ_PY_SILENT_NODE_RECONNECT=1", text)


@unittest.skipIf(seam is None, "redis-py is not importable")
class SilentNodeReconnect(unittest.TestCase):
    def session(self):
        s = seam.ClusterSession(bundle=None, url="redis://127.0.0.1:1")
        s.fence_reads = 0

        def fence():
            s.fence_reads += 1

        s._fence_cluster = fence
        return s

    def opened(self, s, *conns):
        """The connect's own connections (before the session is open): no extra fence read."""
        for c in conns:
            s._on_node_connection(c)
        s._open_done = True

    def run_kill(self, broken: bool) -> tuple[int, int, int]:
        """Fence reads for: a replacement on a node the session had a connection to, a first
        connection to another node, and the refresh after a failed call (with its slot map reads)."""
        with mock.patch.object(seam, "SILENT_NODE_RECONNECT", broken):
            s = self.session()
            self.opened(s, FakeConn("127.0.0.1", 7000))
            s._on_node_connection(FakeConn("127.0.0.1", 7000))  # the replacement
            replacement = s.fence_reads
            s._on_node_connection(FakeConn("127.0.0.1", 7001))  # a first connection there
            first = s.fence_reads - replacement
            s._cluster = FakeCluster()
            s._stale = True
            self.assertIs(s.client, s._cluster)
            self.assertFalse(s._stale)
            self.assertEqual(s._cluster.nodes_manager.refreshes, 1)
            refresh = s.fence_reads - replacement - first
            return replacement, first, refresh

    def test_correct_mode_reads_the_fence_before_a_replacement_and_after_a_failure(self):
        self.assertEqual(self.run_kill(broken=False), (1, 1, 1))

    def test_broken_mode_skips_only_the_replacements_fence_reads(self):
        self.assertEqual(self.run_kill(broken=True), (0, 1, 0))

    def test_a_connection_the_connect_opens_reads_no_extra_fence_in_either_mode(self):
        for broken in (False, True):
            with mock.patch.object(seam, "SILENT_NODE_RECONNECT", broken):
                s = self.session()
                self.opened(s, FakeConn("127.0.0.1", 7000), FakeConn("127.0.0.1", 7000))
                self.assertEqual(s.fence_reads, 0)

    def test_one_engine_sessions_ignore_the_flag(self):
        class Recorder(seam.Session):
            def _fence(self, conn):
                self.fenced = getattr(self, "fenced", 0) + 1

        class Conn:
            def on_connect(self):
                pass

        with mock.patch.object(seam, "SILENT_NODE_RECONNECT", True), mock.patch.object(seam, "SILENT_RECONNECT", False):
            s = Recorder(bundle=None, url="redis://127.0.0.1:1")
            s._on_new_connection(Conn())
            s._on_new_connection(Conn())  # a replacement on one engine still reads the fence
            self.assertEqual(s.fenced, 2)


if __name__ == "__main__":
    unittest.main()
