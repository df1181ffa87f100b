"""Run every benchmark and collect their results into benchmarks/results.json.

Each benchmark runs in its own process (so one's memory, threads and imports never affect
another), prints its table, and hands its figures back as JSON; this driver gathers them with
the date and machine into one file. `make bench` calls this script.

    python benchmarks/run_all.py [--quick] [--only bm25 ann] [--skip pipeline] [--out PATH]
    python benchmarks/run_all.py --smoke      # every benchmark on the tiny fixture (~2 min)

--quick passes --quick to the pipeline benchmark (generate.max_queries=5) and uses fewer
repeats elsewhere. --smoke runs each benchmark on tests/fixtures/tiny_beir with the smallest
settings (`SMOKE_ARGS`, which the default test run also uses, so no benchmark can rot
unnoticed); its figures mean nothing and it writes to a temporary file unless --out is given.
A benchmark that fails is recorded as failed and the others still run; the exit code is then 1.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import _common as C

HERE = Path(__file__).resolve().parent
BENCHMARKS = [
    "bm25",
    "ann",
    "embed",
    "embedders",
    "pipeline",
    "calibrate",
    "probes",
    "verifier",
    "verifier_sources",
    "correctness",
    "sweep",
    "sweep_ray",
    "rerank",
    "llm_judge",
    "llm_claims",
    "index_scale",
    "parse",
    "chunk",
    "train_embed",
    "embed_ray",
    "remote_cache",
    "generate",
    "filters",
    "traces",
    "suite",
    "warm",
    "external",
    "consistency",
    "guardrails",
    "coverage",
]
QUICK_ARGS = {
    "bm25": ["--repeats", "1"],
    "ann": ["--repeats", "2"],
    "embed": ["--n-docs", "300", "--repeats", "2"],
    "embedders": ["--n-docs", "300"],
    "pipeline": ["--quick", "--noop-repeats", "1"],
    "calibrate": ["--quick"],
    "probes": ["--quick"],
    "verifier": [],
    "verifier_sources": [],
    "correctness": ["--max-answers", "60", "--max-claims", "60"],
    "sweep": ["--skip-sequential"],
    "sweep_ray": [],
    "rerank": ["--train", "--depths", "20"],
    "llm_judge": ["--n", "10"],
    "llm_claims": ["--n", "10"],
    "index_scale": ["--n", "200000", "--queries", "300"],
    "parse": ["--copies", "30"],
    "chunk": [],
    "train_embed": [],
    "embed_ray": ["--n-docs", "1000", "--repeats", "1"],
    "remote_cache": ["--repeats", "1"],
    "generate": ["--n", "10", "--setting", "default", "--setting", "max_tokens=48"],
    "filters": ["--repeats", "1"],
    "traces": ["--interactions", "20000", "--rates", "0.05"],
    "suite": ["--targets", "test"],
    "warm": [],
    "external": [],
    "consistency": ["--samples", "2"],
    "guardrails": ["--per-hour", "1000"],
    "coverage": ["--half-width", "0.2"],
}
SMOKE_DATASET = C.PROJECT_ROOT / "tests" / "fixtures" / "tiny_beir"
# Benchmarks reading a dataset of their own, not a BEIR folder: they keep their default root,
# and under --smoke get their own fixture instead of tiny_beir.
OWN_SMOKE_DATASET = {
    "calibrate": C.PROJECT_ROOT / "tests" / "fixtures" / "tiny_mtrag",
    "llm_judge": C.PROJECT_ROOT / "tests" / "fixtures" / "tiny_mtrag",
    "llm_claims": C.PROJECT_ROOT / "tests" / "fixtures" / "tiny_mtrag",
    # tiny_beir with a train split: the reranker trains on it
    "rerank": C.PROJECT_ROOT / "tests" / "fixtures" / "tiny_beir_train",
    # documents of every format, not a BEIR folder (default: ../shared/datasets/docling_test_docs)
    "parse": C.PROJECT_ROOT / "tests" / "fixtures" / "docs",
    "chunk": C.PROJECT_ROOT / "tests" / "fixtures" / "docs",
    # a few invented rows of three claim_verification sources (default: the shared folder)
    "verifier_sources": C.PROJECT_ROOT / "tests" / "fixtures" / "tiny_claim_verification",
}
# Smallest settings that still run every code path on the 20-document fixture; "{tmp}" is a
# scratch folder (the ANN plot and embedding cache must not touch the real ones).
SMOKE_ARGS = {
    "bm25": ["--repeats", "1"],
    # the fixture's corpus sentences, each edited and checked against all 20 documents
    "external": ["--max-sentences", "12"],
    "ann": [
        "--repeats",
        "1",
        "--ef",
        "16",
        "64",
        "--nprobe",
        "1",
        "2",
        "--nlist",
        "2",
        "--cache-dir",
        "{tmp}/ann-cache",
        "--plot",
        "{tmp}/ann.png",
    ],  # fmt: skip
    "embed": ["--n-docs", "10", "--n-queries", "3", "--repeats", "1"],
    "embedders": ["--n-docs", "10", "--n-queries", "3", "--cache-dir", "{tmp}/embedders-cache"],
    "pipeline": [
        "--noop-repeats",
        "1",
        "--override",
        "dataset=tiny",
        "--override",
        "generate=extractive",
        "--override",
        "report.mlflow.enabled=false",
    ],  # fmt: skip
    # the verifier needs a trained model: its smoke run is benchmark `verifier`
    "calibrate": [
        "--quick",
        "--plot",
        "{tmp}/calibration.png",
        "--judges",
        "overlap",
        "--seeds",
        "2",
    ],
    "probes": ["--mtrag-root", str(C.PROJECT_ROOT / "tests" / "fixtures" / "tiny_mtrag_probes")],
    # trains a few pairs of the tiny fixture's training claims, judges the tiny MTRAG fixture
    "verifier": [
        "--train",
        "--max-pairs",
        "12",
        "--mtrag-root",
        str(C.PROJECT_ROOT / "tests" / "fixtures" / "tiny_mtrag"),
    ],
    # half the fixture's rows as validation rows (the shipped tenth would leave almost none)
    "verifier_sources": ["--validation-share", "0.5"],
    # the shipped verifier on the tiny MTRAG fixture (faithfulness ratings: it has no
    # completeness) and ten of tiny_beir's dev claims negated
    "correctness": [
        "--mtrag-root",
        str(C.PROJECT_ROOT / "tests" / "fixtures" / "tiny_mtrag"),
        "--rating",
        "faithfulness",
        "--max-claims",
        "10",
    ],
    # two points of the fixture in parallel, their rerun, the overhead per point through the
    # worktree executor (one sweep; the --temp executor's sweeps are the parallel sweep's)
    "sweep": [
        "--grid",
        "retrieve.ef_search=16,64",
        "--skip-sequential",
        "--overhead-sweeps",
        "1",
        "--overhead-executors",
        "worktree",
        "--workdir",
        "{tmp}",
    ],  # fmt: skip
    # one point of the fixture on a local Ray cluster and sequentially: the script's whole path
    # (tests/test_sweep_cluster_e2e.py compares two points on Ray with the sequential sweep;
    # measured alone on 2 cores, 84 s here against 133 s for two points)
    "sweep_ray": ["--grid", "retrieve.ef_search=16", "--workdir", "{tmp}"],
    # trains on tiny_beir_train's five training queries, reranks BM25's candidates
    "rerank": ["--train", "--workdir", "{tmp}/rerank", "--depths", "3", "50"],
    # the packaged SmolLM2 in process judging two answers of the MTRAG fixture, then cached
    "llm_judge": ["--n", "2", "--cache-dir", "{tmp}/llm-judge-cache"],
    # the lexical fake reader and its position-biased twin on the fixture's faithful answers
    "llm_claims": [
        "--n",
        "3",
        "--verifier",
        "fake",
        "--verifier",
        "fake_first",
        "--cache-dir",
        "{tmp}/llm-claims-cache",
    ],  # fmt: skip
    # 3,000 synthetic 32-d vectors: every configuration kind built, searched and measured
    "index_scale": [
        "--n",
        "3000",
        "--dim",
        "32",
        "--clusters",
        "10",
        "--queries",
        "30",
        "--config",
        '{"name": "ivf_pq+sq8", "dense": {"method": "ivf_pq", "nlist": 8, "pq_m": 8, '
        '"pq_bits": 6, "refine": "sq8", "train_sample": 2000}, "knob": "nprobe", '
        '"values": [1, 8]}',
        "--config",
        '{"name": "hnsw_sq", "dense": {"method": "hnsw_sq", "m": 8, "ef_construction": 32}, '
        '"knob": "ef_search", "values": [16, 64]}',
    ],  # fmt: skip
    # the six fixture documents, then a folder of 8 distinct copies of them
    "parse": ["--copies", "8", "--timeout-s", "60"],
    # the fixture documents through parse=docling, then three chunkers and their metrics
    "chunk": ["--methods", "document", "recursive", "hybrid"],
    # the packaged model in the trained model's place: every path runs, every delta is 0
    "train_embed": ["--model", "packaged:all-MiniLM-L6-v2"],
    # the 20 fixture chunks in windows of 6 on two actors, against the local path
    "embed_ray": ["--n-docs", "20", "--window", "6", "--repeats", "1"],
    # a one-point sweep pushing to an S3 emulator, then one fresh clone restoring that point
    "remote_cache": ["--grid", "retrieve.ef_search=16", "--repeats", "1", "--workdir", "{tmp}"],
    # two fixture claims answered by the packaged SmolLM2 under three settings (the last
    # through torch: generate=smollm2_torch), twice each
    "generate": [
        "--claims",
        "original/claims_dev.jsonl",
        "--n",
        "2",
        "--repeats",
        "2",
        "--setting",
        "default",
        "--setting",
        'max_tokens=16;stop=["\\n"]',
        "--setting",
        "method=torch_gguf;max_tokens=16",
    ],  # fmt: skip
    # a fresh clone timing one short pytest run, the venv linked
    "filters": ["--queries", "300", "--docs", "3000", "--repeats", "1"],
    "traces": [
        "--interactions",
        "2000",
        "--hours",
        "4",
        "--rates",
        "0.1",
        "--workdir",
        "{tmp}/traces",
        "--runtimes",
        "onnx",
        "torch",
    ],  # fmt: skip
    # on the AVX2 path of whatever CPU runs it: the caps, their check and fp32 `auto` once each
    "suite": [
        "--smoke",
        "--isa",
        "avx2",
        "--workdir",
        "{tmp}/suite",
        "--markdown",
        "{tmp}/suite.md",
    ],
    # the fixture's cold run with the extractive generator, then its 2 samples per answer
    "consistency": ["--smoke", "--samples", "2", "--workdir", "{tmp}/consistency"],
    # the injected day on the fixture's corpus, 200 lines an hour
    "guardrails": ["--smoke", "--workdir", "{tmp}/guardrails"],
    # the fixture's 20 documents and their queries: the hand computation must agree
    "coverage": ["--half-width", "0.2"],
    # parse, chunk and embed once each way: the server, the hand-off, the byte comparison
    "warm": ["--repeats", "1", "--target", "embed", "--workdir", "{tmp}"],
}


# Benchmarks that compose their own params.yaml in a throwaway project (no --params option)
NO_PARAMS = {"pipeline", "remote_cache", "sweep", "sweep_ray", "suite", "warm", "consistency"}


def smoke_params(tmp: Path) -> Path:
    """params.yaml composed for the tiny fixture (`dataset=tiny`, its first stage: the packaged
    embedder; SciFact's default embedder is trained on SciFact's train split), written in tmp."""
    from ragrig.compose.params import compose_yaml

    path = Path(tmp) / "params-tiny.yaml"
    path.write_text(compose_yaml(C.PROJECT_ROOT / "conf", ["dataset=tiny"]), encoding="utf-8")
    return path


def command(
    name: str,
    dataset_root: Path,
    params: Path,
    extra: list[str],
    tmp: Path,
) -> list[str]:
    """The command line of one benchmark."""
    cmd = [sys.executable, str(HERE / f"bench_{name}.py")]
    if name in OWN_SMOKE_DATASET:
        if dataset_root.resolve() == SMOKE_DATASET.resolve():
            cmd += ["--dataset-root", str(OWN_SMOKE_DATASET[name])]
    elif dataset_root.resolve() != C.DEFAULT_DATASET_ROOT:
        cmd += ["--dataset-root", str(dataset_root)]
    if name not in NO_PARAMS and params.resolve() != C.DEFAULT_PARAMS.resolve():
        cmd += ["--params", str(params)]
    return cmd + [a.replace("{tmp}", str(tmp)) for a in extra]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--only", nargs="+", choices=BENCHMARKS, help="run only these")
    p.add_argument("--skip", nargs="+", choices=BENCHMARKS, default=[], help="do not run these")
    p.add_argument("--quick", action="store_true", help="fewer repeats, fewer generated answers")
    p.add_argument("--smoke", action="store_true", help="every benchmark on the tiny fixture")
    p.add_argument("--dataset-root", type=Path, default=C.DEFAULT_DATASET_ROOT)
    p.add_argument("--params", type=Path, default=C.DEFAULT_PARAMS)
    p.add_argument("--out", type=Path, default=None, help="default: benchmarks/results.json")
    p.add_argument(
        "--merge",
        action="store_true",
        help="keep results of benchmarks not run this time from an existing --out file",
    )
    args = p.parse_args(argv)

    C.setup_env()
    if args.smoke and args.quick:
        p.error("--smoke and --quick exclude each other")
    if args.out is None and args.smoke:
        args.out = Path(tempfile.gettempdir()) / "ragrig-bench-smoke.json"
    args.out = args.out or HERE / "results.json"
    dataset_root = SMOKE_DATASET if args.smoke else args.dataset_root
    extra = SMOKE_ARGS if args.smoke else QUICK_ARGS if args.quick else {}
    names = [n for n in (args.only or BENCHMARKS) if n not in args.skip]
    results: dict = {}
    if args.merge and args.out.exists():
        results = json.loads(args.out.read_text(encoding="utf-8")).get("benchmarks", {})
    status = 0
    with tempfile.TemporaryDirectory(prefix="ragrig-bench-") as tmp:
        if args.smoke and args.params.resolve() == C.DEFAULT_PARAMS.resolve():
            args.params = smoke_params(Path(tmp))
        for name in names:
            out = Path(tmp) / f"{name}.json"
            cmd = command(name, dataset_root, args.params, extra.get(name, []), Path(tmp))
            shown = " ".join(["python", str(Path(cmd[1]).relative_to(C.PROJECT_ROOT)), *cmd[2:]])
            print(f"\n=== {name}: {shown}", flush=True)
            t0 = time.perf_counter()
            proc = subprocess.run([*cmd, "--json", str(out)])
            seconds = round(time.perf_counter() - t0, 1)
            if proc.returncode == 0 and out.exists():
                results[name] = {
                    "command": shown,
                    "wall_s": seconds,
                    **json.loads(out.read_text(encoding="utf-8")),
                }
            else:
                status = 1
                results[name] = {
                    "command": shown,
                    "wall_s": seconds,
                    "failed": True,
                    "returncode": proc.returncode,
                }
            print(
                f"=== {name}: {'ok' if proc.returncode == 0 else 'FAILED'} in {seconds} s",
                flush=True,
            )

    summary = {
        "date_utc": C.now_iso(),
        "machine": C.machine_info(),
        "quick": args.quick,
        "smoke": args.smoke,
        "targets_met": {n: r.get("target_met") for n, r in results.items()},
        "benchmarks": results,
    }
    C.write_json(args.out, summary)
    print(f"\nwrote {args.out}")
    for n, met in summary["targets_met"].items():
        print(f"  {n:9s} target met: {met}")
    return status


if __name__ == "__main__":
    sys.exit(main())
