"""Every benchmark script runs on the tiny fixture, so that none can rot unnoticed.

Every script runs in its own process, two at a time, with run_all.py's SMOKE_ARGS (the same
settings as `python benchmarks/run_all.py --smoke`); their figures on 20 documents mean nothing
about speed, but the script must finish and report what it measured.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from .conftest import PROJECT, project_env

pytestmark = pytest.mark.full  # make test-all (CI) only

BENCH = PROJECT / "benchmarks"


def _run_all():
    sys.path.insert(0, str(BENCH))  # run_all imports its sibling _common
    try:
        spec = importlib.util.spec_from_file_location("ragrig_bench_run_all", BENCH / "run_all.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module
    finally:
        sys.path.remove(str(BENCH))


RUN_ALL = _run_all()


# RAGRIG_BENCH_SMOKE_ONLY=name,name runs only those scripts (with `-k` on their tests): the
# others' tests are then skipped, not failed.
ONLY = [n for n in os.environ.get("RAGRIG_BENCH_SMOKE_ONLY", "").split(",") if n]


# Measured alone on the fixture (Intel Xeon, 2 cores): the longest start first, so that the
# runs at a time end together. Names not listed start last.
LONGEST_FIRST = ["sweep", "sweep_ray", "generate", "remote_cache", "suite", "pipeline"]
# Scripts at a time: every one on the fixture is CPU-bound, so more than the cores only adds
# memory and contention.
AT_ONCE = max(1, min(2, os.cpu_count() or 1))


def _start(name: str, params: Path, tmp: Path) -> tuple[subprocess.Popen, object]:
    cmd = RUN_ALL.command(name, RUN_ALL.SMOKE_DATASET, params, RUN_ALL.SMOKE_ARGS[name], tmp)
    log = open(tmp / f"{name}.log", "w", encoding="utf-8")  # noqa: SIM115 (closed by the caller)
    proc = subprocess.Popen(
        [*cmd, "--json", str(tmp / f"{name}.json")],
        cwd=PROJECT,
        env=project_env(),
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    return proc, log


@pytest.fixture(scope="module")
def smoke(tmp_path_factory) -> dict[str, tuple[int, str, dict | None]]:
    tmp = tmp_path_factory.mktemp("bench-smoke")
    unknown = set(ONLY) - set(RUN_ALL.BENCHMARKS)
    assert not unknown, f"RAGRIG_BENCH_SMOKE_ONLY names no benchmark: {sorted(unknown)}"
    params = RUN_ALL.smoke_params(tmp)
    names = sorted(
        ONLY or RUN_ALL.BENCHMARKS,
        key=lambda n: LONGEST_FIRST.index(n) if n in LONGEST_FIRST else len(LONGEST_FIRST),
    )
    waiting, running, out, started, wall = list(names), {}, {}, {}, {}
    deadline = time.monotonic() + 1800
    while waiting or running:
        while waiting and len(running) < AT_ONCE:
            name = waiting.pop(0)
            running[name] = _start(name, params, tmp)
            started[name] = time.monotonic()
        for name, (proc, log) in list(running.items()):
            if proc.poll() is None:
                if time.monotonic() > deadline:
                    proc.kill()
                continue
            log.close()
            del running[name]
            wall[name] = round(time.monotonic() - started[name], 1)
            result = tmp / f"{name}.json"
            out[name] = (
                proc.returncode,
                (tmp / f"{name}.log").read_text(encoding="utf-8", errors="replace"),
                json.loads(result.read_text()) if result.exists() else None,
            )
        time.sleep(0.2)
    out["_tmp"] = tmp
    # each script's wall time, two at a time beside the rest of the suite: the ranking to cut by
    (tmp / "wall_s.json").write_text(json.dumps(wall, indent=1), encoding="utf-8")
    return out


def _ok(smoke, name: str) -> dict:
    if name not in smoke:
        pytest.skip(f"bench_{name}.py not run (RAGRIG_BENCH_SMOKE_ONLY)")
    rc, log, result = smoke[name]
    assert rc == 0 and result is not None, f"bench_{name}.py failed ({rc}):\n{log[-4000:]}"
    assert result["benchmark"] == name
    return result


def test_every_benchmark_script_has_a_smoke_run():
    scripts = {p.stem.removeprefix("bench_") for p in BENCH.glob("bench_*.py")}
    assert scripts == set(RUN_ALL.BENCHMARKS) == set(RUN_ALL.SMOKE_ARGS)


def test_bm25_benchmark(smoke):
    r = _ok(smoke, "bm25")
    assert (r["config"]["documents"], r["config"]["queries"], r["config"]["k"]) == (20, 9, 20)
    # on 20 invented documents every gold document shares terms with its query
    assert r["backends"]["bm25s"]["ndcg@10"] == 1.0
    assert r["backends"]["bm25s_batched_retrieve"]["ndcg@10"] == r["backends"]["bm25s"]["ndcg@10"]
    assert r["target_met"] is None  # the published figure is SciFact's
    assert len(r["tokenisation_ablation_bm25s"]) == 4


def test_ann_benchmark(smoke):
    r = _ok(smoke, "ann")
    assert (r["config"]["vectors"], r["config"]["dim"], r["config"]["queries"]) == (20, 384, 9)
    assert [row["efSearch"] for row in r["hnsw"]] == [16, 64]
    assert [row["nprobe"] for row in r["ivf"]] == [1, 2]
    assert r["ivf"][-1]["recall@10"] == 1.0  # nprobe = nlist searches every list: exact
    assert len(r["quality"]) == 7  # 4 methods over HNSW, 3 over exact (BM25 has no dense index)
    assert Path(r["plot"]).exists() and Path(r["plot"]).is_relative_to(smoke["_tmp"])


def test_embed_benchmark_compares_the_whole_stage_with_a_bare_encode(smoke):
    r = _ok(smoke, "embed")
    assert (r["config"]["chunks"], r["config"]["queries"]) == (10, 3)
    assert len(r["wall_s"]["stage"]) == len(r["wall_s"]["bare"]) == 1
    assert r["max_abs_vector_diff"] == 0.0  # the stage wrote exactly the bare vectors
    # the stage's wall time includes its start-up, reads, model load and writes
    assert r["wall_s"]["stage"][0] > r["stage_logged_body_s_median"] > 0


def test_embedders_benchmark_runs_the_embedders_and_precisions_side_by_side(smoke):
    r = _ok(smoke, "embedders")
    assert (r["config"]["chunks_sampled"], r["config"]["queries_alone"]) == (10, 3)
    rows = r["embedders"]
    assert list(rows) == [
        "minilm@fp32",
        "minilm@bf16",
        "minilm@int8",
        "minilm_int8",
        "minilm_l3",
        "wordllama",
    ]
    assert rows["minilm@fp32"]["ratio_to_fp32"] == 1.0
    assert [rows[n]["dim"] for n in rows] == [384, 384, 384, 384, 384, 256]
    assert [rows[n]["precision"] for n in rows] == ["fp32", "bf16", "int8", None, None, None]
    assert [rows[n]["fingerprint"].get("precision") for n in rows][:3] == ["fp32", "bf16", "int8"]
    for name, row in rows.items():
        assert row["passages_per_s"] > 0 and len(row["encode_s_runs"]) == 1, name
        assert len(row["fingerprint"]["model"]["weights_sha256"]) == 64, name
        assert not row["cached"]  # a fresh cache folder: every corpus was embedded
        # 20 invented documents, one gold each: every lane finds it at rank 1 or 2
        assert row["dense"]["recall@100"] == row["hybrid_rrf"]["recall@100"] == 1.0, name
    assert rows["wordllama"]["cosine_to_fp32_sample"] is None  # 256-d: not comparable
    assert rows["minilm_int8"]["cosine_to_fp32_sample"]["min"] >= 0.999
    assert rows["minilm_int8"]["cosine_to_fp32_corpus"]["min"] >= 0.999
    assert rows["minilm@bf16"]["cosine_to_fp32_corpus"]["min"] >= 0.9999
    assert rows["minilm@int8"]["cosine_to_fp32_corpus"]["mean"] < 0.99  # lossy
    checks = r["same_model_vs_fp32"]
    assert list(checks) == ["minilm@bf16", "minilm@int8", "minilm_int8"]
    for check in checks.values():
        assert set(check) >= {"dense_ndcg@10_delta", "hybrid_rrf_ndcg@10_delta", "within_tolerance"}
    assert r["target_met"] == any(
        c["within_tolerance"] and c["speedup_passages_per_s"] > 1.0 for c in checks.values()
    )


def test_pipeline_benchmark(smoke):
    r = _ok(smoke, "pipeline")
    assert r["cold_repro"]["all_stages_ran_ok"] is True
    assert r["noop_repro"]["stages_ran"] == [0]
    assert r["exp_run"]["target_met"] is True
    assert r["exp_run"]["stages_ran"][0]["stage"] == "retrieve"
    assert r["exp_run"]["upstream_of_retrieve_ran"] == []


def test_calibrate_benchmark_on_the_mtrag_shaped_fixture(smoke):
    r = _ok(smoke, "calibrate")
    assert r["config"]["dataset"].endswith(
        "tiny_mtrag/reference_subset_with_human_evaluations.json"
    )
    assert (r["counts"]["evaluations"], r["counts"]["faithful"]) == (16, 8)
    assert r["split"]["tasks"] == {"calibration": 4, "held_out": 4}
    same = "naive_overlap on overlap's answers"  # no_claims excluded: t7's refusal left out
    assert set(r["scorers"]) == {"overlap", "naive_overlap", same}
    # held out: faithful 1, 7/8, 1, 0 against unfaithful 1/7, 1/7, 0, 0 (fixture README)
    assert r["scorers"]["naive_overlap"]["roc_auc_held_out"] == 0.8125
    assert r["scorers"][same]["roc_auc_held_out"] == 1.0  # without t7's refusal (scored 0)
    assert r["scorers"][same]["answers_per_s"] == r["scorers"]["naive_overlap"]["answers_per_s"]
    assert r["scorers"]["overlap"]["threshold_rule"] == "prevalence"
    assert r["target_met"] is None  # the targets are MTRAG's
    # split seeds 1 and 2: naive overlap's held-out ROC-AUC 0.7812 and 1.0 (no fitting in it)
    assert r["seeds"]["naive_overlap"]["roc_auc"] == {
        "mean": 0.8906,
        "sd": 0.1094,
        "min": 0.7812,
        "n_seeds": 2,
    }
    assert r["seeds"]["overlap"]["roc_auc"]["n_seeds"] == 2
    assert Path(r["plot"]).exists() and Path(r["plot"]).is_relative_to(smoke["_tmp"])


def test_probes_benchmark(smoke):
    r = _ok(smoke, "probes")
    assert r["config"]["probes"] == 25  # tiny_beir claims + tests/fixtures/tiny_mtrag_probes
    kinds = r["backends"]["overlap_configured"]["kinds"]
    assert (kinds["negation"]["n"], kinds["negation"]["flagged"]) == (7, 1.0)
    # the fixture's split-evidence claim is read as one two-sentence window
    assert kinds["split_evidence"]["supported_given_original_accepted"] == 1.0
    assert r["config"]["answer_probes"] == 11  # tests/test_probes.py checks their figures
    assert r["target_met"] is False  # the answer-level negation target is not met here


def test_verifier_benchmark_trains_on_the_fixture_and_judges(smoke):
    r = _ok(smoke, "verifier")
    assert r["config"]["model"] == "trained now"
    t = r["training"]
    assert t["pairs"] == 12 and sum(t["labels"].values()) == 12 and t["train_seconds"] > 0
    assert r["scoring"]["pairs"] == 12 and r["scoring"]["pairs_per_s"] > 0
    assert r["judge"]["answers"] == 16 and r["judge"]["answers_per_s"] > 0
    # the prefetched run scores the same pairs as each answer alone, in other batches: fp32 to
    # 1e-4; bf16 products accumulate in another order per batch shape (1.06e-4 seen on AMX)
    tolerance = 1e-3 if r["config"]["quantize_resolved"] == "bf16" else 1e-4
    assert r["judge"]["per_answer_batches"]["max_abs_diff"] < tolerance
    variants = r["judge"]["variants"]
    assert r["config"]["judge"]["quantize"] == "auto"  # conf/judge/verifier.yaml
    assert list(variants) == ["quantize=none", "quantize=int8"]
    # auto: bf16 on a CPU with native bf16 units, else none (fp32), whose variant is then the
    # configured judge itself
    resolved = r["config"]["quantize_resolved"]
    assert resolved in ("bf16", "none")
    for name, quantize in (("quantize=none", "none"), ("quantize=int8", "int8")):
        v = variants[name]
        assert v["overrides"] == {"quantize": quantize}
        assert v["pairs"] == r["judge"]["pairs"] > 0  # the same pairs, in other precision
        assert v["answers_per_s"] > 0
        if quantize == resolved:
            assert v["max_abs_diff"] == 0 and v["claims_changed"] == 0
        else:
            assert 0 < v["max_abs_diff"] < 0.2
    assert set(r["aggregations"]) == {
        "mean_p",
        "share",
        "min_p",
        "mean_p_entity",
        "mean_p_lexical",
    }
    assert r["preferred_aggregation"] in r["aggregations"]
    assert r["target_met"] is None  # the targets are MTRAG's


def test_verifier_sources_benchmark_reads_each_source_both_ways(smoke):
    r = _ok(smoke, "verifier_sources")
    # half the fixture's groups as validation rows: fever_nli 7, snli 12, wice 4 (its two
    # supported claims with their removed-support negatives)
    table = r["balanced_accuracy"]
    assert {k: v["n"] for k, v in table.items() if "/" not in k} == {
        "all": 23,
        "fever_nli": 7,
        "snli": 12,
        "wice": 4,
    }
    for row in table.values():
        for reader in ("verifier", "lexical"):
            assert row[reader] is None or 0.0 <= row[reader] <= 1.0
    assert r["rows"] == 23 and r["verifier_s"] > 0


def test_correctness_benchmark_on_the_fixtures(smoke):
    r = _ok(smoke, "correctness")
    assert r["config"]["answers"] == 8 and r["config"]["rating"] == "faithfulness"
    assert r["config"]["tasks"] == {"calibration": 4, "held_out": 4}
    assert set(r["measures"]) == {
        "token_f1",
        "claim_f1",
        "claim_precision",
        "claim_recall",
        "soft_precision",
        "soft_recall",
        "claim_score",
        "axis_claim_f1",
        "axis",
        "mix_claim_score_token_f1",
    }
    assert set(r["spearman_gain_over_token_f1"]) == {
        "claim_f1",
        "claim_score",
        "axis_claim_f1",
        "axis",
    }
    assert sum(r["status"].values()) == 8
    n = r["negation"]
    # tiny_beir's dev claims: 9, of which negate() flips 8; every flip loses correctness
    assert (n["scifact_claims"], n["negatable"]) == (9, 8)
    assert n["claim_level_lost"] == n["verdict_path_lost"] == 1.0
    assert r["target_met"] is None  # the targets are MTRAG's


def test_parse_benchmark_on_the_documents_fixture(smoke):
    r = _ok(smoke, "parse")
    assert r["config"]["dataset_root"].endswith("tests/fixtures/docs")
    formats = r["per_format"]
    assert set(formats) == {"docx", "html", "md", "pdf", "pptx", "xlsx"}
    assert (formats["pdf"]["files"], formats["pdf"]["pages"]) == (1, 2)
    assert all(f["documents_per_s"] > 0 and f["cpu_s"] > 0 for f in formats.values())
    assert formats["pdf"]["pages_per_s"] > 0 and formats["html"]["pages_per_s"] is None
    assert r["needs_ocr"] == []
    mem = r["peak_memory"]  # the largest fixture document is the DOCX
    assert mem["file"] == "relocation.docx" and mem["status"] == "parsed"
    assert mem["peak_rss_mib"] >= mem["baseline_rss_mib"] > 0
    h = r["hundred"]  # 8 copies: each fixture document once, the first two twice
    assert h["files"] == 8 and h["counts"]["parsed"] == 8 and h["distinct_file_ids"] == 8
    assert h["by_format"] == {"docx": 1, "html": 2, "md": 1, "pdf": 1, "pptx": 1, "xlsx": 2}


def test_filters_benchmark_measures_the_metric_and_the_report_block_alike(smoke):
    r = _ok(smoke, "filters")
    assert r["config"] == {"queries": 300, "candidates": 100, "docs": 3000, "repeats": 1}
    assert r["report_rate"] == r["false_exclusion_rate"] and 0 < r["false_exclusion_rate"] < 1
    assert r["eligible_queries"] <= 300 and set(r["seconds"]) == {
        "false_exclusion",
        "recall_at_k",
        "report",
    }


def test_traces_benchmark_times_the_command_on_a_synthetic_log(smoke):
    r = _ok(smoke, "traces")
    run, torch = r["runs"]
    assert r["config"] == {
        "interactions": 2000, "hours": 4, "rates": [0.1], "glibc_heap_too": False,
        "runtimes": ["onnx", "torch"], "embed_batches": [8],
    }  # fmt: skip
    # the default runtime and torch's, side by side: the same sample, the same verdicts
    assert (run["runtime"], torch["runtime"]) == ("onnx", "torch")
    assert run["embed_batch"] == torch["embed_batch"] == 8  # conf/traces.yaml's default
    assert (torch["judged"], torch["alerts"]) == (run["judged"], run["alerts"])
    assert run["lines"] == 2000 and run["sample_rate"] == 0.1
    assert 150 <= run["judged"] <= 250  # a 10% hashed sample of 2,000
    assert run["exit"] == 1 and run["alerts"] >= 1  # the synthetic incident is found
    assert run["per_s"] > 0 and 100 < run["peak_mib"] < 4096
    assert run["methods"]["relevance"].startswith("semantic ")  # the embed model read too
    assert run["methods"]["correctness"].startswith("self_consistency ")  # samples were read
    # the synthetic log's doubting follow-ups come with its unfaithful answers
    assert "doubted~faithfulness" in run["tracking"]


def test_run_all_records_a_benchmark(tmp_path):
    out = tmp_path / "results.json"
    proc = subprocess.run(
        [sys.executable, str(BENCH / "run_all.py"), "--smoke", "--only", "bm25", "--out", str(out)],
        cwd=PROJECT,
        env=project_env(),
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    summary = json.loads(out.read_text())
    assert summary["smoke"] is True and list(summary["benchmarks"]) == ["bm25"]
    assert "--dataset-root" in summary["benchmarks"]["bm25"]["command"]
    assert summary["benchmarks"]["bm25"]["config"]["documents"] == 20


def test_results_table_on_the_fixture(tmp_path):
    """benchmarks/results_table.py (the results table of docs/benchmarks.md) runs on the fixture."""
    out = tmp_path / "table.json"
    cmd = [sys.executable, str(BENCH / "results_table.py"), "--dataset-root"]
    cmd += [str(RUN_ALL.SMOKE_DATASET), "--markdown", "--json", str(out)]
    proc = subprocess.run(cmd, cwd=PROJECT, env=project_env(), capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "| method | embedder | reranker | nDCG@10 |" in proc.stdout
    r = json.loads(out.read_text())
    assert r["benchmark"] == "results_table" and r["config"]["queries"] == 9
    rows = {(row["method"], row["reranker"]): row for row in r["rows"]}
    assert list(rows) == [
        ("bm25", "identity"),
        ("dense", "identity"),
        ("hybrid_rrf", "identity"),
        ("hybrid_convex", "identity"),
    ]
    assert rows[("bm25", "identity")]["ndcg@10"] == 1.0  # every gold shares terms with its query
    assert rows[("bm25", "identity")]["published_ndcg@10"] == 0.679
    assert rows[("hybrid_rrf", "identity")]["published_ndcg@10"] == 0.742
    assert all(row["query_ms_p50"] > 0 and row["index_s"] > 0 for row in r["rows"])
    assert rows[("dense", "identity")]["embed_s"] > 0 == rows[("bm25", "identity")]["embed_s"]
    bad = subprocess.run(
        [*cmd[:4], "--embed", "no_such_embedder"],
        cwd=PROJECT,
        env=project_env(),
        capture_output=True,
        text=True,
    )
    assert bad.returncode == 1 and "no embed option 'no_such_embedder'; options: [" in bad.stderr


def test_sweep_benchmark(smoke):
    r = _ok(smoke, "sweep")
    assert r["config"]["dataset"] == "tiny" and r["points"] == 2
    assert r["minimum_stage_runs"] == {
        "parse": 1,
        "chunk": 1,
        "embed": 1,
        "index": 1,
        "retrieve": 2,
    }
    par = r["parallel"]
    assert par["failed"] == 0 and par["stage_runs_equal_minimum"] is True
    assert par["stage_runs"]["retrieve"] == 2 and par["stage_runs"]["embed"] == 1
    assert r["rerun"]["stage_runs"] == dict.fromkeys(r["rerun"]["stage_runs"], 0)
    assert r["rerun"]["new_mlflow_runs"] == 0
    overhead = r["overhead_per_point_s"]
    assert set(overhead["dvc_experiment_all_restored"]) == {"worktree"}  # SMOKE_ARGS
    assert all(v > 0 for v in overhead["dvc_experiment_all_restored"].values())
    assert overhead["mlflow_report_log_run"] > 0
    assert len(overhead["executors"]["worktree"]["point_seconds"]) == 2  # the grid's two points
    assert r["cold_single_run_s"] > 0
    assert abs(r["yardstick_s"] - 2 * r["cold_single_run_s"]) <= 0.2


def test_sweep_ray_benchmark(smoke):
    r = _ok(smoke, "sweep_ray")
    assert r["config"]["dataset"] == "tiny" and r["points"] == 1
    minimum = {"parse": 1, "chunk": 1, "embed": 1, "index": 1, "retrieve": 1}
    assert r["minimum_stage_runs"] == minimum
    for name in ("sequential", "ray"):
        assert r[name]["failed"] == 0
        assert {s: r[name]["stage_runs"][s] for s in minimum} == minimum
    assert r["points_with_different_metrics"] == [] and r["metrics_compared"] > 100
    assert r["wall_ratio_ray_to_sequential"] > 0 and r["target_met"] is True


def test_rerank_benchmark_trains_on_the_fixture_and_reranks(smoke):
    r = _ok(smoke, "rerank")
    assert r["config"]["model"] == "trained now" and r["config"]["queries"] == 9
    t = r["training"]
    # tiny_beir_train: t1-t5 kept (5 positives), "3" and "t6" dropped as evaluated queries
    assert t["labels"]["positive"] == 5 and t["queries_in_pairs"] == 5
    assert t["dropped_eval_overlap"] == ["3", "t6"]
    assert t["train_seconds"] > 0 and t["pairs_per_s"] > 0 and len(t["weights_sha256"]) == 64
    assert [row["depth"] for row in r["reranked"]] == [3, 50]
    shallow, deep = r["reranked"]
    # depth 50 over lists of at most a few BM25 hits: every hit scored once, none padded
    assert deep["pairs_scored"] < 9 * 50 and shallow["pairs_scored"] <= 9 * 3
    assert deep["recall@100"] == r["first_stage"]["recall@100"]  # same candidate sets
    assert deep["latency_ms_median"] > 0
    assert r["target_met"] is None  # the target is SciFact's


def test_llm_judge_benchmark_times_the_packaged_model_and_its_cache(smoke):
    r = _ok(smoke, "llm_judge")
    assert r["model"] == "packaged:SmolLM2-135M-Instruct" and r["answers"] == 2
    assert sum(r["status"].values()) == 2  # every call has a status, none dropped
    assert r["all_cached"] is True  # the second pass over the same answers is all cache hits
    assert r["prompt_tokens_mean"] > 0 and r["model_load_s"] > 0
    assert r["cached_call_ms"] < r["wall_s"]["p50"] * 1e3


def test_index_scale_benchmark_measures_each_compressed_index_against_exact(smoke):
    r = _ok(smoke, "index_scale")
    assert r["config"]["n"] == 3000 and r["config"]["dim"] == 32
    names = [x["name"] for x in r["results"]]
    assert names == ["ivf_pq+sq8", "hnsw_sq"]
    for x in r["results"]:
        assert [s[x["knob"]] for s in x["search"]] == (
            [1, 8] if x["knob"] == "nprobe" else [16, 64]
        )
        assert all(0.0 <= s["recall@10"] <= 1.0 and s["query_ms_p50"] > 0 for s in x["search"])
        assert x["build_s"] > 0 and x["peak_rss_mb"] > 0
    ivf = r["results"][0]
    # nprobe 8 of 8 lists scans everything: recall can only grow with nprobe
    assert ivf["search"][1]["recall@10"] >= ivf["search"][0]["recall@10"]
    # 8 PQ bytes of 6 bits + 32 sq8 bytes + an id per vector: below float32's 128 bytes
    assert ivf["bytes_per_vector"] < ivf["float32_bytes_per_vector"] == 128


def test_chunk_benchmark_runs_the_chunkers_on_documents_parse_docling_converted(smoke):
    r = _ok(smoke, "chunk")
    methods = [row["config"].split()[0] for row in r["rows"]]
    assert methods == ["method=document"] + ["method=recursive"] * 2 + ["method=hybrid"] * 2
    assert r["convert_s"] > 0  # the fixture documents went through parse=docling
    docs = r["rows"][0]["chunks"]  # one chunk per document
    assert docs >= 4
    for row in r["rows"]:
        assert row["attribution"] == 1.0  # every pointer resolves to its text
        assert row["chunks"] >= docs


def test_train_embed_benchmark_with_the_same_model_twice_has_zero_deltas(smoke):
    r = _ok(smoke, "train_embed")
    assert r["queries"] == 9  # the fixture's judged test queries
    for method in ("dense", "hybrid_rrf", "hybrid_convex"):
        assert r["figures"]["packaged"][method] == r["figures"]["trained"][method]
        d = r["paired_deltas"][method]["ndcg@10"]
        assert d["delta"] == 0.0 and d["ci_low"] == 0.0 and d["ci_high"] == 0.0


def test_embed_ray_benchmark_gets_the_local_vectors_over_two_actors(smoke):
    r = _ok(smoke, "embed_ray")
    assert r["config"] == {
        "chunks": 20,
        "window": 6,
        "actors": 2,
        "local_threads": r["config"]["local_threads"],
        "repeats": 1,
    }
    assert r["identical"] is True
    assert len(r["wall_s"]["local"]) == len(r["wall_s"]["ray"]) == 1
    assert r["ray_over_local"] == r["passages_per_s"]["ray"] / r["passages_per_s"]["local"]
    assert r["ray_start_s"] > 0


def test_remote_cache_benchmark_restores_the_pushed_point_in_a_fresh_clone(smoke):
    r = _ok(smoke, "remote_cache")
    assert r["config"]["dataset"] == "tiny" and r["points"] == 1
    sweep = r["sweep"]
    assert sweep["stage_runs"]["embed"] == 1 and sweep["stage_runs"]["index"] == 1
    # every stage of the point pushed (one run-cache entry each) with its outputs
    assert sweep["remote_run_cache_entries"] >= 9 and sweep["remote_objects"] > 0
    (clone,) = r["fresh_clone"]["runs"]
    assert clone["stages_run"] == {}  # nothing computed: every stage restored from the remote
    assert {"parse", "chunk", "embed", "index", "retrieve", "report"} <= set(
        clone["stages_restored"]
    )
    assert clone["same_report_as_sweep"] is True
    assert r["fresh_clone"]["embed_or_index_run"] is False and clone["exp_run_s"] > 0


def test_generate_benchmark_runs_settings_side_by_side_on_the_same_claims(smoke):
    r = _ok(smoke, "generate")
    assert (r["config"]["queries"], r["config"]["repeats"], r["config"]["contexts"]) == (
        2,
        2,
        "bm25",
    )
    default, short, torch_gguf = r["results"]
    assert (default["setting"], default["overrides"]) == ("default", {})
    assert torch_gguf["overrides"] == {"method": "torch_gguf", "max_tokens": 16}
    # the same GGUF's chat template through transformers: the same prompt tokens
    assert torch_gguf["prompt_tokens_mean"] == default["prompt_tokens_mean"]
    assert 0 < torch_gguf["completion_tokens_mean"] <= 16
    assert torch_gguf["deterministic"] is True and torch_gguf["status"] == {"ok": 2}
    assert torch_gguf["no_verdict"] == 0 and torch_gguf["prompt_tok_s"] > 0
    assert short["overrides"] == {"max_tokens": 16, "stop": ["\n"]}
    # the same claims and passages: the same prompts
    assert default["prompt_tokens_mean"] == short["prompt_tokens_mean"] > 50
    assert 0 < short["completion_tokens_mean"] <= 16 < default["completion_tokens_mean"] <= 128
    assert all("\n" not in a for a in short["answers"])
    for x in (default, short):
        assert x["deterministic"] is True  # both repeats gave the same answers
        assert x["status"] == {"ok": 2} and x["n_labelled"] == 2
        assert 0.0 <= x["verdict_correctness"] <= 1.0 and x["no_verdict"] == 0  # grammar
        assert x["s_per_query"] > 0 and x["prompt_tok_s"] > 0 and x["decode_tok_s"] > 0
    # the grammar fixes the verdict in the first tokens: a shorter answer keeps it
    assert short["same_verdict_as_first"] == default["same_verdict_as_first"] == 2
    assert default["same_answer_as_first"] == 2


def test_suite_benchmark_times_a_fresh_clone_and_writes_its_section(smoke):
    r = _ok(smoke, "suite")
    (target,) = r["targets"]
    assert target["target"] == "repro" and target["exit_code"] == 0
    assert target["stages_s"]["embed"] > 0 and {"train_embed", "report"} <= set(target["stages_s"])
    assert target["training_share"] < 0.25  # training off: its stages only write a manifest
    assert target["floor"]["encode_s"] > 0 and target["floor"]["answers"] == 9  # the fixture's
    assert target["inference_over_floor"] > 1  # the pipeline costs more than its floor
    assert r["machine"]["cpu_model"] and r["machine"]["cpus"] >= 1
    # --isa avx2: every library held to AVX2 and `auto` fp32, in the venv, the stage, the floor
    assert r["isa"] == "avx2"
    assert r["isa_check"] == {
        "torch": "AVX2",
        "faiss": "AVX2",
        "onednn_cap": "AVX2",
        "auto": "fp32",
    }
    assert target["precision"] == {"embed": "fp32 (auto)"}  # the extractive generator: none
    assert target["floor"]["embed_precision"] == "fp32"
    md = (smoke["_tmp"] / "suite.md").read_text()
    assert md.startswith("<!-- bench_suite:start -->") and "x the floor** (target <= 1.3)" in md
    assert "held to its AVX2 path (ATEN_CPU_CAPABILITY=avx2 " in md
    # the clone ran on this venv: make must not have re-pointed its editable install there
    # (it still points where this process imported ragrig from)
    import ragrig

    where = subprocess.run(
        [sys.executable, "-c", "import ragrig; print(ragrig.__file__)"],
        cwd=smoke["_tmp"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert Path(where) == Path(ragrig.__file__).resolve(), where


def test_llm_claims_benchmark_catches_a_position_biased_judge(smoke):
    r = _ok(smoke, "llm_claims")
    fake, first = r["verifiers"]["fake"], r["verifiers"]["fake_first"]
    assert (fake["answers"], fake["claims"], fake["failed_answers"]) == (3, 3, 0)
    # the lexical reader reads every passage: reversing them changes nothing
    assert fake["position"] == {"claims_unchanged": 1.0, "answers_unchanged": 1.0}
    # its twin reads passage [1] only: the fixture's two-passage tasks expose it
    assert first["position"]["claims_unchanged"] == pytest.approx(1 / 3)
    assert fake["verbosity"]["answers_padded"] == 3
    assert fake["verbosity"]["claims_unchanged"] == 1.0
    assert r["self_preference"]["judge_vs_mtrag_responders"] is None
    assert r["self_preference"]["packaged_judge_vs_packaged_generator"].startswith(
        "the judge and the generator are of one model family (smollm:"
    )


def test_warm_benchmark_runs_both_ways_and_compares_the_bytes(smoke):
    r = _ok(smoke, "warm")
    assert r["repeats"] == 1 and r["target"] == "embed"
    assert r["same_outputs"] is True and r["files_compared"] > 0
    stages = set(r["cold"]["stage_s"])
    assert {"parse", "chunk", "embed"} <= stages == set(r["warm"]["stage_s"])
    assert r["warm"]["warm_stages"] == r["warm"]["n_stages"] == [len(stages)]
    assert r["server_startup_s"] > 0 and r["cold"]["wall_s"] > 0 and r["warm"]["wall_s"] > 0


def test_external_benchmark_flags_edited_sentences(smoke):
    r = _ok(smoke, "external")
    # the fixture's documents hold 4 sentences of 6 words or more
    assert (r["config"]["documents"], r["config"]["sentences"]) == (20, 4)
    assert r["kinds"]["original"]["n"] == 4
    assert r["kinds"]["original"]["source_retrieved"] == 1.0  # each sentence finds its document
    assert r["kinds"]["negation"]["n"] > 0 and r["seconds"]["per_claim_ms"] > 0
    assert r["target_met"] == (r["edited_flagged"] >= 0.9 and r["original_passed"] >= 0.9)


def test_consistency_benchmark_reruns_only_what_reads_the_samples(smoke):
    r = _ok(smoke, "consistency")
    assert r["config"]["samples"] == [2] and r["config"]["smoke"] is True
    assert r["config"]["budgets"] == ["none"]
    assert r["cold"]["stages_s"]["embed"] > 0 and r["cold"]["wall_s"] > 0
    (point,) = r["points"]
    # the sample count is a generate parameter: the estimate prices it, generate draws the
    # samples, the judge clusters them, the report reads them; nothing upstream reruns
    assert point["reran"] == ["estimate", "generate", "judge", "report"]
    assert point["ratio_to_cold"] == round(
        (r["cold"]["wall_s"] + point["extra_s"]) / r["cold"]["wall_s"], 3
    )
    s = point["surrogate"]
    # the fixture's 4 sampled claims are all labelled: each answered and scored, or counted
    assert s["answered"] == 4 and s["answers_scored"] + s["unscored"] == 4
    assert s["unlabelled"] == 0 and 0 <= s["correct"] <= 4
    for name in ("by_meaning", "lexical"):
        a = s[name]
        assert a["n"] == s["answers_scored"]
        assert a["auc"] is None or (0 <= a["auc"] <= 1 and 0 <= a["ci95"][0] <= a["ci95"][1] <= 1)


def test_guardrails_benchmark_reads_every_guardrail_on_the_injected_day(smoke):
    r = _ok(smoke, "guardrails")
    assert r["config"]["lines"] == 24 * 200 and r["lines"] == 4800
    per = r["per_guardrail"]
    assert set(per) == {"faithfulness", "latency", "filter_false_exclusion", "regeneration", "cost",
                        "relevance", "correctness"}  # fmt: skip
    assert per["relevance"]["expected_hours"] == []  # no fault of its own
    # latency, cost and the filter read every line: each fault alerts in its hours
    for g in ("latency", "cost", "filter_false_exclusion"):
        assert per[g]["missed_hours"] == [] and per[g]["alerted_hours"] == per[g]["expected_hours"]
    assert r["false_alarms"] == len(r["false_alarm_lines"]) and r["exit"] == 1


def test_coverage_benchmark_agrees_with_its_hand_computation(smoke):
    r = _ok(smoke, "coverage")
    assert r["agree"] == {"counts": True, "empty": True, "means": True, "needed": True}
    assert r["half_width"] == 0.2
    assert sum(c["queries"] for c in r["cells"]) == r["queries"] > 0
    # every cell's size from its own values or the prior: at least 2, missing what it lacks
    assert all(c["needed"] >= 2 and c["missing"] == max(0, c["needed"] - c["queries"])
               for c in r["cells"])  # fmt: skip
