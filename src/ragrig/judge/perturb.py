"""Perturbations of a supported claim that make it unsupported, and one that must stay supported.

Used to build probe sets (what a judge still accepts after a change of meaning) and, later, the
negative examples a verifier learns from. Every function is deterministic given its `rng`, and
returns None when the claim offers nothing to perturb (never a silent no-op copy):

* `negate`: "not" after the first auxiliary ("is" -> "is not"), or a present-tense verb negated
  ("binds" -> "does not bind", "has" -> "does not have");
* `change_number`: one number changed ("24 hours" -> "25 hours"), never to a value the context
  holds;
* `swap_entity`: a name of the claim replaced by a name taken from another document;
* `drop_qualifier`: a restricting qualifier removed, which overgeneralises ("in mice", "some",
  "up to", "sometimes");
* `reverse_relation`: a directional word replaced by its opposite ("increases" -> "decreases");
* `split_evidence`: the evidence sentence cut into two adjacent sentences (the claim must stay
  supported);
* `affirm`: the inverse of `negate`, the first negation of a claim removed ("is not" -> "is",
  "does not bind" -> "binds", "cannot" -> "can"): the minimal pair the verifier's contrast reads
  (ragrig.judge.confirm).
"""

from __future__ import annotations

import random
import re

from ragrig.judge import entities as ent

_AUX = {
    "is", "are", "was", "were", "can", "could", "may", "might", "will", "would", "should",
    "must", "does", "do", "did",
}  # fmt: skip
_HAVE = {"has": "does", "have": "do", "had": "did"}
_NEGATED = {"not", "no", "never", "n't", "cannot"}
_NOT_A_VERB_BEFORE = {
    "the", "a", "an", "of", "in", "on", "for", "with", "and", "or", "to", "by", "from", "at",
    "as", "than", "that", "its", "their", "his", "her", "these", "those", "this", "some", "all",
}  # fmt: skip
_NOT_VERBS = re.compile(r"(?:ss|us|is|ous|ics|sis|ies|ness|less)$")


def _lemma(verb: str) -> str:
    if verb.endswith("ies"):
        return verb[:-3] + "y"
    if verb.endswith(("sses", "shes", "ches", "xes", "zes", "oes")):
        return verb[:-2]
    return verb[:-1]


def negate(claim: str) -> str | None:
    words = claim.split(" ")
    for i, raw in enumerate(words):
        w = raw.strip(",;:()").lower()
        if i == 0 or (raw != raw.lower() and w not in _AUX | set(_HAVE)):
            continue
        nxt = words[i + 1].strip(",;:").lower() if i + 1 < len(words) else ""
        if nxt in _NEGATED or not nxt:
            return None
        if w in _AUX:
            return " ".join([*words[: i + 1], "not", *words[i + 1 :]])
        if w in _HAVE:
            if nxt.endswith(("ed", "en", "wn", "un", "ne")):  # "has shown" -> "has not shown"
                return " ".join([*words[: i + 1], "not", *words[i + 1 :]])
            return " ".join([*words[:i], _HAVE[w], "not", "have", *words[i + 1 :]])
        prev = words[i - 1].strip(",;:()").lower()
        if (
            w.isalpha()
            and len(w) > 3
            and w.endswith("s")
            and not _NOT_VERBS.search(w)
            and prev not in _NOT_A_VERB_BEFORE
        ):
            return " ".join([*words[:i], "does", "not", _lemma(w), *words[i + 1 :]])
    return None


_DO_NOT = re.compile(r"\b(do|does|did)\s+not\s+([a-z]+)\b", re.IGNORECASE)
_CANNOT = re.compile(r"\bcannot\b", re.IGNORECASE)
_NT = re.compile(r"\b([A-Za-z]+)n't\b")
_NOT = re.compile(r"\s+(?:not|never)\s+", re.IGNORECASE)
_NT_BASE = {"wo": "will", "ca": "can", "sha": "shall"}  # won't, can't, shan't


def _third_person(verb: str) -> str:
    if verb.endswith(("s", "sh", "ch", "x", "z", "o")):
        return verb + "es"
    if verb.endswith("y") and len(verb) > 1 and verb[-2] not in "aeiou":
        return verb[:-1] + "ies"
    return verb + "s"


def affirm(claim: str) -> str | None:
    """The claim with its first negation removed; None when it has none."""
    m = _DO_NOT.search(claim)
    if m:
        aux, verb = m.group(1), m.group(2)
        if aux.lower() == "does":
            verb = "has" if verb.lower() == "have" else _third_person(verb)
        elif aux.lower() == "did":  # the past form is not known: "did not go" -> "did go"
            verb = f"{aux} {verb}"
        return claim[: m.start()] + verb + claim[m.end() :]
    for pattern, repl in (
        (_CANNOT, lambda m: "can"),
        (_NT, lambda m: _NT_BASE.get(m.group(1).lower(), m.group(1))),
        (_NOT, lambda m: " "),
    ):
        out = pattern.sub(repl, claim, count=1)
        if out != claim:
            return out
    return None


def _format_like(value: float, original: str) -> str:
    decimals = len(original.split(".")[1]) if "." in original else 0
    return f"{value:.{decimals}f}"


