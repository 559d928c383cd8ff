"""End-to-end test of the connector over the wire protocol v1 (SPEC §5) against a live Valkey.

It starts its own valkey-server (no persistence, a password, a free loopback port, a temp dir),
starts the connector as a child process and drives every command through stdin/stdout.

Server binary: $EMQ_VALKEY_SERVER, else $HOME/.cache/emq/valkey-9.1.2/bin/valkey-server, else
/tmp/apt-sid/src/src/valkey-server; the test is skipped when none is found.
Connector: $EMQ_PYTHON_CONNECTOR if set, else `python -m echomq_connector` from this source tree.
Needs redis-py for its own admin client (run it with the provisioned venv's python):

    ${EMQ_CACHE:-$HOME/.cache/emq}/venv-python/bin/python -m unittest discover -s connectors/python/tests -v
"""

from __future__ import annotations

import json
import os
import queue
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import unittest
from pathlib import Path

try:
    import redis  # the test's own admin client; the connector package keeps redis in its seam
except ImportError:  # pragma: no cover
    redis = None

HERE = Path(__file__).resolve().parent
PKG = HERE.parent  # connectors/python
BUNDLE = Path(os.environ.get("EMQ_BUNDLE_DIR") or (PKG / ".." / ".." / "bundle")).resolve()
MANIFEST = json.loads((BUNDLE / "manifest.json").read_text())
SHAS = {s["name"]: s["sha1"] for s in MANIFEST["scripts"]}
PASSWORD = "pw"
TIMEOUT = 60.0

SERVER = None  # the valkey-server Popen
PORT = None
TMPDIR = None


