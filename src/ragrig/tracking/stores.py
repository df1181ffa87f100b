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
    elif uri.startswith(("http://", "https://")):
        check_server(uri, timeout_s)
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
