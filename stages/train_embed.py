"""DVC stage train_embed: adapt the bi-encoder on the dataset's train split (in-batch and BM25
hard negatives)."""

from __future__ import annotations

import _bootstrap  # noqa: F401  (this checkout's src/ first on sys.path)
from ragrig.runtime import stage


def main() -> None:
    args = stage.parser(__doc__).parse_args()
    from ragrig.core.config import load_section

    threads = stage.read_runtime(args.params, "threads")
    stage.apply_threads(threads)
    from ragrig.train_embed.train import run_stage

    manifest = run_stage(
        load_section("train_embed", args.params),
        load_section("dataset", args.params),
        load_section("parse", args.params),
        args.out,
        threads,
    )
    if not manifest["trained"]:
        print(f"train_embed: not trained ({manifest['reason']})")
        return
    print(
        f"train_embed: {manifest['examples']} examples from {manifest['train_queries']} train "
        f"queries ({len(manifest['dropped_eval_overlap'])} dropped as evaluated queries), "
        f"{manifest['train_seconds']} s ({manifest['pairs_per_s']} pairs/s), "
        f"weights {manifest['weights_sha256'][:12]}"
    )


if __name__ == "__main__":
    stage.run("train_embed", main)
