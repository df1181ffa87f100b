"""A synthetic interaction log for trying and measuring `ragrig traces` (benchmarks/bench_traces.py),
built from a BEIR corpus, deterministic from its arguments.

Each interaction asks about one sentence of a document (its six longest words), is given a
three-sentence passage around it and a passage of each of two other documents as contexts, and
answers with that sentence (a faithful answer). From `incident_from` (a share of the time span) on, a third of the answers
change a number or state a sentence of a document that is not in the context, a tenth refuse,
and the questions turn to another topic (the documents that mention cells: query drift). A quarter of the
interactions carry user feedback: 1 for a faithful answer, 0 otherwise (a down thumb with a
reason). The feedback signals follow the answer's faithfulness, as a team would hope to find:
a faithful answer is copied more often (60% against 20%) and doubted by a follow-up ("Are you
sure?") less often (3% against 30%); dwell time does not depend on it. A share of the lines
(`samples_share`) logs two samples: a faithful answer's repeat it, an unfaithful one's do not.
"""

from __future__ import annotations

import json
import random
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path

START = datetime(2026, 11, 30, tzinfo=UTC)
_SENTENCE = re.compile(r"(?<=[.!?])\s+")


def _documents(corpus: Path, limit: int) -> list[tuple[str, list[str]]]:
    from ragrig.core.io import iter_lines

    docs = []
    for _, line in iter_lines(corpus):
        if not line.strip():
            continue
        obj = json.loads(line)
        sentences = [s for s in _SENTENCE.split(str(obj.get("text", ""))) if len(s.split()) >= 4]
        if sentences:
            docs.append((str(obj["_id"]), sentences[:6]))
        if len(docs) >= limit:
            break
    if len(docs) < 4:
        raise ValueError(f"{corpus}: fewer than 4 documents with a sentence")
    return docs


def _passage(sentences: list[str], around: str | None) -> str:
    """A chunk of three sentences of a document: the one `around` and its neighbours, or the
    document's first three (a retrieved passage, not the whole document)."""
    i = sentences.index(around) if around is not None else 1
    return " ".join(sentences[max(0, i - 1) : i + 2])


def _question(sentence: str) -> str:
    """The sentence's six longest words (of more than three letters), in its order: a question
    its passage answers."""
    words = [w.strip(".,;:()") for w in sentence.split() if len(w) > 3]
    longest = set(sorted(range(len(words)), key=lambda j: -len(words[j]))[:6])
    return " ".join(w for j, w in enumerate(words) if j in longest) + "?"


