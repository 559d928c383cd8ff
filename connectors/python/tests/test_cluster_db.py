"""R8.5, a database on a cluster: every connection a cluster session opens to a node SELECTs the
url's database before any other command of the session, and a SELECT the engine refuses fails
`connect` with kind engine and the engine's text.

No engine needed: three fake nodes on loopback (FakeNode, a few lines of RESP) record what each
connection gets. The slot map names node A alone; A answers MOVED to B for one queue and ASK to C
(a node outside the map) for another, so the session's connections are the seed's, a MOVED
target's, an ASK target's, and a replacement after A closes them all. redis-py's RedisCluster
refuses a database itself, so these check the connector's own SELECT where redis-py opens each
connection (ClusterSession._on_node_connection). Skipped when redis-py is missing.
"""

from __future__ import annotations

import socket
import sys
import threading
import unittest
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

try:
    from redis.crc import key_slot

    from echomq_connector import wire
    from echomq_connector.bundle import load_bundle
    from echomq_connector.errors import EngineError
    from echomq_connector.seam import ClusterSession
except ImportError:  # pragma: no cover - redis-py missing
    wire = None

BUNDLE = Path(__file__).resolve().parent.parent.parent.parent / "bundle"


class FakeNode:
    """A loopback server speaking just enough RESP for a ClusterSession: AUTH, SELECT, CLUSTER
    SLOTS (every slot on `slots_owner`, or the ranges of `slots`), HGETALL of the fence (installed,
    or empty until a MULTI/HSETNX/EXEC installs it: `fence`), ZCARD (0, or a redirect for the
    queues in `moved`/`asked`). `conns` holds each accepted connection's commands, in order.

    A node listens on `host` (any loopback address) and names another by `endpoint(node)`, in
    CLUSTER SLOTS and in redirects: its host by default; None or "" for a node with no endpoint
    (R8.13: CLUSTER SLOTS says null or "", a redirect `MOVED <slot> :<port>`)."""

    def __init__(self, bundle, host: str = "127.0.0.1"):
        self.bundle = bundle
        self.host = host
        self.listener = socket.create_server((host, 0))
        self.port = self.listener.getsockname()[1]
        self.endpoint = lambda node: node.host  # how this node names `node`
        self.slots: list[tuple[int, int, FakeNode]] | None = None  # CLUSTER SLOTS' ranges, else all on slots_owner
        self.fence = True  # the fence is installed (HGETALL gives it); else MULTI/HSETNX/EXEC installs it
        self.fence_moved: FakeNode | None = None  # the node a fence write's HSETNX is MOVED to
        self.conns: list[list[tuple[str, ...]]] = []
        self.socks: list[socket.socket] = []
        self.select_error: str | None = None  # the reply to SELECT, when it is an error
        self.slots_owner = self
        self.moved: dict[str, FakeNode] = {}  # queue -> the node MOVED names
        self.asked: dict[str, FakeNode] = {}  # queue -> the node ASK names
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                sock, _ = self.listener.accept()
            except OSError:
                return
            self.socks.append(sock)
            self.conns.append([])
            threading.Thread(target=self._serve, args=(sock, self.conns[-1]), daemon=True).start()

    def _serve(self, sock, seen):
        f = sock.makefile("rb")
        try:
            while True:
                line = f.readline()
                if not line:
                    return
                n = int(line[1:])
                args = []
                for _ in range(n):
                    size = int(f.readline()[1:])
                    args.append(f.read(size + 2)[:-2].decode())
                seen.append(tuple(args))
                sock.sendall(self._reply(args))
        except (OSError, ValueError):
            return

    def _reply(self, args) -> bytes:
        cmd = args[0].upper()
        if cmd in ("AUTH", "ASKING", "MULTI"):
            return b"+OK\r\n"
        if cmd == "SELECT":
            return f"-{self.select_error}\r\n".encode() if self.select_error else b"+OK\r\n"
        if cmd == "CLUSTER" and args[1].upper() == "SLOTS":
            ranges = self.slots or [(0, 16383, self.slots_owner)]
            reply = f"*{len(ranges)}\r\n"
            for lo, hi, o in ranges:
                host = self.endpoint(o)
                host = "$-1\r\n" if host is None else f"${len(host)}\r\n{host}\r\n"
                reply += f"*3\r\n:{lo}\r\n:{hi}\r\n*3\r\n{host}:{o.port}\r\n$1\r\n{o.port % 10}\r\n"
            return reply.encode()
        if cmd == "HSETNX":
            if self.fence_moved is not None:
                return f"-MOVED {key_slot(args[1].encode())} {self._named(self.fence_moved)}\r\n".encode()
            return b"+QUEUED\r\n"
        if cmd == "EXEC":
            if self.fence_moved is not None:
                return b"-EXECABORT Transaction discarded because of previous errors.\r\n"
            self.fence = True
            return b"*3\r\n:1\r\n:1\r\n:1\r\n"
        if cmd == "HGETALL" and not self.fence:
            return b"*0\r\n"
        if cmd == "HGETALL":
            b = self.bundle
            fields = ["protocol", str(b.protocol), "bundle", b.version, "digest", b.digest]
            return f"*{len(fields)}\r\n".encode() + b"".join(f"${len(x)}\r\n{x}\r\n".encode() for x in fields)
        if cmd == "ZCARD":
            q = args[1].split("{")[1].split("}")[0]
            slot = key_slot(args[1].encode())
            if q in self.moved:
                return f"-MOVED {slot} {self._named(self.moved[q])}\r\n".encode()
            if q in self.asked:
                return f"-ASK {slot} {self._named(self.asked[q])}\r\n".encode()
            return b":0\r\n"
        return f"-ERR unknown command '{args[0]}'\r\n".encode()

    def _named(self, node) -> str:
        """`node` as a redirect names it: `host:port`, or `:port` when it has no endpoint."""
        return f"{self.endpoint(node) or ''}:{node.port}"

    def drop_connections(self):
        """The engine closes every connection it holds (a CLIENT KILL, a restart)."""
        for s in self.socks:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            s.close()

    def close(self):
        self.listener.close()
        self.drop_connections()


