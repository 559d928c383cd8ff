"""Loaded by every Python child of a test in mutmut's stats run (see ../conftest.py): records the
mutated functions this process calls, one name a line, in the file $EMQ_MUTMUT_HITS."""

import os

if os.environ.get("MUTANT_UNDER_TEST") == "stats" and os.environ.get("EMQ_MUTMUT_HITS"):
    import mutmut.mutation.trampoline as _trampoline

    _path = os.environ["EMQ_MUTMUT_HITS"]
    _seen: set = set()

    def _hit(name, caller=None):
        if name not in _seen:
            _seen.add(name)
            with open(_path, "a", encoding="utf-8") as f:
                f.write(name + "\n")

    _trampoline.record_trampoline_hit = _hit
