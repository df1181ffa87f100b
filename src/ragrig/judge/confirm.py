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

A cross-encoder that rates the paraphrase of a long answer low cannot tell a wrong claim from a
loosely worded one by one absolute reading: it reads a claim better against its *minimal pair*.
Two contrasts do that, each read against the same windows as the claim:

* **negation** (`negation_margin`): a claim with a negation cue ("is not", "does not bind",
  "cannot") and a lexical negation finding (every such claim with `negation_needs_finding:
  false`) is read beside its affirmative (ragrig.judge.perturb.affirm); when the affirmative's
  P(support) exceeds the claim's by the margin, and the affirmative is not itself contradicted
  (P(contradict) < 0.5), the passages state the opposite of the claim;
* **entity** (`entity_margin`, `entity_below`): a claim without a negation cue, with a name
  absent from its passages (an entity finding) and a P(support) below `entity_below`, is read
  with that name replaced by each name of its windows (up to `max_substitutes`); when one
  replacement raises P(support) by the margin, the passages state it of another name ("not just
  in the USA" is not tried: its substitutes read as supported whatever the passages say).

The claims are read first; the minimal pairs only of those a contrast could still decide.

Either makes a `contradicted` finding whose detail names the contrast and both readings.

Only claims with a finding (or a negation cue, with `negation_needs_finding: false`) reach the
model, so a judge stage reads a handful of pairs; the model is loaded on the first one and shared
by every judge of the process."""

from __future__ import annotations

from typing import Any

CONFIRMED = "contradicted"
# a negation contrast counts only when the affirmative is not itself read as contradicted
AFFIRMED_AT = 0.5
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


class LazyVerifier:
    """The shared verifier of a section's settings (model, max_length, batch_size, threads,
    quantize), loaded on the first reading: nothing loads when no pair is read."""

    def __init__(self, cfg: Any):
        self.cfg = cfg

    def readings(self, pairs: list[tuple[str, str]]) -> list[tuple[float, float]]:
        from ragrig.weights.precision import resolve_precision

        c = self.cfg
        quantize = resolve_precision(c.quantize, fp32="none")
        model = shared_verifier(c.model, c.max_length, c.batch_size, c.threads, quantize)
        return model.readings(pairs)


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
        negation_margin: float | None = None,
        entity_margin: float | None = None,
        entity_below: float = 0.3,
        max_substitutes: int = 12,
        negation_needs_finding: bool = True,
    ):
        self.model = model
        self.kinds = tuple(kinds)
        self.below = below
        self.window = window
        self.windows_per_claim = windows_per_claim
        self.settings = (max_length, batch_size, threads, quantize)
        self._verifier = verifier
        self.negation_margin = negation_margin
        self.entity_margin = entity_margin
        self.entity_below = entity_below
        self.max_substitutes = max_substitutes
        self.negation_needs_finding = negation_needs_finding

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
            negation_margin=cfg.negation_margin,
            entity_margin=cfg.entity_margin,
            entity_below=cfg.entity_below,
            max_substitutes=cfg.max_substitutes,
            negation_needs_finding=cfg.negation_needs_finding,
        )

    def verifier(self) -> Any:
        """The model (loaded on first use, shared by the process)."""
        if self._verifier is None:
            self._verifier = shared_verifier(self.model, *self.settings)
        return self._verifier

    def _variants(
        self,
        cs: Any,
        hard: tuple[tuple[str, str, str], ...],
        windows: dict[str, list[str]],
        negated: frozenset[str],
    ) -> dict[str, list[tuple[str, str]]]:
        """Per claim, the minimal pairs it is read beside: ("negation", its affirmative) and
        ("entity:<name>", the claim with <name> replaced by a name of its windows)."""
        from ragrig.judge import entities as ent
        from ragrig.judge.perturb import affirm

        out: dict[str, list[tuple[str, str]]] = {}
        for c in cs.claims:
            if not windows.get(c):
                continue
            v: list[tuple[str, str]] = []
            kinds = {k for cc, k, _ in hard if cc == c}
            if (
                self.negation_margin is not None
                and c in negated
                and ("negation" in kinds or not self.negation_needs_finding)
            ):
                yes = affirm(c)
                if yes is not None and yes != c:
                    v.append(("negation", yes))
            if self.entity_margin is not None and c not in negated:
                for name in dict.fromkeys(d for cc, k, d in hard if cc == c and k == "entity"):
                    if name not in c:
                        continue
                    subs = [n for w in windows[c] for n in ent.names(w) if n != name]
                    for n in list(dict.fromkeys(subs))[: self.max_substitutes]:
                        v.append((f"entity:{name}", c.replace(name, n, 1)))
            if v:
                out[c] = v
        return out

    def findings(
        self,
        cs: Any,
        contexts: list[str],
        hard: tuple[tuple[str, str, str], ...],
        negated: frozenset[str] = frozenset(),
    ) -> tuple[tuple[str, str, str], ...]:
        """The `contradicted` findings, in claim order: the claims whose lexical findings the
        verifier confirms (P(support) < below), and those a contrast contradicts. `negated`:
        the claims with a negation cue (ragrig.judge.overlap.claim_negations)."""
        from ragrig.judge.windows import evidence_windows, preselect

        flagged = {c for c, kind, _ in hard if kind in self.kinds}
        contrasts = self.negation_margin is not None or self.entity_margin is not None
        if not flagged and not contrasts:
            return ()
        units = evidence_windows(contexts, self.window)
        windows = {c: preselect(cs.words[c], units, self.windows_per_claim) for c in cs.claims}
        variants = self._variants(cs, hard, windows, negated) if contrasts else {}
        todo = [c for c in cs.claims if c in flagged or c in variants]
        if not todo:
            return ()
        read: dict[tuple[str, str], tuple[float, float]] = {}

        def score(texts: dict[str, list[str]]) -> None:
            pairs = [(t, w) for c, ts in texts.items() for t in ts for w in windows[c]]
            pairs = [p for p in dict.fromkeys(pairs) if p not in read]
            if pairs:
                read.update(zip(pairs, self.verifier().readings(pairs), strict=True))

        def best(text: str, c: str) -> tuple[float, float, str]:
            rs = [(read[(text, w)], w) for w in windows[c]]
            if not rs:
                return 0.0, 0.0, ""
            (ps, _), w = max(rs, key=lambda r: r[0][0])
            return ps, max(r[0][1] for r in rs), w

        # two passes: the claims as written, then the minimal pairs of those a contrast could
        # still decide (a confirmed finding needs none; a margin above 1 - P(support) is out of
        # reach; the entity contrast reads only claims below entity_below, so the decision
        # below needs no second check of it)
        score({c: [c] for c in todo})

        def could_decide(c: str, what: str) -> bool:
            ps = best(c, c)[0]
            if c in flagged and ps < self.below:
                return False
            if what == "negation":
                return 1.0 - ps >= self.negation_margin
            return ps < self.entity_below and 1.0 - ps >= self.entity_margin

        variants = {
            c: [(what, t) for what, t in vs if could_decide(c, what)] for c, vs in variants.items()
        }
        score({c: [t for _, t in vs] for c, vs in variants.items() if vs})

        out = []
        for c in todo:
            ps, _, window = best(c, c)
            detail = None
            if c in flagged and ps < self.below:
                kinds = "+".join(sorted({k for cc, k, _ in hard if cc == c and k in self.kinds}))
                detail = f"{kinds} finding confirmed by the verifier: P(support) {ps:.3f}"
            for what, text in variants.get(c, []) if detail is None else []:
                vs, vc, vw = best(text, c)
                if what == "negation" and vs - ps >= self.negation_margin and vc < AFFIRMED_AT:
                    detail = (
                        f"negation contrast: P(support) {ps:.3f} as written, {vs:.3f} without "
                        f"the negation"
                    )
                elif what.startswith("entity:") and vs - ps >= self.entity_margin:
                    detail = (
                        f"entity contrast: P(support) {ps:.3f} with {what[7:]!r}, {vs:.3f} "
                        f"with another name of the passages: {text[:120]}"
                    )
                if detail is not None:
                    window = vw
                    break
            if detail is None:
                continue
            where = (
                f" against: {window[:200]}" if window else " (no context window shares its words)"
            )
            out.append((c, CONFIRMED, detail + where))
        return tuple(out)
