"""Unit tests of the new wire fields (SPEC R4.12 `batch.queues`, R8.1 `connect.cluster`): every bad
value is kind `invalid`, and nothing is sent (no session is opened, no session method is called).

No engine needed. validate.py is stdlib only; the dispatch tests import wire.py, which imports
redis-py through the seam, and are skipped when redis-py is missing.
"""

from __future__ import annotations

import sys
import unittest
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from echomq_connector import validate as v  # noqa: E402
from echomq_connector.errors import Invalid  # noqa: E402

try:
    from echomq_connector import wire
    from echomq_connector.bundle import load_bundle
except ImportError:  # pragma: no cover - redis-py missing
    wire = None

BUNDLE = Path(__file__).resolve().parent.parent.parent.parent / "bundle"
BATCH = {"session": "s", "queue": "a", "n": 3, "depth": 2, "payload": "x"}


class BatchQueues(unittest.TestCase):
    def test_absent_is_none(self):
        self.assertIsNone(v.batch_queues(dict(BATCH), "a"))

    def test_good_lists(self):
        self.assertEqual(v.batch_queues({**BATCH, "queues": ["a"]}, "a"), ["a"])
        names = ["a"] + [f"q{i}" for i in range(63)]
        self.assertEqual(v.batch_queues({**BATCH, "queues": names}, "a"), names)
        self.assertEqual(v.batch_queues({**BATCH, "queues": ["a", "a", "x" * 128, "A.b_c-9"]}, "a")[2], "x" * 128)

    def test_bad_lists_are_invalid(self):
        bad = [
            [],  # empty
            ["a"] + [f"q{i}" for i in range(64)],  # 65 names
            "a",  # not a list
            {"a": 1},
            None,
            5,
            ["a", 5],  # not all strings
            ["a", None],
            ["a", ["b"]],
            ["a", ""],  # each a queue name (R1.1)
            ["a", "x" * 129],
            ["a", "b c"],
            ["a", "q{x}"],
            ["a", "é"],
            ["a", "a\n"],
            ["b", "a"],  # queue must be queues[0]
        ]
        for queues in bad:
            with self.subTest(queues=queues):
                with self.assertRaises(Invalid):
                    v.batch_queues({**BATCH, "queues": queues}, "a")


class ClusterFlag(unittest.TestCase):
    def test_absent_or_boolean(self):
        self.assertIs(v.cluster_flag({"session": "s"}), False)
        self.assertIs(v.cluster_flag({"cluster": False}), False)
        self.assertIs(v.cluster_flag({"cluster": True}), True)

    def test_anything_else_is_invalid(self):
        for value in (None, 1, 0, "true", "yes", [], {}, 1.0):
            with self.subTest(value=value):
                with self.assertRaises(Invalid):
                    v.cluster_flag({"cluster": value})

    def test_cluster_url_is_database_0(self):
        for good in ("redis://:pw@127.0.0.1:7000", "redis://:pw@127.0.0.1:7000/", "redis://:pw@127.0.0.1:7000/0"):
            self.assertEqual(v.cluster_url(good), good)
        for bad in ("redis://:pw@127.0.0.1:7000/1", "redis://:pw@127.0.0.1:7000/15", "redis://h:1/x"):
            with self.subTest(url=bad):
                with self.assertRaises(Invalid):
                    v.cluster_url(bad)


class _Spy:
    """A session whose every method records its call: nothing may reach it for a bad request."""

    def __init__(self, calls, *args):
        self.calls = calls
        calls.append(("new", type(self).__name__, *args))

    def open(self):
        self.calls.append(("open",))

    def close(self):
        self.calls.append(("close",))

    def __getattr__(self, name):
        def record(*args):
            self.calls.append((name, *args))
            return 0

        return record


@unittest.skipIf(wire is None, "redis-py is not importable (run with the provisioned venv)")
class Dispatch(unittest.TestCase):
    def setUp(self):
        self.calls: list = []
        calls = self.calls

        class Single(_Spy):
            def __init__(self, bundle, url):
                super().__init__(calls, url)

        class Cluster(_Spy):
            def __init__(self, bundle, url):
                super().__init__(calls, url)

        self._saved = wire.Session, wire.ClusterSession
        wire.Session, wire.ClusterSession = Single, Cluster
        self.c = wire.Connector(load_bundle(BUNDLE))

    def tearDown(self):
        wire.Session, wire.ClusterSession = self._saved

    def call(self, **req):
        import json

        return self.c.handle_line(json.dumps({"seq": 1, **req}).encode())

    def test_connect_picks_the_session_kind(self):
        url = "redis://:pw@127.0.0.1:7000/0"
        self.assertEqual(self.call(cmd="connect", session="a", url=url), {"seq": 1, "ok": {}})
        self.assertEqual(self.call(cmd="connect", session="b", url=url, cluster=False), {"seq": 1, "ok": {}})
        self.assertEqual(self.call(cmd="connect", session="c", url=url, cluster=True), {"seq": 1, "ok": {}})
        kinds = [c[1] for c in self.calls if c[0] == "new"]
        self.assertEqual(kinds, ["Single", "Single", "Cluster"])

    def test_bad_connects_send_nothing(self):
        url = "redis://:pw@127.0.0.1:7000/0"
        for extra in ({"cluster": "true"}, {"cluster": 1}, {"cluster": None}, {"cluster": [True]}):
            with self.subTest(extra=extra):
                reply = self.call(cmd="connect", session="a", url=url, **extra)
                self.assertEqual(reply["error"]["kind"], "invalid", reply)
        reply = self.call(cmd="connect", session="a", url="redis://:pw@127.0.0.1:7000/2", cluster=True)
        self.assertEqual(reply["error"]["kind"], "invalid", reply)
        self.assertEqual(self.calls, [])

    def test_bad_batches_send_nothing(self):
        self.call(cmd="connect", session="s", url="redis://:pw@127.0.0.1:7000/0", cluster=True)
        del self.calls[:]
        for queues in ([], ["a"] * 65, "a", ["a", 5], ["a", "b c"], ["b", "a"], None):
            with self.subTest(queues=queues):
                reply = self.call(cmd="batch", **BATCH, queues=queues)
                self.assertEqual(reply["error"]["kind"], "invalid", reply)
        self.assertEqual(self.calls, [])

    def test_good_batches_reach_the_session(self):
        self.call(cmd="connect", session="s", url="redis://:pw@127.0.0.1:7000/0")
        del self.calls[:]
        self.call(cmd="batch", **BATCH)
        self.call(cmd="batch", **BATCH, queues=["a", "b"])
        self.assertEqual(self.calls, [("batch", "a", 3, 2, "x", None), ("batch", "a", 3, 2, "x", ["a", "b"])])


if __name__ == "__main__":
    unittest.main()


@unittest.skipIf(wire is None, "redis-py is not installed")
class OversizeReply(unittest.TestCase):
    """R5.11 and R5.6: a reply over 16 MiB is kind internal naming its size; one that fits is kept."""

    def test_the_limit(self):
        fits = "x" * (wire.MAX_LINE - len('{"seq":1,"ok":""}'))
        self.assertEqual(len(wire.encode({"seq": 1, "ok": fits})) - 1, wire.MAX_LINE)
        import json

        over = json.loads(wire.encode({"seq": 1, "ok": fits + "x"}))
        self.assertEqual(over["error"]["kind"], "internal")
        self.assertIn("16777217-byte line", over["error"]["message"])
        self.assertEqual(over["seq"], 1)
