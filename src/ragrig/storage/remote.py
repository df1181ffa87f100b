"""A shared DVC run-cache on S3-compatible storage (`storage=s3`), so that no sweep worker
recomputes what another computed and a second machine reproduces a finished sweep without
computing.

The `storage` section of conf/ (conf/storage/{local,s3}.yaml) names the remote: its URL
(`s3://bucket/prefix`), endpoint and region, optionally an AWS profile. Credentials come ONLY from
the environment (AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY, AWS_PROFILE, or the profile named
here), never from a file of the project; a URL holding them (`https://user:secret@host`) is
refused with one line (ragrig.core.urls) before anything is printed or written. No stage reads the
section (dvc.yaml `params`), so choosing a remote recomputes nothing.

    python -m ragrig remote setup storage=s3 storage.remote.url=s3://bucket/ragrig \
        storage.remote.endpoint_url=http://127.0.0.1:9000
    python -m ragrig remote check    # the preflight alone
    python -m ragrig remote push-exp <experiment>   # a finished experiment's stages

`setup` checks the bucket (`preflight`: one HEAD request, a short connect timeout and no
retries; an unreachable endpoint, refused credentials or a missing bucket is one line naming
it) and writes the remote into `.dvc/config.local` (`dvc remote add --local -d`), which DVC's
temporary experiment copies inherit.

A sweep with a remote runs each point as `dvc exp run --temp --pull ...`: DVC first pulls the
remote's run-cache entries, then for each stage whose entry matches it pulls that entry's outputs
and restores them instead of running the stage. After a point succeeds, `push_experiment` sends
exactly the stages of its experiment: for each stage in the experiment's dvc.lock, the outputs its
run-cache entry names, then the entry itself (so a reader never sees an entry whose outputs are
missing). A failed or killed point creates no experiment and pushes nothing; the stages it did
complete stay in the local cache only.
"""

from __future__ import annotations

import copy
import os
import subprocess
import threading
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from pydantic import Field, field_validator

from ragrig.core.config import Section
from ragrig.core.errors import RagrigError
from ragrig.core.urls import AWS_ENV, redact, refuse_credentials

REMOTE_NAME = "ragrig"
CONNECT_TIMEOUT_S = 3.0
READ_TIMEOUT_S = 10.0
WRITTEN_TO = "params.yaml and .dvc/config.local"


class RemoteError(RagrigError):
    """The shared run-cache cannot be used: unreachable, refused, missing or misconfigured."""


class RemoteConfig(Section):
    url: str | None = None  # s3://bucket/prefix; null: no shared run-cache
    endpoint_url: str | None = None  # an S3-compatible endpoint (MinIO, Ceph, ...); null: AWS
    region: str | None = None
    profile: str | None = None  # an AWS profile name (its keys stay in ~/.aws, never here)
    connect_timeout_s: float = Field(CONNECT_TIMEOUT_S, gt=0)

    @field_validator("url")
    @classmethod
    def _s3_url(cls, v: str | None) -> str | None:
        if v is None:
            return v
        refuse_credentials(v, "storage.remote.url", AWS_ENV, WRITTEN_TO)
        parsed = urlparse(v)
        if parsed.scheme != "s3" or not parsed.netloc:
            raise ValueError(f"storage.remote.url {v!r} is not s3://bucket[/prefix]")
        return v.rstrip("/")

    @field_validator("endpoint_url")
    @classmethod
    def _http_url(cls, v: str | None) -> str | None:
        if v is None:
            return v
        refuse_credentials(v, "storage.remote.endpoint_url", AWS_ENV, WRITTEN_TO)
        parsed = urlparse(v)
        if parsed.scheme not in {"http", "https"} or not parsed.netloc:
            raise ValueError(f"storage.remote.endpoint_url {v!r} is not http(s)://host[:port]")
        return v.rstrip("/")

    @property
    def bucket(self) -> str:
        return urlparse(self.url or "").netloc

    @property
    def endpoint(self) -> str:
        """The endpoint as a message names it (redacted: never credentials)."""
        return redact(self.endpoint_url) if self.endpoint_url else "AWS S3"

    @property
    def where(self) -> str:
        """The remote as a message names it: URL and endpoint (redacted: never credentials)."""
        return f"{redact(self.url or '')} at {self.endpoint}"


