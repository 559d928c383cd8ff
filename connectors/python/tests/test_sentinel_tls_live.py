"""Behind Sentinel over TLS (SPEC §11 with §10): a primary, a replica and three Sentinels, every
one on a TLS port only (`port 0`), announcing and announced as `localhost` (the only name the
server certificate gives), drive the connector with a rediss:// url and ca_file.

Every connection the connector opens must speak TLS (nothing listens in plaintext), verify the
CA of ca_file and the name `localhost` (R10.2-R10.4), on the Sentinels and the data nodes alike.
Binary: a valkey-server built with TLS (as test_tls_live.py finds it); skipped without one, without
openssl or without redis-py.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
import unittest
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

try:
    import redis
except ImportError:  # pragma: no cover
    redis = None

from test_sentinel_live import ADMIN_PW, DATA_ACL, NAME, PW, SENTINEL_ACL, USER, free_ports, replicated, wait_for  # noqa: E402
from test_tls_live import _candidates, _make_certs  # noqa: E402
from test_wire import Child  # noqa: E402

PROCS: list[subprocess.Popen] = []
DATA: list[int] = []
SENTINELS: list[int] = []
TMPDIR = None
CA = OTHER_CA = None


def tls_kwargs() -> dict:
    return {"ssl": True, "ssl_ca_certs": CA, "ssl_cert_reqs": "required", "ssl_check_hostname": True}


def data_admin(port: int):
    return redis.Redis(host="localhost", port=port, password=ADMIN_PW, decode_responses=True, protocol=2, **tls_kwargs())


def sentinel_admin(port: int):
    return redis.Redis(host="localhost", port=port, decode_responses=True, protocol=2, **tls_kwargs())


def current_primary() -> int:
    def one():
        named = set()
        for p in SENTINELS:
            reply = sentinel_admin(p).execute_command("SENTINEL", "get-master-addr-by-name", NAME)
            named.add(tuple(reply) if reply else None)
        if len(named) == 1 and None not in named:
            host, port = named.pop()
            assert host == "localhost", host  # announced by name (R10.4)
            return int(port)
        return None

    return wait_for("every Sentinel to name one primary", one)


def setUpModule():
    global TMPDIR, CA, OTHER_CA
    if redis is None:
        raise unittest.SkipTest("redis-py is not importable (run with the provisioned venv)")
    if shutil.which("openssl") is None:
        raise unittest.SkipTest("openssl is not installed")
    binary = next((b for b in _candidates() if "libssl" in subprocess.run(["ldd", b], capture_output=True, text=True).stdout), None)
    if binary is None:
        raise unittest.SkipTest("no valkey-server built with TLS (set EMQ_ENGINE_VALKEY_9_1_TLS_SERVER)")
    TMPDIR = tempfile.mkdtemp(prefix="emq-sentinel-tls-")
    CA, cert, key, OTHER_CA = _make_certs(TMPDIR)
    tls = (f"tls-cert-file {cert}\ntls-key-file {key}\ntls-ca-cert-file {CA}\ntls-auth-clients no\n"
           "tls-replication yes\nport 0\n")
    ports = free_ports(5)
    DATA[:], SENTINELS[:] = ports[:2], ports[2:]
    try:
        for i, port in enumerate(DATA):
            conf = f"{TMPDIR}/d{port}.conf"
            with open(conf, "w") as f:
                f.write(
                    f"tls-port {port}\n{tls}bind 127.0.0.1\nsave \"\"\nappendonly no\ndir {TMPDIR}\n"
                    f"dbfilename d{port}.rdb\nlogfile {TMPDIR}/d{port}.log\nreplica-announce-ip localhost\n"
                    f"requirepass {ADMIN_PW}\nmasterauth {ADMIN_PW}\nuser {USER} {DATA_ACL}\n"
                    + (f"replicaof localhost {DATA[0]}\n" if i else "")
                )
            PROCS.append(subprocess.Popen([binary, conf], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        for port in DATA:
            wait_for(f"data node {port}", lambda p=port: data_admin(p).ping(), 10)
        wait_for("the replica to sync", lambda: data_admin(DATA[1]).info("replication").get("master_link_status") == "up")
        for port in SENTINELS:
            conf = f"{TMPDIR}/s{port}.conf"
            with open(conf, "w") as f:
                f.write(
                    f"tls-port {port}\n{tls}bind 127.0.0.1\ndir {TMPDIR}\nlogfile {TMPDIR}/s{port}.log\n"
                    "sentinel resolve-hostnames yes\nsentinel announce-hostnames yes\n"
                    f"sentinel announce-ip localhost\nsentinel announce-port {port}\n"
                    f"sentinel monitor {NAME} localhost {DATA[0]} 2\n"
                    f"sentinel auth-pass {NAME} {ADMIN_PW}\n"
                    f"sentinel down-after-milliseconds {NAME} 2000\n"
                    f"sentinel failover-timeout {NAME} 10000\n"
                )
            PROCS.append(subprocess.Popen([binary, conf, "--sentinel"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        for port in SENTINELS:
            wait_for(f"Sentinel {port}", lambda p=port: sentinel_admin(p).ping(), 10)
            sentinel_admin(port).execute_command("ACL", "SETUSER", USER, *SENTINEL_ACL.split())
        current_primary()
        wait_for("the Sentinels to see the replica", lambda: all(
            sentinel_admin(p).execute_command("SENTINEL", "REPLICAS", NAME) for p in SENTINELS))
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


class SentinelTls(unittest.TestCase):
    def setUp(self):
        self.primary = current_primary()
        self.db = 2
        data_admin(self.primary).flushall()
        self.assertEqual(replicated(data_admin(self.primary)), 1)
        for p in [*DATA, *SENTINELS]:
            (data_admin(p) if p in DATA else sentinel_admin(p)).execute_command("ACL", "LOG", "RESET")
        self.c = Child()

    def tearDown(self):
        self.c.close()
        for p in DATA:
            self.assertEqual(data_admin(p).execute_command("ACL", "LOG"), [], f"data node {p}")
        for p in SENTINELS:
            self.assertEqual(sentinel_admin(p).execute_command("ACL", "LOG"), [], f"Sentinel {p}")

    def connect(self, session: str, nodes: list[str], ca: str | None = None) -> dict:
        return self.c.call("connect", session=session, url=f"rediss://{USER}:{PW}@{nodes[0]}/{self.db}",
                           ca_file=ca or CA, sentinel={"name": NAME, "nodes": nodes})

    def clients(self, port: int) -> list:
        return [c for c in data_admin(port).client_list() if c.get("user") == USER]

    def test_discovery_verbs_and_a_failover_over_tls(self):
        closed = free_ports(1)[0]
        nodes = [f"localhost:{closed}", *(f"localhost:{p}" for p in SENTINELS)]
        self.assertIn("ok", self.connect("s", nodes))
        self.c.ok("enqueue", session="s", queue="q", payload="a", delay_ms=0)
        self.assertEqual(self.c.ok("pipeline_probe", session="s", key="probe", n=3), [1, 2, 3])
        self.assertEqual(self.c.ok("batch", session="s", queue="q", n=100, depth=10, payload="b"), 100)
        self.assertEqual(len(self.clients(self.primary)), 1)
        old = self.primary
        wait_for("SENTINEL FAILOVER to be taken", lambda: sentinel_admin(SENTINELS[0]).execute_command("SENTINEL", "FAILOVER", NAME))
        new = wait_for("every Sentinel to name the new primary", lambda: (lambda p: p if p != old else None)(current_primary()), 60)
        wait_for("the old primary to be a replica", lambda: data_admin(old).info("replication")["role"] == "slave", 30)
        outcomes = [("ok" in self.c.call("enqueue", session="s", queue="q", payload="c", delay_ms=0)) for _ in range(3)]
        self.assertTrue(outcomes[-1], outcomes)
        self.assertEqual(self.clients(old), [])
        self.assertEqual(len(self.clients(new)), 1)
        self.c.ok("disconnect", session="s")
        wait_for("the session's connection to close", lambda: self.clients(new) == [], 5)

    def test_sentinels_are_verified_like_the_data_nodes(self):
        # another CA: every Sentinel's handshake fails, so no Sentinel answered (R10.3)
        e = self.connect("s", [f"localhost:{p}" for p in SENTINELS], ca=OTHER_CA)["error"]
        self.assertEqual(e["kind"], "engine")
        self.assertIn("no Sentinel answered", e["message"])
        self.assertIn("certificate", e["message"])
        # the Sentinels by address: the certificate names localhost only (R10.4)
        e = self.connect("s", [f"127.0.0.1:{p}" for p in SENTINELS])["error"]
        self.assertEqual(e["kind"], "engine")
        self.assertIn("no Sentinel answered", e["message"])


if __name__ == "__main__":
    unittest.main()
