"""Fine-tune the bi-encoder: the packaged MiniLM sentence-transformer, contrastive.

MultipleNegativesRankingLoss over (query, positive, hard negatives) examples from
`ragrig.train_embed.data`: each query is scored against its positive, its BM25-mined hard
negatives and every other passage of the batch (in-batch negatives); batches hold no text twice.
Deterministic given the config's seed on one machine (same examples, same order, seeded
shuffling; the manifest records the weights' sha256 to check it)."""

from __future__ import annotations

import importlib.metadata
import time
from collections import Counter
from pathlib import Path
from typing import Any

from ragrig.train_embed import data as D
from ragrig.training.fit import weights_sha256
from ragrig.training.split import check_disjoint, corpus_texts, mine_negatives, run_training_stage

MODEL_DIR = "model"
MANIFEST = "manifest.json"
EXAMPLES_FILE = "examples.jsonl"
PACKAGES = ("torch", "transformers", "sentence-transformers", "datasets", "accelerate", "bm25s")


def load_training_examples(
    cfg: Any, dataset: Any, parse: Any, stats: dict[str, Any] | None = None
) -> tuple[list[D.Example], Any]:
    """The capped, shuffled examples of the training split and the queries they came from."""
    root = Path(dataset.root)
    train = D.training_queries(root, dataset.name, cfg.split, dataset.split)
    documents = corpus_texts(root, parse.title_separator, parse.empty_text)
    doc_ids = sorted(documents)
    t0 = time.perf_counter()
    negatives = (
        mine_negatives(
            train.queries,
            train.positives,
            doc_ids,
            [documents[d] for d in doc_ids],
            cfg.mining,
            cfg.hard_negatives_per_query,
            cfg.seed,
        )
        if cfg.hard_negatives_per_query
        else {}
    )
    examples = D.build_examples(train, documents, negatives, cfg.hard_negatives_per_query, cfg.seed)
    examples = D.cap_examples(examples, cfg.max_pairs, cfg.seed)
    check_disjoint(examples, train)
    if stats is not None:
        stats["mining_seconds"] = round(time.perf_counter() - t0, 1)
        stats["train_queries"] = len(train.queries)
        stats["dropped_eval_overlap"] = train.dropped_eval_overlap
        stats["eval_split"] = dataset.split
        stats["eval_queries"] = len(train.eval_qids)
    return examples, train


def train(examples: list[D.Example], cfg: Any, out_dir: Path, threads: int = 2) -> dict[str, Any]:
    """Train on `examples`, save the model to `out_dir/model`; return the manifest's figures."""
    import torch
    from datasets import Dataset
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.losses import MultipleNegativesRankingLoss
    from transformers import set_seed

    from ragrig.training.fit import fit_sentence_transformer, quiet_training_logs
    from ragrig.weights.models import model_fingerprint, resolve_model

    if len(examples) < 2:
        raise ValueError(
            f"{len(examples)} training example(s): in-batch negatives need at least 2; check "
            "the training qrels and train_embed.max_pairs"
        )
    torch.set_num_threads(threads)
    set_seed(cfg.seed)
    quiet_training_logs()
    model = SentenceTransformer(resolve_model(cfg.base_model), device="cpu")
    model.max_seq_length = cfg.max_seq_length
    ds = Dataset.from_dict(D.as_columns(examples))
    loss = MultipleNegativesRankingLoss(model, scale=cfg.scale)
    cpu0 = time.process_time()
    result, seconds = fit_sentence_transformer(
        model, ds, loss, cfg, out_dir, MODEL_DIR, "train_embed"
    )
    cpu_seconds = time.process_time() - cpu0
    n_seen = len(examples) * cfg.epochs
    texts = n_seen * (2 + cfg.hard_negatives_per_query)
    kinds = Counter(k for e in examples for k in e.negative_kinds)
    return {
        "examples": len(examples),
        "negatives": {"bm25": kinds["bm25_negative"], "random": kinds["random_negative"]},
        "queries_in_examples": len({e.qid for e in examples}),
        "train_seconds": round(seconds, 1),
        "train_cpu_seconds": round(cpu_seconds, 1),
        "pairs_per_s": round(n_seen / seconds, 2) if seconds else None,
        "texts_per_s": round(texts / seconds, 2) if seconds else None,
        "train_loss": round(float(result.training_loss), 4),
        "base_model": model_fingerprint(cfg.base_model),
        "weights_sha256": weights_sha256(Path(out_dir) / MODEL_DIR),
        "versions": {p: importlib.metadata.version(p) for p in PACKAGES},
        "threads": threads,
    }


def run_stage(cfg: Any, dataset: Any, parse: Any, out: Path, threads: int = 2) -> dict[str, Any]:
    """The stage body (`ragrig.training.split.run_training_stage`): examples from the dataset's
    train split, a trained model, a manifest; disabled, a manifest saying why."""
    return run_training_stage(
        "train_embed",
        "embed=trained",
        cfg,
        dataset,
        lambda stats: load_training_examples(cfg, dataset, parse, stats)[0],
        lambda examples, folder: train(examples, cfg, folder, threads=threads),
        (EXAMPLES_FILE, D.as_records),
        out,
    )