def find_server() -> str | None:
    candidates = [
        os.environ.get("EMQ_VALKEY_SERVER"),
        str(Path.home() / ".cache/emq/valkey-9.1.2/bin/valkey-server"),
        "/tmp/apt-sid/src/src/valkey-server",
    ]
    for c in candidates:
        if c and os.path.isfile(c) and os.access(c, os.X_OK) and os.path.getsize(c) > 0:
            return c
    return None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def setUpModule():
    global SERVER, PORT, TMPDIR
    if redis is None:
        raise unittest.SkipTest("redis-py is not importable (run with the provisioned venv)")
    binary = find_server()
    if binary is None:
        raise unittest.SkipTest("no valkey-server found (set EMQ_VALKEY_SERVER)")
    TMPDIR = tempfile.mkdtemp(prefix="emq-pytest-")
    for _ in range(5):
        PORT = free_port()
        SERVER = subprocess.Popen(
            [binary, "--port", str(PORT), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
             "--requirepass", PASSWORD, "--dir", TMPDIR, "--logfile", os.path.join(TMPDIR, "valkey.log")],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and SERVER.poll() is None:
            try:
                if admin().ping():
                    return
            except redis.exceptions.ConnectionError:
                time.sleep(0.05)
        SERVER.kill()
        SERVER.wait()
    raise RuntimeError("valkey-server did not start")


def tearDownModule():
    if SERVER is not None:
        SERVER.kill()
        SERVER.wait()
    if TMPDIR:
        shutil.rmtree(TMPDIR, ignore_errors=True)


def admin(db: int = 0):
    return redis.Redis(host="127.0.0.1", port=PORT, password=PASSWORD, db=db, protocol=2, decode_responses=True)


def url(db: int = 0, password: str = PASSWORD, port: int | None = None) -> str:
    return f"redis://:{password}@127.0.0.1:{port or PORT}/{db}"


def commandstats() -> dict[str, int]:
    """{command: calls} from INFO commandstats (subcommands as 'script|load')."""
    info = admin().info("commandstats")
    return {k[len("cmdstat_"):]: int(v["calls"]) for k, v in info.items() if k.startswith("cmdstat_")}


def reset_stats():
    admin().config_resetstat()


class Child:
    """The connector process and a JSON-lines client for it."""

    def __init__(self, *args: str, env: dict | None = None):
        cmd_env = dict(os.environ)
        cmd_env.update(env or {})
        if os.environ.get("EMQ_PYTHON_CONNECTOR"):
            argv = [os.environ["EMQ_PYTHON_CONNECTOR"], *args]
        else:
            argv = [sys.executable, "-m", "echomq_connector", *args]
            cmd_env["PYTHONPATH"] = str(PKG) + os.pathsep + cmd_env.get("PYTHONPATH", "")
        self.proc = subprocess.Popen(
            argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=cmd_env
        )
        self.lines: queue.Queue = queue.Queue()
        self.stderr: list[bytes] = []
        threading.Thread(target=self._pump, args=(self.proc.stdout, self.lines), daemon=True).start()
        threading.Thread(target=self._drain, daemon=True).start()
        self.seq = 0

    @staticmethod
    def _pump(stream, q):
        for line in stream:
            q.put(line)
        q.put(None)

    def _drain(self):
        for line in self.proc.stderr:
            self.stderr.append(line)

    def send_raw(self, line: bytes):
        self.proc.stdin.write(line + b"\n")
        self.proc.stdin.flush()

    def read(self) -> dict:
        line = self.lines.get(timeout=TIMEOUT)
        assert line is not None, "connector closed stdout; stderr: %r" % b"".join(self.stderr)
        return json.loads(line)

    def call(self, cmd: str, **fields) -> dict:
        self.seq += 1
        self.send_raw(json.dumps({"seq": self.seq, "cmd": cmd, **fields}).encode())
        reply = self.read()
        assert reply.get("seq") == self.seq, reply
        return reply

    def ok(self, cmd: str, **fields):
        reply = self.call(cmd, **fields)
        assert "ok" in reply, f"{cmd} {fields} -> {reply}"
        return reply["ok"]

    def err(self, cmd: str, **fields) -> dict:
        reply = self.call(cmd, **fields)
        assert "error" in reply, f"{cmd} {fields} -> {reply}"
        return reply["error"]

    def close(self):
        if self.proc.poll() is None:
            try:
                self.send_raw(b'{"seq": 0, "cmd": "stop"}')
                self.proc.wait(timeout=10)
            except (BrokenPipeError, subprocess.TimeoutExpired):
                self.proc.kill()
                self.proc.wait()


class Monitor:
    """A raw MONITOR connection collecting (client address, argv) of every command."""

    LINE = re.compile(r'^\+\d+\.\d+ \[\d+ ([^\]]+)\] (.*)$')

    def __init__(self):
        self.sock = socket.create_connection(("127.0.0.1", PORT))
        self.sock.sendall(f"AUTH {PASSWORD}\r\nMONITOR\r\n".encode())
        self.records: list[tuple[str, list[str]]] = []
        self.buf = b""
        self.ready = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()
        assert self.ready.wait(5)

    def _run(self):
        f = self.sock.makefile("rb")
        oks = 0
        for raw in f:
            line = raw.decode("utf-8", "replace").rstrip("\r\n")
            if line == "+OK":
                oks += 1
                if oks == 2:
                    self.ready.set()
                continue
            m = self.LINE.match(line)
            if m:
                self.records.append((m.group(1), re.findall(r'"((?:[^"\\]|\\.)*)"', m.group(2))))

    def stop(self) -> list[tuple[str, list[str]]]:
        time.sleep(0.2)
        self.sock.shutdown(socket.SHUT_RDWR)
        self.sock.close()
        self.thread.join(5)
        return self.records


class WireTest(unittest.TestCase):
    def setUp(self):
        admin().flushall()
        self.c = Child()

    def tearDown(self):
        self.c.close()

    def connect(self, session="s1", **kw):
        self.assertEqual(self.c.ok("connect", session=session, url=url(**kw)), {})

    # ------------------------------------------------------------------ protocol basics

    def test_hello(self):
        ok = self.c.ok("hello", protocol=1)
        self.assertEqual(ok["name"], "echomq-python")
        self.assertEqual(ok["language"], "python")
        self.assertEqual(ok["bundle"], "1.0.0")
        self.assertRegex(ok["version"], r"^\d+\.\d+\.\d+")
        self.assertEqual(ok["scripts"], SHAS)
        self.assertEqual(list(ok["scripts"]), ["enqueue", "claim", "complete", "retry", "promote", "reap"])
        self.assertEqual(self.c.err("hello", protocol=2)["kind"], "unsupported")
        self.assertEqual(self.c.err("hello")["kind"], "invalid")

    def test_malformed_and_unknown(self):
        self.c.send_raw(b"this is not json")
        r = self.c.read()
        self.assertEqual((r["seq"], r["error"]["kind"]), (None, "invalid"))
        self.c.send_raw(b'{"seq": 41, "cmd": 5}')
        self.assertEqual(self.c.read()["error"]["kind"], "invalid")
        self.c.send_raw(b'{"cmd": "hello", "protocol": 1}')
        r = self.c.read()
        self.assertEqual((r["seq"], r["error"]["kind"]), (None, "invalid"))
        self.c.send_raw(b"[1, 2]")
        self.assertEqual(self.c.read()["error"]["kind"], "invalid")
        self.c.send_raw(b'{"seq": 42, "cmd": "hello", "protocol": 1, "x": "\xff"}')  # not UTF-8
        r = self.c.read()
        self.assertEqual((r["seq"], r["error"]["kind"]), (None, "invalid"))
        self.assertIn("UTF-8", r["error"]["message"])
        self.assertEqual(self.c.err("frobnicate", session="s1")["kind"], "unsupported")
        self.assertEqual(self.c.ok("hello", protocol=1)["bundle"], "1.0.0")  # the loop survived

    def test_stop_and_eof(self):
        self.c.send_raw(b'{"seq": 1, "cmd": "stop"}')
        self.assertEqual(self.c.proc.wait(timeout=10), 0)
        self.assertIsNone(self.c.lines.get(timeout=10))  # no response at all
        other = Child()
        other.proc.stdin.close()
        self.assertEqual(other.proc.wait(timeout=10), 0)

    def test_bundle_mismatch_refuses_to_start(self):
        with tempfile.TemporaryDirectory() as d:
            shutil.copytree(BUNDLE, d, dirs_exist_ok=True)
            p = Path(d) / "scripts" / "complete.lua"
            p.write_bytes(p.read_bytes() + b"-- changed\n")
            child = Child("--bundle", d)
            self.assertEqual(child.proc.wait(timeout=10), 2)
            time.sleep(0.1)
            err = b"".join(child.stderr).decode()
            self.assertIn("complete", err)
            self.assertEqual(err.count("\n"), 1, err)
            # and the env var is honoured the same way
            child = Child(env={"EMQ_BUNDLE_DIR": d})
            self.assertEqual(child.proc.wait(timeout=10), 2)

    # ------------------------------------------------------------------ the fence

    def test_fence_installed_at_connect(self):
        self.connect()
        self.assertEqual(
            admin().hgetall("emq:fence"),
            {"protocol": "1", "bundle": "1.0.0", "digest": MANIFEST["digest"]},
        )

    def test_fence_of_another_protocol_is_refused(self):
        admin().hset("emq:fence", mapping={"protocol": "2", "bundle": "2.0.0", "digest": "0" * 40})
        reset_stats()
        e = self.c.err("connect", session="s1", url=url())
        self.assertEqual(e["kind"], "fence")
        self.assertIn("fence protocol 2", e["message"])
        self.assertIn("connector protocol 1", e["message"])
        # the session is not connected, and no script went out
        self.assertEqual(self.c.err("pending_size", session="s1", queue="q")["kind"], "invalid")
        stats = commandstats()
        for cmd in ("evalsha", "eval", "script|load", "hsetnx", "multi"):
            self.assertNotIn(cmd, stats)
        self.assertEqual(stats.get("hgetall"), 1)
        self.assertEqual(admin().hget("emq:fence", "protocol"), "2")

    def test_fence_of_another_digest_is_a_warning(self):
        admin().hset("emq:fence", mapping={"protocol": "1", "bundle": "1.0.1", "digest": "f" * 40})
        self.connect()
        self.assertEqual(self.c.ok("enqueue", session="s1", queue="q", payload="x", delay_ms=0), "j0000000000000001")
        time.sleep(0.1)
        self.assertIn(b"warning", b"".join(self.c.stderr))

    def test_every_connection_reads_the_fence_first(self):
        mon = Monitor()
        self.connect()
        self.c.ok("enqueue", session="s1", queue="q", payload="a", delay_ms=0)
        # kill the connector's engine connection: the next verb reconnects and re-reads the fence
        me = admin().client_id()
        for client in admin().client_list():
            if int(client["id"]) != me and "monitor" not in client.get("flags", "") and client["cmd"] != "monitor":
                admin().client_kill_filter(_id=client["id"])
        self.assertEqual(self.c.ok("pending_size", session="s1", queue="q"), 1)
        records = mon.stop()
        by_client: dict[str, list[list[str]]] = {}
        for addr, argv in records:
            if addr != "lua":
                by_client.setdefault(addr, []).append(argv)
        connector = {a: cmds for a, cmds in by_client.items() if any(c[0].upper() == "EVALSHA" or c[0].upper() == "ZCARD" for c in cmds)}
        self.assertEqual(len(connector), 2, by_client)  # one connection, killed, then a new one
        for addr, cmds in connector.items():
            names = [c[0].upper() for c in cmds if c[0].upper() not in ("AUTH", "SELECT")]
            self.assertEqual(cmds[[c[0].upper() for c in cmds].index(names[0])], ["HGETALL", "emq:fence"], cmds)
            allowed = {"HGETALL", "MULTI", "HSETNX", "EXEC", "EVALSHA", "SCRIPT", "ZRANGE", "HGET", "ZCARD", "INCR"}
            self.assertTrue(set(names) <= allowed, names)

    def test_reconnect_under_a_changed_fence_fails_with_fence(self):
        self.connect()
        admin().hset("emq:fence", "protocol", "7")
        me = admin().client_id()
        for client in admin().client_list():
            if int(client["id"]) != me:
                admin().client_kill_filter(_id=client["id"])
        reset_stats()
        e = self.c.err("enqueue", session="s1", queue="q", payload="x", delay_ms=0)
        self.assertEqual(e["kind"], "fence", e)
        self.assertIn("fence protocol 7", e["message"])
        self.assertNotIn("evalsha", commandstats())

    # ------------------------------------------------------------------ the verbs

    def test_every_verb(self):
        c, s, q = self.c, "s1", "orders"
        self.connect(s)
        ids = [c.ok("enqueue", session=s, queue=q, payload=f"p{i}", delay_ms=0) for i in range(3)]
        self.assertEqual(ids, ["j0000000000000001", "j0000000000000002", "j0000000000000003"])
        self.assertEqual(c.ok("enqueue", session=s, queue=q, payload="later", delay_ms=3_600_000), "j0000000000000004")
        self.assertEqual(c.ok("pending_size", session=s, queue=q), 3)
        self.assertEqual(
            c.ok("browse", session=s, queue=q, offset=0, limit=10),
            [{"id": ids[i], "payload": f"p{i}"} for i in range(3)],
        )
        self.assertEqual(c.ok("browse", session=s, queue=q, offset=1, limit=1), [{"id": ids[1], "payload": "p1"}])
        self.assertEqual(c.ok("browse", session=s, queue=q, offset=0, limit=0), [])
        self.assertEqual(c.ok("browse", session=s, queue=q, offset=9, limit=5), [])
        # claim / complete with the fencing token
        job = c.ok("claim", session=s, queue=q, lease_ms=30_000)
        self.assertEqual(job, {"id": ids[0], "payload": "p0", "attempts": 1})
        self.assertIs(c.ok("complete", session=s, queue=q, id=ids[0], attempts=2), False)
        self.assertIs(c.ok("complete", session=s, queue=q, id=ids[0], attempts=1), True)
        self.assertIs(c.ok("complete", session=s, queue=q, id=ids[0], attempts=1), False)
        # retry -> delayed, promote brings it back (backoff 0 is due at once)
        job = c.ok("claim", session=s, queue=q, lease_ms=30_000)
        self.assertEqual(job["id"], ids[1])
        self.assertEqual(c.ok("retry", session=s, queue=q, id=ids[1], attempts=1, backoff_ms=0, max_attempts=2), "delayed")
        self.assertEqual(c.ok("retry", session=s, queue=q, id=ids[1], attempts=1, backoff_ms=0, max_attempts=2), "stale")
        self.assertEqual(c.ok("promote", session=s, queue=q, limit=10), 1)  # the 1h-delayed one stays
        self.assertEqual(c.ok("pending_size", session=s, queue=q), 2)
        job = c.ok("claim", session=s, queue=q, lease_ms=30_000)
        self.assertEqual(job, {"id": ids[1], "payload": "p1", "attempts": 2})
        self.assertEqual(c.ok("retry", session=s, queue=q, id=ids[1], attempts=2, backoff_ms=0, max_attempts=2), "dead")
        self.assertEqual(admin().zrange("emq:{orders}:dead", 0, -1), [ids[1]])
        # reap: lease 0 is due at once
        job = c.ok("claim", session=s, queue=q, lease_ms=0)
        self.assertEqual(job["id"], ids[2])
        self.assertEqual(c.ok("reap", session=s, queue=q, max_attempts=5, limit=10), 1)
        self.assertEqual(c.ok("pending_size", session=s, queue=q), 1)
        job = c.ok("claim", session=s, queue=q, lease_ms=0)
        self.assertEqual(job["attempts"], 2)
        self.assertEqual(c.ok("reap", session=s, queue=q, max_attempts=2, limit=10), 1)
        self.assertEqual(admin().hget(f"emq:{{orders}}:job:{ids[2]}", "state"), "dead")
        self.assertIsNone(c.ok("claim", session=s, queue=q, lease_ms=1000))
        self.assertEqual(c.ok("promote", session=s, queue=q, limit=0), 0)
        self.assertEqual(c.ok("reap", session=s, queue=q, max_attempts=1, limit=10), 0)
        # unicode payload round trip
        uid = c.ok("enqueue", session=s, queue=q, payload="héllo ✓ \n\"q\"", delay_ms=0)
        self.assertEqual(c.ok("claim", session=s, queue=q, lease_ms=5)["payload"], "héllo ✓ \n\"q\"")
        self.assertEqual(c.ok("browse", session=s, queue=q, offset=0, limit=1), [])
        self.assertIs(c.ok("complete", session=s, queue=q, id=uid, attempts=1), True)
        # disconnect
        self.assertEqual(c.ok("disconnect", session=s), {})
        self.assertEqual(c.err("pending_size", session=s, queue=q)["kind"], "invalid")
        self.assertEqual(c.err("disconnect", session=s)["kind"], "invalid")

    def test_sessions_are_independent(self):
        self.connect("a")
        self.connect("b", db=3)
        self.c.ok("enqueue", session="a", queue="q", payload="x", delay_ms=0)
        self.assertEqual(self.c.ok("pending_size", session="a", queue="q"), 1)
        self.assertEqual(self.c.ok("pending_size", session="b", queue="q"), 0)
        self.assertEqual(admin(3).hget("emq:fence", "protocol"), "1")  # fence per database

    def test_pipeline_probe(self):
        self.connect()
        self.assertEqual(self.c.ok("pipeline_probe", session="s1", key="emq-probe", n=10_000), list(range(1, 10_001)))
        self.assertEqual(self.c.ok("pipeline_probe", session="s1", key="emq-probe", n=1), [10_001])

    def test_batch(self):
        self.connect()
        admin().script_flush()
        reset_stats()
        self.assertEqual(self.c.ok("batch", session="s1", queue="bulk", n=20_000, depth=1000, payload="b"), 20_000)
        self.assertEqual(self.c.ok("pending_size", session="s1", queue="bulk"), 20_000)
        self.assertEqual(self.c.ok("batch", session="s1", queue="bulk", n=1, depth=7, payload="b"), 1)
        self.assertEqual(self.c.ok("batch", session="s1", queue="bulk", n=10, depth=3, payload="b"), 10)
        self.assertEqual(admin().zcard("emq:{bulk}:pending"), 20_011)
        stats = commandstats()
        self.assertEqual(stats.get("script|load"), 1)
        self.assertEqual(stats.get("evalsha"), 20_011 + 1)  # one NOSCRIPT miss
        self.assertNotIn("eval", stats)

    def test_batch_survives_script_flush_mid_run(self):
        self.connect()
        n = 60_000
        stop = threading.Event()
        flushes = []

        def flusher():
            a = admin()
            while not stop.is_set():
                a.script_flush()
                flushes.append(1)
                time.sleep(0.05)

        t = threading.Thread(target=flusher)
        t.start()
        try:
            got = self.c.ok("batch", session="s1", queue="bulk", n=n, depth=500, payload="x")
        finally:
            stop.set()
            t.join()
        self.assertEqual(got, n)
        self.assertEqual(admin().zcard("emq:{bulk}:pending"), n)
        self.assertEqual(admin().get("emq:{bulk}:seq"), str(n))  # nothing ran twice
        self.assertGreater(len(flushes), 1)

    # ------------------------------------------------------------------ EVALSHA-first

    def exercise_transitions(self, rounds: int):
        c, s, q = self.c, "s1", "ev"
        for _ in range(rounds):
            jid = c.ok("enqueue", session=s, queue=q, payload="x", delay_ms=0)
            job = c.ok("claim", session=s, queue=q, lease_ms=0)
            self.assertEqual(job["id"], jid)
            self.assertEqual(c.ok("retry", session=s, queue=q, id=jid, attempts=1, backoff_ms=0, max_attempts=5), "delayed")
            self.assertEqual(c.ok("promote", session=s, queue=q, limit=10), 1)
            job = c.ok("claim", session=s, queue=q, lease_ms=0)
            self.assertEqual(c.ok("reap", session=s, queue=q, max_attempts=5, limit=10), 1)
            job = c.ok("claim", session=s, queue=q, lease_ms=30_000)
            self.assertIs(c.ok("complete", session=s, queue=q, id=jid, attempts=job["attempts"]), True)

    def test_noscript_recovery_loads_each_script_once(self):
        self.connect()
        for _ in range(2):  # and again after a second flush
            admin().script_flush()
            reset_stats()
            self.exercise_transitions(25)
            stats = commandstats()
            self.assertEqual(stats.get("script|load"), 6, stats)
            self.assertNotIn("eval", stats)
            self.assertEqual(stats.get("evalsha"), 25 * 8 + 6)  # 8 calls per round + one miss per script
        self.assertEqual(
            sorted(admin().execute_command("SCRIPT", "EXISTS", *SHAS.values())), [1] * 6
        )

    # ------------------------------------------------------------------ errors

    def test_invalid_arguments_send_nothing(self):
        self.connect()
        s = "s1"
        bad = [
            ("enqueue", dict(session=s, queue="", payload="x", delay_ms=0)),
            ("enqueue", dict(session=s, queue="a" * 129, payload="x", delay_ms=0)),
            ("enqueue", dict(session=s, queue="has space", payload="x", delay_ms=0)),
            ("enqueue", dict(session=s, queue="q{x}", payload="x", delay_ms=0)),
            ("enqueue", dict(session=s, queue="q\n", payload="x", delay_ms=0)),
            ("enqueue", dict(session=s, queue="q", payload=5, delay_ms=0)),
            ("enqueue", dict(session=s, queue="q", payload="x", delay_ms=-1)),
            ("enqueue", dict(session=s, queue="q", payload="x", delay_ms=True)),
            ("enqueue", dict(session=s, queue="q", payload="x", delay_ms=1.5)),
            ("enqueue", dict(session=s, queue="q", payload="x", delay_ms="0")),
            ("enqueue", dict(session=s, queue="q", payload="x")),
            ("enqueue", dict(session="nobody", queue="q", payload="x", delay_ms=0)),
            ("browse", dict(session=s, queue="q", offset=-1, limit=1)),
            ("browse", dict(session=s, queue="q", offset=0, limit=-1)),
            ("pending_size", dict(session=s, queue="q/x")),
            ("claim", dict(session=s, queue="q", lease_ms=-5)),
            ("claim", dict(session=s, queue="q", lease_ms=False)),
            ("complete", dict(session=s, queue="q", id="j1", attempts=1)),
            ("complete", dict(session=s, queue="q", id="J0000000000000001", attempts=1)),
            ("complete", dict(session=s, queue="q", id="j0000000000000001", attempts=-1)),
            ("retry", dict(session=s, queue="q", id="j0000000000000001", attempts=1, backoff_ms=0, max_attempts=0)),
            ("retry", dict(session=s, queue="q", id="j0000000000000001", attempts=1, backoff_ms=-1, max_attempts=1)),
            ("promote", dict(session=s, queue="q", limit=-1)),
            ("reap", dict(session=s, queue="q", max_attempts=0, limit=1)),
            ("reap", dict(session=s, queue="q", max_attempts=1, limit=-1)),
            ("pipeline_probe", dict(session=s, key="k", n=0)),
            ("pipeline_probe", dict(session=s, key="", n=1)),
            ("batch", dict(session=s, queue="q", n=0, depth=1, payload="x")),
            ("batch", dict(session=s, queue="q", n=1, depth=0, payload="x")),
            ("batch", dict(session=s, queue="q", n=1, depth=1, payload=None)),
            ("connect", dict(session="s2", url="http://nope")),
            ("connect", dict(session="", url=url())),
            ("disconnect", dict(session="nobody")),
        ]
        reset_stats()
        for cmd, fields in bad:
            with self.subTest(cmd=cmd, fields=fields):
                self.assertEqual(self.c.err(cmd, **fields)["kind"], "invalid")
        stats = commandstats()
        for own in ("config|resetstat", "auth", "client|setinfo", "info", "hello"):
            stats.pop(own, None)  # the test's own admin connections
        self.assertEqual(stats, {})  # the connector sent nothing at all

    def test_engine_errors(self):
        e = self.c.err("connect", session="s1", url=url(password="wrong"))
        self.assertEqual(e["kind"], "engine")
        e = self.c.err("connect", session="s1", url=url(port=free_port()))
        self.assertEqual(e["kind"], "engine")
        self.connect()
        admin().set("emq:{w}:pending", "not a zset")
        e = self.c.err("pending_size", session="s1", queue="w")
        self.assertEqual(e["kind"], "engine")
        self.assertIn("WRONGTYPE", e["message"])
        e = self.c.err("enqueue", session="s1", queue="w", payload="x", delay_ms=0)
        self.assertEqual(e["kind"], "engine")
        self.assertIn("WRONGTYPE", e["message"])
        self.assertEqual(self.c.ok("pending_size", session="s1", queue="fine"), 0)  # still usable


if __name__ == "__main__":
    unittest.main()
