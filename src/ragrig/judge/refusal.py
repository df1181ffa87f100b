"""Refusal detection: which parts of an answer decline to answer, and which make claims.

An answer is one of three kinds:

* ``refusal``: every sentence declines ("I do not have specific information on that", "The
  provided passages don't say"); it has no claims, and no faithfulness score, and is counted
  apart so that refusal correctness can be scored on its own;
* ``partial_refusal``: some sentences or clauses decline, the rest make claims, which are
  still checked ("The passages do not mention dosage, but aspirin reduces fever");
* ``answer``: nothing declines.

A refusal speaks about the *sources* or the *speaker's knowledge* ("the passages do not
mention", "I cannot find", "there is no information about"). A sentence that merely contains a
negation ("Aspirin does not cure gout", "There is no evidence that X causes Y") is a claim.
"""

from __future__ import annotations

import re

ANSWER = "answer"
PARTIAL_REFUSAL = "partial_refusal"
REFUSAL = "refusal"
ANSWER_KINDS = (ANSWER, PARTIAL_REFUSAL, REFUSAL)

_NEG = (
    r"(?:do|does|did|can|could|would|will|is|are|was|were)\s*(?:not|n't)|"
    r"don't|doesn't|didn't|can't|cannot|couldn't|won't|isn't|aren't|wasn't|weren't"
)
_SOURCE = (
    r"(?:passages?|contexts?|documents?|texts?|sources?|excerpts?|snippets?|articles?|"
    r"search results|materials?|references?|information (?:provided|given|available)|"
    r"provided information|given information|data provided)"
)
_REPORT_VERB = (
    r"(?:mention|say|state|specify|contain|provide|include|discuss|address|indicate|give|"
    r"describe|cover|offer|explain|detail|list|clarify|answer|tell|show|reference|talk about)"
)
_REPORT_PART = (
    r"(?:mentioned|stated|specified|provided|given|available|discussed|included|addressed|"
    r"covered|described|found|detailed|listed|explained|clear|clarified|indicated)"
)
_KNOW_VERB = (
    r"(?:have|find|locate|answer|determine|tell|say|provide|confirm|know|see|identify|give|"
    r"verify|offer|comment|speak|help)"
)

_PATTERNS = [
    # the sources, negated: "the provided passages don't say", "the context does not mention"
    rf"\b{_SOURCE}\b[^.;]{{0,40}}?\b(?:{_NEG})\s+(?:\w+\s+)?{_REPORT_VERB}",
    # "... is not mentioned in the passages", "not specified in the context"
    rf"\bnot\s+(?:\w+\s+)?{_REPORT_PART}\s+(?:in|by|within|from)\s+(?:the\s+|these\s+|this\s+)?"
    rf"(?:\w+\s+)?{_SOURCE}",
    # first person: "I do not have specific information", "I'm sorry, but I can't find"
    rf"\bI\s*(?:(?:{_NEG})|am unable to|was unable to|am not able to|'m unable to|'m not able to)"
    rf"\s+(?:\w+\s+)?{_KNOW_VERB}\b",
    r"\bI\s+(?:do|did)\s*(?:not|n't)\s+know\b|\bI don't know\b",
    # "there is no information about", "no specific details", "no mention of"
    r"(?:^|\bthere (?:is|are|was|were)\s+|\b(?:contains?|provides?|gives?|offers?|has|have|"
    r"find|found|see)\s+)no\s+(?:specific\s+|explicit\s+|further\s+|detailed\s+|"
    r"additional\s+|relevant\s+|direct\s+|clear\s+)?(?:information|details|mention)\b",
    r"\b(?:not enough|insufficient|no sufficient|limited)\s+(?:information|details|context|data)\b",
    r"\b(?:unable|not able) to (?:answer|determine|find|provide|say|tell|confirm)\b",
    r"\bcannot be (?:determined|answered|found|confirmed)\b",
    # "it is unclear from the passages", "it is not clear from the context"
    rf"\b(?:unclear|not clear)\s+(?:from|in|based on)\s+(?:the\s+)?(?:\w+\s+)?{_SOURCE}",
    rf"\b(?:outside|beyond)\s+(?:the\s+scope\s+of\s+)?(?:the\s+)?(?:\w+\s+)?{_SOURCE}",
]
REFUSAL_RE = re.compile("|".join(f"(?:{p})" for p in _PATTERNS), re.IGNORECASE)
# Politeness that carries no claim of its own: "I'm sorry", "Unfortunately", "I apologize".
_FILLER = re.compile(
    r"^(?:i'?m sorry|i am sorry|sorry|unfortunately|i apologi[sz]e|apologies|"
    r"thank you|thanks)\b[\s,.!]*(?:but|for [\w ]+)?[\s,.!]*$",
    re.IGNORECASE,
)
# Clause boundaries inside a sentence that holds a refusal: "X does not mention A, but B".
_CLAUSE = re.compile(
    r"\s*(?:[,;:]\s*(?:but|however|although|though|yet|whereas)\b,?|;|\bbut\b|\bhowever\b,?)\s*",
    re.IGNORECASE,
)


def is_refusal(text: str) -> bool:
    """True when `text` (a sentence or clause) declines to answer or says the sources lack it."""
    return bool(REFUSAL_RE.search(text))


def is_filler(text: str) -> bool:
    """An apology or thanks with nothing else in it."""
    return bool(_FILLER.match(text.strip(" \t\n.!,;:")))


def split_refusal(sentence: str) -> tuple[list[str], bool]:
    """(claim parts, declined) of one sentence: a sentence holding a refusal is split into
    clauses and its non-refusal, non-filler clauses are returned as claim parts."""
    if not is_refusal(sentence):
        return [sentence], False
    clauses = (c.strip(" ,;:.!?") for c in _CLAUSE.split(sentence))
    return [c for c in clauses if c and not is_refusal(c) and not is_filler(c)], True


def answer_kind(n_claims: int, declined: bool) -> str:
    """The kind of an answer from its number of claims and whether any part declined."""
    if not declined:
        return ANSWER
    return PARTIAL_REFUSAL if n_claims else REFUSAL
