"""Lint: the sole raw-Redis seam (SPEC §4). Only echomq_connector/seam.py may import redis.

Stdlib only; runs without redis installed:  python -m unittest discover -s connectors/python/tests
"""

import ast
import re
import unittest
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "echomq_connector"
SEAM = PACKAGE / "seam.py"
# Dynamic imports a plain AST walk would miss: importlib.import_module("redis"), __import__("redis").
DYNAMIC = re.compile(r"""(import_module|__import__)\s*\(\s*['"]redis(\.|['"])""")


def redis_imports(path: Path) -> list[str]:
    source = path.read_text(encoding="utf-8")
    found = []
    for node in ast.walk(ast.parse(source, filename=str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name == "redis" or alias.name.startswith("redis."):
                    found.append(f"{path.name}:{node.lineno}: import {alias.name}")
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module == "redis" or node.module.startswith("redis."):
                found.append(f"{path.name}:{node.lineno}: from {node.module} import ...")
    for n, line in enumerate(source.splitlines(), 1):
        if DYNAMIC.search(line):
            found.append(f"{path.name}:{n}: dynamic import of redis")
    return found


class SoleSeam(unittest.TestCase):
    def test_package_sources_exist(self):
        self.assertTrue(SEAM.is_file(), SEAM)
        self.assertGreater(len(list(PACKAGE.rglob("*.py"))), 3)

    def test_redis_is_imported_only_in_the_seam(self):
        offenders = []
        for path in sorted(PACKAGE.rglob("*.py")):
            if path == SEAM:
                continue
            offenders += redis_imports(path)
        self.assertEqual(offenders, [], "redis imported outside echomq_connector/seam.py")

    def test_the_seam_does_import_redis(self):
        # guards the lint itself: if this fails the detector is broken, not the package
        self.assertTrue(redis_imports(SEAM))

    def test_key_schema_lives_only_in_the_seam(self):
        offenders = []
        for path in sorted(PACKAGE.rglob("*.py")):
            if path == SEAM:
                continue
            for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
                if re.search(r"emq:\{", line):
                    offenders.append(f"{path.name}:{n}")
        self.assertEqual(offenders, [], "key schema spelled outside the seam")


if __name__ == "__main__":
    unittest.main()


class OnlyTheListedCommands(unittest.TestCase):
    """SPEC R4.19: COMMAND is not on the list; redis-py's RedisCluster sends it when it is built."""

    def test_the_cluster_client_reads_no_command_table(self):
        from echomq_connector import seam

        cls = seam._cluster_class()
        # Called on a bare instance: no engine, so a COMMAND sent would raise, not return {}.
        self.assertEqual(cls.command(object.__new__(cls)), {})
