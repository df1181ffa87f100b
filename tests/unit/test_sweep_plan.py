"""Sweep planning without running DVC: bad overrides, presets, the parallel schedule, results."""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys

import pytest

from ragrig.sweep import SweepError, check_overrides, grid, swept_keys
from ragrig.sweep.engine import plan
from ragrig.sweep.plan import ALONE_STAGES, Schedule, StageGraph, stage_keys
from ragrig.sweep.results import row, table, write_rows

from ..conftest import PROJECT


def _sweep(args: list[str], tmp_path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "ragrig", "sweep", *args],
        cwd=PROJECT,
        capture_output=True,
        text=True,
        env={
            **os.environ,
            "RAGRIG_MLFLOW_URI": f"sqlite:///{tmp_path / 'm.db'}",
            "RAGRIG_STAGE_LOG": str(tmp_path / "stage_log.jsonl"),
        },
    )


@pytest.mark.parametrize("cmd", [["--multirun"], ["queue", "-j", "2"]])
def test_unknown_option_fails_before_any_point_listing_the_choices(cmd, tmp_path):
    proc = _sweep([*cmd, "dataset=tiny", "retrieve.ef_search=16,32", "retrieve=foo"], tmp_path)
    assert proc.returncode == 1
    (line,) = proc.stderr.strip().splitlines()
    assert line == (
        "ragrig sweep: error: unknown option retrieve=foo: valid choices for retrieve are "
        "bm25, dense, hybrid_convex, hybrid_rrf, run_file"
    )
    assert not (tmp_path / "m.db").exists() and not (tmp_path / "stage_log.jsonl").exists()


def test_unknown_key_fails_before_any_point_naming_the_nearest_keys(tmp_path):
    proc = _sweep(["--multirun", "dataset=tiny", "retrieve.ef_serch=1,2"], tmp_path)
    assert proc.returncode == 1
    (line,) = proc.stderr.strip().splitlines()
    assert line.startswith(
        "ragrig sweep: error: unknown key 'retrieve.ef_serch' (nearest valid keys: "
        "retrieve.ef_search"
    )
    assert not (tmp_path / "m.db").exists()
    # a key that only exists under another option of its group is unknown for this one...
    with pytest.raises(SweepError, match=r"unknown key 'retrieve.alpha'"):
        check_overrides(["retrieve=hybrid_rrf", "retrieve.alpha=0.5"], PROJECT / "conf")
    # ...and known under the option that has it; a group option of a nested group is checked too
    check_overrides(["retrieve=hybrid_convex", "retrieve.alpha=0.5"], PROJECT / "conf")
    with pytest.raises(
        SweepError, match="valid choices for index/dense are flat, hnsw, hnsw_sq, ivf, ivf_pq"
    ):
        check_overrides(["index/dense=hnswx"], PROJECT / "conf")


PRESETS = {
    "chunk_sweep": {
        "chunk": ["recursive", "hybrid"],
        "chunk.max_tokens": [128, 256, 512, 1024],
        "chunk.overlap": [0, 32],
    },
    "hnsw_sweep": {
        "index.dense.m": [16, 32],
        "index.dense.ef_construction": [100, 200],
        "retrieve.ef_search": [32, 64, 128],
    },
    "model_sweep": {"generate": ["extractive", "smollm2_torch", "smollm2"]},
    "filter_sweep": {  # and filters=tenant_locale on every point (one value: not a swept axis)
        "filters.preferences.locale.mode": ["hard", "soft", "none"],
        "filters.preferences.locale.boost": [0.05, 0.1, 0.3],
    },
}


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_each_preset_composes_and_expands_to_its_documented_grid(name):
    points, swept = plan(PROJECT, [f"+experiment={name}"])
    expected = PRESETS[name]
    assert list(swept) == list(expected)
    assert [p.swept for p in points] == [
        dict(zip(expected, values, strict=True)) for values in itertools.product(*expected.values())
    ]
    if name == "filter_sweep":  # the preset chooses the filters that give the preference
        assert {p.cfg["filters"]["eligibility"]["tenant"] for p in points} == {"acme"}
    if name == "chunk_sweep":
        assert [p.cfg["chunk"]["method"] for p in points[:8]] == ["recursive"] * 8
        assert {p.cfg["chunk"]["method"] for p in points[8:]} == {"hybrid"}
        assert {(p.cfg["chunk"]["max_tokens"], p.cfg["chunk"]["overlap"]) for p in points[8:]} == {
            (t, o) for t in (128, 256, 512, 1024) for o in (0, 32)
        }
    # a command-line value of a preset key wins; other overrides are added to every point
    narrowed = grid(
        [
            f"+experiment={name}",
            f"{next(iter(expected))}={expected[next(iter(expected))][0]}",
            "dataset=tiny",
        ]
    )
    assert len(narrowed) == len(points) // len(next(iter(expected.values())))
    assert all("dataset=tiny" in p for p in narrowed)
    makefile = (PROJECT / "Makefile").read_text(encoding="utf-8")
    target = {
        "chunk_sweep": "sweep-chunk",
        "hnsw_sweep": "sweep-hnsw",
        "model_sweep": "sweep-models",
        "filter_sweep": "sweep-filters",
    }[name]
    assert f"{target}:" in makefile and f"+experiment={name}" in makefile
    assert f"make {target}" in (PROJECT / "README.md").read_text(encoding="utf-8")


