"""Fine-tune the reranker: a 1-logit cross-encoder from the packaged MiniLM weights.

Binary cross-entropy on (query, passage, 0/1) pairs from `ragrig.train_rerank.data`, run by
`ragrig.training.loop` (checkpoints, resume after a kill, expected time, progress).
Deterministic given the config's seed on one machine (same pairs, same batches, seeded head
initialisation and dropout; the manifest records the weights' sha256 to check it)."""

from __future__ import annotations

import importlib.metadata
import time
from collections import Counter
from pathlib import Path
from typing import Any

from ragrig.train_rerank import data as D
from ragrig.training.fit import weights_sha256
from ragrig.training.split import corpus_texts, run_training_stage

MODEL_DIR = "model"
MANIFEST = "manifest.json"
PAIRS_FILE = "pairs.jsonl"
PACKAGES = ("torch", "transformers", "sentence-transformers", "bm25s")


def load_training_pairs(
    cfg: Any, dataset: Any, parse: Any, stats: dict[str, Any] | None = None
) -> tuple[list[D.Pair], D.TrainingQueries]:
    """The capped, shuffled pairs of the training split and the queries they came from."""
    root = Path(dataset.root)
    train = D.training_queries(root, dataset.name, cfg.split, dataset.split)
    documents = corpus_texts(root, parse.title_separator, parse.empty_text)
    doc_ids = sorted(documents)
    t0 = time.perf_counter()
    negatives = D.mine_negatives(
        train.queries,
        train.positives,
        doc_ids,
        [documents[d] for d in doc_ids],
        cfg.mining,
        cfg.negatives_per_query,
        cfg.seed,
    )
    pairs = D.cap_pairs(D.build_pairs(train, documents, negatives), cfg.max_pairs, cfg.seed)
    D.check_disjoint(pairs, train)
    if stats is not None:
        stats["mining_seconds"] = round(time.perf_counter() - t0, 1)
        stats["train_queries"] = len(train.queries)
        stats["dropped_eval_overlap"] = train.dropped_eval_overlap
        stats["eval_split"] = dataset.split
        stats["eval_queries"] = len(train.eval_qids)
    return pairs, train


def train(
    pairs: list[D.Pair],
    cfg: Any,
    out_dir: Path,
    threads: int = 2,
    work: Path | None = None,
    stop_after: int | None = None,
) -> dict[str, Any]:
    """Train on `pairs`, save the model to `out_dir/model`; return the manifest's figures.

    `ragrig.training.loop` runs it (batches of pairs of similar length), its checkpoint beside
    `work` (the stage's output folder; default `out_dir`), resumed after a kill."""
    import torch
    from sentence_transformers.cross_encoder import CrossEncoder
    from transformers import set_seed

    from ragrig.training.fit import fit_cross_encoder, quiet_training_logs
    from ragrig.weights.models import model_fingerprint, resolve_model

    if not pairs:
        raise ValueError("no training pairs: check the training qrels and the corpus")
    labels = Counter(p.label for p in pairs)
    if not labels[0] or not labels[1]:
        raise ValueError(f"training pairs need both labels 0 and 1, got {dict(labels)}")
    torch.set_num_threads(threads)
    set_seed(cfg.seed)
    quiet_training_logs()
    model = CrossEncoder(
        resolve_model(cfg.base_model), num_labels=1, max_length=cfg.max_length, device="cpu"
    )
    targets = torch.tensor([float(p.label) for p in pairs])

    def loss_fn(m: Any, batch: tuple[Any, Any]) -> Any:
        features, y = batch
        logits = m(features)["scores"].view(-1).float()
        return torch.nn.functional.binary_cross_entropy_with_logits(logits, y)

    figures = fit_cross_encoder(
        "train_rerank",
        model,
        [p.query for p in pairs],
        [p.passage for p in pairs],
        targets,
        loss_fn,
        cfg,
        D.as_records(pairs),
        out_dir,
        work,
        stop_after,
    )
    seconds = figures["seconds"]
    n_seen = len(pairs) * cfg.epochs
    return {
        "pairs": len(pairs),
        "labels": {"positive": labels[1], "negative": labels[0]},
        "queries_in_pairs": len({p.qid for p in pairs}),
        "steps": figures["steps"],
        "resumed_at": figures["resumed_at"],
        "train_seconds": round(seconds, 1),
        "pairs_per_s": round(n_seen / seconds, 2) if seconds else None,
        "train_loss": figures["loss_mean"],
        "base_model": model_fingerprint(cfg.base_model),
        "weights_sha256": weights_sha256(Path(out_dir) / MODEL_DIR),
        "versions": {p: importlib.metadata.version(p) for p in PACKAGES},
        "threads": threads,
    }


def run_stage(
    cfg: Any,
    dataset: Any,
    parse: Any,
    out: Path,
    threads: int = 2,
    stop_after: int | None = None,
) -> dict[str, Any]:
    """The stage body (`ragrig.training.split.run_training_stage`): pairs from the dataset's
    train split, a trained model, a manifest; disabled, a manifest saying why. A killed run's
    checkpoint (beside `out`) is resumed by the next call with the same settings and data."""
    return run_training_stage(
        "train_rerank",
        "rerank=trained",
        cfg,
        dataset,
        lambda stats: load_training_pairs(cfg, dataset, parse, stats)[0],
        lambda pairs, folder: train(
            pairs, cfg, folder, threads=threads, work=out, stop_after=stop_after
        ),
        (PAIRS_FILE, D.as_records),
        out,
    )
