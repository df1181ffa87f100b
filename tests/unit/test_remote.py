"""The `storage` section (ragrig.remote) without S3: no stage reads it, no credential fits in
it, a sweep cannot vary it, and the run-cache paths it pushes are DVC's own."""

from __future__ import annotations

import copy

import pytest
import yaml

from ragrig.errors import ConfigError
from ragrig.remote import RemoteConfig, RemoteError, for_points, run_cache_entries
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
    from ragrig.config import validate_section

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
