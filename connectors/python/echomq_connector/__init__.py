"""EchoMQ connector for Python (redis-py), speaking the wire protocol v1 of SPEC §5.

Module map:
  bundle.py   - loads the script bundle by path and verifies sha1s/digest (no redis)
  validate.py - argument validation for every wire command (no redis)
  errors.py   - the error kinds of the wire protocol (no redis)
  seam.py     - THE sole raw-Redis seam: owns the redis-py client and the key schema
  wire.py     - the JSON-lines loop on stdin/stdout (no redis)
"""

__version__ = "0.1.0"

NAME = "echomq-python"
LANGUAGE = "python"
WIRE_PROTOCOL = 1
