"""Deterministic faithfulness: answer claims checked for lexical support in one context sentence."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from ragrig.core.text import split_sentences, strip_citations, tokenize
from ragrig.judge import entities as ent
from ragrig.judge.base import Verdict, unclaimed
from ragrig.judge.refusal import answer_kind, split_refusal

# "Based on the provided passages, X" / "According to the context, X": the preamble is no claim.
_ATTRIBUTION = re.compile(
    r"^(?:based on|according to|as (?:stated|mentioned|described|shown) in|per|from|in)\s+"
    r"(?:the\s+|these\s+)?(?:provided\s+|given\s+|available\s+|retrieved\s+|above\s+)?"
    r"(?:passages?|contexts?|documents?|texts?|sources?|information|excerpts?|search results)"
    r"(?:\s+(?:provided|given|above))?\s*,\s*",
    re.IGNORECASE,
)
# Negation cues: a claim that negates needs a supporting sentence that negates the same thing.
_RAW_WORD = re.compile(r"[^\W_]+(?:'[^\W_]+)?")
_CUES = frozenset({"not", "no", "never", "none", "nor", "neither", "cannot"})
# How many content words after a context sentence's negation cue are in its scope.
NEGATION_SCOPE = 4
# Answer particles: "Yes, in 2008" checks "2008"; a bare "Yes" checks the question's terms.
_PARTICLES = frozenset({"yes", "no", "yeah", "nope", "correct", "indeed", "true", "false"})
# What a context sentence's negation covers when it contradicts an affirming claim: the first
# REVERSE_SCOPE content words after its cue, up to the end of the clause ("Smoking, not diet,
# causes ..." negates "diet" only).
REVERSE_SCOPE = 2
# ...and the share of the claim's content words such a sentence must hold (a near restatement)
REVERSE_HOLD = 0.8
# "not only", "not just": no negation of what follows
_NOT_A_NEGATION = frozenset({"only", "just", "merely", "simply", "necessarily", "least"})
# An answer particle opening a claim ("No, you can deploy ..."): no negation of its content
_LEADING_PARTICLE = re.compile(r"^\s*(?:no|nope)\s*[,;:]\s*(?=\S)", re.IGNORECASE)
_CLAUSE_END = re.compile(r"[,;:()\u2013\u2014]|\s-\s")
# The hard checks (ragrig.judge.Verdict.contradictions): kinds of finding. A number or name
# absent from the context is NUMBER / ENTITY when the context holds the claim's other words (it
# says something else about the same thing), FABRICATED when it does not.
NEGATION, NUMBER, ENTITY, FABRICATED = "negation", "number", "entity", "fabricated"


@dataclass
class ClaimSet:
    """The claims of one answer and the words each is checked with."""

    claims: list[str] = field(default_factory=list)
    words: dict[str, set[str]] = field(default_factory=dict)
    # the text whose names and numbers must be in the context, per claim
    surface: dict[str, str] = field(default_factory=dict)
    # a short answer must have every word in one context sentence
    short: bool = False
    declined: bool = False


class OverlapJudge:
    """A claim (an answer sentence, or a clause of it) is supported when at least
    `support_threshold` of its stemmed content words occur in a single context sentence (or, with
    `window` > 1, in a run of up to `window` adjacent sentences of one passage) and, with
    `entity_check`, every name and number of it occurs in the context (numbers compared as
    numbers: "25 hours" is not "24 hours"); with `negation_check`, a claim holding a negation
    ("not", "no", "never", "n't") needs a supporting sentence that negates the same thing: the
    first content word after each of the claim's cues must be among the first NEGATION_SCOPE
    content words after a cue of the sentence ("does not increase the risk" is supported by "was
    not associated with an increased risk", not by "no evidence of such relationships"). The
    other direction is narrower, since a context sentence's negation may belong to another
    clause: an affirming claim is contradicted when every sentence holding its words negates one
    of them within the same clause, among the first REVERSE_SCOPE content words after the cue
    ("X did not reduce Y" contradicts "X reduces Y"; "X, not Z, reduces Y" does not). Such
    findings are the verdict's `contradictions` (`contradictions`): they decide the answer.

    Claims come from a sentence segmenter that knows abbreviations and citations. A refusal
    (every sentence declines: "I do not have specific information", "The provided passages don't
    say") has no claims and the verdict kind `refusal`; a partial refusal ("The passages do not
    mention dosage, but aspirin reduces fever") keeps its other clauses as claims, so a claim
    cannot hide behind a refusal phrase. An answer too short to be a claim on its own ("Norway",
    "2008", "Yes, in 2008.") is checked against the question's context as one claim,
    "Q: <question> A: <answer>": every content word of the answer must occur in one context
    sentence (a bare "Yes"/"No" checks the question's words with the threshold instead).

    Lexical support cannot see negation or relations: it is a first, cheap check.
    """

    def __init__(
        self,
        support_threshold: float = 0.6,
        min_content_words: int = 2,
        entity_check: bool = True,
        negation_check: bool = True,
        window: int = 2,
        answer_model: Any | None = None,
        confirm: Any | None = None,
    ):
        if window < 1:
            raise ValueError(f"window must be >= 1 sentence, got {window}")
        self.threshold = support_threshold
        self.min_words = min_content_words
        self.entity_check = entity_check
        self.negation_check = negation_check
        self.window = window
        self.answer_model = answer_model  # ragrig.judge.extractive.AnswerModel
        self.confirm = confirm  # ragrig.judge.confirm.VerifierConfirm

    @classmethod
    def from_config(cls, cfg: Any) -> OverlapJudge:
        from ragrig.judge.extractive import AnswerModel

        model = getattr(cfg, "answer_model", None)
        return cls(
            cfg.support_threshold,
            cfg.min_content_words,
            cfg.entity_check,
            cfg.negation_check,
            cfg.window,
            AnswerModel.from_config(model) if model is not None else None,
            _confirm(getattr(cfg, "confirm", None)),
        )

    def evidence_units(self, contexts: list[str]) -> list[tuple[set[str], set[str]]]:
        """(content words, negated words) of every context sentence and, with `window` > 1, of
        every run of up to `window` adjacent sentences of one passage. The negated words are
        those in a negation's scope: the first NEGATION_SCOPE content words after each cue."""
        return [(words, negated) for words, negated, _ in self._units(contexts)]

    def _units(self, contexts: list[str]) -> list[tuple[set[str], set[str], set[str]]]:
        """evidence_units with, third, each unit's words negated within their clause (the first
        REVERSE_SCOPE content words after each cue): what it contradicts an affirming claim on."""
        units = []
        for c in contexts:
            sents = [
                (
                    self._words(s),
                    set().union(*negation_scopes(s, NEGATION_SCOPE)),
                    set().union(*clause_negation_scopes(s, REVERSE_SCOPE)),
                )
                for s in split_sentences(c)
            ]
            for i in range(len(sents)):
                for j in range(i + 1, min(i + self.window, len(sents)) + 1):
                    run = sents[i:j]
                    units.append(
                        (
                            set().union(*(w for w, _, _ in run)),
                            set().union(*(n for _, n, _ in run)),
                            set().union(*(r for _, _, r in run)),
                        )
                    )
        return units

    @staticmethod
    def _words(text: str) -> set[str]:
        return set(tokenize([text])[0])

    def claim_set(self, question: str, answer: str) -> ClaimSet:
        out = ClaimSet()
        fragments: list[str] = []
        for sentence in split_sentences(answer):
            text = _ATTRIBUTION.sub("", strip_citations(sentence).rstrip(".!? ").strip())
            parts, declined = split_refusal(text)
            out.declined |= declined
            for part in parts:
                words = self._words(part) - _PARTICLES
                if len(words) >= self.min_words:
                    if part not in out.words:
                        out.claims.append(part)
                        out.words[part] = words
                        out.surface[part] = part
                elif part.strip(" ,;:.!?"):
                    fragments.append(part)
        if out.claims or out.declined or not fragments:
            return out
        short = " ".join(f.strip(" ,;:.!?") for f in fragments)
        words = set().union(*(self._words(f) for f in fragments)) - _PARTICLES
        claim = f"Q: {question.strip()} A: {short}" if question.strip() else short
        if not words:  # a bare "Yes"/"No": the question's terms must be in the context
            words = self._words(question) - _PARTICLES
            if len(words) < self.min_words:
                return out
        else:
            out.short = True
        out.claims.append(claim)
        out.words[claim] = words
        out.surface[claim] = short
        return out

    def claims(self, answer: str, question: str = "") -> list[str]:
        return self.claim_set(question, answer).claims

    def supported(
        self,
        words: set[str],
        context_sentences: list[tuple[set[str], set[str]]],
        short: bool = False,
        negated: tuple[frozenset[str], ...] = (),
    ) -> bool:
        """Some context sentence holds enough of `words` (all of them for a short answer) and,
        with `negation_check`, negates what the claim negates: for each negation of the claim
        (`negated`: per cue, the first content word it negates, or none), the sentence has that
        word in a negation's scope (a bare cue: any negation)."""
        need = 1.0 if short else self.threshold
        scopes = negated if self.negation_check else ()
        return any(
            len(words & s) / len(words) >= need
            and all((scope <= neg) if scope else bool(neg) for scope in scopes)
            for s, neg in context_sentences
        )

    def _holding(self, words: set[str], units: list, short: bool = False) -> list:
        """The evidence units holding enough of a claim's words (all of them when short)."""
        need = 1.0 if short else self.threshold
        return [u for u in units if words and len(words & u[0]) / len(words) >= need]

    def negation_conflict(
        self,
        words: set[str],
        surface: str,
        units: list[tuple[set[str], set[str], set[str]]],
        short: bool = False,
    ) -> str | None:
        """Whether the context holds the claim's words but the opposite polarity: a claim that
        negates ("X is not Y") where no sentence holding its words negates the same word, or a
        claim that affirms ("X reduces Y") where every sentence holding its words negates one of
        them within its clause ("X did not reduce Y"). None without such sentences (no support
        is not a contradiction) or without a conflict; else what conflicts."""
        need = 1.0 if short else self.threshold
        holding = self._holding(words, units, short)
        if not holding:
            return None
        scopes = claim_negations(surface)
        if scopes:
            if any(
                all((scope <= neg) if scope else bool(neg) for scope in scopes)
                for _, neg, _ in holding
            ):
                return None
            return "the claim negates what its context states"
        close = [u for u in holding if len(words & u[0]) / len(words) >= max(need, REVERSE_HOLD)]
        if close and len(close) == len(holding) and all(r & words for _, _, r in close):
            return "the context negates what the claim states"
        return None

    def contradictions(
        self,
        cs: ClaimSet,
        contexts: list[str],
        entities: bool = True,
        units: list[tuple[set[str], set[str], set[str]]] | None = None,
        checks: dict[str, ent.EntityCheck] | None = None,
    ) -> tuple[tuple[str, str, str], ...]:
        """The hard checks of every claim, (claim, kind, detail) per finding: a negation
        conflict (negation_conflict, with `negation_check`), and, with `entities`, each number
        (NUMBER) and name (ENTITY) of the claim absent from a context that holds the claim's
        words, or FABRICATED when the context does not hold them. A claim found here is
        unfaithful whatever a soft score says (ragrig.judge.judge_all decides on it)."""
        if units is None:
            units = self._units(contexts)
        out: list[tuple[str, str, str]] = []
        for c in cs.claims:
            if self.negation_check:
                conflict = self.negation_conflict(cs.words[c], cs.surface[c], units, cs.short)
                if conflict:
                    out.append((c, NEGATION, conflict))
            if entities:
                found = checks[c] if checks is not None else ent.check(cs.surface[c], contexts)
                # a capitalised word opening its sentence or clause may be no name (an acronym
                # there is one: ent.opens_clause): only the soft entity overlap counts it
                unseen = [n for n in found.unseen_names if not ent.opens_clause(n, cs.surface[c])]
                if found.unseen_numbers or unseen:
                    held = bool(self._holding(cs.words[c], units, cs.short))
                    out += [(c, NUMBER if held else FABRICATED, n) for n in found.unseen_numbers]
                    out += [(c, ENTITY if held else FABRICATED, n) for n in unseen]
        return tuple(out)

    def judge(
        self, question: str, answer: str, contexts: list[str], reference: str | None = None
    ) -> Verdict:
        cs = self.claim_set(question, answer)
        kind = answer_kind(len(cs.claims), cs.declined)
        if not cs.claims:
            return unclaimed(answer, kind)
        units = self._units(contexts)
        ctx = [(words, negated) for words, negated, _ in units]
        # each claim's names and numbers, checked once for the hard checks and for support
        checks = (
            {c: ent.check(cs.surface[c], contexts) for c in cs.claims} if self.entity_check else {}
        )
        hard = self.contradictions(cs, contexts, self.entity_check, units, checks)
        if self.confirm is not None:
            negated = frozenset(c for c in cs.claims if claim_negations(cs.surface[c]))
            hard = tuple(hard) + self.confirm.findings(cs, contexts, hard, negated)
        contradicted = {c for c, _, _ in hard}
        sup = [
            c
            for c in cs.claims
            if c not in contradicted
            and self.supported(cs.words[c], ctx, cs.short, claim_negations(cs.surface[c]))
            and not (self.entity_check and checks[c].flag)
        ]
        uns = [c for c in cs.claims if c not in sup]
        found = ent.check(" ".join(cs.surface[c] + "." for c in cs.claims), contexts)
        return Verdict(
            cs.claims,
            sup,
            uns,
            kind=kind,
            entity_overlap=found.overlap,
            unseen_entities=found.unseen_names + found.unseen_numbers,
            answer_score=(
                self.answer_model.score(answer, contexts) if self.answer_model is not None else None
            ),
            contradictions=hard,
        )


def _confirm(cfg: Any) -> Any:
    if cfg is None:
        return None
    from ragrig.judge.confirm import VerifierConfirm

    return VerifierConfirm.from_config(cfg)


@lru_cache(maxsize=65536)
def _stems(word: str) -> tuple[str, ...]:
    return tuple(tokenize([word])[0])


def _is_cue(word: str) -> bool:
    return word in _CUES or word.endswith("n't")


def negation_scopes(text: str, width: int) -> list[set[str]]:
    """Per negation cue of `text` ("not", "no", "never", "n't"...), the stemmed content words of
    the next `width` content words: what the negation is about."""
    raw = [w.lower().replace("\u2019", "'") for w in _RAW_WORD.findall(text.replace("\u2019", "'"))]
    out = []
    for i, w in enumerate(raw):
        if not _is_cue(w) or (i + 1 < len(raw) and raw[i + 1] in _NOT_A_NEGATION):
            continue
        after = [t for t in raw[i + 1 :] if not _is_cue(t)]
        stems: list[str] = []
        for t in after:
            stems.extend(_stems(t))
            if len(stems) >= width:
                break
        out.append(set(stems[:width]))
    return out


def clause_negation_scopes(text: str, width: int) -> list[set[str]]:
    """negation_scopes within each clause of `text` (split at commas, semicolons, colons,
    brackets and dashes): a cue's scope never reaches past its clause."""
    return [scope for clause in _CLAUSE_END.split(text) for scope in negation_scopes(clause, width)]


def claim_negations(text: str) -> tuple[frozenset[str], ...]:
    """Per negation cue of a claim, the first content word it negates (empty for a bare cue):
    "does not increase the risk" -> ({"increas"},). An answer particle opening the claim ("No,
    ...") and "not only" / "not just" negate nothing."""
    return tuple(frozenset(s) for s in negation_scopes(_LEADING_PARTICLE.sub("", text), 1))
