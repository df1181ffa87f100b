"""Sub-commands of `ragrig` whose code loads only when they run: compare, tune-first-stage,
ingest-fidelity, remote, warm, prepare, estimate, log, golden, neighbours, coverage, split, synth."""

from __future__ import annotations

import argparse
import importlib
from collections.abc import Callable
from typing import Any


def _lazy(module: str, name: str) -> Callable[[argparse.Namespace], int]:
    def run(args: argparse.Namespace) -> int:
        return getattr(importlib.import_module(module), name)(args)

    return run


def _doc(module: str) -> str:
    """The docstring of `module`, read from its source without importing it (its imports are
    what the command line defers) and without `ast`: CPython 3.11's AST constructor keeps one
    recursion counter for all threads, and a parse racing another thread's raises SystemError
    (python/cpython#106905)."""
    import importlib.util
    import inspect
    import tokenize

    spec = importlib.util.find_spec(module)
    if spec is None or spec.origin is None:
        return ""
    with open(spec.origin, "rb") as f:
        for tok in tokenize.tokenize(f.readline):
            if tok.type in (tokenize.ENCODING, tokenize.NL, tokenize.NEWLINE, tokenize.COMMENT):
                continue
            if tok.type != tokenize.STRING:
                return ""
            if "f" in tok.string.split(tok.string[-1], 1)[0].lower():
                return ""  # an f-string is no docstring
            # one string literal, evaluated by the compiler (no Python AST objects are built)
            return inspect.cleandoc(eval(tok.string, {"__builtins__": {}}))  # noqa: S307
    return ""


def add_parsers(sub: Any) -> None:
    add_train_verifier(sub)
    add_compare(sub)
    add_tune_first_stage(sub)
    add_ingest_fidelity(sub)
    add_postgres(sub)
    add_remote(sub)
    add_warm(sub)
    add_prepare(sub)
    add_estimate(sub)
    from ragrig.cli.coverage import add_parser as add_coverage
    from ragrig.cli.log import add_parser as add_log
    from ragrig.cli.review import add_parser as add_golden
    from ragrig.cli.split import add_parser as add_split
    from ragrig.tools.neighbours import add_parser as add_neighbours
    from ragrig.tools.testset import add_parser as add_synth

    add_log(sub)
    add_golden(sub)
    add_neighbours(sub)
    add_coverage(sub)
    add_split(sub)
    add_synth(sub)


