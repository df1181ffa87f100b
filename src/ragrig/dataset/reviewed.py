"""The golden set that reviews grow: reviewed interactions of `ragrig traces`' review queue,
appended to a versioned evaluation set in BEIR layout that the pipeline reads like any other
(conf/dataset/reviewed.yaml).

The reviews file (JSONL, what the review page of `ragrig label --queue` saves) holds one line
per reviewed interaction:

    {"id": "<interaction id>", "answer_sha256": "<sha256 of the answer>", "rating": "faithful",
     "relevant": ["<passage id>", ...], "corrected_answer": "", "note": ""}

`id`, `answer_sha256` and `rating` (faithful / unfaithful) are required; `relevant` lists ids
of the passages the queue item showed; `corrected_answer` and `note` are optional. The whole
file is checked before anything is written, and the first problem stops it with one line naming
the file and the line: not JSON, a field missing or of the wrong type, a rating outside the two,
an interaction reviewed twice, an id the queue does not hold, an answer hash of another answer,
a passage the item did not show.

The set (a folder):

* `corpus.jsonl`: the passages the reviewed items showed (`_id`, `title`, `text`); a passage id
  the set holds with another text is refused;
* `queries.jsonl`: one query per reviewed interaction (`_id` its id, `text` its question); its
  `metadata` holds `split`, `rating`, `reasons`, `version` and `source` (slices of a run),
  `answer` (the reference answer: the reviewer's correction, else the logged answer when rated
  faithful and left uncorrected, else empty, which the correctness axis counts as an empty
  reference) and `review` (the logged answer, its sha256, whether it was corrected, the note: an
  object, so no slice column);
* `qrels/release.tsv` and `qrels/monitoring.tsv`: every passage shown, 1 when marked relevant,
  0 when not. The blind sample's reviews are monitoring data (ragrig.traces.queue) and go to
  `monitoring` only, the rest to `release`: a run reads one split, so the two never mix;
* `versions.jsonl`: one line per append that added something (version, counts, the reviews
  file's sha256 and every file's sha256 after it).

An interaction already in the set is not added again (counted). Every file is rewritten whole
and atomically; a killed append leaves the previous version or a state the same append
completes when run again (versions.jsonl, written last, is the commit).
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

from ragrig.core.errors import DataValidationError
from ragrig.core.io import file_sha256
from ragrig.dataset.labels import RATINGS

SPLITS = ("release", "monitoring")
FILES = ("corpus.jsonl", "queries.jsonl", "qrels/release.tsv", "qrels/monitoring.tsv")


class ReviewsError(DataValidationError):
    """A reviews file, queue or set that cannot be read as such."""


def _jsonl(path: Path, what: str) -> list[tuple[int, dict[str, Any]]]:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ReviewsError(f"{path}: cannot read the {what}: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise ReviewsError(f"{path}: the {what} is not UTF-8") from None
    out = []
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ReviewsError(f"{path}:{n}: not JSON: {exc.msg}") from None
        if not isinstance(rec, dict):
            raise ReviewsError(f"{path}:{n}: a line must be a JSON object")
        out.append((n, rec))
    return out


def read_queue(path: Path) -> dict[str, dict[str, Any]]:
    """The review queue of `ragrig traces` (review_queue.jsonl), by interaction id."""
    out: dict[str, dict[str, Any]] = {}
    for n, rec in _jsonl(path, "review queue"):
        for key in ("id", "question", "contexts", "answer", "answer_sha256", "split"):
            if key not in rec:
                raise ReviewsError(f"{path}:{n}: a queue item without {key!r}")
        if rec["split"] not in SPLITS:
            raise ReviewsError(f"{path}:{n}: split {rec['split']!r} is not one of {SPLITS}")
        out[str(rec["id"])] = rec
    if not out:
        raise ReviewsError(f"{path}: the review queue is empty")
    return out


def read_reviews(path: Path, queue: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """The reviews of `path`, checked against the queue (module doc)."""
    seen: dict[str, int] = {}
    out = []
    for n, rec in _jsonl(path, "reviews file"):
        where = f"{path}:{n}"
        for key in ("id", "answer_sha256", "rating"):
            if not isinstance(rec.get(key), str) or not rec[key].strip():
                raise ReviewsError(f"{where}: {key!r} is missing or not a non-empty string")
        qid = rec["id"]
        if rec["rating"] not in RATINGS:
            raise ReviewsError(
                f"{where}: rating {rec['rating']!r} is not one of {', '.join(RATINGS)}"
            )
        if qid in seen:
            raise ReviewsError(f"{where}: interaction {qid!r} reviewed twice (line {seen[qid]})")
        seen[qid] = n
        item = queue.get(qid)
        if item is None:
            raise ReviewsError(f"{where}: interaction {qid!r} is not in the review queue")
        if rec["answer_sha256"] != item["answer_sha256"]:
            raise ReviewsError(
                f"{where}: the answer hash of {qid!r} is not the queued answer's (a review of "
                "another answer)"
            )
        relevant = rec.get("relevant", [])
        if not isinstance(relevant, list) or not all(isinstance(r, str) for r in relevant):
            raise ReviewsError(f"{where}: 'relevant' must be a list of passage ids")
        shown = [c["id"] for c in item["contexts"]]
        unknown = [r for r in relevant if r not in shown]
        if unknown:
            raise ReviewsError(f"{where}: passage {unknown[0]!r} was not shown with {qid!r}")
        for key in ("corrected_answer", "note"):
            if rec.get(key) is not None and not isinstance(rec[key], str):
                raise ReviewsError(f"{where}: {key!r} must be a string")
        out.append(
            {
                "id": qid,
                "rating": rec["rating"],
                "relevant": set(relevant),
                "corrected_answer": (rec.get("corrected_answer") or "").strip(),
                "note": (rec.get("note") or "").strip(),
            }
        )
    if not out:
        raise ReviewsError(f"{path}: no reviews")
    return out


def _read_set(root: Path) -> tuple[dict[str, str], list[dict], dict[str, list[str]], list[dict]]:
    corpus = {str(r["_id"]): str(r["text"]) for _, r in _read_if(root / "corpus.jsonl")}
    queries = [r for _, r in _read_if(root / "queries.jsonl")]
    qrels: dict[str, list[str]] = {}
    for split in SPLITS:
        path = root / "qrels" / f"{split}.tsv"
        lines = path.read_text(encoding="utf-8").splitlines()[1:] if path.exists() else []
        qrels[split] = [x for x in lines if x.strip()]
    versions = [r for _, r in _read_if(root / "versions.jsonl")]
    return corpus, queries, qrels, versions


def _read_if(path: Path) -> list[tuple[int, dict[str, Any]]]:
    return _jsonl(path, "set file") if path.exists() else []


def append(reviews_path: Path, queue_path: Path, root: Path) -> dict[str, Any]:
    """Append the reviews to the set at `root` (created when absent); what was added and
    skipped, and the new version (None when nothing was added)."""
    from ragrig.core.io import atomic_write_text

    queue = read_queue(queue_path)
    reviews = read_reviews(reviews_path, queue)
    corpus, queries, qrels, versions = _read_set(root)
    have = {str(q["_id"]) for q in queries}
    version = (versions[-1]["version"] if versions else 0) + 1
    added: Counter = Counter()
    skipped: Counter = Counter()
    new_passages = 0
    for r in reviews:
        if r["id"] in have:
            skipped["already in the set"] += 1
            continue
        item = queue[r["id"]]
        split = item["split"]
        for c in item["contexts"]:
            pid, text = str(c["id"]), str(c["text"])
            if pid in corpus and corpus[pid] != text:
                raise ReviewsError(
                    f"{root / 'corpus.jsonl'}: passage {pid!r} is in the set with another text "
                    f"than interaction {r['id']!r} showed"
                )
            new_passages += pid not in corpus
            corpus[pid] = text
        # a line an earlier, killed append left for this query is replaced, never doubled
        qrels[split] = [x for x in qrels[split] if x.split("\t")[0] != r["id"]]
        qrels[split] += [
            f"{r['id']}\t{c['id']}\t{int(c['id'] in r['relevant'])}" for c in item["contexts"]
        ]
        meta: dict[str, Any] = {
            "split": split,
            "rating": r["rating"],
            "reasons": ",".join(item.get("reasons") or []),
            "answer": reference(r, item["answer"]),
            "version": version,
            "source": "review",
            # not a slice: an object, which the loader leaves out of the slice columns
            "review": {
                "logged_answer": item["answer"],
                "answer_sha256": item["answer_sha256"],
                "corrected": bool(r["corrected_answer"]),
                "note": r["note"],
            },
        }
        queries.append({"_id": r["id"], "text": item["question"], "metadata": meta})
        have.add(r["id"])
        added[split] += 1
    summary: dict[str, Any] = {
        "set": str(root),
        "reviews": len(reviews),
        "added": {s: added[s] for s in SPLITS},
        "skipped": dict(skipped),
        "new_passages": new_passages,
        "version": None,
    }
    if not sum(added.values()):
        return summary
    root.mkdir(parents=True, exist_ok=True)

    def jsonl(rows: list[dict]) -> str:
        return "".join(json.dumps(x, ensure_ascii=False) + "\n" for x in rows)

    atomic_write_text(
        root / "corpus.jsonl",
        jsonl([{"_id": k, "title": "", "text": v} for k, v in sorted(corpus.items())]),
    )
    for split in SPLITS:
        body = "".join(x + "\n" for x in qrels[split])
        atomic_write_text(root / "qrels" / f"{split}.tsv", "query-id\tcorpus-id\tscore\n" + body)
    atomic_write_text(root / "queries.jsonl", jsonl(queries))
    record = {
        "version": version,
        "added": summary["added"],
        "skipped": dict(skipped),
        "reviews_sha256": file_sha256(reviews_path),
        "files": {name: file_sha256(root / name) for name in FILES},
    }
    atomic_write_text(root / "versions.jsonl", jsonl([*versions, record]))
    summary["version"] = version
    return summary


def reference(review: dict[str, Any], logged: str) -> str:
    """The query's reference answer: the reviewer's correction; else the logged answer when the
    reviewer rated it faithful and left it as it was; else "" (no reference, which the
    correctness axis counts as an empty reference, never reads as a wrong answer)."""
    if review["corrected_answer"]:
        return review["corrected_answer"]
    return logged if review["rating"] == "faithful" else ""


def page_items(queue: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """The queue's items as the review page shows them (ragrig.dataset.label_page)."""
    return [
        {
            "qid": qid,
            "question": it["question"],
            "answer": it["answer"],
            "passages": [str(c["text"]) for c in it["contexts"]],
            "passage_ids": [str(c["id"]) for c in it["contexts"]],
            "answer_sha256": it["answer_sha256"],
            "judge": it.get("judge"),
            "reasons": it.get("reasons") or [],
        }
        for qid, it in queue.items()
    ]
