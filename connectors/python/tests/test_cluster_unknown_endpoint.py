"""R8.13, an unknown endpoint: a cluster at `cluster-preferred-endpoint-type unknown-endpoint` names
no host, in CLUSTER SLOTS (null or "") and in redirects (`MOVED 12 :7001`, `ASK 12 :7001`). An
endpoint left unnamed is the host of the node that sent the reply, at the port given: the session
dials that host, keeps it in its slot map, and never dials "" nor reports the redirect as the
call's error.

No engine needed: test_cluster_db's FakeNode, on several loopback addresses (127.0.0.2, .3, .4),
so that the host a node is reached at tells which node named it: a redirect followed to the seed's
host, to the slot owner's, or to "" (getaddrinfo refuses it; a resolver that took it for the local
machine would reach 127.0.0.1, where no node listens) finds nothing there and fails the call.
Skipped when redis-py is missing, or where those addresses cannot be bound (only 127.0.0.1 on
some systems).
"""

from __future__ import annotations

import sys
import unittest
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from test_cluster_db import BUNDLE, FakeNode, wire  # noqa: E402  (the fake nodes of R8.5's tests)

if wire is not None:
    from redis.crc import key_slot

    from redis.cluster import ClusterNode
    from redis.exceptions import AskError, MovedError

    from echomq_connector.bundle import load_bundle
    from echomq_connector.seam import TLS, ClusterSession


def _unnamed(node):
    """A node at `unknown-endpoint`: it names every node with an empty host."""
    return ""


