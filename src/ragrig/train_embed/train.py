"""Fine-tune the bi-encoder: the packaged MiniLM sentence-transformer, contrastive.

MultipleNegativesRankingLoss over (query, positive, hard negatives) examples from
`ragrig.train_embed.data`: each query is scored against its positive, its BM25-mined hard
negatives and every other passage of the batch (in-batch negatives), less the passages judged
relevant to it and repeated ones (`in_batch_mask`). Run by `ragrig.training.loop` (checkpoints,
resume after a kill, expected time, progress). Deterministic given the config's seed on one
machine (same examples, same batches, seeded dropout; the manifest records the weights' sha256
to check it)."""

from __future__ import annotations

import importlib.metadata
import time
from collections import Counter
from dataclasses import asdict
from pathlib import Path
from typing import Any

from ragrig.train_embed import data as D
from ragrig.training.fit import weights_sha256
from ragrig.training.split import check_disjoint, corpus_texts, mine_negatives, run_training_stage

MODEL_DIR = "model"
MANIFEST = "manifest.json"
EXAMPLES_FILE = "examples.jsonl"
PACKAGES = ("torch", "transformers", "sentence-transformers", "bm25s")


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


def in_batch_mask(qids: list[str], candidates: list[str], relevant: dict[str, set[str]]) -> Any:
    """(batch, candidates) booleans, True where a candidate is left out of an anchor's
    in-batch negatives: a document judged relevant to the anchor's query other than its own
    positive (another example of the same query, or the same passage as its positive), and any
    later copy of a document already in the batch. Candidate i is example i's positive."""
    import torch

    seen: set[str] = set()
    repeat = []
    for doc in candidates:
        repeat.append(doc in seen)
        seen.add(doc)
    mask = torch.zeros((len(qids), len(candidates)), dtype=torch.bool)
    for i, qid in enumerate(qids):
        for c, doc in enumerate(candidates):
            if c != i and (repeat[c] or doc in relevant[qid]):
                mask[i, c] = True
    return mask


def ranking_loss(queries: Any, documents: Any, mask: Any, scale: float) -> Any:
    """MultipleNegativesRankingLoss: cross-entropy of each query's scaled cosine similarities to
    every document of the batch (positives first, then the hard negatives), its positive the
    target; masked documents are no negatives."""
    import torch

    q = torch.nn.functional.normalize(queries.float(), dim=-1)
    d = torch.nn.functional.normalize(documents.float(), dim=-1)
    scores = (q @ d.T * scale).masked_fill(mask, float("-inf"))
    return torch.nn.functional.cross_entropy(scores, torch.arange(len(q)))


def train(
    examples: list[D.Example],
    cfg: Any,
    out_dir: Path,
    threads: int = 2,
    work: Path | None = None,
    stop_after: int | None = None,
) -> dict[str, Any]:
    """Train on `examples`, save the model to `out_dir/model`; return the manifest's figures.

    `ragrig.training.loop` runs it, its checkpoint beside `work` (the stage's output folder;
    default `out_dir`), resumed after a kill. Batches are random (no length buckets: in-batch
    negatives are a sample of the batch, not passages of one length)."""
    import torch
    from sentence_transformers import SentenceTransformer
    from transformers import set_seed

    from ragrig.training.fit import fingerprint, fit, quiet_training_logs, settings
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
    relevant: dict[str, set[str]] = {}
    for e in examples:
        relevant.setdefault(e.qid, set()).add(e.doc_id)
    per_query = cfg.hard_negatives_per_query

    def make_batch(idx: list[int]) -> tuple[Any, Any, Any]:
        batch = [examples[i] for i in idx]
        docs = [e.positive for e in batch]
        docs += [e.negatives[j] for j in range(per_query) for e in batch]
        ids = [e.doc_id for e in batch]
        ids += [e.negative_ids[j] for j in range(per_query) for e in batch]
        mask = in_batch_mask([e.qid for e in batch], ids, relevant)
        return model.preprocess([e.query for e in batch]), model.preprocess(docs), mask

    def loss_fn(m: Any, batch: tuple[Any, Any, Any]) -> Any:
        queries, docs, mask = batch
        q = m(queries)["sentence_embedding"]
        d = m(docs)["sentence_embedding"]
        return ranking_loss(q, d, mask, cfg.scale)

    s = settings(cfg, len(examples), bucket_batches=1, stop_after=stop_after)
    fp = fingerprint("train_embed", cfg, [asdict(e) for e in examples], s)
    lengths = [len(e.query) + len(e.positive) for e in examples]
    cpu0 = time.process_time()
    figures = fit(
        model, lengths, make_batch, loss_fn, s, work or out_dir, fp, "train_embed training"
    )
    cpu_seconds = time.process_time() - cpu0
    model.save_pretrained(str(Path(out_dir) / MODEL_DIR), create_model_card=False)
    seconds = figures["seconds"]
    n_seen = len(examples) * cfg.epochs
    texts = n_seen * (2 + cfg.hard_negatives_per_query)
    kinds = Counter(k for e in examples for k in e.negative_kinds)
    return {
        "examples": len(examples),
        "negatives": {"bm25": kinds["bm25_negative"], "random": kinds["random_negative"]},
        "queries_in_examples": len({e.qid for e in examples}),
        "steps": figures["steps"],
        "resumed_at": figures["resumed_at"],
        "train_seconds": round(seconds, 1),
        "train_cpu_seconds": round(cpu_seconds, 1),
        "pairs_per_s": round(n_seen / seconds, 2) if seconds else None,
        "texts_per_s": round(texts / seconds, 2) if seconds else None,
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
    """The stage body (`ragrig.training.split.run_training_stage`): examples from the dataset's
    train split, a trained model, a manifest; disabled, a manifest saying why. A killed run's
    checkpoint (beside `out`) is resumed by the next call with the same settings and data."""
    return run_training_stage(
        "train_embed",
        "embed=trained",
        cfg,
        dataset,
        lambda stats: load_training_examples(cfg, dataset, parse, stats)[0],
        lambda examples, folder: train(
            examples, cfg, folder, threads=threads, work=out, stop_after=stop_after
        ),
        (EXAMPLES_FILE, D.as_records),
        out,
    )
