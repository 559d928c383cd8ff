"""Error kinds of the wire protocol v1 (SPEC §5). No redis here."""


class ConnectorError(Exception):
    kind = "internal"

    def __init__(self, message: str):
        super().__init__(message)
        self.message = message


class Invalid(ConnectorError):
    """Bad argument: nothing was sent to the engine."""

    kind = "invalid"


class Unsupported(ConnectorError):
    kind = "unsupported"


class FenceError(ConnectorError):
    """The engine's version fence names another protocol."""

    kind = "fence"


class EngineError(ConnectorError):
    """The server replied an error, or the connection is refused/broken."""

    kind = "engine"


class BundleError(Exception):
    """The bundle cannot be loaded or does not match its manifest."""
