"""People's faithfulness labels of a run's judged answers: the sample to rate, the file the
ratings come back in, and its checks.

`ragrig label` draws the sample: the answers the judge scored, in strata of its decision
(judged faithful / judged unfaithful / undecided), each stratum given its proportional share
of n (largest remainder), and within a stratum the first answers in sha256("<seed>:<qid>")
order. Proportional allocation keeps the sample self-weighting: each scored answer had the
same chance of being drawn (up to rounding), so the labelled answers are a uniform sample of
the judged ones, as prediction-powered inference (ragrig.metrics.ppi) needs.

The labels file (JSONL, or CSV with a header) holds one line per rated answer:

    {"qid": "...", "answer_sha256": "<sha256 of the answer's text>", "rating": "faithful",
     "note": "optional"}

`rating` is `faithful` or `unfaithful`. `answer_sha256` ties a label to the exact answer it
rates: a label of another run's answer to the same question is refused, never read as this
run's. `read_labels` checks the whole file and raises LabelsError (one line naming the file
and the line) on: unreadable or malformed lines, a missing field, a rating outside the allowed
values or left empty, a question labelled twice, a question the run does not hold or the judge
did not score, an answer hash of another run, and fewer labels than an interval needs.
"""

from __future__ import annotations

import csv
import hashlib
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ragrig.core.errors import DataValidationError

RATINGS = {"faithful": 1, "unfaithful": 0}
FIELDS = ("qid", "answer_sha256", "rating", "note")
MIN_LABELS = 2  # ragrig.metrics.ppi.MIN_LABELS: a sample variance needs two
STRATA = ("judged_faithful", "judged_unfaithful", "undecided")


class LabelsError(DataValidationError):
    """A labels file that cannot be read as labels of this run."""


def answer_sha256(answer: str) -> str:
    return hashlib.sha256(answer.encode("utf-8")).hexdigest()


def stratum(decision: float | None) -> str:
    if decision is None or decision != decision:  # NaN: undecided
        return "undecided"
    return "judged_faithful" if decision >= 0.5 else "judged_unfaithful"


def allocate(sizes: Mapping[str, int], n: int) -> dict[str, int]:
    """n split over strata in proportion to their sizes, by largest remainder (ties: the
    order of STRATA); every stratum gets at most its size."""
    total = sum(sizes.values())
    if n > total:
        raise ValueError(f"asked for {n} answers to label, the run has {total} scored")
    exact = {s: n * k / total for s, k in sizes.items()} if total else {}
    out = {s: int(v) for s, v in exact.items()}
    order = sorted(exact, key=lambda s: (-(exact[s] - out[s]), STRATA.index(s)))
    for s in order[: n - sum(out.values())]:
        out[s] += 1
    return out


def sample(candidates: list[dict[str, Any]], n: int, seed: int) -> tuple[list[dict], dict]:
    """The answers to label (each candidate a dict with at least qid and `judged_faithful`),
    and per stratum its size and how many were drawn."""
    if n < MIN_LABELS:
        raise ValueError(f"a sample needs at least {MIN_LABELS} answers, asked for {n}")
    by: dict[str, list[dict]] = {s: [] for s in STRATA}
    for c in candidates:
        by[stratum(c.get("judged_faithful"))].append(c)
    sizes = {s: len(v) for s, v in by.items() if v}
    take = allocate(sizes, n)
    out = []
    for s in STRATA:
        if s not in take:
            continue
        ranked = sorted(by[s], key=lambda c: hashlib.sha256(f"{seed}:{c['qid']}".encode()).digest())
        out += [{**c, "stratum": s} for c in ranked[: take[s]]]
    return out, {s: {"answers": sizes[s], "drawn": take[s]} for s in sizes}


def _lines(path: Path) -> list[tuple[int, dict[str, Any]]]:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise LabelsError(f"{path}: cannot read the labels: {exc}") from None
    if path.suffix.lower() == ".csv":
        reader = csv.DictReader(text.splitlines())
        missing = [f for f in FIELDS[:3] if f not in (reader.fieldnames or [])]
        if missing:
            raise LabelsError(f"{path}: the CSV header lacks {', '.join(missing)}")
        return [(i + 2, dict(row)) for i, row in enumerate(reader)]
    out = []
    for i, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except json.JSONDecodeError as exc:
            raise LabelsError(f"{path}: line {i} is not JSON: {exc.msg}") from None
        if not isinstance(rec, dict):
            raise LabelsError(f"{path}: line {i} is not a JSON object")
        out.append((i, rec))
    return out


