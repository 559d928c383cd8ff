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

    def test_a_cluster_url_names_any_database(self):
        """R8.5: a cluster url names a database as any url does (R9.1); the client refuses none
        (the engine knows how many it has), and a non-numeric one is still invalid."""
        for url, db in (("redis://:pw@127.0.0.1:7000", 0), ("redis://:pw@127.0.0.1:7000/", 0),
                        ("redis://:pw@127.0.0.1:7000/0", 0), ("redis://emq:pw@127.0.0.1:7000/9", 9),
                        ("rediss://emq:pw@localhost:7000/16", 16), ("redis://h:1/3", 3)):
            with self.subTest(url=url):
                self.assertEqual(v.database(v.url({"url": url})), db)
        for bad in ("redis://h:1/x", "redis://h:1/1x", "redis://h:1/-1", "redis://h:1/٣"):
            with self.subTest(url=bad):
                with self.assertRaises(Invalid):
                    v.url({"url": bad})


class SentinelField(unittest.TestCase):
    """R11.1: `connect.sentinel` is {"name", "nodes"}; absent or null is no Sentinel."""

    GOOD = {"name": "emq", "nodes": ["127.0.0.1:26379", "localhost:26380", "[::1]:1", "s-3.example:65535"]}

    def test_absent_or_null_is_none(self):
        self.assertIsNone(v.sentinel({"session": "s"}, False))
        self.assertIsNone(v.sentinel({"sentinel": None}, False))
        self.assertIsNone(v.sentinel({"sentinel": None}, True))  # null is absent, even with a cluster

    def test_good(self):
        self.assertEqual(
            v.sentinel({"sentinel": self.GOOD}, False),
            ("emq", [("127.0.0.1", 26379), ("localhost", 26380), ("::1", 1), ("s-3.example", 65535)]),
        )
        self.assertEqual(v.sentinel({"sentinel": {"name": "x", "nodes": ["h:1"], "more": 1}}, False), ("x", [("h", 1)]))

    def test_bad_is_invalid(self):
        bad = [
            "emq", ["emq"], 5, True,  # not an object
            {"nodes": ["h:1"]}, {"name": "", "nodes": ["h:1"]}, {"name": 5, "nodes": ["h:1"]},
            {"name": None, "nodes": ["h:1"]}, {"name": "\ud800", "nodes": ["h:1"]},
            {"name": "emq"}, {"name": "emq", "nodes": []}, {"name": "emq", "nodes": "h:1"},
            {"name": "emq", "nodes": None}, {"name": "emq", "nodes": {"h": 1}},
            {"name": "emq", "nodes": ["h:1"] * 65},
        ]
        nodes = ["h", "h:", ":1", "h:0", "h:65536", "h:-1", "h:+1", "h: 1", "h:1x", "h:abc", " h:1", "h:1 ",
                 "::1:1", "[h]:1", "[::1]", "h:1:2", "a@h:1", "h/1:1", "", 5, None, ["h:1"], "h:\u0661"]
        bad += [{"name": "emq", "nodes": ["127.0.0.1:1", n]} for n in nodes]
        for value in bad:
            with self.subTest(sentinel=value):
                with self.assertRaises(Invalid):
                    v.sentinel({"sentinel": value}, False)

    def test_not_with_a_cluster(self):
        with self.assertRaises(Invalid):
            v.sentinel({"sentinel": self.GOOD, "cluster": True}, True)
        self.assertIsNotNone(v.sentinel({"sentinel": self.GOOD, "cluster": False}, False))


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
            def __init__(self, bundle, url, tls=None):
                super().__init__(calls, url, tls)

        class Cluster(_Spy):
            def __init__(self, bundle, url, tls=None):
                super().__init__(calls, url, tls)

        class Sentinel(_Spy):
            def __init__(self, bundle, url, tls, name, nodes):
                super().__init__(calls, url, tls, name, nodes)

        self._saved = wire.Session, wire.ClusterSession, wire.SentinelSession
        wire.Session, wire.ClusterSession, wire.SentinelSession = Single, Cluster, Sentinel
        self.c = wire.Connector(load_bundle(BUNDLE))

    def tearDown(self):
        wire.Session, wire.ClusterSession, wire.SentinelSession = self._saved

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
        reply = self.call(cmd="connect", session="a", url="redis://:pw@127.0.0.1:7000/x", cluster=True)
        self.assertEqual(reply["error"]["kind"], "invalid", reply)
        self.assertEqual(self.calls, [])

    def test_a_cluster_connect_takes_any_database(self):
        """R8.5: /2, /9, /16 on a cluster reach a cluster session with the url as given: the engine,
        not the client, refuses a database it lacks (kind engine, at the SELECT)."""
        for db in ("2", "9", "16"):
            url = f"redis://emq:pw@127.0.0.1:7000/{db}"
            with self.subTest(db=db):
                self.assertEqual(self.call(cmd="connect", session="a", url=url, cluster=True), {"seq": 1, "ok": {}})
                self.assertEqual(self.calls[-2][:3], ("new", "Cluster", url))

    def test_a_sentinel_connect_makes_a_sentinel_session(self):
        url = "redis://emq:pw@127.0.0.1:26379/5"
        sentinel = {"name": "emq", "nodes": ["127.0.0.1:26379", "127.0.0.1:26380"]}
        self.assertEqual(self.call(cmd="connect", session="a", url=url, sentinel=sentinel), {"seq": 1, "ok": {}})
        self.assertEqual(self.call(cmd="connect", session="b", url=url, sentinel=None), {"seq": 1, "ok": {}})
        self.assertEqual(self.call(cmd="connect", session="c", url=url, sentinel=sentinel, cluster=False), {"seq": 1, "ok": {}})
        news = [c for c in self.calls if c[0] == "new"]
        self.assertEqual([c[1] for c in news], ["Sentinel", "Single", "Sentinel"])
        self.assertEqual(news[0][2:], (url, None, "emq", [("127.0.0.1", 26379), ("127.0.0.1", 26380)]))

    def test_bad_sentinel_connects_send_nothing(self):
        url = "redis://emq:pw@127.0.0.1:26379/0"
        for sentinel, extra in (({"name": "emq", "nodes": []}, {}), ({"name": "", "nodes": ["h:1"]}, {}),
                                ({"name": "emq", "nodes": ["h:0"]}, {}), ({"name": "emq", "nodes": ["h"]}, {}),
                                ("emq", {}), ({"name": "emq", "nodes": ["h:1"]}, {"cluster": True})):
            with self.subTest(sentinel=sentinel, extra=extra):
                reply = self.call(cmd="connect", session="a", url=url, sentinel=sentinel, **extra)
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


