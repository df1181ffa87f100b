"""The MLflow tracking store and artifact location a configuration names, checked before any
work: a PostgreSQL server, an `mlflow server` or an S3 bucket that cannot be reached fails in
seconds with one line naming it; wrong credentials say so without printing them.

Secrets never sit in params.yaml: a PostgreSQL password comes from the environment (libpq's
PGPASSWORD / PGPASSFILE, or the variable `report.mlflow.password_env` names), S3 credentials
from AWS's variables. The S3 endpoint (`report.mlflow.s3_endpoint_url`) reaches MLflow through
MLFLOW_S3_ENDPOINT_URL.
"""

from __future__ import annotations

import contextlib
import os
import zlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from ragrig.core.errors import ServiceError
from ragrig.core.urls import redact as url_redact
from ragrig.core.urls import refuse_credentials

ENV_S3_ENDPOINT = "MLFLOW_S3_ENDPOINT_URL"
ENV_PGPASSWORD = "PGPASSWORD"
PG_SCHEMES = ("postgresql", "postgres")


def is_postgres(uri: str) -> bool:
    return uri.split(":", 1)[0].split("+", 1)[0] in PG_SCHEMES


def sqlalchemy_uri(uri: str) -> str:
    """A PostgreSQL URI with its driver named: SQLAlchemy 2.1 reads a bare `postgresql://` as
    psycopg 3, which is not installed; ragrig ships psycopg2 (`postgresql+psycopg2://`)."""
    scheme, sep, rest = uri.partition("://")
    if sep and scheme in PG_SCHEMES:
        return f"postgresql+psycopg2://{rest}"
    return uri


def refuse_uri_credentials(uri: str, field: str, written_to: str = "params.yaml") -> str:
    """The URL rule (ragrig.core.urls) for a tracking URI, saying where its credentials go: for
    PostgreSQL the password in PGPASSWORD / a pgpass file (a role name alone may stay: it is
    not a secret), for an MLflow server MLflow's own variables."""
    if is_postgres(uri):
        instead = (
            "export PGPASSWORD (or use ~/.pgpass / PGPASSFILE, or name the variable holding "
            "the password in report.mlflow.password_env); the user name may stay in the URI"
        )
        return refuse_credentials(uri, field, instead, written_to, allow_user=True)
    if uri.startswith(("http://", "https://")):
        instead = (
            "set MLFLOW_TRACKING_USERNAME / MLFLOW_TRACKING_PASSWORD (or MLFLOW_TRACKING_TOKEN) "
            "in the environment"
        )
        return refuse_credentials(uri, field, instead, written_to)
    return refuse_credentials(uri, field, "give credentials through the environment", written_to)


def uri_password(uri: str) -> str | None:
    """The password written into a URI (`scheme://user:secret@host`), else None."""
    try:
        return urlsplit(uri).password or None
    except ValueError:
        return None


def redact(uri: str) -> str:
    """The URI as a message shows it (ragrig.core.urls.redact): a password and secret-looking
    parameters replaced by `***`; a PostgreSQL role name kept, any other user part hidden."""
    return url_redact(uri, keep_user=is_postgres(uri))


@dataclass(frozen=True)
class PgTarget:
    host: str
    port: int
    user: str | None
    dbname: str | None

    @property
    def where(self) -> str:
        return f"{self.host}:{self.port}"


def pg_target(uri: str) -> PgTarget:
    parts = urlsplit(uri)
    try:
        port = parts.port or 5432
    except ValueError as exc:
        raise ServiceError(f"MLflow tracking URI {redact(uri)}: bad port ({exc})") from None
    return PgTarget(
        host=parts.hostname or "localhost",
        port=port,
        user=parts.username or None,
        dbname=parts.path.lstrip("/") or None,
    )


def apply_environment(
    mlflow_cfg: Mapping[str, Any] | Any, environ: dict[str, str] | None = None
) -> None:
    """Put the configured S3 endpoint and the named password variable where MLflow, boto3 and
    libpq read them (MLFLOW_S3_ENDPOINT_URL, PGPASSWORD), without overriding what is set."""
    env = os.environ if environ is None else environ
    get = mlflow_cfg.get if isinstance(mlflow_cfg, Mapping) else lambda k: getattr(mlflow_cfg, k)
    endpoint = get("s3_endpoint_url")
    if endpoint and not env.get(ENV_S3_ENDPOINT):
        env[ENV_S3_ENDPOINT] = str(endpoint)
    var = get("password_env")
    if var:
        if not env.get(str(var)):
            raise ServiceError(
                f"report.mlflow.password_env names ${var}, which is not set: export it with the "
                "PostgreSQL password"
            )
        env[ENV_PGPASSWORD] = env[str(var)]


