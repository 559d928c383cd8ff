"""Load the EchoMQ script bundle by path (never a copy) and verify it. No redis here.

A script is its file's bytes exactly (SPEC §2): the bytes are read once, their sha1 is
computed and must equal the manifest's; the digest is sha1 of the six sha1s (lower-case hex)
joined by "\\n" in the order enqueue, claim, complete, retry, promote, reap.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path

from .errors import BundleError

SCRIPT_ORDER = ("enqueue", "claim", "complete", "retry", "promote", "reap")

# KEYS / ARGV names per script, as the connector dispatches them (SPEC §2 table).
# They are checked against the manifest so a bundle that reorders them is refused.
EXPECTED_KEYS = {
    "enqueue": ["pending", "delayed", "seq"],
    "claim": ["pending", "active"],
    "complete": ["active"],
    "retry": ["active", "delayed", "dead"],
    "promote": ["delayed", "pending"],
    "reap": ["active", "pending", "dead"],
}
EXPECTED_ARGV = {
    "enqueue": ["root", "payload", "delay_ms"],
    "claim": ["root", "lease_ms"],
    "complete": ["root", "id", "attempts"],
    "retry": ["root", "id", "attempts", "backoff_ms", "max_attempts"],
    "promote": ["root", "limit"],
    "reap": ["root", "max_attempts", "limit"],
}


@dataclass(frozen=True)
class Script:
    name: str
    path: Path
    source: bytes
    sha1: str
    keys: tuple[str, ...]
    argv: tuple[str, ...]


@dataclass(frozen=True)
class Bundle:
    directory: Path
    version: str
    protocol: int
    digest: str
    fence_key: str
    scripts: dict[str, Script]

    def shas(self) -> dict[str, str]:
        return {name: self.scripts[name].sha1 for name in SCRIPT_ORDER}


def default_bundle_dir() -> Path:
    """The repo's bundle/, found relative to the package source: connectors/python/../../bundle."""
    package_root = Path(__file__).resolve().parent.parent  # connectors/python
    return (package_root / ".." / ".." / "bundle").resolve()


def resolve_bundle_dir(cli_value: str | None) -> Path:
    if cli_value:
        return Path(cli_value)
    env = os.environ.get("EMQ_BUNDLE_DIR")
    if env:
        return Path(env)
    return default_bundle_dir()


def compute_digest(shas_in_order: list[str]) -> str:
    return hashlib.sha1("\n".join(s.lower() for s in shas_in_order).encode("ascii")).hexdigest()


def load_bundle(directory: Path) -> Bundle:
    directory = Path(directory)
    manifest_path = directory / "manifest.json"
    try:
        manifest = json.loads(manifest_path.read_bytes())
    except FileNotFoundError:
        raise BundleError(f"bundle manifest not found: {manifest_path}") from None
    except (OSError, ValueError) as e:
        raise BundleError(f"bundle manifest unreadable: {manifest_path}: {e}") from None
    if not isinstance(manifest, dict):
        raise BundleError(f"bundle manifest is not a JSON object: {manifest_path}")

    try:
        version = manifest["bundle"]
        protocol = manifest["protocol"]
        digest = manifest["digest"]
        entries = manifest["scripts"]
    except KeyError as e:
        raise BundleError(f"bundle manifest lacks field {e.args[0]!r}: {manifest_path}") from None
    fence_key = manifest.get("fence_key", "emq:fence")
    if not isinstance(version, str) or not isinstance(digest, str) or not isinstance(entries, list):
        raise BundleError(f"bundle manifest has fields of the wrong type: {manifest_path}")
    if type(protocol) is not int:
        raise BundleError(f"bundle manifest protocol is not an integer: {manifest_path}")

    by_name = {}
    for entry in entries:
        if not isinstance(entry, dict) or not isinstance(entry.get("name"), str):
            raise BundleError(f"bundle manifest has a malformed script entry: {entry!r}")
        by_name[entry["name"]] = entry

    scripts: dict[str, Script] = {}
    for name in SCRIPT_ORDER:
        entry = by_name.get(name)
        if entry is None:
            raise BundleError(f"bundle manifest lacks script {name!r}")
        rel = entry.get("file") or f"scripts/{name}.lua"
        path = directory / rel
        try:
            source = path.read_bytes()
        except OSError as e:
            raise BundleError(f"bundle script unreadable: {path}: {e.strerror or e}") from None
        sha = hashlib.sha1(source).hexdigest()
        declared = str(entry.get("sha1", "")).lower()
        if sha != declared:
            raise BundleError(
                f"bundle script {name} sha1 {sha} does not match manifest sha1 {declared or '<none>'} ({path})"
            )
        keys = list(entry.get("keys", []))
        argv = list(entry.get("argv", []))
        if keys != EXPECTED_KEYS[name] or argv != EXPECTED_ARGV[name]:
            raise BundleError(
                f"bundle script {name} declares KEYS {keys} ARGV {argv}; this connector dispatches "
                f"KEYS {EXPECTED_KEYS[name]} ARGV {EXPECTED_ARGV[name]}"
            )
        scripts[name] = Script(name, path, source, sha, tuple(keys), tuple(argv))

    computed = compute_digest([scripts[n].sha1 for n in SCRIPT_ORDER])
    if computed != digest.lower():
        raise BundleError(f"bundle digest {computed} does not match manifest digest {digest}")
    return Bundle(directory, version, protocol, computed, fence_key, scripts)
