"""Where the index lives: the embedded FalkorDB, or a server named by URI, and whether it answers.

``falkor://``/``redis://`` (FalkorDB) or ``bolt://``/``neo4j://`` (``+s`` for TLS), credentials in
the URI or ``NEO4J_USER``/``NEO4J_PASSWORD``. :func:`check_reachable` opens one TCP connection with
a short timeout first: a dead host fails in seconds, where the Neo4j driver alone retries a minute.
"""

from __future__ import annotations

import os
import socket
import urllib.parse
from dataclasses import dataclass

from guardkit_state.errors import IndexBackendError

#: The environment variable naming a shared server instead of the repository's own index.
URI_ENV = "GUARDKIT_GRAPHITI_URI"
#: How long the reachability check waits for the server to accept a connection.
CONNECT_TIMEOUT = 3.0
FALKOR_SCHEMES = ("falkor", "falkordb", "redis")
NEO4J_SCHEMES = ("bolt", "neo4j", "bolt+s", "neo4j+s")
_DEFAULT_PORTS = {"falkor": 6379, "falkordb": 6379, "redis": 6379}


def configured_uri(uri: str | None) -> str | None:
    """The server URI given, else the one in the environment, else ``None`` (embedded)."""
    return uri or os.environ.get(URI_ENV) or None


@dataclass(frozen=True)
class ServerAddress:
    scheme: str
    host: str
    port: int
    username: str | None
    password: str | None


def parse_uri(uri: str) -> ServerAddress:
    """The parts of a server URI.

    Raises:
        IndexBackendError: an unsupported scheme.
    """
    parsed = urllib.parse.urlsplit(uri)
    scheme = parsed.scheme.lower()
    if scheme not in FALKOR_SCHEMES + NEO4J_SCHEMES:
        raise IndexBackendError(f"unsupported index URI scheme {parsed.scheme!r}",
                                expected="falkor://host:port, redis://host:port, bolt://host:port or neo4j://host:port")
    port = parsed.port or _DEFAULT_PORTS.get(scheme, 7687)
    return ServerAddress(scheme, parsed.hostname or "localhost", port,
                         urllib.parse.unquote(parsed.username) if parsed.username else None,
                         urllib.parse.unquote(parsed.password) if parsed.password else None)


def redact(uri: str) -> str:
    """The URI with its password replaced by ``***`` (for messages and file names)."""
    parsed = urllib.parse.urlsplit(uri)
    if parsed.password:
        netloc = f"{parsed.username}:***@{parsed.hostname}" + (f":{parsed.port}" if parsed.port else "")
        return urllib.parse.urlunsplit(parsed._replace(netloc=netloc))
    return uri


def check_reachable(uri: str, *, timeout: float = CONNECT_TIMEOUT) -> None:
    """Open (and close) one TCP connection to the server within ``timeout`` seconds.

    Raises:
        IndexBackendError: nothing accepts connections there.
    """
    address = parse_uri(uri)
    try:
        with socket.create_connection((address.host, address.port), timeout=timeout):
            return
    except OSError as exc:
        reason = "timed out" if isinstance(exc, TimeoutError) else (exc.strerror or str(exc))
        raise IndexBackendError(
            f"cannot reach the index server at {redact(uri)}: {reason}",
            fix=f"start the server, or give no --uri / {URI_ENV} to use the embedded index") from exc