def _pg_reason(message: str, target: PgTarget) -> str:
    """A libpq error in one line, by what went wrong."""
    text = " ".join(message.split())
    low = text.lower()
    if "password authentication failed" in low:
        return (
            f"password authentication failed for user {target.user!r} "
            "(wrong password, or no such role; the password, from the environment, is not shown)"
        )
    if "no password supplied" in low or "fe_sendauth" in low:
        return (
            f"the server asks a password for user {target.user!r} and none is set: export "
            "PGPASSWORD (or name its variable in report.mlflow.password_env)"
        )
    if "does not exist" in low and "database" in low:
        return (
            f"database {target.dbname!r} does not exist on {target.where} "
            "(create it: createdb, or make postgres for the local server)"
        )
    if "role" in low and "does not exist" in low:
        return f"role {target.user!r} does not exist on {target.where}"
    return text


def check_postgres(uri: str, timeout_s: int = 5) -> None:
    """Connect once with a timeout; raise ServiceError with one line naming host:port."""
    target = pg_target(uri)
    try:
        import psycopg2
    except ImportError:
        raise ServiceError(
            "a postgresql:// tracking URI needs psycopg2 (pip install psycopg2-binary)"
        ) from None
    secret = uri_password(uri) or os.environ.get(ENV_PGPASSWORD)
    try:
        conn = psycopg2.connect(
            host=target.host,
            port=target.port,
            user=target.user,
            dbname=target.dbname,
            password=uri_password(uri),  # None: libpq's PGPASSWORD / PGPASSFILE
            connect_timeout=timeout_s,
            application_name="ragrig-preflight",
        )
    except psycopg2.OperationalError as exc:
        reason = _pg_reason(str(exc), target)
        low = reason.lower()
        if not any(w in low for w in ("password", "database", "role")):
            reason = reason.split(" failed: ", 1)[-1].split(" Is the server running")[0]
            reason = (
                f"cannot reach PostgreSQL at {target.where} ({reason.rstrip('. ')}; "
                f"connect timeout {timeout_s} s); is the server running? (make postgres starts "
                "a local one)"
            )
        line = f"MLflow tracking store {redact(uri)}: {reason}"
        if secret and len(secret) >= 4:  # libpq does not echo it; never let it through
            line = line.replace(secret, "***")
        raise ServiceError(line) from None
    conn.close()


def check_server(uri: str, timeout_s: int = 5) -> None:
    import requests

    url = uri.rstrip("/") + "/health"
    try:
        reply = requests.get(url, timeout=timeout_s)
    except requests.RequestException as exc:
        raise ServiceError(
            f"MLflow tracking server {redact(uri)}: cannot reach it within {timeout_s} s "
            f"({type(exc).__name__})"
        ) from None
    if reply.status_code != 200:
        raise ServiceError(
            f"MLflow tracking server {redact(uri)}: /health answered {reply.status_code}"
        )


def check_s3(location: str, timeout_s: int = 5) -> None:
    """The bucket of an s3:// artifact location exists and the credentials are accepted."""
    import boto3
    from botocore.config import Config
    from botocore.exceptions import BotoCoreError, ClientError, NoCredentialsError

    parts = urlsplit(location)
    bucket = parts.netloc
    endpoint = os.environ.get(ENV_S3_ENDPOINT) or None
    where = url_redact(endpoint) if endpoint else "AWS S3"
    client = boto3.client(
        "s3",
        endpoint_url=endpoint,
        config=Config(
            connect_timeout=timeout_s, read_timeout=timeout_s, retries={"max_attempts": 1}
        ),
    )
    head = f"MLflow artifact location {url_redact(location)} ({where})"
    try:
        client.head_bucket(Bucket=bucket)
    except NoCredentialsError:
        raise ServiceError(
            f"{head}: no S3 credentials (set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY)"
        ) from None
    except ClientError as exc:
        code = str(exc.response.get("Error", {}).get("Code", ""))
        if code in {"404", "NoSuchBucket", "NotFound"}:
            raise ServiceError(f"{head}: bucket {bucket!r} does not exist") from None
        if code in {"403", "AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch"}:
            raise ServiceError(
                f"{head}: the S3 credentials were refused for bucket {bucket!r} "
                "(from the AWS_* environment; not shown)"
            ) from None
        raise ServiceError(f"{head}: {code or type(exc).__name__}") from None
    except BotoCoreError as exc:
        raise ServiceError(
            f"{head}: cannot reach the endpoint within {timeout_s} s ({type(exc).__name__})"
        ) from None


