"""Behind Sentinel (SPEC §11) against real Valkey: a primary, a replica and three Sentinels on
loopback, plus fake servers (a few lines of RESP in a thread) that play a refusing, a silent and a
stale Sentinel and a replica, and record every command they get.

The data nodes and the Sentinels hold a connector user `emq` with what R4.19 and R11.4 allow, so a
command outside the lists is refused and shows in their `ACL LOG` (checked after every test). The
test drives the connector over the wire (a child process, as the harness does) and kills every
server it started. Binaries: $EMQ_VALKEY_SERVER, else ~/.cache/emq/valkey-9.1.2/bin/valkey-server
(the same binary runs `--sentinel`). Skipped when it is missing or redis-py is not importable.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import threading
import time
import unittest
from pathlib import Path

try:
    import redis
except ImportError:  # pragma: no cover
    redis = None

from test_wire import Child  # the connector child process and its JSON-lines client

ADMIN_PW = "adminpw"  # the default user of the data nodes (Sentinels monitor with it)
USER, PW = "emq", "pw"
NAME = "emq"
DATA_ACL = (
    "on >pw ~* -@all +evalsha +script|load +zrange +zcard +hget +hmget +hgetall +hsetnx +multi +exec "
    "+discard +incr +auth +hello +select +ping +client|setname +client|setinfo +role "
    "+del +hincrby +hset +time +zadd +zpopmin +zrem +zscore"
)
SENTINEL_ACL = (
    "on >pw -@all +auth +hello +ping +client|setname +client|setinfo +sentinel|get-master-addr-by-name "
    "+sentinel|get-primary-addr-by-name +sentinel|sentinels"
)

PROCS: list[subprocess.Popen] = []
DATA: list[int] = []  # [primary, replica] at the start
SENTINELS: list[int] = []
TMPDIR = None


def server_binary() -> str | None:
    b = os.environ.get("EMQ_VALKEY_SERVER") or str(Path.home() / ".cache/emq/valkey-9.1.2/bin/valkey-server")
    return b if os.path.isfile(b) and os.access(b, os.X_OK) and os.path.getsize(b) > 0 else None


def free_ports(n: int) -> list[int]:
    held = []
    try:
        for _ in range(n):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            held.append(s)
        return [s.getsockname()[1] for s in held]
    finally:
        for s in held:
            s.close()


def data_admin(port: int):
    return redis.Redis(host="127.0.0.1", port=port, password=ADMIN_PW, decode_responses=True, protocol=2)


def replicated(admin) -> int:
    """Waits until the replica holds every write the primary took so far, and says how many
    replicas do. WAIT counts only the calling connection's own writes (a fresh connection's are
    none, so it returns at once), hence a marker write and WAIT on one connection: the replication
    stream is ordered, so the marker's ack covers every write before it, the connector's too."""
    with admin.client() as one:  # pins one connection for both commands
        one.incr("emq-test:replicated")  # database 0; the tests use 2 and 3
        return one.execute_command("WAIT", 1, 10000)


def sentinel_admin(port: int):
    return redis.Redis(host="127.0.0.1", port=port, decode_responses=True, protocol=2)


def wait_for(what: str, check, timeout: float = 30.0):
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        try:
            last = check()
            if last:
                return last
        except (redis.exceptions.RedisError, OSError) as e:
            last = e
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what} (last: {last!r})")


def named_primary(port: int) -> int | None:
    reply = sentinel_admin(port).execute_command("SENTINEL", "get-master-addr-by-name", NAME)
    return int(reply[1]) if reply else None


def current_primary() -> int:
    return wait_for("every Sentinel to name one primary",
                    lambda: (lambda s: s.pop() if len(s) == 1 and None not in s else None)({named_primary(p) for p in SENTINELS}))


def setUpModule():
    global TMPDIR
    if redis is None:
        raise unittest.SkipTest("redis-py is not importable (run with the provisioned venv)")
    binary = server_binary()
    if binary is None:
        raise unittest.SkipTest("no valkey-server found (set EMQ_VALKEY_SERVER)")
    TMPDIR = tempfile.mkdtemp(prefix="emq-sentinel-")
    ports = free_ports(5)
    DATA[:], SENTINELS[:] = ports[:2], ports[2:]
    try:
        for i, port in enumerate(DATA):
            conf = f"{TMPDIR}/d{port}.conf"
            with open(conf, "w") as f:  # a file: `--user "emq on ..."` is read as one user name
                f.write(
                    f"port {port}\nbind 127.0.0.1\nsave \"\"\nappendonly no\ndir {TMPDIR}\n"
                    f"dbfilename d{port}.rdb\nlogfile {TMPDIR}/d{port}.log\n"
                    f"requirepass {ADMIN_PW}\nmasterauth {ADMIN_PW}\nuser {USER} {DATA_ACL}\n"
                    + (f"replicaof 127.0.0.1 {DATA[0]}\n" if i else "")
                )
            PROCS.append(subprocess.Popen([binary, conf], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        for port in DATA:
            wait_for(f"data node {port}", lambda p=port: data_admin(p).ping(), 10)
        wait_for("the replica to sync", lambda: data_admin(DATA[1]).info("replication").get("master_link_status") == "up")
        for port in SENTINELS:
            conf = f"{TMPDIR}/s{port}.conf"
            with open(conf, "w") as f:
                f.write(
                    f"port {port}\nbind 127.0.0.1\ndir {TMPDIR}\nlogfile {TMPDIR}/s{port}.log\n"
                    f"sentinel monitor {NAME} 127.0.0.1 {DATA[0]} 2\n"
                    f"sentinel auth-pass {NAME} {ADMIN_PW}\n"
                    f"sentinel down-after-milliseconds {NAME} 2000\n"
                    f"sentinel failover-timeout {NAME} 10000\n"
                )
            PROCS.append(subprocess.Popen([binary, conf, "--sentinel"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        for port in SENTINELS:
            wait_for(f"Sentinel {port}", lambda p=port: sentinel_admin(p).ping(), 10)
            sentinel_admin(port).execute_command("ACL", "SETUSER", USER, *SENTINEL_ACL.split())
        current_primary()
        wait_for("the Sentinels to see the replica and each other", lambda: all(
            sentinel_admin(p).execute_command("SENTINEL", "MASTER", NAME)[
                sentinel_admin(p).execute_command("SENTINEL", "MASTER", NAME).index("num-other-sentinels") + 1] == "2"
            and sentinel_admin(p).execute_command("SENTINEL", "REPLICAS", NAME) for p in SENTINELS))
    except BaseException:
        tearDownModule()
        raise


def tearDownModule():
    for p in PROCS:
        p.kill()
        p.wait()
    PROCS.clear()
    if TMPDIR:
        shutil.rmtree(TMPDIR, ignore_errors=True)


# ------------------------------------------------------------------------------------------------
# Fake servers: a refusing port, a silent Sentinel, a Sentinel that names what it is told, a node
# that answers ROLE as a replica. Each records the commands it gets.


class Fake:
    """A RESP server on a free loopback port. `answer(argv) -> bytes | None` (None: stay silent)."""

    def __init__(self, answer):
        self.answer = answer
        self.commands: list[list[str]] = []
        self.connections = 0
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        self.open: list[socket.socket] = []
        self.held: list[float] = []  # seconds each ended connection stayed open, by its end
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.connections += 1
            self.open.append(conn)
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn):
        f = conn.makefile("rb")
        opened = time.monotonic()
        try:
            while True:
                line = f.readline()
                if not line:
                    return
                assert line.startswith(b"*"), line
                argv = []
                for _ in range(int(line[1:])):
                    n = int(f.readline()[1:])
                    argv.append(f.read(n + 2)[:-2].decode())
                self.commands.append(argv)
                reply = self.answer(argv)
                if reply is not None:
                    conn.sendall(reply)
        except (OSError, ValueError):
            return
        finally:
            self.held.append(time.monotonic() - opened)
            if conn in self.open:
                self.open.remove(conn)
            conn.close()

    def close(self):
        self.sock.close()
        for c in list(self.open):
            try:
                c.shutdown(socket.SHUT_RDWR)
                c.close()
            except OSError:
                pass


def bulk_array(*items) -> bytes:
    out = f"*{len(items)}\r\n".encode()
    for i in items:
        b = str(i).encode()
        out += b"$%d\r\n%s\r\n" % (len(b), b)
    return out


def sentinel_naming(where):
    """A fake Sentinel: AUTH +OK; get-master-addr-by-name -> where() ((host, port) or None)."""

    def answer(argv):
        if argv[0].upper() == "AUTH":
            return b"+OK\r\n"
        if [a.lower() for a in argv[:2]] == ["sentinel", "get-master-addr-by-name"]:
            w = where()
            return b"*-1\r\n" if w is None else bulk_array(*w)
        return b"-ERR unknown command\r\n"

    return answer


def fake_replica(argv):
    if argv[0].upper() == "AUTH":
        return b"+OK\r\n"
    if argv[0].upper() == "ROLE":
        return b"*5\r\n$5\r\nslave\r\n$9\r\n127.0.0.1\r\n:6379\r\n$9\r\nconnected\r\n:100\r\n"
    return b"-ERR not for a replica\r\n"


def closed_port() -> int:
    return free_ports(1)[0]  # nothing listens there: the connection is refused


# ------------------------------------------------------------------------------------------------


class SentinelLive(unittest.TestCase):
    def setUp(self):
        self.primary = current_primary()
        self.db = 3
        data_admin(self.primary).flushall()
        data_admin(self.primary).script_flush()
        # every node empty before the test: a replica that is behind would bring old jobs back
        # when a test promotes it
        self.assertEqual(replicated(data_admin(self.primary)), 1)
        for p in [*DATA, *SENTINELS]:
            (data_admin(p) if p in DATA else sentinel_admin(p)).execute_command("ACL", "LOG", "RESET")
        self.c = Child()
        self.fakes: list[Fake] = []

    def tearDown(self):
        self.c.close()
        for f in self.fakes:
            f.close()
        # R11.4 and R4.19: nothing the connector sent was refused, on a Sentinel or a data node
        for p in DATA:
            self.assertEqual(data_admin(p).execute_command("ACL", "LOG"), [], f"data node {p}")
        for p in SENTINELS:
            self.assertEqual(sentinel_admin(p).execute_command("ACL", "LOG"), [], f"Sentinel {p}")

    def fake(self, answer) -> Fake:
        f = Fake(answer)
        self.fakes.append(f)
        return f

    def url(self, first: int) -> str:
        return f"redis://{USER}:{PW}@127.0.0.1:{first}/{self.db}"

    def connect(self, session: str, nodes: list[int], **extra) -> dict:
        return self.c.call("connect", session=session, url=self.url(nodes[0]),
                           sentinel={"name": NAME, "nodes": [f"127.0.0.1:{p}" for p in nodes]}, **extra)

    def clients(self, port: int) -> list[str]:
        return [c for c in data_admin(port).client_list() if c.get("user") == USER]

    # -------------------------------------------------------------------------------------------

    def test_connect_and_verbs_on_the_primary(self):
        self.assertEqual(self.connect("s", SENTINELS), {"seq": 1, "ok": {}})
        jid = self.c.ok("enqueue", session="s", queue="q", payload="hi", delay_ms=0)
        self.assertEqual(self.c.ok("pending_size", session="s", queue="q"), 1)
        self.assertEqual(self.c.ok("browse", session="s", queue="q", offset=0, limit=10), [{"id": jid, "payload": "hi"}])
        self.assertEqual(self.c.ok("pipeline_probe", session="s", key="probe", n=5), [1, 2, 3, 4, 5])
        self.assertEqual(self.c.ok("batch", session="s", queue="q", n=500, depth=64, payload="b"), 500)
        r = data_admin(self.primary)
        r.execute_command("SELECT", self.db)
        self.assertEqual(r.zcard("emq:{q}:pending"), 501)  # the url's database, on the primary
        self.assertEqual(r.hget("emq:fence", "protocol"), "1")
        self.assertEqual(len(self.clients(self.primary)), 1)
        self.c.ok("disconnect", session="s")
        wait_for("the session's connection to close", lambda: self.clients(self.primary) == [], 5)

    def test_refusing_silent_and_unknowing_sentinels_are_skipped(self):
        silent = self.fake(lambda argv: None)
        unknowing = self.fake(sentinel_naming(lambda: None))
        self.assertIn("ok", self.connect("s", [closed_port(), silent.port, unknowing.port, *SENTINELS]))
        self.assertEqual(silent.commands[0][0].upper(), "AUTH")  # then nothing: it never answered
        self.assertEqual(len(silent.commands), 1)
        self.assertEqual([a[0].upper() for a in unknowing.commands], ["AUTH", "SENTINEL"])
        self.assertEqual(unknowing.commands[0], ["AUTH", USER, PW])  # the url's user (R11.1)
        self.assertEqual(unknowing.commands[1], ["SENTINEL", "get-master-addr-by-name", NAME])
        wait_for("the Sentinel connections to close", lambda: silent.open == [] and unknowing.open == [], 3)
        # The silent one was given up within its share of R5.8's 10 s, not the whole of it: timed by
        # the fake from accept to the connector's close, so a slow machine elsewhere does not count.
        self.assertLess(silent.held[0], 10.0)
        self.assertIn("ok", self.c.call("enqueue", session="s", queue="q", payload="x", delay_ms=0))

    def test_a_stale_sentinel_naming_a_replica_is_skipped(self):
        replica = self.fake(fake_replica)
        stale = self.fake(sentinel_naming(lambda: ("127.0.0.1", replica.port)))
        self.assertIn("ok", self.connect("s", [stale.port, *SENTINELS]))
        # R11.2: the named node got AUTH and ROLE and nothing else (no SELECT, no fence read)
        self.assertEqual(replica.commands, [["AUTH", USER, PW], ["ROLE"]])
        wait_for("the replica's connection to close", lambda: replica.open == [], 3)
        self.assertEqual(len(self.clients(self.primary)), 1)

    def test_a_killed_connection_makes_the_next_call_ask_again(self):
        """R11.3: the engine closes the session's idle connection (CLIENT KILL); the next call asks
        the Sentinels again (never the remembered address), reads the fence there, then runs."""
        fake = self.fake(sentinel_naming(lambda: ("127.0.0.1", self.primary)))
        self.assertIn("ok", self.connect("s", [fake.port]))
        asked = [a for a in fake.commands if a[0] == "SENTINEL"]
        self.assertEqual(len(asked), 1)
        self.c.ok("enqueue", session="s", queue="q", payload="a", delay_ms=0)
        data_admin(self.primary).execute_command("CLIENT", "KILL", "USER", USER)
        wait_for("the kill", lambda: self.clients(self.primary) == [], 5)
        self.assertIn("ok", self.c.call("enqueue", session="s", queue="q", payload="b", delay_ms=0))
        self.assertEqual(len([a for a in fake.commands if a[0] == "SENTINEL"]), 2)
        self.assertEqual(len(self.clients(self.primary)), 1)

    def test_no_primary_is_kind_engine_saying_why(self):
        unknowing = self.fake(sentinel_naming(lambda: None))
        e = self.c.err("connect", session="s", url=self.url(unknowing.port),
                       sentinel={"name": NAME, "nodes": [f"127.0.0.1:{unknowing.port}"]})
        self.assertEqual(e["kind"], "engine")
        self.assertIn("no Sentinel knows the name", e["message"])
        e = self.c.err("connect", session="s", url=self.url(SENTINELS[0]),
                       sentinel={"name": NAME, "nodes": [f"127.0.0.1:{closed_port()}", f"127.0.0.1:{closed_port()}"]})
        self.assertEqual(e["kind"], "engine")
        self.assertIn("no Sentinel answered", e["message"])
        replica = self.fake(fake_replica)
        stale = self.fake(sentinel_naming(lambda: ("127.0.0.1", replica.port)))
        e = self.c.err("connect", session="s", url=self.url(stale.port),
                       sentinel={"name": NAME, "nodes": [f"127.0.0.1:{stale.port}"]})
        self.assertEqual(e["kind"], "engine")
        self.assertIn("ROLE slave", e["message"])
        e = self.c.err("connect", session="s", url=self.url(SENTINELS[0]),
                       sentinel={"name": "nobody", "nodes": [f"127.0.0.1:{p}" for p in SENTINELS]})
        self.assertEqual(e["kind"], "engine")
        self.assertIn("no Sentinel knows the name 'nobody'", e["message"])

    def test_readonly_fails_once_then_the_next_call_resolves_again(self):
        """R11.3 with READONLY: a fake Sentinel names the primary, which is then made a replica of
        the other node by hand (`REPLICAOF` keeps its normal clients connected, as a proxy in front
        of a demoted primary does: they meet READONLY), and the fake names the other node from
        then on. The real Sentinels stop monitoring meanwhile; the topology is put back after."""
        # A queue of its own: the failover test before it leaves jobs 'a' and 'b' on queue q.
        old, new = self.primary, next(p for p in DATA if p != self.primary)
        where = [("127.0.0.1", old)]
        fake = self.fake(sentinel_naming(lambda: where[0]))
        self.assertIn("ok", self.connect("s", [fake.port]))
        self.c.ok("enqueue", session="s", queue="q-readonly", payload="a", delay_ms=0)
        self.assertEqual(replicated(data_admin(old)), 1)  # 'a' is on the replica too
        for p in SENTINELS:  # keep the real Sentinels from undoing the swap below
            sentinel_admin(p).execute_command("SENTINEL", "REMOVE", NAME)
        try:
            data_admin(new).execute_command("REPLICAOF", "NO", "ONE")
            data_admin(old).execute_command("REPLICAOF", "127.0.0.1", new)
            where[0] = ("127.0.0.1", new)
            data_admin(new).execute_command("SCRIPT", "FLUSH")  # as on a promoted replica
            e = self.c.err("enqueue", session="s", queue="q-readonly", payload="b", delay_ms=0)
            self.assertEqual(e["kind"], "engine")
            self.assertTrue(e["message"].startswith("READONLY"), e)
            self.assertEqual(self.clients(old), [])  # closed at once (R11.3, R5.13)
            self.assertIn("ok", self.c.call("enqueue", session="s", queue="q-readonly", payload="c", delay_ms=0))
            r = data_admin(new)
            r.execute_command("SELECT", self.db)
            self.assertEqual([r.hget("emq:{q-readonly}:job:" + j, "payload") for j in r.zrange("emq:{q-readonly}:pending", 0, -1)], ["a", "c"])
        finally:
            data_admin(old).execute_command("REPLICAOF", "NO", "ONE")
            data_admin(new).execute_command("REPLICAOF", "127.0.0.1", old)
            wait_for("the replica to sync again", lambda: data_admin(new).info("replication").get("master_link_status") == "up")
            for p in SENTINELS:
                sentinel_admin(p).execute_command("SENTINEL", "MONITOR", NAME, "127.0.0.1", old, 2)
                sentinel_admin(p).execute_command("SENTINEL", "SET", NAME, "auth-pass", ADMIN_PW,
                                                  "down-after-milliseconds", 2000, "failover-timeout", 10000)
            current_primary()

    def test_a_sentinel_failover_is_followed(self):
        """R11.3 through a real SENTINEL FAILOVER, one session working and one idle: Sentinel
        closes the old primary's clients; each session's next call resolves the new primary,
        reads the fence there and loads its script there (an empty cache)."""
        for s in ("work", "idle"):
            self.assertIn("ok", self.connect(s, SENTINELS))
        self.c.ok("enqueue", session="work", queue="q", payload="a", delay_ms=0)
        self.c.ok("enqueue", session="idle", queue="q", payload="b", delay_ms=0)
        old = self.primary
        wait_for("the replica to be known to every Sentinel", lambda: all(
            sentinel_admin(p).execute_command("SENTINEL", "REPLICAS", NAME) for p in SENTINELS))
        wait_for("SENTINEL FAILOVER to be taken", lambda: sentinel_admin(SENTINELS[0]).execute_command("SENTINEL", "FAILOVER", NAME))
        new = wait_for("every Sentinel to name the new primary", lambda: (lambda p: p if p != old else None)(current_primary()), 60)
        wait_for("the old primary to be a replica", lambda: data_admin(old).info("replication")["role"] == "slave", 30)
        for s in ("work", "idle"):
            outcomes = [("ok" in self.c.call("enqueue", session=s, queue="q", payload=s, delay_ms=0)) for _ in range(3)]
            self.assertTrue(any(outcomes), (s, outcomes))
            self.assertEqual(outcomes[outcomes.index(True):], [True] * (3 - outcomes.index(True)), (s, outcomes))
            self.assertIn("ok", self.c.call("claim", session=s, queue="q", lease_ms=1000))
        self.assertEqual(self.clients(old), [])
        self.assertEqual(len(self.clients(new)), 2)


if __name__ == "__main__":
    unittest.main()