class StorageConfig(Section):
    remote: RemoteConfig = RemoteConfig()


def storage_config(cfg: dict[str, Any]) -> StorageConfig:
    from ragrig.core.config import validate_section

    return validate_section("storage", cfg.get("storage") or {})


def _credential_source(remote: RemoteConfig, env: dict[str, str]) -> str:
    if remote.profile:
        return f"AWS profile {remote.profile!r}"
    if env.get("AWS_ACCESS_KEY_ID"):
        return "AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY from the environment"
    if env.get("AWS_PROFILE"):
        return f"AWS profile {env['AWS_PROFILE']!r} (AWS_PROFILE)"
    return "the default AWS credential chain"


def preflight(remote: RemoteConfig, env: dict[str, str] | None = None) -> None:
    """One HEAD request on the bucket, a short connect timeout and no retries: return when the
    bucket answers to these credentials, else raise RemoteError with one line naming the
    endpoint or bucket (credentials are never part of the message)."""
    import boto3
    import botocore.exceptions as bex
    from botocore.config import Config

    env = dict(os.environ if env is None else env)
    if not remote.url:
        raise RemoteError("storage.remote.url is not set: no shared run-cache to check")
    config = Config(
        connect_timeout=remote.connect_timeout_s,
        read_timeout=READ_TIMEOUT_S,
        retries={"total_max_attempts": 1, "mode": "standard"},
    )
    try:
        session = boto3.session.Session(
            aws_access_key_id=env.get("AWS_ACCESS_KEY_ID") if not remote.profile else None,
            aws_secret_access_key=env.get("AWS_SECRET_ACCESS_KEY") if not remote.profile else None,
            aws_session_token=env.get("AWS_SESSION_TOKEN") if not remote.profile else None,
            profile_name=remote.profile or None,
            region_name=remote.region or env.get("AWS_DEFAULT_REGION") or "us-east-1",
        )
        client = session.client("s3", endpoint_url=remote.endpoint_url, config=config)
        client.head_bucket(Bucket=remote.bucket)
    except bex.ProfileNotFound:
        raise RemoteError(
            f"S3 remote {remote.where}: AWS profile {remote.profile!r} not found"
        ) from None
    except bex.NoCredentialsError:
        raise RemoteError(
            f"S3 remote {remote.where}: no credentials; set AWS_ACCESS_KEY_ID and "
            "AWS_SECRET_ACCESS_KEY (or AWS_PROFILE / storage.remote.profile) in the environment"
        ) from None
    except (bex.EndpointConnectionError, bex.ConnectTimeoutError, bex.ReadTimeoutError) as exc:
        raise RemoteError(
            f"S3 endpoint {remote.endpoint} unreachable for {redact(remote.url)} "
            f"({type(exc).__name__}, connect timeout {remote.connect_timeout_s:g} s)"
        ) from None
    except bex.ClientError as exc:
        code = str(exc.response.get("Error", {}).get("Code", ""))
        status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
        if code in {"404", "NoSuchBucket", "NotFound"} or status == 404:
            raise RemoteError(
                f"S3 bucket {remote.bucket!r} does not exist at "
                f"{remote.endpoint} (storage.remote.url {redact(remote.url)})"
            ) from None
        if code in {"403", "InvalidAccessKeyId", "SignatureDoesNotMatch", "AccessDenied"} or (
            status in {401, 403}
        ):
            raise RemoteError(
                f"S3 remote {remote.where}: credentials refused (HTTP {status}, "
                f"{code or 'Forbidden'}; from {_credential_source(remote, env)})"
            ) from None
        raise RemoteError(
            f"S3 remote {remote.where}: HEAD bucket failed (HTTP {status} {code})"
        ) from None
    except bex.BotoCoreError as exc:
        raise RemoteError(f"S3 remote {remote.where}: {type(exc).__name__}") from None