def add_train_verifier(sub: Any) -> None:
    p = sub.add_parser(
        "train-verifier",
        help="train the claim verifier on the public claim-verification sets (resumable)",
        description=_doc("ragrig.train_verifier.public"),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    from ragrig.train_verifier.public import add_arguments

    add_arguments(p)
    p.set_defaults(func=_lazy("ragrig.train_verifier.public", "run_command"))


def add_estimate(sub: Any) -> None:
    p = sub.add_parser(
        "estimate",
        help="what the run's model calls will cost, before any is made (exit 1 over budget)",
        description=_doc("ragrig.report.estimate"),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--params", default="params.yaml")
    p.add_argument("--json", default=None, help="also write the estimate here")
    p.set_defaults(func=_lazy("ragrig.report.estimate", "cmd_estimate"))


def add_prepare(sub: Any) -> None:
    p = sub.add_parser(
        "prepare",
        help="convert the packaged GGUF generator's weights and export the verifier and MiniLM "
        "to ONNX, once per machine (make setup runs it)",
    )
    p.add_argument(
        "models",
        nargs="*",
        default=["packaged:SmolLM2-135M-Instruct"],
        help="model references (default: the default generator's, packaged:SmolLM2-135M-Instruct)",
    )
    p.add_argument("--no-onnx", action="store_true", help="skip the ONNX exports")
    p.set_defaults(func=_lazy("ragrig.cli.prepare", "cmd_prepare"))


def add_warm(sub: Any) -> None:
    p = sub.add_parser(
        "warm",
        help="serve warm stage processes at a socket (export RAGRIG_WARM_SOCKET to use it)",
        description=_doc("ragrig.runtime.warm"),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("socket", help="the Unix socket's path; stops on SIGTERM or Ctrl-C")
    p.add_argument("--until", type=int, metavar="PID", help="stop when this process ends")
    p.add_argument(
        "--detach", action="store_true", help="serve in the background and return at once"
    )
    p.add_argument("--log", help="with --detach: append the server's messages to this file")
    p.add_argument(
        "--preload", help="comma-separated modules to import first (default: the stage libraries)"
    )
    p.set_defaults(func=_lazy("ragrig.runtime.warm", "cmd_warm"))


def add_postgres(sub: Any) -> None:
    p = sub.add_parser(
        "postgres",
        help="start/stop a local PostgreSQL (.ragrig/postgres) for MLflow's tracking store",
    )
    p.add_argument("action", choices=["start", "stop"])
    p.add_argument("--port", type=int, default=5433)
    p.add_argument("--user", default="ragrig")
    p.add_argument("--db", default="ragrig")
    p.set_defaults(func=_lazy("ragrig.tracking.postgres", "cmd_postgres"))


def add_remote(sub: Any) -> None:
    p = sub.add_parser(
        "remote",
        help="the shared DVC run-cache on S3: set it up, check it, push an experiment",
        description=_doc("ragrig.storage.remote"),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("action", choices=["setup", "check", "push-exp"])
    p.add_argument(
        "items",
        nargs="*",
        help="config overrides (storage=s3 storage.remote.url=...), or "
        "the experiment name for push-exp",
    )
    p.set_defaults(func=cmd_remote)


def cmd_remote(args: argparse.Namespace) -> int:
    """`ragrig remote setup|check [overrides]`, `ragrig remote push-exp <experiment>`: the
    shared run-cache (ragrig.storage.remote) with `storage.remote` composed from conf/ as a sweep
    point's is (so this command sits above both)."""
    from pathlib import Path

    from ragrig.storage import remote as shared
    from ragrig.sweep.grid import compose_point

    project = Path.cwd()
    if args.action == "push-exp":
        if len(args.items) != 1:
            raise shared.RemoteError("usage: ragrig remote push-exp <experiment name>")
        counts = shared.push_experiment(project, args.items[0])
        print(
            f"pushed experiment {args.items[0]}: {counts['stages']} run-cache entries, "
            f"{counts['objects']} new objects"
        )
        return 0
    remote = shared.storage_config(compose_point(list(args.items))).remote
    if not remote.url:
        raise shared.RemoteError(
            "no shared run-cache configured (storage=local): give storage=s3 "
            "storage.remote.url=s3://bucket/prefix [storage.remote.endpoint_url=...]"
        )
    shared.preflight(remote)
    if args.action == "check":
        print(f"S3 remote {remote.where}: bucket reachable with the given credentials")
        return 0
    shared.setup(project, remote)
    print(
        f"DVC remote {shared.REMOTE_NAME!r} (default, .dvc/config.local) -> {remote.where}; "
        "credentials from the environment"
    )
    return 0


def add_ingest_fidelity(sub: Any) -> None:
    p = sub.add_parser(
        "ingest-fidelity",
        help="CER/WER per document type of docling's conversions against reference Markdown",
        description=_doc("ragrig.metrics.fidelity"),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "root",
        nargs="?",
        default="../shared/datasets/docling_test_docs",
        help="folder of <type>/<file> sources and groundtruth/<file>.md references",
    )
    p.add_argument("--out", default=None, help="write the result as JSON")
    p.set_defaults(func=_lazy("ragrig.metrics.fidelity", "cmd_ingest_fidelity"))


def add_compare(sub: Any) -> None:
    pc = sub.add_parser(
        "compare",
        help="paired per-query deltas (B - A) of nDCG@10, MRR, P@1 with 95%% intervals",
        description=_doc("ragrig.tools.compare"),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    pc.add_argument("run_a", help="run A: .parquet run, TREC run file, stage or report folder")
    pc.add_argument("run_b", help="run B (same forms)")
    pc.add_argument("--qrels", default=None, help="qrels .parquet or TREC qrels file")
    pc.add_argument("--slices", default=None, help="a report's per_query.parquet (slice columns)")
    pc.add_argument("--seed", type=int, default=None, help="default: params.yaml runtime.seed")
    pc.add_argument("--params", default="params.yaml")
    pc.add_argument("--resamples", type=int, default=10_000)
    pc.add_argument("--name-a", default=None)
    pc.add_argument("--name-b", default=None)
    pc.add_argument("--overall-only", action="store_true", help="no per-slice lines")
    pc.add_argument("--out", default=None, help="folder for deltas.csv and deltas.json")
    pc.set_defaults(func=_lazy("ragrig.tools.compare", "cmd_compare"))


def add_tune_first_stage(sub: Any) -> None:
    p = sub.add_parser(
        "tune-first-stage",
        help="choose BM25 k1/b, RRF k and convex alpha on the train split; write them to conf/",
        description=_doc("ragrig.tools.tune_first_stage"),
    )
    p.add_argument("--params", default="params.yaml", help="sections used: dataset .. retrieve")
    p.add_argument("--dataset-root", default=None, help="a BEIR folder (default: dataset.root)")
    p.add_argument("--conf", default="conf")
    p.add_argument("--no-write", action="store_true", help="print the choice, leave conf/ as is")
    p.add_argument(
        "--evaluate-test",
        action="store_true",
        help="after choosing, print the test split's figures (never used to choose)",
    )
    p.add_argument("--json", default=None, help="write every grid point's figures here")
    p.add_argument(
        "--chunk-vectors",
        default=None,
        help="chunk vectors the embed stage wrote (data/embed/chunks.npy): not re-embedded",
    )
    p.add_argument("--quiet", action="store_true", help="no progress bars")
    p.set_defaults(func=_lazy("ragrig.tools.tune_first_stage", "cmd_tune"))
