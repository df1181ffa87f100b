"""Fine-tune the verifier: a 3-label cross-encoder from the packaged MiniLM weights.

Cross-entropy over the three labels, run by `ragrig.training.loop` (checkpoints, resume after a
kill, expected time, progress). Deterministic given the config's seed on one machine (same
pairs, same batches, seeded head initialisation and dropout; the manifest records the weights'
sha256 to check it)."""

from __future__ import annotations

import importlib.metadata
from pathlib import Path
from typing import Any

from ragrig.train_verifier import LABELS
from ragrig.train_verifier import data as D
from ragrig.training.fit import weights_sha256

MODEL_DIR = "model"
MANIFEST = "manifest.json"
PAIRS_FILE = "pairs.jsonl"
PACKAGES = ("torch", "transformers", "sentence-transformers")


def held_out_files(claims_path: Path) -> list[Path]:
    """Every other ``claims_*.jsonl`` beside the training file (SciFact: dev and test)."""
    claims_path = Path(claims_path)
    return sorted(p for p in claims_path.parent.glob("claims_*.jsonl") if p != claims_path)


def load_training_pairs(
    claims_path: Path, sentences_path: Path, cfg: Any, stats: dict | None = None
) -> list[D.Pair]:
    """Pairs of the training claims, less any claim whose id or text (case-folded) is also in a
    held-out claim file beside it (SciFact repeats three claim texts across its splits)."""
    claims, dropped = D.drop_held_out(D.read_claims(claims_path), held_out_files(claims_path))
    if stats is not None:
        stats["claims_dropped_held_out"] = dropped
    if cfg.max_claims is not None:
        claims = claims[: cfg.max_claims]
    sentences = D.read_sentences(sentences_path)
    pairs = D.build_pairs(
        claims,
        sentences,
        negatives_per_claim=cfg.negatives_per_claim,
        other_doc_negatives=cfg.other_doc_negatives,
        perturbations=cfg.perturbations,
        seed=cfg.seed,
    )
    return D.cap_pairs(pairs, cfg.max_pairs, cfg.seed, balance=cfg.balance_labels)


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
        raise ValueError("no training pairs: check the training claims and sentence files")
    missing = [lab for lab in LABELS if lab not in {p.label for p in pairs}]
    if missing:
        raise ValueError(f"training pairs lack label(s) {missing}: the verifier needs all three")
    torch.set_num_threads(threads)
    set_seed(cfg.seed)
    quiet_training_logs()
    label_id = {lab: i for i, lab in enumerate(LABELS)}
    model = CrossEncoder(
        resolve_model(cfg.base_model),
        num_labels=len(LABELS),
        max_length=cfg.max_length,
        device="cpu",
        config_kwargs={
            "id2label": dict(enumerate(LABELS)),
            "label2id": label_id,
        },
    )
    targets = torch.tensor([label_id[p.label] for p in pairs])

    def loss_fn(m: Any, batch: tuple[Any, Any]) -> Any:
        features, y = batch
        return torch.nn.functional.cross_entropy(m(features)["scores"].float(), y)

    figures = fit_cross_encoder(
        "train_verifier",
        model,
        [p.claim for p in pairs],
        [p.evidence for p in pairs],
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
        "labels": D.label_counts(pairs),
        "kinds": D.kind_counts(pairs),
        "claims": len({p.claim_id for p in pairs}),
        "steps": figures["steps"],
        "resumed_at": figures["resumed_at"],
        "train_seconds": round(seconds, 1),
        "pairs_per_s": round(n_seen / seconds, 1) if seconds else None,
        "train_loss": figures["loss_mean"],
        "labels_order": list(LABELS),
        "base_model": model_fingerprint(cfg.base_model),
        "weights_sha256": weights_sha256(Path(out_dir) / MODEL_DIR),
        "versions": {p: importlib.metadata.version(p) for p in PACKAGES},
        "threads": threads,
    }


def run_stage(
    cfg: Any, dataset: Any, out: Path, threads: int = 2, stop_after: int | None = None
) -> dict[str, Any]:
    """The stage body: pairs from the dataset's training files, a trained model, a manifest.
    A killed run's checkpoint (beside `out`) is resumed by the next call with the same settings
    and data, and removed once the output is in place.

    A dataset that names no training data (`dataset.claims.train` / `.sentences` unset) gives an
    output holding only a manifest with ``trained: false`` and the reason; the verifier judge
    refuses such a folder with that reason (the overlap judge never reads it)."""
    import json

    from ragrig.core.io import atomic_dir, write_json
    from ragrig.training.fit import discard_checkpoints

    claims = dataset.claims
    with atomic_dir(Path(out)) as tmp:
        reason = None
        if not cfg.enabled:
            reason = "train_verifier.enabled is false (judge.method=verifier sets it true)"
        elif claims is None or claims.train is None or claims.sentences is None:
            reason = (
                f"dataset {dataset.name!r} names no verifier training data "
                "(dataset.claims.train and dataset.claims.sentences)"
            )
        if reason is not None:
            manifest: dict[str, Any] = {
                "trained": False,
                "reason": reason,
                "config": cfg.model_dump(),
            }
            write_json(tmp / MANIFEST, manifest)
            return manifest
        root = Path(dataset.root)
        stats: dict[str, Any] = {}
        pairs = load_training_pairs(root / claims.train, root / claims.sentences, cfg, stats)
        figures = train(pairs, cfg, tmp, threads=threads, work=Path(out), stop_after=stop_after)
        manifest = {"trained": True, **stats, **figures}
        manifest["config"] = cfg.model_dump()
        manifest["claims_file"] = claims.train
        manifest["sentences_file"] = claims.sentences
        with open(tmp / PAIRS_FILE, "w", encoding="utf-8") as fh:
            for rec in D.as_records(pairs):
                fh.write(json.dumps(rec, sort_keys=True, ensure_ascii=False) + "\n")
        write_json(tmp / MANIFEST, manifest)
    discard_checkpoints(Path(out))
    return manifest