def preflight(uri: str, artifact_location: str | None = None, timeout_s: int = 5) -> None:
    """Reach the tracking store and the artifact bucket once, before anything runs."""
    if is_postgres(uri):
        check_postgres(uri, timeout_s)
    elif uri.startswith("sqlite:///"):
        check_sqlite(uri)
    elif uri.startswith(("http://", "https://")):
        check_server(uri, timeout_s)
    else:
        check_file_store(uri)
    if artifact_location and artifact_location.startswith("s3://"):
        check_s3(artifact_location, timeout_s)


@contextlib.contextmanager
def pg_advisory_lock(uri: str, name: str, timeout_s: int = 5) -> Iterator[None]:
    """Serialise store creation between processes on one PostgreSQL database (the schema
    migrations, the experiment): a session-level advisory lock, held while the block runs."""
    import psycopg2

    target = pg_target(uri)
    key = zlib.crc32(name.encode())
    conn = psycopg2.connect(
        host=target.host,
        port=target.port,
        user=target.user,
        dbname=target.dbname,
        password=uri_password(uri),
        connect_timeout=timeout_s,
        application_name="ragrig-lock",
    )
    try:
        conn.autocommit = True
        with conn.cursor() as cur:
            cur.execute("SELECT pg_advisory_lock(%s)", (key,))
        try:
            yield
        finally:
            with conn.cursor() as cur:
                cur.execute("SELECT pg_advisory_unlock(%s)", (key,))
    finally:
        conn.close()


# What an SQLite store file starts with (https://www.sqlite.org/fileformat.html, the header).
SQLITE_MAGIC = b"SQLite format 3\x00"
# How long a locked sqlite store is waited for, unless report.mlflow.lock_timeout_s says
LOCK_TIMEOUT_S = 30.0
FIX_STORE = (
    "point report.mlflow.tracking_uri (or $RAGRIG_MLFLOW_URI) at a writable store, or fix this one"
)


@dataclass(frozen=True)
class SqliteStore:
    """A `sqlite:///` store: its file, and how sqlite3 opens it (a `sqlite:///file:...?mode=ro
    &uri=true` URI, SQLAlchemy's spelling of SQLite's URI filenames, keeps its query)."""

    path: Path
    target: str
    is_uri: bool

    @property
    def read_only_uri(self) -> bool:
        return self.is_uri and "mode=ro" in self.target


def sqlite_store(uri: str) -> SqliteStore | None:
    """The store of a `sqlite:///` URI, else None."""
    prefix = "sqlite:///"
    if not uri.startswith(prefix):
        return None
    rest = uri[len(prefix) :]
    if rest.startswith("file:") and "uri=true" in rest:
        name, _, query = rest[len("file:") :].partition("?")
        keep = "&".join(q for q in query.split("&") if q and q != "uri=true")
        path = Path(name).resolve()
        return SqliteStore(path, f"file:{path}" + (f"?{keep}" if keep else ""), True)
    path = Path(rest).resolve()
    return SqliteStore(path, str(path), False)


def check_sqlite(uri: str) -> None:
    """What a glance tells of a sqlite store, without waiting: a file that is not an SQLite
    database (a text file named as the store), a folder, a store or folder not writable."""
    store = sqlite_store(uri)
    if store is None:
        return
    head = f"MLflow tracking store {redact(uri)}"
    path = store.path
    if path.is_dir():
        raise ServiceError(f"{head}: {path} is a folder, not a database file; {FIX_STORE}")
    if path.exists():
        try:
            with open(path, "rb") as fh:
                magic = fh.read(len(SQLITE_MAGIC))
        except OSError as exc:
            raise ServiceError(f"{head}: cannot read {path} ({exc.strerror})") from None
        if magic and magic != SQLITE_MAGIC:
            raise ServiceError(
                f"{head}: {path} is not an SQLite database (another kind of file); {FIX_STORE}"
            )
    folder = path.parent if path.parent.exists() else _existing_parent(path)
    if store.read_only_uri or not os.access(path if path.exists() else folder, os.W_OK):
        raise ServiceError(_read_only(head, path))
    if not os.access(folder, os.W_OK | os.X_OK):
        raise ServiceError(
            f"{head}: the folder {folder} is not writable (SQLite writes its journal beside the "
            f"database); {FIX_STORE}"
        )


