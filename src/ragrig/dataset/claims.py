"""SciFact's original claim files: per-claim label and rationale sentences, as query attributes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ragrig.core.errors import DataValidationError
from ragrig.core.io import DEFAULT_LIMITS, ReadLimits
from ragrig.dataset.beir import Replaced, iter_jsonl

NOT_ENOUGH_INFO = "NOT_ENOUGH_INFO"
# A query of the split that no claim file names: its label is not known (not "no evidence").
UNKNOWN = "unknown"


def claim_label(evidence: dict[str, list[dict[str, Any]]]) -> str:
    """One label per claim: SUPPORT, CONTRADICT, NOT_ENOUGH_INFO (no rationale) or MIXED."""
    labels = {r["label"] for rationales in evidence.values() for r in rationales}
    if not labels:
        return NOT_ENOUGH_INFO
    if len(labels) == 1:
        return labels.pop()
    return "MIXED"


def load_claims(
    paths: list[Path], replaced: Replaced | None = None, limits: ReadLimits = DEFAULT_LIMITS
) -> dict[str, dict[str, Any]]:
    """Map claim id -> {label, evidence}; a claim id appearing in two files is an error. Lone
    surrogates in a record are replaced by U+FFFD and added to `replaced`; `limits` bound a
    line and a `.gz` file's inflated size (see `iter_jsonl`)."""
    claims: dict[str, dict[str, Any]] = {}
    for path in paths:
        if not path.exists():
            raise DataValidationError(f"claims file not found: {path}")
        for lineno, rec in iter_jsonl(path, replaced, limits=limits):
            if "id" not in rec or "claim" not in rec:
                raise DataValidationError(f"{path}:{lineno}: claim record needs 'id' and 'claim'")
            evidence = rec.get("evidence") or {}
            if not isinstance(evidence, dict) or not all(
                isinstance(rs, list) and all(isinstance(r, dict) and "label" in r for r in rs)
                for rs in evidence.values()
            ):
                raise DataValidationError(
                    f"{path}:{lineno}: 'evidence' must map document ids to lists of "
                    "rationales, each with a 'label'"
                )
            cid = str(rec["id"])
            if cid in claims:
                raise DataValidationError(f"{path}:{lineno}: duplicate claim id {cid!r}")
            claims[cid] = {
                "label": claim_label(evidence),
                "evidence": evidence,
                "claim": rec["claim"],
            }
    return claims