def _dvc(project: Path, *args: str) -> None:
    proc = subprocess.run(["dvc", *args], cwd=project, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RemoteError(f"`dvc {' '.join(args)}` failed: {(proc.stderr or proc.stdout).strip()}")


def setup(project: Path, remote: RemoteConfig) -> None:
    """Write the remote as the default DVC remote of this checkout, in `.dvc/config.local`
    (never committed; DVC's experiment copies inherit it). No credential is written."""
    if not remote.url:
        raise RemoteError("storage.remote.url is not set (choose storage=s3 and give the URL)")
    for field, value in (("url", remote.url), ("endpoint_url", remote.endpoint_url)):
        if value:  # a model built without validation (model_construct) is checked here too
            refuse_credentials(value, f"storage.remote.{field}", AWS_ENV, WRITTEN_TO)
    _dvc(project, "remote", "add", "--local", "--default", "--force", REMOTE_NAME, remote.url)
    for key, value in (
        ("endpointurl", remote.endpoint_url),
        ("region", remote.region),
        ("profile", remote.profile),
    ):
        if value:
            _dvc(project, "remote", "modify", "--local", REMOTE_NAME, key, value)
        else:
            _dvc(project, "remote", "modify", "--local", "--unset", REMOTE_NAME, key)


_READY: dict[tuple[str, str], None] = {}
_READY_LOCK = threading.Lock()
_PUSH_LOCK = threading.Lock()


def ensure(project: Path, remote: RemoteConfig, env: dict[str, str] | None = None) -> None:
    """`preflight` then `setup`, once per checkout and remote in this process."""
    key = (str(project.resolve()), remote.model_dump_json())
    with _READY_LOCK:
        if key in _READY:
            return
        preflight(remote, env)
        setup(project, remote)
        _READY[key] = None


def shared_remote(cfg: dict[str, Any]) -> RemoteConfig | None:
    """The point's shared run-cache, or None (`storage=local`)."""
    remote = storage_config(cfg).remote
    return remote if remote.url else None


def for_points(cfgs: list[dict[str, Any]]) -> RemoteConfig | None:
    """The one remote of a sweep's points; a sweep over `storage` itself is refused."""
    remotes = {storage_config(c).remote for c in cfgs}
    if len(remotes) > 1:
        raise RemoteError("storage cannot vary between the points of a sweep: give one remote")
    (remote,) = remotes or {RemoteConfig()}
    return remote if remote.url else None


def experiment_lock(project: Path, name: str) -> dict[str, Any]:
    """The dvc.lock an experiment committed, read with DVC's own YAML loader: PyYAML's YAML 1.1
    reads e.g. `2e-05` as a string, which would change the run-cache hash."""
    from dvc.utils.serialize import parse_yaml

    refs = subprocess.run(
        ["git", "for-each-ref", "--format=%(refname)", "refs/exps/"],
        cwd=project,
        capture_output=True,
        text=True,
    ).stdout.split()
    ref = next((r for r in refs if r.rsplit("/", 1)[-1] == name), None)
    if ref is None:
        raise RemoteError(f"no DVC experiment named {name!r} in {project}")
    lock = subprocess.run(
        ["git", "show", f"{ref}:dvc.lock"], cwd=project, capture_output=True, text=True
    )
    if lock.returncode != 0:
        raise RemoteError(f"experiment {name!r} has no dvc.lock")
    return parse_yaml(lock.stdout, f"{name}:dvc.lock") or {}


def run_cache_entries(lock: dict[str, Any]) -> dict[str, tuple[str, str]]:
    """stage -> (key, value) of its run-cache entry (`.dvc/cache/runs/<key[:2]>/<key>/<value>`),
    computed from a dvc.lock stage entry as DVC computes them when it saves a stage."""
    from dvc.stage.cache import _get_cache_hash

    out = {}
    for name, entry in (lock.get("stages") or {}).items():
        if not entry.get("outs"):
            continue
        key = _get_cache_hash(copy.deepcopy(entry), key=True)
        out[name] = (key, _get_cache_hash(copy.deepcopy(entry)))
    return out


def push_experiment(project: Path, name: str, remote: str | None = None) -> dict[str, int]:
    """Push one finished experiment's stages to the (default) DVC remote: the outputs each
    stage's run-cache entry names, then the entry. Returns counts of stages and objects."""
    lock = experiment_lock(project, name)
    with _PUSH_LOCK:
        return _push_entries(project, run_cache_entries(lock), remote)


def _push_entries(
    project: Path, entries: dict[str, tuple[str, str]], remote: str | None
) -> dict[str, int]:
    from dvc.repo import Repo
    from dvc.stage.cache import RunCacheNotSupported

    pushed = {"stages": 0, "objects": 0}  # objects: newly uploaded
    with Repo(str(project)) as repo:
        cache = repo.stage_cache
        try:
            odb = repo.cloud.get_remote_odb(remote, "push --run-cache", hash_name="md5-dos2unix")
        except Exception as exc:  # NoRemoteError, RemoteConfigError
            raise RemoteError(f"no DVC remote to push to: {exc}") from None
        for stage, (key, value) in entries.items():
            entry = cache._load_cache(key, value)
            if entry is None:
                raise RemoteError(
                    f"stage {stage!r}: run-cache entry {key[:8]}/{value[:8]} not in the local "
                    "cache (stage not cacheable, or its entry was removed)"
                )
            cached = cache._create_stage(entry)
            try:
                for objs in cached.get_used_objs().values():
                    result = repo.cloud.push(objs, remote=remote)
                    if result.failed:
                        raise RemoteError(
                            f"stage {stage!r}: {len(result.failed)} output object(s) failed "
                            "to upload; its run-cache entry was not pushed"
                        )
                    pushed["objects"] += len(result.transferred)
            except RunCacheNotSupported as exc:
                raise RemoteError(str(exc)) from None
            dst = odb.fs.join(odb.path, "runs", key[:2], key, value)
            odb.fs.put_file(cache._get_cache_path(key, value), dst)
            pushed["stages"] += 1
    return pushed


# --- the sweep's hook around each point (ragrig.sweep.point.run_point) ---


def prepare_point(cfg: dict[str, Any], project: Path, env: dict[str, str]) -> RemoteConfig | None:
    """The point's shared run-cache, checked and written as the DVC remote (once per process),
    or None with `storage=local`."""
    remote = shared_remote(cfg)
    if remote is not None:
        ensure(project, remote, env)
    return remote


def pull_args(remote: RemoteConfig | None) -> list[str]:
    """`dvc exp run` flags that pull the remote's run-cache and each restored stage's outputs."""
    return ["--pull"] if remote is not None else []


def push_point(
    project: Path, remote: RemoteConfig | None, experiment: str | None, log: Path
) -> str | None:
    """After a SUCCESSFUL point only: push its experiment's stages; the error, or None. The
    outcome goes to the point's log."""
    if remote is None:
        return None
    try:
        if not experiment:
            raise RemoteError("the point's log names no experiment (`Ran experiment(s): ...`)")
        counts = push_experiment(project, experiment)
    except Exception as exc:  # noqa: BLE001 - any failure to share is the point's failure
        msg = f"computed but not pushed to {remote.where}: {type(exc).__name__}: {exc}"
        line = msg.splitlines()[0] if msg else msg
        _append(log, f"ragrig remote: ERROR: {line}")
        return line
    _append(
        log,
        f"ragrig remote: pushed experiment {experiment} to {remote.where}: "
        f"{counts['stages']} run-cache entries, {counts['objects']} new objects",
    )
    return None


def _append(log: Path, line: str) -> None:
    try:
        with open(log, "a", encoding="utf-8") as fh:
            fh.write(line + "\n")
    except OSError:
        pass