@unittest.skipIf(wire is None, "redis-py is not importable (run with the provisioned venv)")
class ClusterDatabase(unittest.TestCase):
    def setUp(self):
        # redis-py 8 warns of lib_name/lib_version on every node pool it builds; the child process
        # says it on stderr, here it would fill the test log
        self.enterContext(warnings.catch_warnings())
        warnings.simplefilter("ignore", DeprecationWarning)
        self.bundle = load_bundle(BUNDLE)
        self.a, self.b, self.c = FakeNode(self.bundle), FakeNode(self.bundle), FakeNode(self.bundle)
        for node in (self.b, self.c):
            node.slots_owner = self.a  # the slot map names A alone: B and C are reached by redirects
        self.a.moved["m"] = self.b
        self.a.asked["k"] = self.c
        self.sessions: list[ClusterSession] = []

    def tearDown(self):
        for s in self.sessions:
            s.close()
        for node in (self.a, self.b, self.c):
            node.close()

    def session(self, db: str) -> ClusterSession:
        s = ClusterSession(self.bundle, f"redis://emq:pw@127.0.0.1:{self.a.port}{db}")
        self.sessions.append(s)
        return s

    def test_every_node_connection_selects_the_database_first(self):
        s = self.session("/9")
        s.open()
        self.assertEqual(s.pending_size("a"), 0)  # the seed's slot
        self.assertEqual(s.pending_size("m"), 0)  # MOVED to B: a connection opened for the redirect
        self.assertEqual(s.pending_size("k"), 0)  # ASK to C, outside the slot map
        self.a.drop_connections()
        try:  # redis-py's pool replaces the closed connection at checkout; or this call fails
            s.pending_size("a")
        except EngineError:
            pass
        self.assertEqual(s.pending_size("a"), 0)
        self.assertGreaterEqual(len(self.a.conns), 2, "the replacement of A's connection")
        for name, node in (("A", self.a), ("B", self.b), ("C", self.c)):
            self.assertTrue(node.conns, f"node {name} got no connection")
            for i, seen in enumerate(node.conns):
                with self.subTest(node=name, connection=i):
                    self.assertEqual(seen[0][0], "AUTH", seen)
                    self.assertEqual(seen[1], ("SELECT", "9"), seen)  # before CLUSTER SLOTS, the fence, ASKING...
                    self.assertNotIn(("SELECT", "9"), seen[2:])
        self.assertIn(("ASKING",), self.c.conns[0])
        self.assertIn(("ZCARD", "emq:{m}:pending"), self.b.conns[0])

    def test_database_0_sends_no_select(self):
        for db in ("", "/", "/0"):
            s = self.session(db)
            s.open()
            self.assertEqual(s.pending_size("m"), 0)
            s.close()
        for node in (self.a, self.b):
            for seen in node.conns:
                self.assertFalse([c for c in seen if c[0] == "SELECT"], seen)

    def test_a_refused_select_fails_connect_with_the_engines_text(self):
        c = wire.Connector(self.bundle)
        url = f"redis://emq:pw@127.0.0.1:{self.a.port}"
        for refusal, db in (("ERR DB index is out of range", "/16"), ("NOPERM No permissions to access database", "/3"),
                            ("ERR SELECT is not allowed in cluster mode", "/9")):
            with self.subTest(refusal=refusal):
                self.a.select_error = refusal
                del self.a.conns[:]
                reply = c.handle_line(f'{{"seq":1,"cmd":"connect","session":"s","url":"{url}{db}","cluster":true}}'.encode())
                self.assertEqual(reply["error"]["kind"], "engine", reply)
                self.assertTrue(reply["error"]["message"].startswith(refusal), reply)
                self.assertEqual([seen[:2] for seen in self.a.conns], [[("AUTH", "emq", "pw"), ("SELECT", db[1:])]])
                self.assertEqual([len(seen) for seen in self.a.conns], [2])  # nothing after the SELECT
        self.assertEqual(c.sessions, {})

    def test_a_refused_select_on_a_redirect_fails_that_call(self):
        s = self.session("/9")
        s.open()
        self.b.select_error = "ERR DB index is out of range"
        with self.assertRaises(EngineError) as e:
            s.pending_size("m")
        self.assertTrue(str(e.exception).startswith("ERR DB index is out of range"), e.exception)
        self.assertEqual([len(seen) for seen in self.b.conns], [2])  # AUTH and SELECT, nothing else
        self.b.select_error = None
        self.assertEqual(s.pending_size("m"), 0)  # the next call opens B again, SELECT first


if __name__ == "__main__":
    unittest.main()
