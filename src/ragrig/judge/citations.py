"""Citations checked claim by claim, by the judge's own claim checker.

An answer's sentences carry their citation markers ("... Deimos. [1]": the segmenter attaches a
marker to the sentence before it, ragrig.core.text.sentence_spans). For each sentence, each
passage it cites is checked alone against the sentence with the configured judge: the pair is
supported when the judge extracts claims from the sentence and finds every one supported by that
passage. A citation to a passage number the context does not have supports nothing.

Per answer (judgments columns):

* `citation_pairs` / `citation_pairs_supported`: (sentence, cited passage) pairs and those whose
  passage supports the sentence (citation precision = supported / pairs);
* `claims_needing_support` / `claims_cited_supported`: the sentences that state something (a
  claim the overlap segmenter would check; refusals and fragments do not) and those citing at
  least one passage that supports them (citation recall, and per answer its completeness);
* `citation_checks`: every sentence with its citations and their verdicts (JSON).
"""

from __future__ import annotations

import json
from functools import lru_cache
from typing import Any

from ragrig.core.text import cited_numbers, split_sentences, strip_citations


@lru_cache(maxsize=1)
def _segmenter() -> Any:
    """The overlap judge's claim segmenter, for its text rules only (no model)."""
    from ragrig.judge.overlap import OverlapJudge

    return OverlapJudge()


def needs_support(question: str, sentence: str) -> bool:
    """Whether the sentence states something to support (not a refusal or a fragment)."""
    return bool(_segmenter().claim_set(question, sentence).claims)


def sentence_items(answer: str) -> list[tuple[str, list[int]]]:
    """(sentence without its markers, distinct passage numbers it cites in order) per sentence."""
    out = []
    for sentence in split_sentences(answer):
        cited = list(dict.fromkeys(cited_numbers(sentence)))
        out.append((strip_citations(sentence), cited))
    return out


def pair_items(question: str, answer: str, contexts: list[str]) -> list[tuple[str, str, list[str]]]:
    """The (question, sentence, [passage]) items `check_citations` judges: what a batching
    judge prefetches."""
    return [
        (question, text, [contexts[n - 1]])
        for text, cited in sentence_items(answer)
        for n in cited
        if 1 <= n <= len(contexts) and text
    ]


def check_citations(judge: Any, question: str, answer: str, contexts: list[str]) -> dict:
    """The judgments columns of the module doc for one answer."""
    checks = []
    for text, cited in sentence_items(answer):
        supports = []
        for n in cited:
            ok = False
            if 1 <= n <= len(contexts) and text:
                verdict = judge.judge(question, text, [contexts[n - 1]])
                ok = bool(verdict.extracted) and len(verdict.supported) == len(verdict.extracted)
            supports.append(ok)
        checks.append(
            {
                "sentence": text,
                "needs_support": needs_support(question, text),
                "cited": cited,
                "supports": supports,
            }
        )
    need = [c for c in checks if c["needs_support"]]
    return {
        "citation_pairs": sum(len(c["cited"]) for c in checks),
        "citation_pairs_supported": sum(sum(c["supports"]) for c in checks),
        "claims_needing_support": len(need),
        "claims_cited_supported": sum(1 for c in need if any(c["supports"])),
        "citation_checks": json.dumps(checks, ensure_ascii=False),
    }
