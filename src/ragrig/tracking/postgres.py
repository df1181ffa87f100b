"""A local PostgreSQL server for MLflow's tracking store (`make postgres`, `make postgres-stop`),
and the throwaway clusters the tests start: Debian's `postgresql` binaries (initdb, pg_ctl), a
data folder of its own, listening on 127.0.0.1 only (no Unix socket), password authentication.

Passwords never go into params.yaml or a URI: the role's comes from $PGPASSWORD when set, else
one is generated and kept in `.ragrig/postgres.pass` (mode 0600, git-ignored); MLflow, psycopg2
and `mlflow server` read it from PGPASSWORD. initdb refuses to run as root: as root, the server
runs as the `postgres` system user the Debian package creates.
"""

from __future__ import annotations

import argparse
import os
import re
import secrets
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from ragrig.core.errors import ServiceError

PG_LIB = Path("/usr/lib/postgresql")
OS_USER = "postgres"  # the system user of Debian's package (the server cannot run as root)
ADMIN = "postgres"  # the cluster's superuser role
START_TIMEOUT_S = 60


def bin_dir() -> Path | None:
    """The folder holding initdb and pg_ctl: on PATH, else the newest /usr/lib/postgresql/N."""
    found = shutil.which("pg_ctl")
    if found and (Path(found).parent / "initdb").exists():
        return Path(found).parent

    def version(p: Path) -> float:
        try:
            return float(p.parent.name)
        except ValueError:
            return -1.0

    candidates = sorted(PG_LIB.glob("*/bin/initdb"), key=lambda p: version(p.parent))
    return candidates[-1].parent if candidates else None


def require_bin_dir() -> Path:
    found = bin_dir()
    if found is None:
        raise ServiceError(
            "PostgreSQL's initdb/pg_ctl are not installed (Debian: apt-get install postgresql; "
            "`make test` installs it as root)"
        )
    return found


def _run_as() -> dict:
    """subprocess arguments running a server binary as a non-root user (initdb refuses root)."""
    if os.geteuid() != 0:
        return {}
    import pwd

    try:
        pwd.getpwnam(OS_USER)
    except KeyError:
        raise ServiceError(
            f"running as root, PostgreSQL needs the {OS_USER!r} system user (Debian's "
            "postgresql package creates it)"
        ) from None
    return {"user": OS_USER, "group": OS_USER, "extra_groups": []}


def _give(path: Path) -> None:
    """Hand a path to the server's user when running as root."""
    if os.geteuid() == 0:
        shutil.chown(path, OS_USER, OS_USER)


@dataclass
class Cluster:
    """A PostgreSQL data folder and the server on 127.0.0.1:`port` that serves it."""

    data: Path
    port: int
    admin_password: str
    host: str = "127.0.0.1"
    bindir: Path | None = None

    def __post_init__(self) -> None:
        self.data = Path(self.data).absolute()
        self.bindir = self.bindir or require_bin_dir()

    @property
    def log(self) -> Path:
        return self.data / "server.log"

    def _bin(self, name: str) -> str:
        return str(self.bindir / name)

    def _run(self, cmd: list[str], what: str, timeout: float = 120) -> str:
        proc = subprocess.run(
            cmd,
            capture_output=True,
            text=True,
            timeout=timeout,
            cwd="/",
            env={**os.environ, "LC_ALL": "C"},
            **_run_as(),
        )
        if proc.returncode != 0:
            tail = " | ".join((proc.stderr or proc.stdout).strip().splitlines()[-3:])
            raise ServiceError(f"{what} failed (exit {proc.returncode}): {tail}")
        return proc.stdout

    def initialised(self) -> bool:
        return (self.data / "PG_VERSION").exists()

    def init(self, fast: bool = False) -> None:
        """initdb: superuser `postgres` with `admin_password`, password (SCRAM) logins only."""
        self.data.mkdir(parents=True, exist_ok=True)
        self.data.chmod(0o700)
        _give(self.data)
        fd, pwfile = tempfile.mkstemp(prefix="ragrig-pg-pw-")
        try:
            with os.fdopen(fd, "w") as fh:
                fh.write(self.admin_password + "\n")
            _give(Path(pwfile))
            cmd = [
                self._bin("initdb"),
                "-D",
                str(self.data),
                "-U",
                ADMIN,
                f"--pwfile={pwfile}",
                "--auth=scram-sha-256",
                "-E",
                "UTF8",
                "--locale=C",
            ]
            self._run(cmd + (["--no-sync"] if fast else []), f"initdb {self.data}")
        finally:
            Path(pwfile).unlink(missing_ok=True)

    def running(self) -> bool:
        if not self.initialised():
            return False
        proc = subprocess.run(
            [self._bin("pg_ctl"), "-D", str(self.data), "status"],
            capture_output=True,
            text=True,
            cwd="/",
            **_run_as(),
        )
        return proc.returncode == 0

    def start(self, fast: bool = False) -> None:
        """Start on host:port (TCP only, no Unix socket); wait until it accepts connections."""
        opts = f"-h {self.host} -p {self.port} -k ''"
        if fast:  # a throwaway test cluster: no fsync
            opts += " -c fsync=off -c synchronous_commit=off -c full_page_writes=off"
        try:
            self._run(
                [
                    self._bin("pg_ctl"),
                    "-D",
                    str(self.data),
                    "-l",
                    str(self.log),
                    "-o",
                    opts,
                    "-w",
                    "-t",
                    str(START_TIMEOUT_S),
                    "start",
                ],
                f"pg_ctl start on {self.host}:{self.port}",
                timeout=START_TIMEOUT_S + 10,
            )
        except ServiceError as exc:
            raise ServiceError(f"{exc} (server log: {self.log}: {self._log_tail()})") from None

    def _log_tail(self) -> str:
        try:
            lines = self.log.read_text(errors="replace").strip().splitlines()
        except OSError:
            return "no log"
        why = [ln for ln in lines if re.search(r"FATAL|ERROR|could not bind|in use", ln)]
        return " | ".join((why or lines)[-3:])

    def stop(self) -> bool:
        """Stop the server (fast shutdown); False when it was not running."""
        if not self.running():
            return False
        self._run(
            [self._bin("pg_ctl"), "-D", str(self.data), "-m", "fast", "-w", "stop"],
            f"pg_ctl stop {self.data}",
        )
        return True

    def connect(self, dbname: str = "postgres"):
        import psycopg2

        conn = psycopg2.connect(
            host=self.host,
            port=self.port,
            user=ADMIN,
            password=self.admin_password,
            dbname=dbname,
            connect_timeout=5,
        )
        conn.autocommit = True
        return conn

    def ensure_database(self, user: str, password: str, dbname: str) -> None:
        """A login role `user` with `password` (set again when it exists) owning `dbname`."""
        from psycopg2 import sql

        for name in (user, dbname):
            if not re.fullmatch(r"[a-z_][a-z0-9_]*", name):
                raise ServiceError(f"PostgreSQL name {name!r}: use lower-case letters, digits, _")
        conn = self.connect()
        try:
            with conn.cursor() as cur:
                cur.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (user,))
                verb = "ALTER" if cur.fetchone() else "CREATE"
                cur.execute(
                    sql.SQL(verb + " ROLE {} LOGIN PASSWORD %s").format(sql.Identifier(user)),
                    (password,),
                )
                cur.execute("SELECT 1 FROM pg_database WHERE datname = %s", (dbname,))
                if not cur.fetchone():
                    cur.execute(
                        sql.SQL("CREATE DATABASE {} OWNER {}").format(
                            sql.Identifier(dbname), sql.Identifier(user)
                        )
                    )
        finally:
            conn.close()

    def uri(self, user: str, dbname: str) -> str:
        """The tracking URI (no password in it)."""
        return f"postgresql://{user}@{self.host}:{self.port}/{dbname}"


