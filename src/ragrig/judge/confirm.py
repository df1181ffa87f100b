"""Lexical findings confirmed by the verifier before they decide an answer.

The overlap judge's negation check ("the claim negates a word the context affirms") and entity
check ("a name of the claim is absent from the context") see words, not meaning: alone, as vetoes,
they cost more balanced accuracy on MTRAG's rated answers than they gain (docs/benchmarks.md
§19), so by default they are listed and do not decide. The shipped verifier reads meaning but
rates the paraphrases of long answers low (it does not beat the lexical judge as the answer-level
score, docs/judge.md). Together: a claim with a lexical finding of a kind in `kinds` is read by
the verifier against its best evidence windows, and when its P(support) is below `below`, the
finding is confirmed: a hard finding of kind `contradicted` (which `veto` names, so it decides
the answer), with the verifier's reading and the window it read as its detail.

Only the claims with such a finding reach the model, so a judge stage reads a handful of pairs;
the model is loaded on the first one and shared by every judge of the process."""

from __future__ import annotations

from typing import Any

CONFIRMED = "contradicted"
_VERIFIERS: dict[tuple, Any] = {}


def shared_verifier(
    model: str, max_length: int, batch_size: int, threads: int, quantize: str
) -> Any:
    """One loaded verifier per settings and process."""
    key = (str(model), max_length, batch_size, threads, quantize)
    if key not in _VERIFIERS:
        from ragrig.judge.verifier_model import Verifier

        _VERIFIERS[key] = Verifier(model, max_length, batch_size, threads, quantize)
    return _VERIFIERS[key]


class VerifierConfirm:
    def __init__(
        self,
        model: str = "shipped",
        kinds: tuple[str, ...] = ("negation", "entity"),
        below: float = 0.05,
        window: int = 3,
        windows_per_claim: int = 3,
        max_length: int = 192,
        batch_size: int = 32,
        threads: int = 2,
        quantize: str = "none",
        verifier: Any = None,
    ):
        self.model = model
        self.kinds = tuple(kinds)
        self.below = below
        self.window = window
        self.windows_per_claim = windows_per_claim
        self.settings = (max_length, batch_size, threads, quantize)
        self._verifier = verifier

    @classmethod
    def from_config(cls, cfg: Any) -> VerifierConfirm:
        from ragrig.weights.precision import resolve_precision

        return cls(
            cfg.model,
            tuple(cfg.kinds),
            cfg.below,
            cfg.window,
            cfg.windows_per_claim,
            cfg.max_length,
            cfg.batch_size,
            cfg.threads,
            resolve_precision(cfg.quantize, fp32="none"),
        )

    def verifier(self) -> Any:
        """The model (loaded on first use, shared by the process)."""
        if self._verifier is None:
            self._verifier = shared_verifier(self.model, *self.settings)
        return self._verifier

    def readings(
        self, claims: list[str], words: dict[str, set[str]], contexts: list[str]
    ) -> list[tuple[float, str]]:
        """Per claim: its max P(support) over its pre-selected windows (0 when no window shares
        a word with it) and the window that gave it."""
        from ragrig.judge.windows import best_per_claim, claim_pairs

        pairs, owner = claim_pairs(claims, words, contexts, self.window, self.windows_per_claim)
        read = dict(zip(pairs, self.verifier().readings(pairs), strict=True)) if pairs else {}
        return [(s, w) for s, _, w, _ in best_per_claim(len(claims), pairs, owner, read)]

    def findings(
        self, cs: Any, contexts: list[str], hard: tuple[tuple[str, str, str], ...]
    ) -> tuple[tuple[str, str, str], ...]:
        """The `contradicted` findings of the claims whose lexical findings the verifier
        confirms (P(support) < below), in claim order."""
        todo = list(dict.fromkeys(c for c, kind, _ in hard if kind in self.kinds))
        if not todo:
            return ()
        readings = self.readings(todo, cs.words, contexts)
        out = []
        for claim, (ps, window) in zip(todo, readings, strict=True):
            if ps >= self.below:
                continue
            kinds = "+".join(sorted({k for c, k, _ in hard if c == claim and k in self.kinds}))
            where = (
                f" against: {window[:200]}" if window else " (no context window shares its words)"
            )
            out.append(
                (
                    claim,
                    CONFIRMED,
                    f"{kinds} finding confirmed by the verifier: P(support) {ps:.3f}{where}",
                )
            )
        return tuple(out)
