"""MTRAG's human faithfulness ratings (IBM mt-rag-benchmark,
`mtrag-human/evaluations/reference_subset_with_human_evaluations.json`), as rated answers.

The file holds `documents` ({document_id, title, text}), `tasks` (the conversation `input`, the
gold `contexts` as document ids, ...) and `evaluations` (one per task and responder: `task_id`,
`model_id`, `model_response`, and per-annotator categorical ratings under
`annotations.faithfulness.<annotator>.value`, "1"-"4"). One rated answer per evaluation:

* question: the last user turn of `input`; `history` holds the turns before it;
* contexts: the text of the task's gold `contexts`, resolved in `documents`, in task order;
* answer: `model_response`;
* human label: faithful when the mean of the annotators' faithfulness ratings is >= the
  configured minimum (3 of 4 by default).

Bad input raises DataValidationError naming the file and the record (an evaluation naming an
unknown task, a rating that is not 1-4, a missing field, a duplicate task/responder pair, a
context id with no document, an answerability that is not one known label); nothing is dropped
silently. Tasks with no evaluation, and tasks with no answerability label, are counted; so are
lone surrogates (JSON escapes such as "\\ud83d" without their pair), replaced by U+FFFD
(`surrogates_replaced`, only when there are some, and a warning on stderr).
"""

from __future__ import annotations

import gzip
import json
import statistics
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ragrig.core.errors import DataValidationError

RATINGS = (1, 2, 3, 4)
UNANSWERABLE, ANSWERABLE = "UNANSWERABLE", "ANSWERABLE"
# MTRAG's answerability values (MTRAG and MTRAG-UN); any other value is an error naming it.
ANSWERABILITY = frozenset({ANSWERABLE, UNANSWERABLE, "PARTIAL", "UNDERSPECIFIED", "CONVERSATIONAL"})


def answerability_label(value: Any, where: str) -> str:
    """The single answerability label of a task: MTRAG stores a one-element list; absent or
    empty gives "" (unlabelled, counted); anything else is a DataValidationError."""
    if value is None or value == []:
        return ""
    if (
        not isinstance(value, list)
        or len(value) != 1
        or not isinstance(value[0], str)
        or value[0] not in ANSWERABILITY
    ):
        raise DataValidationError(
            f"{where}: answerability {value!r:.80} is not one list of one of {sorted(ANSWERABILITY)}"
        )
    return value[0]


@dataclass(frozen=True)
class RatedAnswer:
    task_id: str
    model_id: str
    question: str
    history: tuple[tuple[str, str], ...]  # (speaker, text) of the turns before the question
    contexts: tuple[str, ...]
    answer: str
    ratings: tuple[int, ...]
    faithful: int  # 1 when mean(ratings) >= the configured minimum
    answerability: str = ""
    domain: str = ""

    @property
    def mean_rating(self) -> float:
        return statistics.fmean(self.ratings)

    def judge_question(self, mode: str = "conversation") -> str:
        """The question the judge reads: the last user turn alone, or preceded by the turns
        before it, one `speaker: text` line each."""
        if mode == "last_turn" or not self.history:
            return self.question
        if mode != "conversation":
            raise ValueError(f"unknown question mode {mode!r}")
        lines = [f"{speaker}: {text}" for speaker, text in self.history]
        return "\n".join([*lines, f"user: {self.question}"])


@dataclass(frozen=True)
class RatedSet:
    path: Path
    answers: list[RatedAnswer]
    counts: dict[str, int] = field(default_factory=dict)


def resolve_dataset_file(path: Path) -> Path:
    """The file itself, or its uncompressed twin (`x.json` for a missing `x.json.gz`)."""
    path = Path(path)
    if path.is_file():
        return path
    if path.suffix == ".gz" and path.with_suffix("").is_file():
        return path.with_suffix("")
    raise DataValidationError(f"MTRAG human-evaluation file not found: {path}")


