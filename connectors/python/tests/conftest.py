"""pytest glue for mutation testing with mutmut 3 (`ci/mutants`); inert otherwise.

mutmut 3 runs, for each mutant, only the tests that called the mutated function in a first
"stats" run, and it learns that in-process. This connector's tests drive it as a child process
(`test_wire.py`, and `test_gate.py` through `emq-gate`), so mutmut would see no test calling
anything. In the stats run (MUTANT_UNDER_TEST=stats) each test's children therefore load
`mutmut_hits/sitecustomize.py`, which writes the functions they call to a file, and those are
added to the test's hits here, before mutmut's own teardown hook reads them.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest

HITS = Path(__file__).resolve().parent / "mutmut_hits"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item):
    if os.environ.get("MUTANT_UNDER_TEST") != "stats":
        yield
        return
    fd, path = tempfile.mkstemp(prefix="emq-mutmut-hits-")
    os.close(fd)
    saved = {k: os.environ.get(k) for k in ("EMQ_MUTMUT_HITS", "PYTHONPATH")}
    os.environ["EMQ_MUTMUT_HITS"] = path
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(HITS), saved["PYTHONPATH"]) if p)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        with open(path, encoding="utf-8") as f:
            names = {line.strip() for line in f if line.strip()}
        os.unlink(path)
        from mutmut.state import state

        state()._stats.update(names)