def test_unknown_preset_lists_the_presets():
    with pytest.raises(
        SweepError, match="presets: chunk_sweep, filter_sweep, hnsw_sweep, model_sweep"
    ):
        grid(["+experiment=nope"])


def _bench_grid_keys() -> list[dict[str, str]]:
    graph = StageGraph.from_dvc_yaml(PROJECT / "dvc.yaml")
    from ragrig.compose.params import compose

    points = grid(
        [
            "generate=extractive",
            "chunk=recursive",
            "chunk.max_tokens=128,256,512",
            "index.dense.m=16,32",
            "retrieve.ef_search=64,128",
        ]
    )
    return [stage_keys(compose(PROJECT / "conf", p), graph) for p in points]


def test_stage_graph_reads_params_and_upstream_from_dvc_yaml():
    graph = StageGraph.from_dvc_yaml(PROJECT / "dvc.yaml")
    assert graph.params["embed"] == ["embed", "runtime.threads"]
    assert sorted(graph.upstream["embed"]) == ["chunk", "parse", "train_embed"]
    assert sorted(graph.upstream["index"]) == ["chunk", "embed"]
    assert graph.upstream["parse"] == [] and graph.upstream["train_verifier"] == []


def test_parallel_schedule_never_runs_two_points_needing_the_same_uncomputed_stage():
    keys = _bench_grid_keys()
    schedule = Schedule(keys)
    # the minimum a sweep must compute: 3 chunkings and embeddings, 6 indexes, 12 retrievals
    assert [schedule.distinct(s) for s in ("parse", "chunk", "embed", "index", "retrieve")] == [
        1,
        3,
        3,
        6,
        12,
    ]
    computed: dict[str, int] = {}
    order = []
    while schedule.pending or schedule.running:
        started = schedule.ready(2)
        assert started or schedule.running
        needs = [schedule.running[i] for i in started]
        busy = [schedule.running[i] for i in schedule.running if i not in started]
        for a, b in itertools.combinations(needs + busy, 2):
            assert not (a & b)  # never the same uncomputed stage configuration twice at once
        for i in started:
            for k in schedule.running[i]:
                computed[k] = computed.get(k, 0) + 1
        order.append(started)
        first = next(iter(schedule.running))
        schedule.finish(first, ok=True)
    assert all(n == 1 for n in computed.values())
    assert len(computed) == len({k for point in keys for k in point.values()})
    assert order[0] == [0]  # parse is shared and uncomputed: the first point runs alone
    assert max(len(s) for s in order) == 2  # then two at a time


def test_points_computing_an_embedding_run_alone_and_the_rest_fan_out():
    keys = _bench_grid_keys()
    schedule = Schedule(keys, ALONE_STAGES)
    computed: dict[str, int] = {}
    order = []
    while schedule.pending or schedule.running:
        started = schedule.ready(2)
        assert started or schedule.running
        for i in started:
            for k in schedule.running[i]:
                computed[k] = computed.get(k, 0) + 1
        embeds = [i for i in schedule.running if schedule.needs_alone(i)]
        assert not embeds or list(schedule.running) == embeds  # an embedding point is alone
        order.append(sorted(schedule.running))
        schedule.finish(next(iter(schedule.running)), ok=True)
    assert all(n == 1 for n in computed.values())  # still the minimum stage runs
    # the grid is chunk (outer) x M x efSearch: points 0, 4 and 8 compute the 3 embeddings
    assert [o for o in order if set(o) & {0, 4, 8}] == [[0], [4], [8]]
    assert sum(len(o) == 2 for o in order) >= 3  # the index/retrieve points still go in pairs
    batches = Schedule(keys, ALONE_STAGES).batches(2)
    assert [b for b in batches if set(b) & {0, 4, 8}] == [[0], [4], [8]]
    assert sorted(i for b in batches for i in b) == list(range(12))