def _read(path: Path) -> tuple[Any, int]:
    """The file's JSON, with lone surrogates replaced by U+FFFD, and how many were replaced."""
    from ragrig.core.text import replace_surrogates_in, surrogate_warning

    opener = gzip.open if path.suffix == ".gz" else open
    try:
        with opener(path, "rt", encoding="utf-8") as fh:
            data = json.load(fh)
    except (OSError, json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise DataValidationError(f"{path}: cannot read JSON: {exc}") from exc
    data, replaced = replace_surrogates_in(data)
    if replaced:
        print(surrogate_warning(str(path), replaced), file=sys.stderr)
    return data, replaced


def _field(record: Any, key: str, where: str, kind: type | tuple[type, ...]) -> Any:
    if not isinstance(record, dict) or key not in record:
        raise DataValidationError(f"{where}: missing field {key!r}")
    value = record[key]
    if not isinstance(value, kind) or isinstance(value, bool):
        names = " or ".join(t.__name__ for t in (kind if isinstance(kind, tuple) else (kind,)))
        raise DataValidationError(f"{where}: field {key!r} must be {names}, got {value!r:.60}")
    return value


def _rating(value: Any, where: str) -> int:
    """'1'-'4' (the file's categorical strings) or the integers 1-4; anything else is an error."""
    if isinstance(value, str) and value.strip() in {str(r) for r in RATINGS}:
        return int(value.strip())
    if isinstance(value, int) and not isinstance(value, bool) and value in RATINGS:
        return value
    if isinstance(value, float) and value.is_integer() and int(value) in RATINGS:
        return int(value)
    raise DataValidationError(f"{where}: rating {value!r} is not one of 1-4")


def load_mtrag_human(path: str | Path, faithful_min_mean: float = 3.0) -> RatedSet:
    path = resolve_dataset_file(Path(path))
    data, replaced = _read(path)
    if not isinstance(data, dict):
        raise DataValidationError(f"{path}: top level must be an object")
    docs: dict[str, str] = {}
    for i, d in enumerate(_field(data, "documents", str(path), list)):
        where = f"{path}: documents[{i}]"
        doc_id = _field(d, "document_id", where, str)
        if doc_id in docs:
            raise DataValidationError(f"{where}: duplicate document_id {doc_id!r}")
        docs[doc_id] = _field(d, "text", f"{where} ({doc_id})", str)

    tasks: dict[str, dict[str, Any]] = {}
    counts = {"tasks_without_contexts": 0}
    for i, t in enumerate(_field(data, "tasks", str(path), list)):
        where = f"{path}: tasks[{i}]"
        tid = _field(t, "task_id", where, str)
        where = f"{where} (task {tid!r})"
        if tid in tasks:
            raise DataValidationError(f"{where}: duplicate task_id")
        turns = []
        for j, turn in enumerate(_field(t, "input", where, list)):
            turns.append(
                (
                    _field(turn, "speaker", f"{where} input[{j}]", str),
                    _field(turn, "text", f"{where} input[{j}]", str),
                )
            )
        if not turns or turns[-1][0] != "user":
            raise DataValidationError(f"{where}: `input` must end with a user turn")
        contexts = []
        for j, c in enumerate(_field(t, "contexts", where, list)):
            doc_id = _field(c, "document_id", f"{where} contexts[{j}]", str)
            if doc_id not in docs:
                raise DataValidationError(
                    f"{where} contexts[{j}]: document_id {doc_id!r} is not among `documents`"
                )
            contexts.append(docs[doc_id])
        counts["tasks_without_contexts"] += not contexts
        answerability = answerability_label(t.get("Answerability"), where)
        collection = str(t.get("Collection", ""))
        tasks[tid] = {
            "question": turns[-1][1],
            "history": tuple(turns[:-1]),
            "contexts": tuple(contexts),
            "answerability": answerability,
            "domain": collection.split("-")[2] if collection.count("-") >= 2 else collection,
        }

    answers: list[RatedAnswer] = []
    seen: set[tuple[str, str]] = set()
    for i, e in enumerate(_field(data, "evaluations", str(path), list)):
        where = f"{path}: evaluations[{i}]"
        tid = _field(e, "task_id", where, str)
        mid = _field(e, "model_id", where, str)
        where = f"{where} (task {tid!r}, model {mid!r})"
        if tid not in tasks:
            raise DataValidationError(f"{where}: task_id is not among `tasks`")
        if (tid, mid) in seen:
            raise DataValidationError(f"{where}: a second evaluation of the same task and model")
        seen.add((tid, mid))
        response = _field(e, "model_response", where, str)
        ann = _field(e, "annotations", where, dict)
        faith = _field(ann, "faithfulness", f"{where} annotations", dict)
        if not faith:
            raise DataValidationError(f"{where}: no faithfulness rating")
        ratings = tuple(
            _rating(
                _field(v, "value", f"{where} faithfulness[{a!r}]", (str, int, float)),
                f"{where} faithfulness[{a!r}]",
            )
            for a, v in faith.items()
        )
        task = tasks[tid]
        answers.append(
            RatedAnswer(
                task_id=tid,
                model_id=mid,
                question=task["question"],
                history=task["history"],
                contexts=task["contexts"],
                answer=response,
                ratings=ratings,
                faithful=int(statistics.fmean(ratings) >= faithful_min_mean),
                answerability=task["answerability"],
                domain=task["domain"],
            )
        )
    rated_tasks = {a.task_id for a in answers}
    counts.update(
        documents=len(docs),
        tasks=len(tasks),
        evaluations=len(answers),
        tasks_unrated=len(set(tasks) - rated_tasks),
        faithful=sum(a.faithful for a in answers),
        tasks_without_answerability=sum(not t["answerability"] for t in tasks.values()),
    )
    if replaced:
        counts["surrogates_replaced"] = replaced
    if not answers:
        raise DataValidationError(f"{path}: no evaluations")
    return RatedSet(path=path, answers=answers, counts=counts)