def write_synthetic(
    path: Path,
    corpus: Path,
    n: int,
    hours: int = 24,
    seed: int = 13,
    incident_from: float = 0.75,
    max_docs: int = 2000,
    samples_share: float = 0.1,
) -> Path:
    """Write `n` interactions over `hours` hours to `path` (JSONL); returns the path."""
    rng = random.Random(seed)
    sig = random.Random(seed + 1)  # the signals' own draws: the rest of the log is unchanged
    previous: tuple[str, bool] | None = None
    docs = _documents(corpus, max_docs)
    # the incident's questions are about another topic: the documents that mention cells
    topical = [d for d in docs if any(" cell" in x.lower() for x in d[1])]
    rest = [d for d in docs if d not in topical]
    if not topical or not rest:
        topical, rest = docs[len(docs) // 2 :], docs[: len(docs) // 2]
    span = hours * 3600
    with Path(path).open("w", encoding="utf-8") as fh:
        for i in range(n):
            offset = span * i / n
            incident = offset >= span * incident_from
            pool = topical if incident else rest
            doc_id, sentences = pool[rng.randrange(len(pool))]
            others = [docs[rng.randrange(len(docs))] for _ in range(2)]
            sentence = sentences[rng.randrange(len(sentences))]
            question = _question(sentence)
            roll = rng.random()
            faithful = True
            answer = sentence
            if incident and roll < 0.1:
                answer = "I could not find this in the provided documents."
                faithful = False
            elif incident and roll < 0.35:
                faithful = False
                if re.search(r"\d", sentence):
                    answer = re.sub(r"\d+", lambda m: str(int(m.group()) + 7), sentence, count=1)
                else:
                    answer = docs[rng.randrange(len(docs))][1][0]
            feedback = None
            if rng.random() < 0.25:
                feedback = int(faithful) if rng.random() > 0.05 else int(not faithful)
            contexts = [{"id": doc_id, "text": _passage(sentences, sentence)}] + [
                {"id": d, "text": _passage(s, None)} for d, s in others
            ]
            when = START + timedelta(seconds=offset)
            row = {
                "id": f"ix-{seed}-{i}",
                "timestamp": when.strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
                "question": question,
                "contexts": contexts,
                "answer": answer,
                "latency_ms": round(200 + rng.random() * 600 + (400 if incident else 0), 1),
                "feedback": feedback,
            }
            if feedback == 0:
                row["feedback_reason"] = ("wrong", "incomplete", "unclear")[sig.randrange(3)]
            row["copied"] = sig.random() < (0.6 if faithful else 0.2)
            row["dwell_ms"] = round(2000 + sig.random() * 20000)
            if previous is not None and sig.random() < (0.03 if previous[1] else 0.3):
                row["follows"] = previous[0]
                row["question"] = "Are you sure? " + question
            if sig.random() < samples_share:
                other = sentences[sig.randrange(len(sentences))]
                row["samples"] = [answer, answer] if faithful else [sentence, other]
            previous = (row["id"], faithful)
            fh.write(json.dumps(row) + "\n")
    return Path(path)


LOCALES = ("en", "de", "fr", "es")
# the injected incidents of write_incident_day, by hour of the day (benchmarks/bench_guardrails.py)
INCIDENTS = {
    "faithfulness": range(18, 24),  # retrieval regression in locale=fr: answers lose their source
    "latency": range(19, 21),  # the generate stage 4x slower
    "cost": range(21, 22),  # 10x the tokens
    "filter_false_exclusion": range(22, 24),  # the filter starts excluding locale=de's gold
}
REGRESSED_LOCALE, FILTERED_LOCALE = "fr", "de"


def write_incident_day(
    path: Path, corpus: Path, per_hour: int, seed: int = 13, max_docs: int = 2000
) -> Path:
    """A day (24 hours) of `per_hour` interactions a hour carrying every field the guardrails
    read, clean for 18 hours and with the INCIDENTS injected in the last six: a retrieval
    regression in one locale (its contexts no longer hold the answer's document), a latency
    spike, a cost spike and a metadata filter that starts removing one locale's gold documents.

    Clean traffic: four locales, equally likely; the question is the six longest words of the
    answer's sentence, the contexts three-sentence passages (the answer's sentence and its
    neighbours first, then a passage of each of two other documents); retrieve 20-60 ms, generate 300-900 ms (total
    latency their sum plus 20 ms); cost 0.0015-0.0025 USD; a fifth of the interactions reviewed
    (gold: the answer's document), the filter removing two other documents (one in a hundred
    times the gold one too); 3% regenerate the interaction before them (in its locale), 30%
    after an answer whose document is missing from its contexts."""
    rng = random.Random(seed)
    docs = _documents(corpus, max_docs)
    n = 24 * per_hour
    previous: tuple[str, bool, str] | None = None  # (id, faithful, locale) of the line before
    with Path(path).open("w", encoding="utf-8") as fh:
        for i in range(n):
            hour = i // per_hour
            # a regeneration is the same user's: the locale of the line it regenerates
            regenerates = previous is not None and rng.random() < (0.03 if previous[1] else 0.3)
            locale = previous[2] if regenerates else LOCALES[rng.randrange(len(LOCALES))]
            doc_id, sentences = docs[rng.randrange(len(docs))]
            sentence = sentences[rng.randrange(len(sentences))]
            others = [
                d for d in (docs[rng.randrange(len(docs))] for _ in range(3)) if d[0] != doc_id
            ]
            regressed = hour in INCIDENTS["faithfulness"] and locale == REGRESSED_LOCALE
            shown = others if regressed else [(doc_id, sentences), *others[:2]]
            retrieve = 20 + rng.random() * 40
            generate = 300 + rng.random() * 600
            if hour in INCIDENTS["latency"]:
                generate *= 4
            cost = 0.0015 + rng.random() * 0.001
            if hour in INCIDENTS["cost"]:
                cost *= 10
            row = {
                "id": f"day-{seed}-{i}",
                "timestamp": (START + timedelta(seconds=3600 * i / per_hour)).strftime(
                    "%Y-%m-%dT%H:%M:%S.%fZ"
                ),
                # the sentence's own longest words: its passage answers it
                "question": _question(sentence),
                "contexts": [
                    {"id": d, "text": _passage(s, sentence if d == doc_id else None)}
                    for d, s in shown
                ],
                "answer": sentence,
                "latency_ms": round(retrieve + generate + 20, 1),
                "stage_latency_ms": {
                    "retrieve": round(retrieve, 1),
                    "generate": round(generate, 1),
                },
                "cost_usd": round(cost, 6),
                "slices": {"locale": locale},
            }
            if rng.random() < 0.2:
                removed = [d for d, _ in others[:2]]
                if rng.random() < 0.01 or (
                    hour in INCIDENTS["filter_false_exclusion"] and locale == FILTERED_LOCALE
                ):
                    removed.append(doc_id)
                row["gold"] = [doc_id]
                row["filter_excluded"] = removed
            if regenerates:
                row["regenerates"] = previous[0]
            previous = (row["id"], not regressed, locale)
            fh.write(json.dumps(row) + "\n")
    return Path(path)