def _ca_pem(directory: str) -> str:
    """A self-signed CA certificate in PEM (openssl, else skip): what a harness ca_file holds."""
    import shutil
    import subprocess

    if shutil.which("openssl") is None:
        raise unittest.SkipTest("openssl is not installed")
    key, cert = f"{directory}/ca.key", f"{directory}/ca.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", cert,
         "-days", "1", "-subj", "/CN=emq test CA", "-addext", "basicConstraints=critical,CA:TRUE"],
        check=True, capture_output=True,
    )
    return cert


class TlsUrlAndCaFile(unittest.TestCase):
    """SPEC §5's url rule and R10.1: rediss:// is accepted; ca_file goes with rediss:// only."""

    def test_rediss_urls_are_accepted(self):
        for good in ("rediss://:pw@localhost:6380/0", "rediss://localhost:6380", "rediss://:pw@localhost:6380/3"):
            with self.subTest(url=good):
                self.assertEqual(v.url({"url": good}), good)
                self.assertTrue(v.is_tls(good))
        self.assertFalse(v.is_tls("redis://:pw@localhost:6379/0"))

    def test_other_schemes_and_bad_rediss_urls_are_invalid(self):
        for bad in ("unix:///tmp/v.sock", "http://localhost:6379/0", "redis+tls://localhost:1/0", "valkeys://localhost:1/0",
                    "rediss://localhost:notaport/0", "rediss://localhost:6380/x", "REDISS//localhost:1"):
            with self.subTest(url=bad):
                with self.assertRaises(Invalid):
                    v.url({"url": bad})

    def test_ca_file_with_rediss_is_accepted(self):
        url = "rediss://:pw@localhost:6380/0"
        self.assertEqual(v.ca_file({"url": url, "ca_file": "/tmp/ca.pem"}, url), "/tmp/ca.pem")
        self.assertIsNone(v.ca_file({"url": url}, url))  # the system's store

    def test_ca_file_with_redis_is_invalid(self):
        url = "redis://:pw@127.0.0.1:6379/0"
        with self.assertRaises(Invalid):
            v.ca_file({"url": url, "ca_file": "/etc/ssl/certs/ca-certificates.crt"}, url)
        self.assertIsNone(v.ca_file({"url": url}, url))

    def test_ca_file_must_be_a_non_empty_string(self):
        url = "rediss://localhost:6380/0"
        for bad in ("", None, 5, True, ["/tmp/ca.pem"], {"path": "/tmp/ca.pem"}, "/tmp/ca\0.pem"):
            with self.subTest(ca_file=bad):
                with self.assertRaises(Invalid):
                    v.ca_file({"ca_file": bad}, url)


