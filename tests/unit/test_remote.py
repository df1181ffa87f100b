"""The `storage` section (ragrig.storage.remote) without S3: no stage reads it, no credential fits in
it, a sweep cannot vary it, and the run-cache paths it pushes are DVC's own."""

from __future__ import annotations

import copy
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from ragrig.core.errors import ConfigError
from ragrig.storage.remote import RemoteConfig, RemoteError, for_points, run_cache_entries
from ragrig.sweep.grid import compose_point
from ragrig.sweep.plan import StageGraph, stage_keys

from ..conftest import PROJECT

S3 = ["storage=s3", "storage.remote.url=s3://bucket/prefix"]


def test_no_stage_lists_storage_so_choosing_a_remote_recomputes_nothing():
    stages = yaml.safe_load((PROJECT / "dvc.yaml").read_text())["stages"]
    for name, stage in stages.items():
        assert not any(str(p).split(".")[0] == "storage" for p in stage.get("params", [])), name
    graph = StageGraph.from_dvc_yaml(PROJECT / "dvc.yaml")
    local = compose_point(["dataset=tiny"])
    remote = compose_point(["dataset=tiny", *S3, "storage.remote.endpoint_url=http://h:9000"])
    assert local["storage"]["remote"]["url"] is None
    assert remote["storage"]["remote"]["url"] == "s3://bucket/prefix"
    assert stage_keys(local, graph) == stage_keys(remote, graph)


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("url", "http://bucket/x", "is not s3://bucket"),
        ("url", "s3://", "is not s3://bucket"),
        ("endpoint_url", "127.0.0.1:9000", "is not http(s)://host"),
        ("aws_secret_access_key", "hunter2", "Extra inputs are not permitted"),
        ("connect_timeout_s", 0, "greater than 0"),
    ],
)
def test_bad_storage_config_is_refused_naming_the_key(key, value, message):
    from ragrig.core.config import validate_section

    with pytest.raises(ConfigError, match="storage") as err:
        validate_section("storage", {"remote": {"url": "s3://b/p", key: value}})
    assert message in str(err.value)


def test_a_sweep_cannot_vary_the_remote():
    a = compose_point(["dataset=tiny", *S3])
    b = compose_point(["dataset=tiny", "storage=s3", "storage.remote.url=s3://other/prefix"])
    with pytest.raises(RemoteError, match="storage cannot vary"):
        for_points([a, b])
    assert for_points([a, a]) == RemoteConfig(url="s3://bucket/prefix")
    assert for_points([compose_point(["dataset=tiny"])]) is None


def test_run_cache_paths_are_dvcs_own():
    """The (key, value) of a dvc.lock stage entry are those DVC's StageCache.save computes:
    the key ignores the outputs' hashes, the value does not."""
    from dvc.stage.cache import _get_cache_hash

    entry = {
        "cmd": "python stages/x.py",
        "deps": [{"path": "a.txt", "hash": "md5", "md5": "0" * 32, "size": 3}],
        "params": {"params.yaml": {"x": {"lr": 2e-05}}},
        "outs": [{"path": "data/x", "hash": "md5", "md5": "1" * 32 + ".dir", "size": 9}],
    }
    lock = {"schema": "2.0", "stages": {"x": copy.deepcopy(entry), "y": {"cmd": "echo"}}}
    (key, value), other = run_cache_entries(lock)["x"], copy.deepcopy(entry)
    assert list(run_cache_entries(lock)) == ["x"]  # a stage without outputs has no entry
    assert key == _get_cache_hash(copy.deepcopy(entry), key=True) != value
    other["outs"][0]["md5"] = "2" * 32 + ".dir"
    assert run_cache_entries({"stages": {"x": other}})["x"][0] == key  # same key
    assert run_cache_entries({"stages": {"x": other}})["x"][1] != value  # another entry


# --- credentials inside the endpoint URL ---------------------------------------------------

SECRET = "s3cr3tPW"


def _dvc_project(path: Path, monkeypatch) -> Path:
    """An empty DVC project as cwd, `dvc` on PATH (the venv's)."""
    bindir = str(Path(sys.executable).parent)
    monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}{os.environ.get('PATH', '')}")
    subprocess.run([sys.executable, "-m", "dvc", "init", "--no-scm", "-q"], cwd=path, check=True)
    monkeypatch.chdir(path)
    return path


@pytest.mark.parametrize("action", ["check", "setup"])
def test_remote_refuses_credentials_in_the_endpoint_and_writes_nothing(
    action, tmp_path, monkeypatch, capsys
):
    from ragrig.cli import app as cli
    from ragrig.storage import remote

    project = _dvc_project(tmp_path, monkeypatch)
    reached = []  # the bucket would answer: only the URL rule stands in the way
    monkeypatch.setattr(remote, "preflight", lambda r, env=None: reached.append(r))
    bad = f"storage.remote.endpoint_url=https://minio:{SECRET}@minio.lan:9000"
    code = cli.main(["remote", action, *S3, bad])
    out, err = capsys.readouterr()
    assert code == 1 and out == "" and reached == [], (out, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith(
        "ragrig: error: storage.remote.endpoint_url: credentials inside the URL are refused"
    )
    assert "https://***@minio.lan:9000" in lines[0] and "AWS_SECRET_ACCESS_KEY" in lines[0]
    assert SECRET not in err and "minio:" not in err
    assert not (project / ".dvc" / "config.local").exists()


def test_remote_check_cli_refuses_a_secret_in_the_endpoint_in_one_line(tmp_path):
    from ..conftest import project_env

    dead = f"https://user:{SECRET}@127.0.0.1:9"  # nothing listens: the secret is the only issue
    proc = subprocess.run(
        [sys.executable, "-m", "ragrig", "remote", "check", *S3,
         f"storage.remote.endpoint_url={dead}"],
        cwd=PROJECT,
        env=project_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )  # fmt: skip
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 1 and proc.stdout == "" and len(lines) == 1, proc.stderr[-2000:]
    assert "storage.remote.endpoint_url: credentials inside the URL are refused" in lines[0]
    assert SECRET not in proc.stderr


def test_setup_and_messages_never_carry_userinfo_of_an_unvalidated_config(tmp_path, monkeypatch):
    """Defence in depth: a RemoteConfig built without validation is refused by setup before
    anything is written, and the paths messages print hide its credentials."""
    from ragrig.storage import remote

    project = _dvc_project(tmp_path, monkeypatch)
    raw = RemoteConfig.model_construct(
        url="s3://bucket/prefix",
        endpoint_url=f"https://user:{SECRET}@minio.lan:9000",
        region=None,
        profile=None,
        connect_timeout_s=3.0,
    )
    assert SECRET not in raw.where and "https://***@minio.lan:9000" in raw.where
    with pytest.raises(ConfigError, match="storage.remote.endpoint_url: credentials") as err:
        remote.setup(project, raw)
    assert SECRET not in str(err.value)
    assert not (project / ".dvc" / "config.local").exists()