def test_alone_names_only_stages_of_dvc_yaml(tmp_path):
    from ragrig.cli.sweep import _stages

    assert _stages("none", PROJECT) == frozenset()
    assert _stages("embed, generate", PROJECT) == {"embed", "generate"}
    with pytest.raises(SweepError, match=r"unknown stage\(s\) \['embedd'\].*'embed'"):
        _stages("embedd", PROJECT)


def test_a_failed_point_leaves_its_stages_to_the_next_point():
    keys = [{"parse": "p", "chunk": "a"}, {"parse": "p", "chunk": "b"}]
    schedule = Schedule(keys)
    assert schedule.ready(2) == [0]
    schedule.finish(0, ok=False)
    assert schedule.ready(2) == [1]


def test_table_shows_the_false_exclusion_rate_when_a_point_has_filters():
    rows = [
        row("hard", {"m": "hard"}, {"filters/false_exclusion_rate": 0.25}, "ok", None, 1.0),
        row("soft", {"m": "soft"}, {"filters/false_exclusion_rate": 0.0}, "ok", None, 1.0),
    ]
    text = table(rows).splitlines()
    assert text[0].split()[-3:] == ["false", "excl.", "s"]
    assert text[1].split()[-2:] == ["0.2500", "1.0"] and text[2].split()[-2] == "0.0000*"
    plain = row("p", {"m": "x"}, {"retrieval/ndcg_at_10": 0.5}, "ok", None, 1.0)
    assert "excl." not in table([plain])


def test_table_marks_the_best_point_per_metric_and_lists_failures(tmp_path):
    rows = [
        row(
            "ef_search=16",
            {"retrieve.ef_search": 16},
            {"retrieval/ndcg_at_10": 0.5, "latency_ms/retrieve/p95": 2.0},
            "ok",
            None,
            3.0,
        ),
        row(
            "ef_search=64",
            {"retrieve.ef_search": 64},
            {"retrieval/ndcg_at_10": 0.7, "latency_ms/retrieve/p95": 5.0},
            "ok",
            None,
            4.0,
        ),
        row(
            "ef_search=99", {"retrieve.ef_search": 99}, {}, "failed", "exit code 1: ERROR boom", 1.0
        ),
    ]
    text = table(rows).splitlines()
    assert text[0].split() == [
        "retrieve.ef_search",
        "nDCG@10",
        "Recall@100",
        "faithfulness",
        "p95",
        "ms",
        "$/query",
        "s",
    ]
    assert text[1].split()[:2] == ["16", "0.5000"] and text[1].split()[4] == "2.0*"
    assert text[2].split()[:2] == ["64", "0.7000*"] and text[2].split()[4] == "5.0"
    assert text[-2:] == ["failed points (1):", "  ef_search=99: exit code 1: ERROR boom"]
    saved = json.loads(write_rows(rows, tmp_path).read_text())
    assert saved == rows and set(saved[0]) == {
        "point",
        "params",
        "metrics",
        "status",
        "error",
        "seconds",
    }


def test_swept_keys_are_the_keys_with_several_values():
    assert swept_keys(["dataset=tiny", "retrieve.ef_search=16,64", "chunk=document"]) == {
        "retrieve.ef_search": ["16", "64"]
    }


def test_a_gate_orders_its_reader_but_keys_nothing():
    """generate reads only the estimate stage's gate file (data/estimate/ok, the same bytes
    whenever the run may go on): a judge parameter changes the estimate's key, which prices the
    judge's calls, and the judge's, never generate's."""
    import yaml

    graph = StageGraph.from_dvc_yaml(PROJECT / "dvc.yaml")
    assert graph.gates["generate"] == ["estimate"] and "estimate" not in graph.upstream["generate"]
    cfg = yaml.safe_load((PROJECT / "params.yaml").read_text())
    changed = {**cfg, "judge": {**cfg["judge"], "support_threshold": 0.61}}
    base, new = stage_keys(cfg, graph), stage_keys(changed, graph)
    assert [s for s in base if base[s] != new[s]] == ["estimate", "judge", "report"]
