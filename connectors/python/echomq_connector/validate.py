"""Argument validation for the wire commands (SPEC §1, §5). No redis here.

Everything is checked before a byte is sent; a failure raises errors.Invalid.
A JSON bool is not an integer; a float (even 1.0) is not an integer.
"""

from __future__ import annotations

import re
from typing import Any

from .errors import Invalid

QUEUE_RE = re.compile(r"[A-Za-z0-9._-]{1,128}")
ID_RE = re.compile(r"j[0-9]{16}")
# Bounds of bundle/SPEC.md §4 (the same as the Rust reference connector's).
MAX_MS = 1_000_000_000_000  # keeps now + ms an exact integer in Lua's %.14g
MAX_COUNT = 2**31 - 1  # attempts, max_attempts, limit, offset
MAX_PROBE = 1_000_000
MAX_BATCH = 10_000_000
MAX_DEPTH = 100_000


def _field(req: dict, name: str) -> Any:
    if name not in req:
        raise Invalid(f"missing field {name}")
    return req[name]


def integer(req: dict, name: str, minimum: int, maximum: int = MAX_COUNT) -> int:
    value = _field(req, name)
    if type(value) is not int:  # excludes bool (a subclass of int) and floats
        raise Invalid(f"{name} must be an integer >= {minimum}")
    if value < minimum:
        raise Invalid(f"{name} must be >= {minimum}")
    if value > maximum:
        raise Invalid(f"{name} must be <= {maximum}")
    return value


def queue(req: dict) -> str:
    value = _field(req, "queue")
    if not isinstance(value, str) or QUEUE_RE.fullmatch(value) is None:
        raise Invalid("queue must be 1-128 chars of [A-Za-z0-9._-]")
    return value


def text(req: dict, name: str, allow_empty: bool = True) -> str:
    value = _field(req, name)
    if not isinstance(value, str):
        raise Invalid(f"{name} must be a string")
    if not allow_empty and value == "":
        raise Invalid(f"{name} must not be empty")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise Invalid(f"{name} must be valid UTF-8 (no lone surrogates)") from None
    return value


def payload(req: dict) -> str:
    return text(req, "payload")


def job_id(req: dict) -> str:
    value = _field(req, "id")
    if not isinstance(value, str) or ID_RE.fullmatch(value) is None:
        raise Invalid("id must match ^j[0-9]{16}$")
    return value


def session_name(req: dict) -> str:
    value = _field(req, "session")
    if not isinstance(value, str) or value == "":
        raise Invalid("session must be a non-empty string")
    return value


def url(req: dict) -> str:
    value = text(req, "url", allow_empty=False)
    # SPEC §5: one url rule for every connector; rediss:// and unix:// are refused like any other scheme.
    if not value.startswith("redis://"):
        raise Invalid("url must be redis://[:password@]host:port[/db]")
    return value


def probe_key(req: dict) -> str:
    value = text(req, "key", allow_empty=False)
    if value.startswith("emq:"):
        raise Invalid("probe key must be outside emq:")
    return value
