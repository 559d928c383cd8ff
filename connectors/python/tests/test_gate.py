"""The gate judges this source tree's connector: `emq-gate run` on some gates, the connector run
as `python -m echomq_connector` from the package next to this file.

This is what makes mutation testing (`ci/mutants`, mutmut) judge a mutant by the gate and not only
by these unit tests. Skipped unless EMQ_GATE names an emq-gate binary; EMQ_GATE_GATES picks the
gates (default G1,G2,G3,G6: fence, SHAs, EVALSHA-first, every case; about a minute). The engine is
emq-gate's binary engine (EMQ_VALKEY_SERVER or the provision cache).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

PKG = Path(__file__).resolve().parent.parent  # connectors/python (or mutmut's mutants/)
GATE = os.environ.get("EMQ_GATE", "")
GATES = os.environ.get("EMQ_GATE_GATES", "G1,G2,G3,G6")


@unittest.skipUnless(GATE and os.path.isfile(GATE), "set EMQ_GATE to an emq-gate binary")
class GateTest(unittest.TestCase):
    def test_gate_passes(self):
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(PKG), env.get("PYTHONPATH")) if p)
        with tempfile.TemporaryDirectory(prefix="emq-gate-") as out:
            cmd = [GATE, "run", "-q", "--engine", "binary", "--gates", GATES, "--fail-fast",
                   "--batch", "2000", "--histories", "16", "--timeout", "5", "--out", out,
                   "--", sys.executable, "-m", "echomq_connector"]
            r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
            records = list(Path(out).glob("*.json"))
            self.assertTrue(records, f"no record: exit {r.returncode}\n{r.stderr[-3000:]}")
            record = json.loads(records[0].read_text())
        # The gates not selected are ERROR by design; every selected one must PASS.
        wanted = {g.strip().upper() for g in GATES.split(",")}
        bad = [g for g in record["gates"] if g["id"] in wanted and g["verdict"] != "PASS"]
        self.assertFalse(bad, "\n".join(f"{g['id']} {g['verdict']}: " + "\n  ".join(g["evidence"]) for g in bad))


if __name__ == "__main__":
    unittest.main()