@unittest.skipIf(wire is None, "redis-py is not importable (run with the provisioned venv)")
class TlsContext(unittest.TestCase):
    """seam.TLS: the session's own TLS context, from ca_file only, verification and host name on."""

    def test_a_ca_file_is_trusted_alone(self):
        import ssl
        import tempfile

        from echomq_connector import seam

        with tempfile.TemporaryDirectory() as d:
            tls = seam.TLS(_ca_pem(d))
        ctx = tls.context
        self.assertEqual(ctx.verify_mode, ssl.CERT_REQUIRED)
        self.assertTrue(ctx.check_hostname)
        # only the CA of ca_file, not the system's store in addition (R10.1)
        self.assertEqual(ctx.cert_store_stats()["x509_ca"], 1)
        self.assertEqual(len(ctx.get_ca_certs()), 1)
        kwargs = tls.redis_kwargs()
        self.assertTrue(issubclass(kwargs["connection_class"], seam.redis.connection.SSLConnection))
        self.assertIs(kwargs["connection_class"].emq_tls, tls)
        self.assertEqual((kwargs["ssl_cert_reqs"], kwargs["ssl_check_hostname"]), ("required", True))

    def test_unusable_ca_files_are_invalid(self):
        import os
        import tempfile

        from echomq_connector import seam

        with tempfile.TemporaryDirectory() as d:
            empty, text, key = f"{d}/empty.pem", f"{d}/text.pem", f"{d}/only-key.pem"
            open(empty, "w").close()
            with open(text, "w") as f:
                f.write("not a certificate\n")
            _ca_pem(d)
            os.rename(f"{d}/ca.key", key)  # a PEM file, but a private key: no certificate
            for path in (f"{d}/missing.pem", d, empty, text, key):
                with self.subTest(ca_file=path):
                    with self.assertRaises(Invalid):
                        seam.TLS(path)

    def test_cluster_names_are_checked_as_given(self):
        """redis-py's ClusterNode dials `localhost` as its address; the name checked stays the name
        the url, slot map or redirect gave (R10.4), and an address stays an address."""
        import socket

        from echomq_connector import seam

        tls = seam.TLS(None)
        ip = socket.gethostbyname("localhost")
        self.assertEqual(tls.server_name(ip, 7000), ip)
        tls.note("localhost", 7000)
        self.assertEqual(tls.server_name(ip, 7000), "localhost")
        self.assertEqual(tls.server_name(ip, 7001), ip)
        self.assertEqual(tls.server_name("node-1.example", 7000), "node-1.example")
        tls.note(ip, 7000)  # the slot map names the address now: the address is checked
        self.assertEqual(tls.server_name(ip, 7000), ip)

    def test_no_ca_file_is_the_system_store(self):
        import ssl

        from echomq_connector import seam

        ctx = seam.TLS(None).context
        self.assertEqual(ctx.verify_mode, ssl.CERT_REQUIRED)
        self.assertTrue(ctx.check_hostname)
        self.assertIsNone(seam.tls_for("redis://localhost:6379/0", None))
        self.assertIsNotNone(seam.tls_for("rediss://localhost:6380/0", None))


@unittest.skipIf(wire is None, "redis-py is not importable (run with the provisioned venv)")
class TlsDispatch(Dispatch):
    """connect over the wire: a rediss:// url with ca_file reaches a session with its TLS; a ca_file
    with redis://, or one that cannot be read, is invalid and no session is made (nothing dialled)."""

    def test_rediss_with_ca_file_is_accepted(self):
        import tempfile

        with tempfile.TemporaryDirectory() as d:
            ca = _ca_pem(d)
            url = "rediss://:pw@localhost:6380/0"
            self.assertEqual(self.call(cmd="connect", session="a", url=url, ca_file=ca), {"seq": 1, "ok": {}})
            self.assertEqual(self.call(cmd="connect", session="c", url="rediss://:pw@localhost:7000", ca_file=ca, cluster=True),
                             {"seq": 1, "ok": {}})
        news = [c for c in self.calls if c[0] == "new"]
        self.assertEqual([c[1] for c in news], ["Single", "Cluster"])
        for c in news:
            self.assertEqual(c[3].ca_file, ca)  # the session got its TLS settings
        plain = "redis://:pw@127.0.0.1:6379/0"
        self.call(cmd="connect", session="p", url=plain)
        self.assertIsNone(self.calls[-2][3])  # ("new", "Single", url, tls), then ("open",)

    def test_ca_file_with_redis_is_invalid_and_sends_nothing(self):
        reply = self.call(cmd="connect", session="a", url="redis://127.0.0.1:6379/0",
                          ca_file="/etc/ssl/certs/ca-certificates.crt")
        self.assertEqual(reply["error"]["kind"], "invalid", reply)
        self.assertEqual(self.calls, [])

    def test_unreadable_ca_file_is_invalid_without_dialling(self):
        import tempfile

        from echomq_connector import seam

        dialled = []
        saved = seam.redis.connection.Connection._connect
        seam.redis.connection.Connection._connect = lambda conn: dialled.append(conn) or saved(conn)
        try:
            # an open session of that name stays as it was: the bad connect replaces nothing
            self.call(cmd="connect", session="a", url="rediss://:pw@localhost:6380/0")
            del self.calls[:]
            with tempfile.TemporaryDirectory() as d:
                open(f"{d}/empty.pem", "w").close()
                for ca in (f"{d}/missing.pem", f"{d}/empty.pem", d):
                    with self.subTest(ca_file=ca):
                        reply = self.call(cmd="connect", session="a", url="rediss://:pw@localhost:6380/0", ca_file=ca)
                        self.assertEqual(reply["error"]["kind"], "invalid", reply)
                        self.assertIn("ca_file", reply["error"]["message"])
        finally:
            seam.redis.connection.Connection._connect = saved
        self.assertEqual(self.calls, [])  # no session made, none closed
        self.assertEqual(dialled, [])
        self.assertIn("a", self.c.sessions)


if __name__ == "__main__":
    unittest.main()
