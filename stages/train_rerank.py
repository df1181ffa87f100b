"""DVC stage train_rerank: fine-tune the reranker on the dataset's train split (BM25 negatives)."""

from __future__ import annotations

import _bootstrap  # noqa: F401  (this checkout's src/ first on sys.path)
from ragrig.runtime import stage


def main() -> None:
    args = stage.parser(__doc__).parse_args()
    from ragrig.core.config import load_section

    threads = stage.read_runtime(args.params, "threads")
    stage.apply_threads(threads)
    from ragrig.train_rerank.train import run_stage

    manifest = run_stage(
        load_section("train_rerank", args.params),
        load_section("dataset", args.params),
        load_section("parse", args.params),
        args.out,
        threads,
    )
    if not manifest["trained"]:
        print(f"train_rerank: not trained ({manifest['reason']})")
        return
    print(
        f"train_rerank: {manifest['pairs']} pairs {manifest['labels']} from "
        f"{manifest['train_queries']} train queries ({len(manifest['dropped_eval_overlap'])} "
        f"dropped as evaluated queries), {manifest['train_seconds']} s "
        f"({manifest['pairs_per_s']} pairs/s), weights {manifest['weights_sha256'][:12]}"
    )


if __name__ == "__main__":
    stage.run("train_rerank", main)