def change_number(claim: str, context: str, rng: random.Random) -> str | None:
    m = ent._NUMBER.search(claim)
    if not m:
        return None
    token = m.group(1)
    value = float(token.replace(",", ""))
    seen = set(ent.numbers(context))
    step = 10 ** -(len(token.split(".")[1])) if "." in token else 1
    candidates = [value + step, value * 2, value + 10 * step]
    if value - step > 0:
        candidates.append(value - step)
    candidates = [c for c in candidates if round(c, 9) not in seen and c != value]
    if not candidates:
        return None
    new = _format_like(rng.choice(candidates), token)
    return claim[: m.start(1)] + new + claim[m.end(1) :]


def swappable_names(claim: str) -> list[str]:
    """Names of the claim, less a capitalised opener that is a name only by its position
    ("Patients ...", "Antibiotic overuse ...")."""
    return [
        n
        for n in ent.names(claim)
        if not claim.startswith(n) or " " in n or ent._is_marked(n.split()[0])
    ]


def swap_entity(claim: str, context: str, pool: list[str], rng: random.Random) -> str | None:
    """Replace the first name of the claim found in `context` by a name of `pool` (names of
    other documents) that `context` does not hold."""
    present = [n for n in swappable_names(claim) if ent._phrase_in(n, context)]
    if not present:
        return None
    target = present[0]
    options = sorted({p for p in pool if p != target and not ent._phrase_in(p, context)})
    if not options:
        return None
    replacement = rng.choice(options)
    return re.sub(r"(?<!\w)" + re.escape(target) + r"(?!\w)", replacement, claim, count=1)


_QUALIFIERS = re.compile(
    r"\b(?:in (?:mice|rats|animals|vitro|vivo|children|adults|women|men|the elderly|older adults|"
    r"some cases|part|certain cases)|under certain conditions|up to|at least|more than|less than|"
    r"fewer than|some|certain|most|many|several|partially|partly|sometimes|occasionally|often|"
    r"usually|frequently|rarely|mildly|modestly|slightly|moderately)\b\s*",
    re.IGNORECASE,
)


def drop_qualifier(claim: str) -> str | None:
    m = _QUALIFIERS.search(claim)
    if not m:
        return None
    out = (claim[: m.start()] + claim[m.end() :]).replace("  ", " ").strip()
    out = re.sub(r"\s+([,.;:])", r"\1", out)
    if m.start() == 0 and out:
        out = out[0].upper() + out[1:]
    return out if out and out != claim else None


_OPPOSITES = {
    "increases": "decreases", "increase": "decrease", "increased": "decreased",
    "increasing": "decreasing", "higher": "lower", "more": "less", "greater": "smaller",
    "larger": "smaller", "raises": "lowers", "raise": "lower", "promotes": "inhibits",
    "promote": "inhibit", "activates": "inhibits", "activate": "inhibit", "enhances": "reduces",
    "enhance": "reduce", "reduces": "increases", "reduce": "increase", "reduced": "increased",
    "improves": "worsens", "improve": "worsen", "improved": "worsened", "positive": "negative",
    "positively": "negatively", "upregulates": "downregulates", "up-regulates": "down-regulates",
    "before": "after", "above": "below", "induces": "suppresses", "suppresses": "induces",
    "accelerates": "slows", "prevents": "causes", "longer": "shorter", "beneficial": "harmful",
    "earlier": "later", "gain": "loss", "rises": "falls", "stronger": "weaker",
    "inhibits": "promotes", "inhibit": "promote", "lower": "higher", "less": "more",
    "decreases": "increases", "decrease": "increase", "decreased": "increased",
    "lowers": "raises", "worsens": "improves", "negative": "positive", "after": "before",
    "below": "above", "shorter": "longer", "harmful": "beneficial", "later": "earlier",
    "loss": "gain", "falls": "rises", "weaker": "stronger", "smaller": "larger",
    "downregulates": "upregulates", "down-regulates": "up-regulates", "allows": "prevents",
    "protects": "exposes", "associated with increased": "associated with decreased",
}  # fmt: skip
_OPPOSITE_RE = re.compile(
    r"\b(" + "|".join(sorted(map(re.escape, _OPPOSITES), key=len, reverse=True)) + r")\b",
    re.IGNORECASE,
)


def reverse_relation(claim: str) -> str | None:
    m = _OPPOSITE_RE.search(claim)
    if not m:
        return None
    word = m.group(1)
    new = _OPPOSITES[word.lower()]
    if word[0].isupper():
        new = new[0].upper() + new[1:]
    return claim[: m.start(1)] + new + claim[m.end(1) :]


_CUT = re.compile(r",\s+(?:and\s+|which\s+|while\s+|whereas\s+|but\s+)?|;\s+|\s+and\s+")


def split_evidence(sentence: str, min_words: int = 4) -> tuple[str, str] | None:
    """The sentence cut at the clause boundary nearest its middle into two sentences, each with
    at least `min_words` words; None when it has no such boundary."""
    n = len(sentence)
    best = None
    for m in _CUT.finditer(sentence):
        left, right = sentence[: m.start()].strip(), sentence[m.end() :].strip()
        if len(left.split()) < min_words or len(right.split()) < min_words:
            continue
        if best is None or abs(m.start() - n / 2) < abs(best[0] - n / 2):
            best = (m.start(), left, right)
    if best is None:
        return None
    _, left, right = best
    left = left.rstrip(",;:") + "."
    right = right[0].upper() + right[1:]
    if right[-1] not in ".!?":
        right += "."
    return left, right
