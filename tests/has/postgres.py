"""A throw-away PostgreSQL server for tests: a temporary folder, a free loopback port.

:func:`unavailable_reason` says why no server can be started here (no
binaries, no ``psycopg`` driver, root without a ``postgres`` user) or
returns None. :func:`start` runs ``initdb`` in a fresh folder under the
system temp dir and starts the server on 127.0.0.1 with trust auth and
durability off (fsync, synchronous commit); as root it runs both as the
``postgres`` user, since PostgreSQL refuses to run as root.
:meth:`Server.create_database` makes an empty database and returns its
SQLAlchemy URL (``postgresql+psycopg://postgres@127.0.0.1:PORT/NAME``);
:meth:`Server.stop` stops the server and removes the folder, and does both
even when the stop command fails.
"""

from __future__ import annotations

import importlib.util
import itertools
import os
import pwd
import re
import shutil
import signal
import socket
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import sqlalchemy

USER = "postgres"
#: seconds pg_ctl waits for the server to start or stop
PG_CTL_TIMEOUT_S = 30
_SEARCH_DIRS = "/usr/lib/postgresql/*/bin"


def find_bin_dir() -> Path | None:
    """The folder holding ``initdb`` and ``pg_ctl``: PATH first, then the newest Debian install."""
    found = shutil.which("pg_ctl")
    if found and shutil.which("initdb"):
        return Path(found).resolve().parent
    dirs = sorted(Path("/").glob(_SEARCH_DIRS.lstrip("/")),
                  key=lambda p: [int(n) for n in re.findall(r"\d+", p.parent.name)])
    for d in reversed(dirs):
        if (d / "pg_ctl").is_file() and (d / "initdb").is_file():
            return d
    return None


def unavailable_reason() -> str | None:
    """Why a test server cannot start on this machine, or None where it can."""
    if find_bin_dir() is None:
        return f"PostgreSQL binaries (initdb, pg_ctl) are not on PATH nor under {_SEARCH_DIRS}"
    if importlib.util.find_spec("psycopg") is None:
        return "the psycopg driver is not installed (pip install -e '.[postgres]')"
    if os.geteuid() == 0:
        try:
            pwd.getpwnam(USER)
        except KeyError:
            return f"running as root and there is no {USER!r} user to run the server as"
        if shutil.which("runuser") is None:
            return f"running as root and runuser is missing (needed to run the server as {USER!r})"
    return None


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _as_server_user(argv: list[str]) -> list[str]:
    return ["runuser", "-u", USER, "--", *argv] if os.geteuid() == 0 else argv


@dataclass(kw_only=True)
class Server:
    """A running throw-away server (see the module docstring)."""

    bin_dir: Path
    root: Path
    port: int
    _names: itertools.count[int] = field(default_factory=itertools.count)

    @property
    def data_dir(self) -> Path:
        return self.root / "data"

    def url(self, database: str) -> str:
        return f"postgresql+psycopg://{USER}@127.0.0.1:{self.port}/{database}"

    def create_database(self) -> str:
        """Create an empty database and return its SQLAlchemy URL."""
        name = f"t{next(self._names)}"
        engine = sqlalchemy.create_engine(self.url("postgres"), isolation_level="AUTOCOMMIT")
        try:
            with engine.connect() as conn:
                conn.execute(sqlalchemy.text(f'CREATE DATABASE "{name}"'))
        finally:
            engine.dispose()
        return self.url(name)

    def stop(self) -> None:
        """Stop the server (immediate mode) and remove its folder, whatever happens."""
        pid_file = self.data_dir / "postmaster.pid"
        try:
            done = subprocess.run(_as_server_user([
                str(self.bin_dir / "pg_ctl"), "-D", str(self.data_dir), "-m", "immediate",
                "-w", "-t", str(PG_CTL_TIMEOUT_S), "stop"]), capture_output=True,
                timeout=PG_CTL_TIMEOUT_S + 5, check=False)
            if done.returncode != 0 and pid_file.is_file():
                os.kill(int(pid_file.read_text().split()[0]), signal.SIGKILL)
        finally:
            shutil.rmtree(self.root, ignore_errors=True)


def _run(argv: list[str], what: str) -> None:
    done = subprocess.run(_as_server_user(argv), capture_output=True, text=True,
                          timeout=PG_CTL_TIMEOUT_S + 30, check=False)
    if done.returncode != 0:
        tail = (done.stdout + done.stderr).strip().splitlines()[-5:]
        raise RuntimeError(f"{what} failed ({done.returncode}): " + " | ".join(tail))


def start() -> Server:
    """initdb a fresh folder and start a server on a free loopback port (see the module docstring)."""
    bin_dir = find_bin_dir()
    if bin_dir is None:
        raise RuntimeError(unavailable_reason())
    root = Path(tempfile.mkdtemp(prefix="easerve-pg-"))
    if os.geteuid() == 0:
        entry = pwd.getpwnam(USER)
        os.chown(root, entry.pw_uid, entry.pw_gid)
    server = Server(bin_dir=bin_dir, root=root, port=_free_port())
    options = (f"-h 127.0.0.1 -p {server.port} -k {root} -c fsync=off "
               "-c synchronous_commit=off -c full_page_writes=off")
    log = root / "server.log"
    try:
        _run([str(bin_dir / "initdb"), "-D", str(server.data_dir), "-U", USER, "--auth=trust",
              "--encoding=UTF8", "--locale=C", "--no-sync"], "initdb")
        _run([str(bin_dir / "pg_ctl"), "-D", str(server.data_dir), "-l", str(log),
              "-w", "-t", str(PG_CTL_TIMEOUT_S), "-o", options, "start"], "pg_ctl start")
    except RuntimeError as exc:
        lines = log.read_text(errors="replace").strip().splitlines()[-3:] if log.is_file() else []
        server.stop()
        raise RuntimeError(" | ".join([str(exc), *lines])) from None
    except BaseException:
        server.stop()
        raise
    return server
