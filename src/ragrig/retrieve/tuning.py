"""A fusion setting tuned on one corpus, applied only to that corpus.

A hybrid's RRF k or convex weight chosen on one corpus's training queries does not transfer: on
corpora it was not tuned on the fused ranking can score below its own lanes. So `rrf_k` /
`alpha` left unset (null) read the config's `tuned` list, each entry recorded with the content
fingerprint of the corpus it was tuned on, and fall back to the setting that needs no tuning
(RRF k=60, the usual baseline; an even convex weight 0.5) on any other corpus. A value set in
the config is used as given. The stage records which of the three it was and why.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

# what a hybrid reads when nothing was tuned on this corpus
UNTUNED = {"hybrid_rrf": ("rrf_k", 60), "hybrid_convex": ("alpha", 0.5)}


def corpus_fingerprint(rows: Iterable[tuple[str, str, str]]) -> str:
    """sha256 of a corpus's (doc_id, title, text) rows in doc_id order, each field
    length-prefixed so that no two corpora share a digest by moving text between fields."""
    h = hashlib.sha256()
    for doc_id, title, text in sorted(rows, key=lambda r: r[0]):
        for field in (doc_id, title, text):
            data = str(field).encode("utf-8", "surrogatepass")
            h.update(len(data).to_bytes(8, "little"))
            h.update(data)
    return h.hexdigest()


def documents_fingerprint(documents: Any) -> str:
    """corpus_fingerprint of a documents table (doc_id, title, text: the parse stage's)."""
    cols = [documents[c].astype(str).tolist() for c in ("doc_id", "title", "text")]
    return corpus_fingerprint(zip(*cols, strict=True))


@dataclass(frozen=True)
class FusionChoice:
    param: str  # rrf_k or alpha
    value: float
    source: str  # configured | tuned | untuned
    reason: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "param": self.param,
            "value": self.value,
            "source": self.source,
            "reason": self.reason,
        }

    def line(self) -> str:
        value = int(self.value) if self.param == "rrf_k" else self.value
        return f"fusion {self.param}={value:g} ({self.source}: {self.reason})"


def choose_fusion(cfg: Any, fingerprint: str) -> tuple[Any, FusionChoice | None]:
    """(the config with its fusion setting filled in, what was chosen and why); a method
    without fusion comes back unchanged with None."""
    if cfg.method not in UNTUNED:
        return cfg, None
    param, default = UNTUNED[cfg.method]
    given = getattr(cfg, param)
    if given is not None:
        choice = FusionChoice(param, given, "configured", f"retrieve.{param} set")
        return cfg, choice
    match = [t for t in cfg.tuned if t.corpus_sha256 == fingerprint]
    if match:
        choice = FusionChoice(param, match[0].value, "tuned", match[0].source)
    else:
        known = ", ".join(t.corpus_sha256[:12] for t in cfg.tuned) or "none"
        choice = FusionChoice(
            param,
            default,
            "untuned",
            f"no value tuned on this corpus (sha256 {fingerprint[:12]}; tuned: {known})",
        )
    value = int(choice.value) if param == "rrf_k" else float(choice.value)
    return cfg.model_copy(update={param: value}), choice
