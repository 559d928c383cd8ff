"""End-to-end test of rediss:// (SPEC §10) against a live Valkey that listens on a TLS port.

It makes a CA and a server certificate naming `localhost` only (DNS SAN, no IP SAN), and a second
CA the connector is not given (openssl), starts its own valkey-server built with TLS on a TLS port
(and, for one check, a plaintext port), drives the connector over the wire and checks:

  - a rediss:// session with ca_file works (fence, verbs, pipelines) and its replacement
    connection after a CLIENT KILL speaks TLS too (the server accepts nothing else on its TLS port);
  - R10.3: a ca_file of another CA is refused at the handshake, kind engine, nothing sent;
  - R10.4: the url host 127.0.0.1 (the certificate names localhost only) is refused, kind engine;
  - no plaintext fallback: rediss:// to the plaintext port fails, kind engine;
  - redis:// to the TLS port fails, kind engine (and does not hang).

Server binary: $EMQ_ENGINE_VALKEY_9_1_TLS_SERVER, else ~/.cache/emq/valkey-9.1.2-tls/bin/valkey-server,
else $EMQ_VALKEY_SERVER / ~/.cache/emq/valkey-9.1.2/bin/valkey-server if it was built with TLS;
skipped when none is found, or when openssl is missing.
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

from test_wire import PASSWORD, Child, free_port  # noqa: E402

SERVER = None
TLS_PORT = PLAIN_PORT = None
TMPDIR = None
CA = OTHER_CA = None


def _candidates() -> list[str]:
    home = Path.home() / ".cache/emq"
    return [
        c
        for c in (
            os.environ.get("EMQ_ENGINE_VALKEY_9_1_TLS_SERVER"),
            str(home / "valkey-9.1.2-tls/bin/valkey-server"),
            os.environ.get("EMQ_VALKEY_SERVER"),
            str(home / "valkey-9.1.2/bin/valkey-server"),
        )
        if c and os.path.isfile(c) and os.access(c, os.X_OK)
    ]


def _openssl(*args: str) -> None:
    subprocess.run(["openssl", *args], check=True, capture_output=True)


def _make_certs(d: str) -> tuple[str, str, str, str]:
    """(ca.pem, server.pem, server.key, other-ca.pem): the server certificate names localhost only."""
    for name in ("ca", "other-ca"):
        _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{d}/{name}.key", "-out",
                 f"{d}/{name}.pem", "-days", "2", "-subj", f"/CN=emq test {name}",
                 "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign")
    _openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{d}/server.key", "-out", f"{d}/server.csr",
             "-subj", "/CN=localhost")
    with open(f"{d}/ext.cnf", "w") as f:
        f.write("subjectAltName=DNS:localhost\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n")
    _openssl("x509", "-req", "-in", f"{d}/server.csr", "-CA", f"{d}/ca.pem", "-CAkey", f"{d}/ca.key",
             "-CAcreateserial", "-out", f"{d}/server.pem", "-days", "2", "-extfile", f"{d}/ext.cnf")
    return f"{d}/ca.pem", f"{d}/server.pem", f"{d}/server.key", f"{d}/other-ca.pem"


def admin() -> "redis.Redis":
    return redis.Redis(host="localhost", port=TLS_PORT, password=PASSWORD, ssl=True, ssl_ca_certs=CA,
                       ssl_cert_reqs="required", ssl_check_hostname=True, protocol=2, decode_responses=True)


def setUpModule():
    global SERVER, TLS_PORT, PLAIN_PORT, TMPDIR, CA, OTHER_CA
    if redis is None:
        raise unittest.SkipTest("redis-py is not importable (run with the provisioned venv)")
    if shutil.which("openssl") is None:
        raise unittest.SkipTest("openssl is not installed")
    binaries = _candidates()
    if not binaries:
        raise unittest.SkipTest("no valkey-server found (set EMQ_ENGINE_VALKEY_9_1_TLS_SERVER)")
    TMPDIR = tempfile.mkdtemp(prefix="emq-pytls-")
    CA, cert, key, OTHER_CA = _make_certs(TMPDIR)
    for binary in binaries:
        TLS_PORT, PLAIN_PORT = free_port(), free_port()
        log = os.path.join(TMPDIR, "valkey.log")
        SERVER = subprocess.Popen(
            [binary, "--port", str(PLAIN_PORT), "--tls-port", str(TLS_PORT), "--bind", "127.0.0.1",
             "--tls-cert-file", cert, "--tls-key-file", key, "--tls-ca-cert-file", CA, "--tls-auth-clients", "no",
             "--save", "", "--appendonly", "no", "--requirepass", PASSWORD, "--dir", TMPDIR, "--logfile", log],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and SERVER.poll() is None:
            try:
                if admin().ping():
                    return
            except (redis.exceptions.ConnectionError, OSError):
                time.sleep(0.05)
        SERVER.kill()
        SERVER.wait()
        SERVER = None  # not built with TLS (or the port was taken): the next candidate
    raise unittest.SkipTest(f"no valkey-server with TLS started from {binaries}")


def tearDownModule():
    if SERVER is not None:
        SERVER.kill()
        SERVER.wait()
    if TMPDIR:
        shutil.rmtree(TMPDIR, ignore_errors=True)


def rediss(host: str = "localhost", port: int | None = None, db: int = 0) -> str:
    return f"rediss://:{PASSWORD}@{host}:{port or TLS_PORT}/{db}"


class OverTls(unittest.TestCase):
    def setUp(self):
        admin().flushall()
        self.child = Child()
        self.child.ok("hello", protocol=1)

    def tearDown(self):
        self.child.close()

    def test_a_session_over_tls_and_its_replacement_connection(self):
        c = self.child
        self.assertEqual(c.ok("connect", session="s", url=rediss(db=3), ca_file=CA), {})
        self.assertEqual(redis.Redis(host="localhost", port=TLS_PORT, password=PASSWORD, ssl=True, ssl_ca_certs=CA,
                                     db=3, decode_responses=True).hgetall("emq:fence")["protocol"], "1")
        c.ok("enqueue", session="s", queue="q", payload="hi", delay_ms=0)
        self.assertEqual(c.ok("pipeline_probe", session="s", key="probe", n=50), list(range(1, 51)))
        self.assertEqual(c.ok("batch", session="s", queue="q", n=500, depth=100, payload="x"), 500)
        self.assertEqual(c.ok("pending_size", session="s", queue="q"), 501)
        # the engine kills the session's connection: the pool's replacement speaks TLS as well
        # (on this port the server accepts nothing else) and reads the fence again
        a = admin()
        killed = a.client_kill_filter(_type="normal", skipme=True)
        self.assertGreaterEqual(killed, 1)
        replies = [c.call("pending_size", session="s", queue="q") for _ in range(2)]
        self.assertEqual(replies[-1].get("ok"), 501, replies)  # the first may fail (no retries, R4.17)
        claimed = c.ok("claim", session="s", queue="q", lease_ms=30000)
        self.assertEqual(claimed["payload"], "hi")
        self.assertEqual(c.ok("disconnect", session="s"), {})

    def test_a_certificate_of_another_ca_is_refused(self):
        before = admin().info("commandstats")
        err = self.child.err("connect", session="s", url=rediss(), ca_file=OTHER_CA)
        self.assertEqual(err["kind"], "engine", err)
        self.assertIn("certificate", err["message"])
        self.assertEqual(before.get("cmdstat_hgetall"), admin().info("commandstats").get("cmdstat_hgetall"))
        self.assertEqual(self.child.err("pending_size", session="s", queue="q")["kind"], "invalid")

    def test_a_host_the_certificate_does_not_name_is_refused(self):
        err = self.child.err("connect", session="s", url=rediss(host="127.0.0.1"), ca_file=CA)
        self.assertEqual(err["kind"], "engine", err)
        self.assertIn("certificate", err["message"])

    def test_rediss_to_a_plaintext_port_does_not_fall_back(self):
        err = self.child.err("connect", session="s", url=rediss(port=PLAIN_PORT), ca_file=CA)
        self.assertEqual(err["kind"], "engine", err)
        self.assertIn("TLS", err["message"])
        self.assertEqual(admin().hgetall("emq:fence"), {})  # nothing reached the engine in plaintext

    def test_redis_to_the_tls_port_fails(self):
        started = time.monotonic()
        err = self.child.err("connect", session="s", url=f"redis://:{PASSWORD}@localhost:{TLS_PORT}/0")
        self.assertEqual(err["kind"], "engine", err)
        self.assertLess(time.monotonic() - started, 15)

    def test_the_system_store_does_not_trust_the_run_ca(self):
        # rediss:// without ca_file trusts the system's store, which does not hold this test's CA
        err = self.child.err("connect", session="s", url=rediss())
        self.assertEqual(err["kind"], "engine", err)
        self.assertIn("system's trust store", err["message"])


if __name__ == "__main__":
    unittest.main()