def read_labels(path: str | Path, answers: Mapping[str, str | None]) -> dict[str, dict]:
    """{qid: {"human": 1 | 0, "note": str}} of a labels file, checked against the run's
    `answers` ({qid: the answer's sha256 when the judge scored it, None when it did not})."""
    path = Path(path)
    out: dict[str, dict] = {}
    for line, rec in _lines(path):
        where = f"{path}: line {line}"
        for f in FIELDS[:3]:
            if f not in rec or rec[f] is None:
                raise LabelsError(f"{where}: no {f!r}")
        qid, sha, rating = str(rec["qid"]), str(rec["answer_sha256"]), rec["rating"]
        if isinstance(rating, str) and not rating.strip():
            raise LabelsError(f"{where}: question {qid!r} has no rating")
        if rating not in RATINGS:
            raise LabelsError(
                f"{where}: rating {rating!r} of question {qid!r} is not one of {sorted(RATINGS)}"
            )
        if qid in out:
            raise LabelsError(f"{where}: question {qid!r} is labelled a second time")
        if qid not in answers:
            raise LabelsError(f"{where}: question {qid!r} is not among the run's answers")
        if answers[qid] is None:
            raise LabelsError(f"{where}: question {qid!r} was not scored by the judge")
        if sha != answers[qid]:
            raise LabelsError(
                f"{where}: the answer of question {qid!r} differs from this run's "
                f"(answer_sha256 {sha[:12]}..., the run's {answers[qid][:12]}...): "
                "labels of another run"
            )
        out[qid] = {"human": RATINGS[rating], "note": str(rec.get("note") or "")}
    if len(out) < MIN_LABELS:
        raise LabelsError(f"{path}: {len(out)} label(s); an interval needs at least {MIN_LABELS}")
    return out


def run_answers(generations: Any, judgments: Any) -> dict[str, str | None]:
    """{qid: sha256 of the answer when the judge scored it, else None} of a run's tables."""
    scored = set(judgments.loc[judgments["status"] == "scored", "qid"].astype(str))
    return {
        str(q): (answer_sha256(str(a)) if str(q) in scored else None)
        for q, a in zip(generations["qid"], generations["answer"], strict=True)
    }


def run_id(answers: Mapping[str, str | None]) -> str:
    """sha256 of the run's scored answers (qid and answer hash, in qid order)."""
    body = "\n".join(f"{q}\t{s}" for q, s in sorted(answers.items()) if s is not None)
    return hashlib.sha256(body.encode("utf-8")).hexdigest()


def _float(v: Any) -> float | None:
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return None if f != f else f


def export_sample(data: Path, out: Path, n: int, seed: int) -> dict[str, Any]:
    """Draw the sample of a run's judged answers (data/parse, data/generate, data/judge under
    `data`) and write, in one rename, `out/`: sample.jsonl (question, passages, answer,
    the judge's verdict), labels.csv (the labels-file columns, rating left empty, for a
    spreadsheet), rate.html (ragrig.dataset.label_page) and manifest.json. Returns the manifest."""
    from ragrig.core.io import atomic_dir, read_table, write_json
    from ragrig.dataset.label_page import write_label_page

    queries = read_table(data / "parse" / "queries.parquet", "queries")
    generations = read_table(data / "generate" / "generations.parquet", "generations")
    judgments = read_table(data / "judge" / "judgments.parquet", "judgments")
    answers = run_answers(generations, judgments)
    question = dict(zip(queries["qid"].astype(str), queries["text"], strict=True))
    gen = {str(r["qid"]): r for r in generations.to_dict("records")}
    candidates = []
    for j in judgments.to_dict("records"):
        qid = str(j["qid"])
        if j["status"] != "scored":
            continue
        g = gen[qid]
        candidates.append(
            {
                "qid": qid,
                "question": str(question.get(qid, "")),
                "answer": str(g["answer"]),
                "passages": json.loads(g["contexts"] or "[]"),
                "answer_sha256": answers[qid],
                "judged_faithful": _float(j.get("judged_faithful")),
                "judge": {
                    "judged_faithful": _float(j.get("judged_faithful")),
                    "answer_support": _float(j.get("answer_support")),
                    "faithfulness": _float(j.get("faithfulness")),
                    "failure_mode": str(j.get("failure_mode") or ""),
                    "contradictions": json.loads(j.get("contradictions") or "[]"),
                },
            }
        )
    items, strata = sample(candidates, n, seed)
    rid = run_id(answers)
    manifest = {
        "run_id": rid,
        "n": len(items),
        "seed": seed,
        "scored_answers": len(candidates),
        "answers": len(answers),
        "strata": strata,
        "rule": "strata of the judge's decision, each its proportional share of n (largest "
        "remainder); within a stratum the first answers in sha256('<seed>:<qid>') order",
    }
    with atomic_dir(out) as tmp:
        lines = []
        for it in items:
            rec = {k: it[k] for k in ("qid", "question", "answer", "passages", "answer_sha256")}
            lines.append(json.dumps({**rec, "stratum": it["stratum"], "judge": it["judge"]}))
        (tmp / "sample.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
        with open(tmp / "labels.csv", "w", encoding="utf-8", newline="") as fh:
            w = csv.writer(fh)
            w.writerow([*FIELDS, "question", "answer"])
            for it in items:
                w.writerow([it["qid"], it["answer_sha256"], "", "", it["question"], it["answer"]])
        write_label_page(tmp / "rate.html", rid[:16], items, f"Rate {len(items)} answers")
        write_json(tmp / "manifest.json", manifest)
    return manifest