@unittest.skipIf(wire is None, "redis-py is not importable (run with the provisioned venv)")
class UnknownEndpoint(unittest.TestCase):
    def setUp(self):
        self.enterContext(warnings.catch_warnings())
        warnings.simplefilter("ignore", DeprecationWarning)  # redis-py 8's lib_name/lib_version
        self.bundle = load_bundle(BUNDLE)
        self.nodes: list[FakeNode] = []
        self.sessions: list[ClusterSession] = []

    def tearDown(self):
        for s in self.sessions:
            s.close()
        for node in self.nodes:
            node.close()

    def node(self, host: str) -> FakeNode:
        try:
            node = FakeNode(self.bundle, host)
        except OSError as e:
            self.skipTest(f"cannot listen on {host}: {e}")
        self.nodes.append(node)
        return node

    def session(self, seed: FakeNode) -> ClusterSession:
        s = ClusterSession(self.bundle, f"redis://emq:pw@{seed.host}:{seed.port}")
        self.sessions.append(s)
        return s

    def owner(self, s: ClusterSession, q: str) -> tuple[str, int]:
        """The (host, port) the session's slot map gives as the primary of queue q's slot."""
        node = s.client.nodes_manager.slots_cache[key_slot(f"emq:{{{q}}}:pending".encode())][0]
        return node.host, node.port

    def assert_no_empty_host(self, s: ClusterSession):
        nm = s.client.nodes_manager
        for node in [*nm.nodes_cache.values(), *nm.startup_nodes.values(), *s._extra_nodes]:
            self.assertTrue(node.host, f"a node of the session has no host: {node!r}")

    @staticmethod
    def calls(node: FakeNode, *command: str) -> int:
        return sum(seen.count(command) for seen in node.conns)

    def three_nodes(self):
        """The seed A on 127.0.0.2, whose slot map puts every slot on B, named 127.0.0.3; C on
        127.0.0.3 too, reached only by B's redirects, which name no host. A redirect taken to the
        seed's host (127.0.0.2:C) finds nothing."""
        a, b, c = self.node("127.0.0.2"), self.node("127.0.0.3"), self.node("127.0.0.3")
        self.assertNotEqual(a.port, c.port)  # else 127.0.0.2:C would be A (the kernel gives distinct ports)
        a.slots_owner = b
        b.endpoint = _unnamed
        return a, b, c

    def test_moved_with_no_host_goes_to_the_answering_nodes_host_and_into_the_slot_map(self):
        a, b, c = self.three_nodes()
        b.moved["m"] = c  # -MOVED <slot> :<C's port>
        s = self.session(a)
        s.open()
        self.assertEqual(s.pending_size("m"), 0)  # followed, not the call's error
        self.assertEqual(self.calls(c, "ZCARD", "emq:{m}:pending"), 1)
        self.assertEqual(self.owner(s, "m"), ("127.0.0.3", c.port))  # B's host, C's port
        self.assert_no_empty_host(s)
        self.assertEqual(s.pending_size("m"), 0)  # the slot map sends it to C straight away
        self.assertEqual(self.calls(b, "ZCARD", "emq:{m}:pending"), 1)
        self.assertEqual(self.calls(c, "ZCARD", "emq:{m}:pending"), 2)

    def test_ask_with_no_host_sends_asking_and_the_call_to_the_answering_nodes_host(self):
        a, b, c = self.three_nodes()
        b.asked["k"] = c  # -ASK <slot> :<C's port>
        s = self.session(a)
        s.open()
        self.assertEqual(s.pending_size("k"), 0)
        (seen,) = [seen for seen in c.conns if ("ZCARD", "emq:{k}:pending") in seen]
        i = seen.index(("ZCARD", "emq:{k}:pending"))
        self.assertEqual(seen[i - 1], ("ASKING",), seen)  # ASKING, then the call, on C
        self.assertEqual(self.owner(s, "k"), ("127.0.0.3", b.port))  # ASK leaves the slot map alone
        self.assert_no_empty_host(s)
        self.assertEqual(s.pending_size("k"), 0)  # again by B, which asks again
        self.assertEqual(self.calls(b, "ZCARD", "emq:{k}:pending"), 2)
        self.assertEqual(self.calls(c, "ASKING"), 2)

    def test_each_redirect_of_a_chain_names_the_host_of_the_node_that_sent_it(self):
        # B (127.0.0.3, the slot map's) MOVEs to C, naming 127.0.0.4; C ASKs to :<D's port>, so D is
        # at C's host, 127.0.0.4, neither the seed's (127.0.0.2) nor the slot owner's (127.0.0.3).
        a, b = self.node("127.0.0.2"), self.node("127.0.0.3")
        c, d = self.node("127.0.0.4"), self.node("127.0.0.4")
        a.slots_owner = b
        b.moved["m"] = c
        c.asked["m"] = d
        c.endpoint = _unnamed
        s = self.session(a)
        s.open()
        self.assertEqual(s.pending_size("m"), 0)
        self.assertEqual(self.calls(d, "ZCARD", "emq:{m}:pending"), 1)
        self.assertEqual(self.calls(d, "ASKING"), 1)
        self.assertEqual(self.owner(s, "m"), ("127.0.0.4", c.port))
        self.assert_no_empty_host(s)

    def test_a_fence_write_moved_with_no_host_goes_to_the_answering_nodes_host(self):
        # No fence yet on B; its MULTI/HSETNX/EXEC is MOVED (:<C's port>) to C, at B's host.
        a, b, c = self.three_nodes()
        b.fence = c.fence = False
        b.fence_moved = c
        s = self.session(a)
        s.open()
        self.assertTrue(c.fence, "the fence was not written on C")
        self.assertEqual(self.calls(c, "EXEC"), 1)
        self.assertEqual(self.calls(b, "EXEC"), 1)  # the aborted one
        fence_slot = key_slot(self.bundle.fence_key.encode())
        owner = s.client.nodes_manager.slots_cache[fence_slot][0]
        self.assertEqual((owner.host, owner.port), ("127.0.0.3", c.port))
        self.assert_no_empty_host(s)

    def test_cluster_slots_null_and_empty_hosts_are_the_answering_nodes_host(self):
        # The seed A (127.0.0.2) names itself with a null host and B (127.0.0.2 too) with "".
        a, b = self.node("127.0.0.2"), self.node("127.0.0.2")
        a.slots = [(0, 8191, a), (8192, 16383, b)]
        a.endpoint = lambda node: None if node is a else ""
        queues = [f"q{i}" for i in range(64)]
        low = next(q for q in queues if key_slot(f"emq:{{{q}}}:pending".encode()) <= 8191)
        high = next(q for q in queues if key_slot(f"emq:{{{q}}}:pending".encode()) >= 8192)
        s = self.session(a)
        s.open()
        self.assertEqual(self.owner(s, low), ("127.0.0.2", a.port))
        self.assertEqual(self.owner(s, high), ("127.0.0.2", b.port))
        self.assert_no_empty_host(s)
        self.assertEqual(s.pending_size(low), 0)
        self.assertEqual(s.pending_size(high), 0)
        self.assertEqual(self.calls(a, "ZCARD", f"emq:{{{low}}}:pending"), 1)
        self.assertEqual(self.calls(b, "ZCARD", f"emq:{{{high}}}:pending"), 1)

    def test_over_tls_an_unnamed_host_is_the_name_the_answering_node_is_checked_as(self):
        # R10.4: a node the url names `localhost` is dialled at the address ClusterNode makes of it
        # and checked as `localhost`; a redirect it sends with no host names that same name, so
        # the node it names is checked as `localhost` too. No socket: `_unnamed` on its own.
        s = ClusterSession(self.bundle, "rediss://emq:pw@localhost:7000", TLS(None))
        s.tls.note("localhost", 7000)
        answering = ClusterNode("localhost", 7000)
        self.assertNotEqual(answering.host, "localhost")  # redis-py made it an address
        for e in (MovedError("12 :7001"), AskError("12 :7001")):
            with self.subTest(redirect=type(e).__name__):
                self.assertEqual(s._unnamed(e, answering).node_addr, ("localhost", 7001))
                self.assertEqual((e.host, e.port), ("localhost", 7001))
        named = MovedError("12 127.0.0.9:7001")
        self.assertEqual(s._unnamed(named, answering).node_addr, ("127.0.0.9", 7001))  # a named host is kept


if __name__ == "__main__":
    unittest.main()