# --- make postgres / make postgres-stop --------------------------------------------------------


def _secret_file(path: Path, value: str | None = None) -> str:
    """Read the secret kept in `path`, or write `value` (or a new one) there, mode 0600."""
    if value is None and path.exists():
        return path.read_text().strip()
    value = value or secrets.token_urlsafe(18)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as fh:
        fh.write(value + "\n")
    return value


def local_cluster(root: Path, port: int) -> Cluster:
    state = root / ".ragrig"
    admin = _secret_file(state / "postgres-admin.pass")
    return Cluster(state / "postgres", port, admin)


def _team_uri(root: Path) -> str | None:
    import yaml

    path = root / "conf" / "report" / "mlflow" / "team.yaml"
    return (yaml.safe_load(path.read_text()) or {}).get("tracking_uri") if path.exists() else None


def cmd_postgres(args: argparse.Namespace) -> int:
    from ragrig.core.paths import project_root

    root = project_root(Path.cwd())
    cluster = local_cluster(root, args.port)
    rel = os.path.relpath(cluster.data, Path.cwd())
    if args.action == "stop":
        print("stopped PostgreSQL" if cluster.stop() else f"PostgreSQL ({rel}) was not running")
        return 0
    if not cluster.initialised():
        print(f"postgres: initdb {rel} ({cluster.bindir})", flush=True)
        cluster.init()
    if cluster.running():
        print(f"postgres: already running ({rel}); make postgres-stop first to change the port")
    else:
        cluster.start()
    pass_file = root / ".ragrig" / "postgres.pass"
    password = _secret_file(pass_file, os.environ.get("PGPASSWORD") or None)
    cluster.ensure_database(args.user, password, args.db)
    uri = cluster.uri(args.user, args.db)
    store = "report/mlflow=team"
    if uri != _team_uri(root):
        store += f" report.mlflow.tracking_uri={uri}"
    print(f"PostgreSQL on {cluster.host}:{cluster.port} (data {rel}, log {rel}/server.log)")
    print(f"tracking URI: {uri}")
    print(f"password:     export PGPASSWORD=$(cat {os.path.relpath(pass_file, Path.cwd())})")
    print(f"select it:    {store}  (conf/ overrides)")
    print(
        "artifacts:    report.mlflow.artifact_location (s3://...), S3 credentials from "
        "AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY, endpoint from MLFLOW_S3_ENDPOINT_URL"
    )
    print(f'e.g.          make sweep ARGS="{store} retrieve.ef_search=32,64"')
    print(f'              make ui ARGS="{store}"')
    print("stop:         make postgres-stop")
    return 0