def check_file_store(uri: str) -> None:
    """A path or file:// URI is MLflow's file store, a folder: a file there (a text file, a
    database named without sqlite:///) is no store."""
    if "://" in uri and not uri.startswith("file://"):
        return
    from urllib.parse import unquote

    path = Path(unquote(urlsplit(uri).path) if uri.startswith("file://") else uri).expanduser()
    if not path.is_file():
        return
    try:
        with open(path, "rb") as fh:
            is_sqlite = fh.read(len(SQLITE_MAGIC)) == SQLITE_MAGIC
    except OSError:
        is_sqlite = False
    instead = (
        f"an SQLite store is named sqlite:///{path.resolve()}"
        if is_sqlite
        else "a tracking URI names a database (sqlite:///path/mlflow.db), a server or a folder"
    )
    raise ServiceError(
        f"MLflow tracking store {redact(uri)}: {path} is a file, not a tracking store; {instead}"
    )


def _existing_parent(path: Path) -> Path:
    parent = path.parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    return parent


def _read_only(head: str, path: Path) -> str:
    return f"{head}: {path} is read-only, so no run can be written; {FIX_STORE}"


def wait_for_sqlite(uri: str, timeout_s: float = LOCK_TIMEOUT_S) -> None:
    """Make sure a sqlite store takes a write now: take and release its write lock, retried with
    backoff (0.1 s doubling, at most 2 s) while another process holds it, for `timeout_s` in all;
    then ServiceError naming the lock and the bound. A read-only store says so at once."""
    import sqlite3
    import time

    store = sqlite_store(uri)
    if store is None or not store.path.exists():
        return  # a new store: MLflow creates it (under ragrig's store lock)
    check_sqlite(uri)
    head = f"MLflow tracking store {redact(uri)}"
    deadline = time.monotonic() + timeout_s
    pause = 0.1
    while True:
        try:
            conn = sqlite3.connect(store.target, uri=store.is_uri, timeout=0, isolation_level=None)
            try:
                conn.execute("BEGIN IMMEDIATE")
                version = conn.execute("PRAGMA user_version").fetchone()[0]
                # a write of what is there: refused by a read-only file or mount, changes nothing
                conn.execute(f"PRAGMA user_version = {int(version)}")
                conn.execute("ROLLBACK")
            finally:
                conn.close()
            return
        except sqlite3.Error as exc:
            text = str(exc).lower()
            if "locked" not in text and "busy" not in text:
                raise ServiceError(sqlite_reason(head, store.path, exc)) from None
        left = deadline - time.monotonic()
        if left <= 0:
            raise ServiceError(
                f"{head}: the database is locked by another process and stayed locked for "
                f"{timeout_s:g} s (report.mlflow.lock_timeout_s); find the process holding "
                f"{store.path} (fuser {store.path}) or raise the bound"
            )
        time.sleep(min(pause, left))
        pause = min(pause * 2, 2.0)


def sqlite_reason(head: str, path: Path, exc: BaseException) -> str:
    """An SQLite failure of the store as one line, by what went wrong."""
    text = " ".join(str(exc).split())
    low = text.lower()
    if "readonly" in low or "read-only" in low:
        return _read_only(head, path)
    if "not a database" in low:
        return f"{head}: {path} is not an SQLite database (another kind of file); {FIX_STORE}"
    if "locked" in low or "busy" in low:
        return f"{head}: the database is locked by another process; {FIX_STORE}"
    if "unable to open" in low:
        return f"{head}: cannot open {path} (a missing or unwritable folder?); {FIX_STORE}"
    return f"{head}: {text.splitlines()[0] if text else type(exc).__name__}"


@contextlib.contextmanager
def store_errors(uri: str) -> Iterator[None]:
    """A failure of the store while ragrig talks to it (SQLAlchemy's, MLflow's, the file
    system's) as ServiceError with one line naming the store; ragrig's own errors pass as
    they are."""
    from ragrig.core.errors import RagrigError

    try:
        yield
    except RagrigError:
        raise
    except Exception as exc:
        if not _is_store_error(exc):
            raise
        store = sqlite_store(uri)
        head = f"MLflow tracking store {redact(uri)}"
        if store is not None:
            raise ServiceError(sqlite_reason(head, store.path, _root_cause(exc))) from None
        first = (str(_root_cause(exc)).strip().splitlines() or [type(exc).__name__])[0]
        raise ServiceError(f"{head}: {first}") from None


def _root_cause(exc: BaseException) -> BaseException:
    seen = exc
    while seen.__cause__ is not None or seen.__context__ is not None:
        seen = seen.__cause__ or seen.__context__
    return seen if str(seen) else exc


def _is_store_error(exc: BaseException) -> bool:
    """An exception of the store's libraries or the file system, not a bug of ragrig's."""
    import sqlite3

    if isinstance(exc, sqlite3.Error | OSError):
        return True
    module = type(exc).__module__ or ""
    return module.startswith(("sqlalchemy", "mlflow", "psycopg2", "requests", "botocore"))
