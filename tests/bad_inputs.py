"""ragrig's bad-input corpus: malformed or hostile BEIR datasets and dataset archives, generated.

Nothing here is committed as data. Each case writes a small valid BEIR dataset (`write_base`),
then breaks it one way, and states the outcome the parse stage or `data ensure` must give: one
error line containing `error` (`{root}` / `{url}` stand for the case's folder / URL), or, for
input that is accepted, the counts the parse manifest must hold. tests/test_bad_inputs.py runs
every case; `python tests/bad_inputs.py OUT` writes them all under OUT for a look.
"""

from __future__ import annotations

import gzip
import io
import json
import os
import stat
import sys
import tarfile
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# --- the valid base dataset ---------------------------------------------------------------------

CORPUS = [
    {"_id": "d1", "title": "Phobos", "text": "Phobos is the larger moon of Mars."},
    {"_id": "d2", "title": "Deimos", "text": "Deimos is the smaller moon of Mars."},
    {"_id": "d3", "title": "Olympus Mons", "text": "Olympus Mons is a volcano on Mars."},
    {"_id": "d4", "title": "", "text": "Valles Marineris is a canyon system."},
]
QUERIES = [
    {"_id": "1", "text": "Which is the larger moon of Mars?"},
    {"_id": "2", "text": "Which is the smaller moon of Mars?"},
    {"_id": "3", "text": "Is there a canyon on Venus?"},
    {"_id": "4", "text": "A query no split judges."},
]
QRELS = ["query-id\tcorpus-id\tscore", "1\td1\t1", "2\td2\t1", "2\td3\t0", "3\td4\t0"]
CLAIMS = [
    {
        "id": 1,
        "claim": QUERIES[0]["text"],
        "evidence": {"d1": [{"sentences": [0], "label": "SUPPORT"}]},
    },
    {
        "id": 2,
        "claim": QUERIES[1]["text"],
        "evidence": {"d2": [{"sentences": [0], "label": "CONTRADICT"}]},
    },
    {"id": 3, "claim": QUERIES[2]["text"], "evidence": {}},
]
CLAIMS_FILE = "original/claims_dev.jsonl"

# What parse reports for the base dataset: queries 1 and 2 have a positive judgment, 3 only a
# grade-0 one, 4 none at all.
BASE_COUNTS: dict[str, Any] = {
    "documents": 4,
    "queries": 3,
    "judgments": 4,
    "queries_scored": 2,
    "queries_unjudged": 1,
    "queries_no_positive": 1,
    "claims_unknown": 0,
    "claim_labels": {"CONTRADICT": 1, "NOT_ENOUGH_INFO": 1, "SUPPORT": 1},
}


def _jsonl(records: list[dict[str, Any]]) -> str:
    return "".join(json.dumps(r) + "\n" for r in records)


def write_base(root: Path) -> Path:
    (root / "qrels").mkdir(parents=True)
    (root / "original").mkdir()
    (root / "corpus.jsonl").write_text(_jsonl(CORPUS), encoding="utf-8")
    (root / "queries.jsonl").write_text(_jsonl(QUERIES), encoding="utf-8")
    (root / "qrels" / "test.tsv").write_text("\n".join(QRELS) + "\n", encoding="utf-8")
    (root / CLAIMS_FILE).write_text(_jsonl(CLAIMS), encoding="utf-8")
    return root


def _lines(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines()


def _set_line(name: str, lineno: int, text: str) -> Callable[[Path], None]:
    def build(root: Path) -> None:
        lines = _lines(root / name)
        lines[lineno - 1] = text
        (root / name).write_text("\n".join(lines) + "\n", encoding="utf-8")

    return build


def _append(name: str, text: str) -> Callable[[Path], None]:
    def build(root: Path) -> None:
        with open(root / name, "a", encoding="utf-8") as fh:
            fh.write(text + "\n")

    return build


def _remove(name: str) -> Callable[[Path], None]:
    def build(root: Path) -> None:
        (root / name).unlink()

    return build


def _write(name: str, data: bytes) -> Callable[[Path], None]:
    def build(root: Path) -> None:
        (root / name).write_bytes(data)

    return build


def _blank_docs(*ids: str) -> Callable[[Path], None]:
    def build(root: Path) -> None:
        recs = [
            {"_id": r["_id"], "title": "", "text": " "} if r["_id"] in ids else r for r in CORPUS
        ]
        (root / "corpus.jsonl").write_text(_jsonl(recs), encoding="utf-8")

    return build


def _each_file(transform: Callable[[bytes], bytes]) -> Callable[[Path], None]:
    def build(root: Path) -> None:
        for rel in ("corpus.jsonl", "queries.jsonl", "qrels/test.tsv", CLAIMS_FILE):
            (root / rel).write_bytes(transform((root / rel).read_bytes()))

    return build


def _gzip_corpus(
    transform: Callable[[bytes], bytes] = lambda b: b, bom: bool = False
) -> Callable[[Path], None]:
    def build(root: Path) -> None:
        raw = (b"\xef\xbb\xbf" if bom else b"") + (root / "corpus.jsonl").read_bytes()
        (root / "corpus.jsonl.gz").write_bytes(transform(gzip.compress(raw, mtime=0)))
        (root / "corpus.jsonl").unlink()

    return build


def _root_is_file(root: Path) -> None:
    import shutil

    shutil.rmtree(root)
    root.write_text("not a folder\n", encoding="utf-8")


def _root_missing(root: Path) -> None:
    import shutil

    shutil.rmtree(root)


def _non_utf8_corpus(root: Path) -> None:
    lines = (root / "corpus.jsonl").read_bytes().split(b"\n")
    lines[1] = lines[1].replace(b"smaller", b"sm\xffller")
    (root / "corpus.jsonl").write_bytes(b"\n".join(lines))


# byte offset of the 0xff above: line 1 and its newline, then up to "sm" in line 2
_LINE1 = (json.dumps(CORPUS[0]) + "\n").encode()
_BAD_AT = len(_LINE1) + json.dumps(CORPUS[1]).encode().index(b"smaller") + 2


def _latin1_queries(root: Path) -> None:
    recs = [dict(q) for q in QUERIES]
    recs[2]["text"] = "Is there a canyon on Vénus?"
    text = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in recs)
    (root / "queries.jsonl").write_text(text, encoding="latin-1")


def _more_unjudged(root: Path) -> None:
    extra = [{"_id": "5", "text": "Unjudged five."}, {"_id": "6", "text": "Unjudged six."}]
    (root / "queries.jsonl").write_text(_jsonl(QUERIES + extra), encoding="utf-8")


def _claims_without(cid: int) -> Callable[[Path], None]:
    def build(root: Path) -> None:
        kept = [c for c in CLAIMS if c["id"] != cid]
        (root / CLAIMS_FILE).write_text(_jsonl(kept), encoding="utf-8")

    return build


# A gzip bomb in miniature: one JSON line of 4 MiB of spaces compresses to about 4 KB; with the
# case's parse.max_record_bytes of 1 MiB the reader stops after reading 1 MiB of it. The real
# thing (gigabytes from a few MB) is the same file with more spaces; the defaults stop it alike.
_BOMB_LINE = b'{"_id": "d5", "title": "Bomb", "text": "' + b" " * (4 * 2**20) + b'"}\n'
_SMALL_LIMITS = {"max_record_bytes": 2**20, "max_inflated_bytes": 2**21}


def _gzip_bomb(lines: int = 1, line: bytes = _BOMB_LINE) -> Callable[[Path], None]:
    def build(root: Path) -> None:
        raw = (root / "corpus.jsonl").read_bytes() + line * lines
        (root / "corpus.jsonl.gz").write_bytes(gzip.compress(raw, compresslevel=9, mtime=0))
        (root / "corpus.jsonl").unlink()

    return build


def _long_line(name: str, text: str) -> Callable[[Path], None]:
    """A plain file whose second line is 1 MiB and more: over the case's 1 MiB record bound."""
    return _set_line(name, 2, text + "x" * 2**20)


def _one_id_everywhere(root: Path) -> None:
    """5000 more lines, all with the id d1: the duplicate-id message must stay short."""
    extra = "".join(
        json.dumps({"_id": "d1", "title": "Again", "text": f"Copy {i}."}) + "\n"
        for i in range(5000)
    )
    with open(root / "corpus.jsonl", "a", encoding="utf-8") as fh:
        fh.write(extra)


def _many_duplicate_ids(root: Path) -> None:
    """Ids d1..d4 each repeated 3 more times, and 20 new ids twice: 24 duplicate ids."""
    recs = CORPUS * 4 + [
        {"_id": f"n{i:02d}", "title": "", "text": "x"} for i in range(20) for _ in range(2)
    ]
    (root / "corpus.jsonl").write_text(_jsonl(recs), encoding="utf-8")


def _blank_lines(root: Path) -> None:
    for rel in ("corpus.jsonl", "queries.jsonl", "qrels/test.tsv"):
        text = (root / rel).read_text(encoding="utf-8")
        (root / rel).write_text("\n" + text.replace("\n", "\n  \n"), encoding="utf-8")


@dataclass(frozen=True)
class DatasetCase:
    name: str
    build: Callable[[Path], None]  # breaks the base dataset written at root
    error: str | tuple[str, ...] | None = None  # the one error line contains this (every part
    # of a tuple); {root} stands for the dataset folder
    counts: dict[str, Any] | None = None  # else: the manifest holds these values
    empty_text: str = "skip"
    claims: bool = True
    printed: str | None = None  # a line parse must print for an accepted input
    warned: str | tuple[str, ...] = ()  # the warning line(s) parse must print on stderr, all
    # "table.column" -> how many U+FFFD its values hold in total (a replaced lone surrogate)
    fffd: dict[str, int] | None = None
    parse: dict[str, Any] | None = None  # parse settings the case sets (its read limits)
    longest: int | None = None  # the error line holds at most this many characters


def _counts(**changes: Any) -> dict[str, Any]:
    return {**BASE_COUNTS, **changes}


def _surrogates(**changes: int) -> dict[str, int]:
    return {"corpus": 0, "queries": 0, "claims": 0, **changes}


def _record(name: str, lineno: int, record: dict[str, Any]) -> Callable[[Path], None]:
    """Line `lineno` of `name` becomes `record` as JSON: a lone surrogate in its strings is
    written as the escape json.dumps gives it ("\\ud83d"), the one way a UTF-8 file holds it."""
    return _set_line(name, lineno, json.dumps(record))


_EMPTY_NONE = {
    "policy": "skip",
    "documents": 0,
    "skipped": 0,
    "doc_ids": [],
    "judged_documents": 0,
    "judged_doc_ids": [],
    "judgments": 0,
    "positive_judgments": 0,
    "queries_affected": 0,
}

DATASET_CASES: list[DatasetCase] = [
    # JSON lines
    DatasetCase(
        "malformed_json",
        _set_line("corpus.jsonl", 2, '{"_id": "d2", "title": "cut off", "text": '),
        "{root}/corpus.jsonl:2: malformed JSON",
    ),
    DatasetCase(
        "non_object_line",
        _set_line("queries.jsonl", 1, '["1", "a list, not an object"]'),
        "{root}/queries.jsonl:1: expected a JSON object",
    ),
    DatasetCase(
        "bare_string_line",
        _set_line("corpus.jsonl", 1, '"just a string"'),
        "{root}/corpus.jsonl:1: expected a JSON object",
    ),
    DatasetCase(
        "missing_id",
        _append("corpus.jsonl", json.dumps({"title": "No id", "text": "Nobody knows me."})),
        "{root}/corpus.jsonl:5: record has no '_id'",
    ),
    DatasetCase(
        "null_id",
        _set_line("corpus.jsonl", 3, json.dumps({"_id": None, "title": "t", "text": "x"})),
        "{root}/corpus.jsonl:3: '_id' must be a non-empty string or integer, got None",
    ),
    DatasetCase(
        "title_not_a_string",
        _set_line("corpus.jsonl", 2, json.dumps({"_id": "d2", "title": {"a": 1}, "text": "x"})),
        "{root}/corpus.jsonl:2: field 'title' must be a string, got dict",
    ),
    DatasetCase(
        "hostile_nesting",
        _set_line("corpus.jsonl", 4, "[" * 200_000),
        "{root}/corpus.jsonl:4: JSON nested too deeply",
    ),
    DatasetCase(
        "duplicate_document_id",
        _append("corpus.jsonl", json.dumps({"_id": "d2", "title": "Again", "text": "Twice."})),
        "{root}/corpus.jsonl: 1 duplicate document id ('d2' on 2 lines (2, 5))",
    ),
    DatasetCase(
        "duplicate_query_id",
        _append("queries.jsonl", json.dumps({"_id": "2", "text": "A second query 2."})),
        "{root}/queries.jsonl: 1 duplicate query id ('2' on 2 lines (2, 5))",
    ),
    DatasetCase(
        "one_id_on_every_line",
        _one_id_everywhere,
        "{root}/corpus.jsonl: 1 duplicate document id ('d1' on 5001 lines (1, 5, 6, … and "
        "4998 more))",
        longest=400,
    ),
    DatasetCase(
        "many_duplicate_ids",
        _many_duplicate_ids,
        "{root}/corpus.jsonl: 24 duplicate document ids ('d1' on 4 lines (1, 5, 9, … and 1 "
        "more), 'd2' on 4 lines (2, 6, 10, … and 1 more), 'd3' on 4 lines (3, 7, 11, … and 1 "
        "more), … and 21 more)",
        longest=400,
    ),
    DatasetCase(
        "empty_query_text",
        _set_line("queries.jsonl", 2, json.dumps({"_id": "2", "text": "  "})),
        "{root}/queries.jsonl: 1 query ('2') with empty text",
    ),
    # ids TREC run and qrels files cannot hold: refused at parse, not at report after the compute
    DatasetCase(
        "document_id_with_space",
        _append("corpus.jsonl", json.dumps({"_id": "d 5", "title": "Tharsis", "text": "x"})),
        "{root}/corpus.jsonl:5: '_id' 'd 5' holds whitespace (' '); an id may hold no "
        "whitespace or control character",
    ),
    DatasetCase(
        "document_id_with_nul",
        _append("corpus.jsonl", json.dumps({"_id": "d\u00005", "title": "Tharsis", "text": "x"})),
        "{root}/corpus.jsonl:5: '_id' 'd\\x005' holds a control character ('\\x00')",
    ),
    DatasetCase(
        "document_id_with_no_break_space",
        _append("corpus.jsonl", json.dumps({"_id": "d\u00a05", "title": "Tharsis", "text": "x"})),
        "{root}/corpus.jsonl:5: '_id' 'd\\xa05' holds whitespace ('\\xa0')",
    ),
    DatasetCase(
        "document_id_with_line_separator",
        _append("corpus.jsonl", json.dumps({"_id": "d\u20285", "title": "Tharsis", "text": "x"})),
        "{root}/corpus.jsonl:5: '_id' 'd\\u20285' holds whitespace ('\\u2028')",
    ),
    DatasetCase(
        "query_id_with_tab",
        _append("queries.jsonl", json.dumps({"_id": "5\t6", "text": "A tab in my id."})),
        "{root}/queries.jsonl:5: '_id' '5\\t6' holds whitespace ('\\t')",
    ),
    DatasetCase(
        "query_id_with_delete",
        _append("queries.jsonl", json.dumps({"_id": "5\u007f", "text": "A DEL in my id."})),
        "{root}/queries.jsonl:5: '_id' '5\\x7f' holds a control character ('\\x7f')",
    ),
    DatasetCase(
        "qrels_document_id_with_no_break_space",
        _append("qrels/test.tsv", "1\td\u00a01\t1"),
        "{root}/qrels/test.tsv:6: document id 'd\\xa01' holds whitespace ('\\xa0')",
    ),
    DatasetCase(
        "zero_width_space_in_id_is_kept",
        _append("corpus.jsonl", json.dumps({"_id": "d\u200b5", "title": "Tharsis", "text": "x"})),
        counts=_counts(documents=5),
    ),
    # encodings
    DatasetCase(
        "byte_order_mark_everywhere", _each_file(lambda b: b"\xef\xbb\xbf" + b), counts=_counts()
    ),
    DatasetCase(
        "crlf_line_endings", _each_file(lambda b: b.replace(b"\n", b"\r\n")), counts=_counts()
    ),
    DatasetCase("blank_lines_between_records", _blank_lines, counts=_counts()),
    DatasetCase(
        "non_utf8_byte_in_corpus",
        _non_utf8_corpus,
        f"{{root}}/corpus.jsonl:2: not valid UTF-8 (byte 0xff at byte offset {_BAD_AT})",
    ),
    DatasetCase(
        "latin1_queries",
        _latin1_queries,
        "{root}/queries.jsonl:3: not valid UTF-8 (byte 0xe9 at byte offset ",
    ),
    DatasetCase(
        "utf16_corpus",
        lambda root: (root / "corpus.jsonl").write_bytes(
            (root / "corpus.jsonl").read_text(encoding="utf-8").encode("utf-16")
        ),
        "{root}/corpus.jsonl:1: not valid UTF-8 (byte 0xff at byte offset 0)",
    ),
    DatasetCase(
        "latin1_claims",
        _write(
            CLAIMS_FILE,
            json.dumps({"id": 1, "claim": "Caf\xe9"}, ensure_ascii=False).encode("latin-1"),
        ),
        "{root}/original/claims_dev.jsonl:1: not valid UTF-8 (byte 0xe9",
    ),
    # gzip
    DatasetCase("gzip_corpus_with_bom", _gzip_corpus(bom=True), counts=_counts()),
    DatasetCase(
        "gzip_truncated",
        _gzip_corpus(lambda b: b[: len(b) // 2]),
        (
            "{root}/corpus.jsonl.gz:",
            ": truncated or corrupt gzip (Compressed file ended before the end-of-stream",
        ),
    ),
    DatasetCase(
        "gzip_line_bomb",
        _gzip_bomb(),
        "{root}/corpus.jsonl.gz:5: line longer than 1 MiB (raise parse.max_record_bytes to "
        "read it); not read further",
        parse=_SMALL_LIMITS,
    ),
    # 3000 lines of 926 bytes after the base's 4 lines (319 bytes): the 2265th added line, line
    # 2269, is the one that takes the inflated total past 2 MiB (319 + 2265 * 926 > 2**21)
    DatasetCase(
        "gzip_inflates_past_its_bound",
        _gzip_bomb(lines=3000, line=_jsonl([{"_id": "dN", "text": "x" * 900}]).encode()),
        "{root}/corpus.jsonl.gz:2269: inflates past 2 MiB (raise parse.max_inflated_bytes to "
        "read it); not read further",
        parse=_SMALL_LIMITS,
    ),
    DatasetCase(
        "long_line_in_queries",
        _long_line("queries.jsonl", '{"_id": "2", "text": "'),
        "{root}/queries.jsonl:2: line longer than 1 MiB (raise parse.max_record_bytes",
        parse=_SMALL_LIMITS,
    ),
    DatasetCase(
        "long_line_in_qrels",
        _long_line("qrels/test.tsv", "1\td1\t1"),
        "{root}/qrels/test.tsv:2: line longer than 1 MiB (raise parse.max_record_bytes",
        parse=_SMALL_LIMITS,
    ),
    DatasetCase(
        "long_line_in_claims",
        _long_line(CLAIMS_FILE, '{"id": 2, "claim": "'),
        "{root}/original/claims_dev.jsonl:2: line longer than 1 MiB (raise parse.max_record_bytes",
        parse=_SMALL_LIMITS,
    ),
    DatasetCase(
        "record_at_its_bound_is_read",
        _set_line(
            "corpus.jsonl",
            4,
            (lambda head: head + "y" * (2**20 - len(head) - 2) + '"}')(
                '{"_id": "d4", "title": "", "text": "'
            ),
        ),
        counts=_counts(),
        parse=_SMALL_LIMITS,
    ),
    DatasetCase(
        "gzip_name_plain_text",
        lambda root: (root / "corpus.jsonl").rename(root / "corpus.jsonl.gz"),
        "{root}/corpus.jsonl.gz:1: truncated or corrupt gzip (Not a gzipped file",
    ),
    # empty corpora and blank documents
    DatasetCase(
        "empty_corpus", _write("corpus.jsonl", b"\n\n"), "{root}/corpus.jsonl: the corpus is empty"
    ),
    DatasetCase(
        "all_documents_blank",
        _blank_docs("d1", "d2", "d3", "d4"),
        "{root}/corpus.jsonl: the corpus is empty (4 blank document(s) skipped)",
    ),
    DatasetCase(
        "blank_judged_document_skip",
        _blank_docs("d1", "d3"),
        counts=_counts(
            documents=2,
            empty_text={
                **_EMPTY_NONE,
                "documents": 2,
                "skipped": 2,
                "doc_ids": ["d1", "d3"],
                "judged_documents": 2,
                "judged_doc_ids": ["d1", "d3"],
                "judgments": 2,
                "positive_judgments": 1,
                "queries_affected": 1,
            },
        ),
        printed="parse: 2 document(s) with empty title and text skipped (parse.empty_text=skip): "
        "2 of them judged (d1, d3), 1 positive judgment(s) on 1 query(ies) kept in qrels "
        "(counted as gold that cannot be retrieved)",
    ),
    DatasetCase(
        "blank_judged_document_keep",
        _blank_docs("d1"),
        counts=_counts(
            empty_text={
                **_EMPTY_NONE,
                "policy": "keep",
                "documents": 1,
                "doc_ids": ["d1"],
                "judged_documents": 1,
                "judged_doc_ids": ["d1"],
                "judgments": 1,
                "positive_judgments": 1,
                "queries_affected": 1,
            }
        ),
        empty_text="keep",
    ),
    DatasetCase(
        "blank_document_error_policy",
        _blank_docs("d1"),
        "{root}/corpus.jsonl: 1 document ('d1') with empty title and text "
        "(set parse.empty_text=skip or keep to accept them)",
        empty_text="error",
    ),
    # qrels
    DatasetCase(
        "qrels_unknown_document",
        _append("qrels/test.tsv", "1\tdX\t1"),
        "qrels/test.tsv names 1 unknown document id ('dX')",
    ),
    DatasetCase(
        "qrels_unknown_query",
        _append("qrels/test.tsv", "99\td1\t1"),
        "qrels/test.tsv names 1 unknown query id ('99')",
    ),
    DatasetCase(
        "qrels_word_score",
        _append("qrels/test.tsv", "1\td2\thigh"),
        "{root}/qrels/test.tsv:6: score 'high' is not an integer",
    ),
    DatasetCase(
        "qrels_float_score",
        _append("qrels/test.tsv", "1\td2\t0.5"),
        "{root}/qrels/test.tsv:6: score '0.5' is not an integer",
    ),
    DatasetCase(
        "qrels_four_fields",
        _append("qrels/test.tsv", "1\tQ0\td2\t1"),
        "{root}/qrels/test.tsv:6: expected 3 tab-separated fields, got 4",
    ),
    DatasetCase(
        "qrels_space_separated",
        _append("qrels/test.tsv", "1 d2 1"),
        "{root}/qrels/test.tsv:6: expected 3 tab-separated fields, got 1",
    ),
    DatasetCase(
        "qrels_empty_id",
        _append("qrels/test.tsv", "\td2\t1"),
        "{root}/qrels/test.tsv:6: empty query or document id",
    ),
    DatasetCase(
        "qrels_duplicate_judgment",
        _append("qrels/test.tsv", "1\td1\t0"),
        "{root}/qrels/test.tsv: 1 duplicate judgment (query '1' on 'd1')",
    ),
    DatasetCase(
        "qrels_header_only",
        _write("qrels/test.tsv", b"query-id\tcorpus-id\tscore\n"),
        "{root}/qrels/test.tsv: no judgments",
    ),
    # missing pieces
    DatasetCase(
        "qrels_missing", _remove("qrels/test.tsv"), "qrels file not found: {root}/qrels/test.tsv"
    ),
    DatasetCase(
        "corpus_missing", _remove("corpus.jsonl"), "no corpus.jsonl or corpus.jsonl.gz in {root}"
    ),
    DatasetCase(
        "queries_missing", _remove("queries.jsonl"), "file not found: {root}/queries.jsonl"
    ),
    DatasetCase("root_missing", _root_missing, "dataset root {root} is not a folder"),
    DatasetCase("root_is_a_file", _root_is_file, "dataset root {root} is not a folder"),
    # claim files
    DatasetCase(
        "claims_missing",
        _remove(CLAIMS_FILE),
        "claims file not found: {root}/original/claims_dev.jsonl",
    ),
    DatasetCase(
        "claims_record_without_claim",
        _set_line(CLAIMS_FILE, 2, json.dumps({"id": 2, "evidence": {}})),
        "{root}/original/claims_dev.jsonl:2: claim record needs 'id' and 'claim'",
    ),
    DatasetCase(
        "claims_duplicate_id",
        _append(CLAIMS_FILE, json.dumps({"id": 1, "claim": "Again.", "evidence": {}})),
        "{root}/original/claims_dev.jsonl:4: duplicate claim id '1'",
    ),
    DatasetCase(
        "claims_bad_evidence",
        _set_line(
            CLAIMS_FILE, 1, json.dumps({"id": 1, "claim": "x", "evidence": {"d1": "SUPPORT"}})
        ),
        "{root}/original/claims_dev.jsonl:1: 'evidence' must map document ids to lists",
    ),
    DatasetCase(
        "claims_malformed_json",
        _set_line(CLAIMS_FILE, 3, '{"id": 3, "claim": '),
        "{root}/original/claims_dev.jsonl:3: malformed JSON",
    ),
    # integer fields: ASCII digits with an optional sign (Python's int() takes "1_0" and "２")
    DatasetCase(
        "qrels_grade_with_underscore",
        _append("qrels/test.tsv", "1\td2\t1_0"),
        "{root}/qrels/test.tsv:6: score '1_0' is not an integer (ASCII digits with an optional "
        "sign)",
    ),
    DatasetCase(
        "qrels_full_width_grade",
        _append("qrels/test.tsv", "1\td2\t\uff12"),
        "{root}/qrels/test.tsv:6: score '\uff12' is not an integer (ASCII digits",
    ),
    DatasetCase(
        "qrels_arabic_indic_grade",
        _append("qrels/test.tsv", "1\td2\t\u0661"),
        "{root}/qrels/test.tsv:6: score '\u0661' is not an integer (ASCII digits",
    ),
    DatasetCase(
        "qrels_superscript_grade",
        _append("qrels/test.tsv", "1\td2\t\u00b2"),
        "{root}/qrels/test.tsv:6: score '\u00b2' is not an integer (ASCII digits",
    ),
    DatasetCase(
        "qrels_signed_grades",
        lambda root: (
            _append("qrels/test.tsv", "1\td2\t+1")(root),
            _append("qrels/test.tsv", "2\td1\t-1")(root),
        ),
        counts=_counts(judgments=6),
    ),
    DatasetCase(
        "qrels_grade_padded_with_spaces",
        _append("qrels/test.tsv", "1\td2\t 2 "),
        counts=_counts(judgments=5),
    ),
    # lone surrogates: replaced by U+FFFD, counted in the manifest, one warning on stderr
    DatasetCase(
        "lone_surrogate_in_corpus_text",
        _record(
            "corpus.jsonl",
            3,
            {"_id": "d3", "title": "Olympus Mons", "text": "A volcano \ud83d on Mars \udfff."},
        ),
        counts=_counts(surrogates_replaced=_surrogates(corpus=2)),
        printed="parse: 2 lone surrogate(s) replaced by U+FFFD (corpus 2)",
        warned="ragrig: warning: {root}/corpus.jsonl:3: 2 lone surrogate(s) replaced by U+FFFD",
        fffd={"documents.content": 2, "documents.text": 2, "documents.title": 0},
    ),
    DatasetCase(
        "lone_surrogate_in_corpus_title",
        _record("corpus.jsonl", 2, {"_id": "d2", "title": "Deimos \udc00", "text": "A moon."}),
        counts=_counts(surrogates_replaced=_surrogates(corpus=1)),
        warned="ragrig: warning: {root}/corpus.jsonl:2: 1 lone surrogate(s) replaced by U+FFFD",
        fffd={"documents.title": 1, "documents.content": 1},
    ),
    DatasetCase(
        "lone_surrogates_on_two_corpus_lines",
        lambda root: (
            _record("corpus.jsonl", 1, {"_id": "d1", "title": "\ud800", "text": "Phobos."})(root),
            _record("corpus.jsonl", 4, {"_id": "d4", "title": "", "text": "Valles \udbff."})(root),
        ),
        counts=_counts(surrogates_replaced=_surrogates(corpus=2)),
        warned="ragrig: warning: {root}/corpus.jsonl:1: 2 lone surrogate(s) replaced by U+FFFD "
        "on 2 lines, the first here",
        fffd={"documents.content": 2},
    ),
    DatasetCase(
        "lone_surrogate_in_document_id",
        _append(
            "corpus.jsonl",
            json.dumps({"_id": "d\ud83d5", "title": "Tharsis", "text": "A plateau."}),
        ),
        counts=_counts(documents=5, surrogates_replaced=_surrogates(corpus=1)),
        warned="ragrig: warning: {root}/corpus.jsonl:5: 1 lone surrogate(s) replaced by U+FFFD",
        fffd={"documents.doc_id": 1, "documents.content": 0},
    ),
    DatasetCase(
        "lone_surrogates_make_document_ids_collide",
        lambda root: (
            _append("corpus.jsonl", json.dumps({"_id": "dX\ud800", "text": "One."}))(root),
            _append("corpus.jsonl", json.dumps({"_id": "dX\udbff", "text": "Two."}))(root),
        ),
        "{root}/corpus.jsonl: 1 duplicate document id ('dX\ufffd' on 2 lines (5, 6))",
    ),
    DatasetCase(
        "surrogate_pair_escape_and_escaped_backslash_are_kept",
        _record(
            "corpus.jsonl",
            1,
            {"_id": "d1", "title": "Phobos \U0001f600", "text": "C:\\ud83d is a path."},
        ),
        counts=_counts(),
        fffd={"documents.content": 0},
    ),
    DatasetCase(
        "lone_surrogate_in_query",
        _record("queries.jsonl", 3, {"_id": "3", "text": "Is there a canyon on Venus \ud83d?"}),
        counts=_counts(surrogates_replaced=_surrogates(queries=1)),
        printed="parse: 1 lone surrogate(s) replaced by U+FFFD (queries 1)",
        warned="ragrig: warning: {root}/queries.jsonl:3: 1 lone surrogate(s) replaced by U+FFFD",
        fffd={"queries.text": 1},
    ),
    DatasetCase(
        "lone_surrogate_in_query_metadata",
        _record(
            "queries.jsonl",
            1,
            {"_id": "1", "text": QUERIES[0]["text"], "metadata": {"topic": "moons \udead"}},
        ),
        counts=_counts(
            surrogates_replaced=_surrogates(queries=1), query_metadata_columns=["meta_topic"]
        ),
        warned="ragrig: warning: {root}/queries.jsonl:1: 1 lone surrogate(s) replaced by U+FFFD",
        fffd={"queries.meta_topic": 1, "queries.text": 0},
    ),
    DatasetCase(
        "lone_surrogate_in_claims",
        _record(
            CLAIMS_FILE,
            2,
            {**CLAIMS[1], "claim": "Which is the smaller \ud83d moon of Mars?"},
        ),
        counts=_counts(surrogates_replaced=_surrogates(claims=1)),
        printed="parse: 1 lone surrogate(s) replaced by U+FFFD (claims 1)",
        warned="ragrig: warning: {root}/original/claims_dev.jsonl:2: 1 lone surrogate(s) "
        "replaced by U+FFFD",
    ),
    DatasetCase(
        "lone_surrogates_in_every_file",
        lambda root: (
            _record("corpus.jsonl", 2, {"_id": "d2", "title": "\ud83d", "text": "x"})(root),
            _record("queries.jsonl", 2, {"_id": "2", "text": "smaller \ud83d \ud83d?"})(root),
            _record(CLAIMS_FILE, 1, {**CLAIMS[0], "claim": "\udc00"})(root),
        ),
        counts=_counts(surrogates_replaced=_surrogates(corpus=1, queries=2, claims=1)),
        printed="parse: 4 lone surrogate(s) replaced by U+FFFD (corpus 1, queries 2, claims 1)",
        warned=(
            "ragrig: warning: {root}/corpus.jsonl:2: 1 lone surrogate(s) replaced by U+FFFD",
            "ragrig: warning: {root}/queries.jsonl:2: 2 lone surrogate(s) replaced by U+FFFD",
            "ragrig: warning: {root}/original/claims_dev.jsonl:1: 1 lone surrogate(s) replaced "
            "by U+FFFD",
        ),
    ),
    # accepted, but counted
    DatasetCase(
        "query_missing_from_claims",
        _claims_without(2),
        counts=_counts(
            claims_unknown=1, claim_labels={"NOT_ENOUGH_INFO": 1, "SUPPORT": 1, "unknown": 1}
        ),
        printed="parse: 1 query(ies) not in the claim files: claim_label 'unknown'",
    ),
    DatasetCase(
        "more_unjudged_queries",
        _more_unjudged,
        counts=_counts(queries_unjudged=3),
        printed="parse: queries: 2 scored, 3 unjudged (in queries.jsonl, no judgment in "
        "qrels/test.tsv), 1 judged with no positive judgment",
    ),
    DatasetCase(
        "no_claim_files_configured",
        lambda root: None,
        counts={
            k: v
            for k, v in _counts(claim_labels={"unknown": 3}).items()
            if k != "claims_unknown"  # no claim files: nothing to be missing from
        },
        claims=False,
    ),
]


# --- archives served over HTTP to `data ensure` -------------------------------------------------

ARCHIVE_ROOT = "set"


def _base_files() -> dict[str, bytes]:
    return {
        "corpus.jsonl": _jsonl(CORPUS).encode(),
        "queries.jsonl": _jsonl(QUERIES).encode(),
        "qrels/test.tsv": ("\n".join(QRELS) + "\n").encode(),
        CLAIMS_FILE: _jsonl(CLAIMS).encode(),
    }


def make_zip(prefix: str = ARCHIVE_ROOT, extra: list[zipfile.ZipInfo | tuple] = ()) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        for rel, data in _base_files().items():
            zf.writestr(f"{prefix}/{rel}", data)
        for info, data in extra:
            zf.writestr(info, data)
    return buf.getvalue()


def _tar_member(name: str, kind: bytes = tarfile.REGTYPE, linkname: str = "", data: bytes = b""):
    info = tarfile.TarInfo(name)
    info.type = kind
    info.linkname = linkname
    info.size = len(data) if kind == tarfile.REGTYPE else 0
    info.mtime = 0
    return info, data


def make_targz(prefix: str = ARCHIVE_ROOT, extra: list[tuple] = ()) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tf:
        for rel, data in _base_files().items():
            info, _ = _tar_member(f"{prefix}/{rel}", data=data)
            tf.addfile(info, io.BytesIO(data))
        for info, data in extra:
            tf.addfile(info, io.BytesIO(data) if info.isfile() else None)
    return buf.getvalue()


def _zip_entry(name: str, mode: int = 0o644) -> zipfile.ZipInfo:
    info = zipfile.ZipInfo(name)
    info.external_attr = mode << 16
    return info


def _corrupt_zip() -> bytes:
    good = make_zip()
    return good[:120] + bytes(len(good) - 120)


ESCAPED = "ragrig-bad-input-escaped"  # any file of this name outside the dataset is an escape


@dataclass(frozen=True)
class ArchiveCase:
    name: str
    blob: Callable[[], bytes]
    error: str | None  # the one error line contains this ({url} = the archive's URL)
    mode: str = "ok"  # how the server sends it (tests/_http.py Route.mode)
    status: int = 200
    checksum_matches: bool = True
    archive_root: str | None = ARCHIVE_ROOT


ARCHIVE_CASES: list[ArchiveCase] = [
    ArchiveCase("zip_ok", make_zip, None),
    ArchiveCase("tar_gz_ok", make_targz, None),
    ArchiveCase(
        "zip_slip",
        lambda: make_zip(extra=[(_zip_entry(f"{ARCHIVE_ROOT}/../../{ESCAPED}"), b"owned")]),
        f"archive from {{url}}: member '{ARCHIVE_ROOT}/../../{ESCAPED}' escapes the folder",
    ),
    ArchiveCase(
        "zip_absolute_path",
        lambda: make_zip(extra=[(_zip_entry(f"/tmp/{ESCAPED}"), b"owned")]),
        f"archive from {{url}}: member '/tmp/{ESCAPED}' escapes the folder",
    ),
    ArchiveCase(
        "zip_symlink",
        lambda: make_zip(
            extra=[(_zip_entry(f"{ARCHIVE_ROOT}/link", stat.S_IFLNK | 0o777), b"/etc")]
        ),
        f"archive from {{url}}: member '{ARCHIVE_ROOT}/link' is a symbolic link",
    ),
    ArchiveCase(
        "tar_path_escape",
        lambda: make_targz(extra=[_tar_member(f"../{ESCAPED}", data=b"owned")]),
        f"archive from {{url}}: member '../{ESCAPED}' escapes the folder",
    ),
    ArchiveCase(
        "tar_absolute_path",
        lambda: make_targz(extra=[_tar_member(f"/tmp/{ESCAPED}", data=b"owned")]),
        f"archive from {{url}}: member '/tmp/{ESCAPED}' escapes the folder",
    ),
    ArchiveCase(
        "tar_symlink_absolute_out",
        lambda: make_targz(extra=[_tar_member(f"{ARCHIVE_ROOT}/etc", tarfile.SYMTYPE, "/etc")]),
        f"archive from {{url}}: member '{ARCHIVE_ROOT}/etc' is a symbolic link to '/etc' outside",
    ),
    ArchiveCase(
        "tar_symlink_relative_out",
        lambda: make_targz(
            extra=[_tar_member(f"{ARCHIVE_ROOT}/up", tarfile.SYMTYPE, f"../../{ESCAPED}")]
        ),
        f"archive from {{url}}: member '{ARCHIVE_ROOT}/up' is a symbolic link to "
        f"'../../{ESCAPED}' outside the folder",
    ),
    ArchiveCase(
        "tar_hardlink_out",
        lambda: make_targz(
            extra=[_tar_member(f"{ARCHIVE_ROOT}/hard", tarfile.LNKTYPE, f"../{ESCAPED}")]
        ),
        f"archive from {{url}}: member '{ARCHIVE_ROOT}/hard' is a hard link to '../{ESCAPED}' "
        "outside the folder",
    ),
    ArchiveCase(
        "tar_device_file",
        lambda: make_targz(extra=[_tar_member(f"{ARCHIVE_ROOT}/tty", tarfile.CHRTYPE)]),
        f"archive from {{url}}: member '{ARCHIVE_ROOT}/tty' is not a regular file or folder",
    ),
    ArchiveCase("corrupt_zip", _corrupt_zip, "archive from {url} is corrupt: BadZipFile"),
    ArchiveCase(
        "truncated_tar_gz",
        lambda: make_targz()[:300],
        "archive from {url} is corrupt: ",
    ),
    ArchiveCase(
        "not_an_archive",
        lambda: b"<html><body>Please log in</body></html>\n",
        "archive from {url} is neither a zip nor a tar archive (starts with b'<htm')",
    ),
    ArchiveCase(
        "truncated_transfer",
        make_zip,
        "download of {url} failed: truncated transfer: received ",
        mode="truncate",
    ),
    ArchiveCase(
        "checksum_mismatch",
        make_zip,
        "checksum mismatch for {url}: sha256 ",
        checksum_matches=False,
    ),
    ArchiveCase(
        "archive_without_expected_folder",
        lambda: make_zip(prefix="other"),
        "archive from {url} has no folder 'set' (top level: ['other'])",
    ),
    ArchiveCase(
        "archive_root_escape",
        make_zip,
        "archive from {url} has no folder '../set'",
        archive_root="../set",
    ),
    ArchiveCase(
        "http_404",
        lambda: b"",
        "download of {url} failed: 404 Client Error",
        mode="status",
        status=404,
    ),
    ArchiveCase("bogus_content_length", make_zip, None, mode="bogus_length"),
    ArchiveCase(
        "empty_body", lambda: b"", "download of {url} failed: the server sent an empty body"
    ),
]


# --- documents folders for parse=docling ----------------------------------------------------------
#
# Each case fills a documents folder (and `outside`, a sibling folder that is not a documents
# folder), then states what listing the folder gives each file, before any conversion: its path
# as shown, status ("" = to be converted), cause and reason. Nothing here needs docling.

PDF_HEAD = b"%PDF-1.4\n1 0 obj << /Type /Catalog >> endobj\n"
PNG_HEAD = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR"


def _zip_of(files: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for name, data in files.items():
            zf.writestr(name, data)
    return buf.getvalue()


def _put(name: bytes | str, data: bytes) -> Callable[[Path, Path], None]:
    """Write `name` (bytes: a file name that need not be UTF-8) in the documents folder."""

    def build(folder: Path, outside: Path) -> None:
        raw = name if isinstance(name, bytes) else name.encode()
        with open(os.path.join(os.fsencode(folder), raw), "wb") as fh:
            fh.write(data)

    return build


def _link(name: str, target: Callable[[Path, Path], Path]) -> Callable[[Path, Path], None]:
    def build(folder: Path, outside: Path) -> None:
        (folder / name).symlink_to(target(folder, outside))

    return build


def _outside_file(folder: Path, outside: Path) -> Path:
    (outside / "secret.md").write_text("# Secret\n\nNot part of the corpus.\n")
    return outside / "secret.md"


def _inside_file(folder: Path, outside: Path) -> Path:
    (folder / "sub").mkdir()
    (folder / "sub" / "notes.md").write_text("# Notes\n\nIn the corpus once.\n")
    return Path("sub/notes.md")  # a relative link, resolved from the folder


@dataclass(frozen=True)
class DocumentsCase:
    name: str
    build: Callable[[Path, Path], None]
    # path as listed -> (status, cause, reason); status "" = to be converted
    expected: dict[str, tuple[str, str, str]]
    follow_outside_links: bool = False


_CONVERT = ("", "", "")
DOCUMENT_CASES: list[DocumentsCase] = [
    # content that is not what the extension says
    DocumentsCase(
        "zip_named_pdf",
        _put("report.pdf", _zip_of({"a.txt": b"hello"})),
        {
            "report.pdf": (
                "failed",
                "content_mismatch",
                "content does not match its extension .pdf: a ZIP archive",
            )
        },
    ),
    DocumentsCase(
        "pdf_named_docx",
        _put("letter.docx", PDF_HEAD),
        {
            "letter.docx": (
                "failed",
                "content_mismatch",
                "content does not match its extension .docx: a PDF",
            )
        },
    ),
    DocumentsCase(
        "zip_without_word_part_named_docx",
        _put("letter.docx", _zip_of({"[Content_Types].xml": b"<Types/>", "a.txt": b"x"})),
        {
            "letter.docx": (
                "failed",
                "content_mismatch",
                "content does not match its extension .docx: a ZIP archive without word/",
            )
        },
    ),
    DocumentsCase(
        "text_named_xlsx",
        _put("table.xlsx", b"a,b\n1,2\n"),
        {
            "table.xlsx": (
                "failed",
                "content_mismatch",
                "content does not match its extension .xlsx: not a ZIP archive",
            )
        },
    ),
    DocumentsCase(
        "png_named_html",
        _put("page.html", PNG_HEAD + bytes(64)),
        {
            "page.html": (
                "failed",
                "content_mismatch",
                "content does not match its extension .html: a PNG image",
            )
        },
    ),
    DocumentsCase(
        "binary_named_md",
        _put("notes.md", b"# Notes\n\x00\x01\x02\x00"),
        {
            "notes.md": (
                "failed",
                "content_mismatch",
                "content does not match its extension .md: binary content (NUL bytes)",
            )
        },
    ),
    DocumentsCase(
        "pdf_without_header",
        _put("scan.pdf", b"1 0 obj << >> endobj\n"),
        {
            "scan.pdf": (
                "failed",
                "content_mismatch",
                "content does not match its extension .pdf: no %PDF- header",
            )
        },
    ),
    DocumentsCase(
        "pdf_header_after_junk",  # readers accept a header within the first 1024 bytes
        _put("late.pdf", b"\r\n" * 10 + PDF_HEAD),
        {"late.pdf": _CONVERT},
    ),
    DocumentsCase(
        "empty_pdf",
        _put("empty.pdf", b""),
        {"empty.pdf": ("failed", "empty", "empty file (0 bytes)")},
    ),
    # symbolic links
    DocumentsCase(
        "symlink_out_of_the_folder",
        _link("leak.md", _outside_file),
        {
            "leak.md": (
                "skipped",
                "link_outside",
                "symbolic link to a file outside the documents folder "
                "(parse.follow_outside_links is false)",
            )
        },
    ),
    DocumentsCase(
        "symlink_out_of_the_folder_followed",
        _link("leak.md", _outside_file),
        {"leak.md": _CONVERT},
        follow_outside_links=True,
    ),
    DocumentsCase(
        "symlink_within_the_folder",
        _link("alias.md", _inside_file),
        {
            "alias.md": (
                "skipped",
                "link_inside",
                "symbolic link to sub/notes.md: parsed under that path",
            ),
            "sub/notes.md": _CONVERT,
        },
    ),
    DocumentsCase(
        "symlink_to_a_folder_outside",
        _link("elsewhere", lambda folder, outside: outside),
        {
            "elsewhere": (
                "skipped",
                "link_to_folder",
                "symbolic link to a folder: not descended",
            )
        },
    ),
    DocumentsCase(
        "symlink_to_a_device",
        _link("zero.md", lambda folder, outside: Path("/dev/zero")),
        {
            "zero.md": (
                "skipped",
                "link_outside",
                "symbolic link to a file outside the documents folder "
                "(parse.follow_outside_links is false)",
            )
        },
    ),
    DocumentsCase(
        "symlink_to_a_device_followed",
        _link("zero.md", lambda folder, outside: Path("/dev/zero")),
        {
            "zero.md": (
                "skipped",
                "not_regular",
                "symbolic link to something that is not a regular file",
            )
        },
        follow_outside_links=True,
    ),
    DocumentsCase(
        "broken_symlink",
        _link("gone.md", lambda folder, outside: outside / "missing.md"),
        {"gone.md": ("failed", "broken_link", "broken symbolic link: its target does not exist")},
    ),
    DocumentsCase(
        "symlink_loop",
        _link("loop.md", lambda folder, outside: Path("loop.md")),
        {"loop.md": ("failed", "broken_link", "broken symbolic link: its target does not exist")},
    ),
    # file names that are not UTF-8: kept, shown with U+FFFD for each undecodable byte
    DocumentsCase(
        "name_not_utf8",
        _put(b"caf\xe9.md", b"# Menu\n\nCoffee.\n"),
        {"caf\ufffd.md": _CONVERT},
    ),
    DocumentsCase(
        "extension_not_utf8",
        _put(b"notes.t\xe9xt", b"plain text\n"),
        {"notes.t\ufffdxt": ("skipped", "unsupported", "unsupported extension '.t\ufffdxt'")},
    ),
    DocumentsCase(
        "name_not_utf8_and_zip_named_pdf",
        _put(b"r\xe9port.pdf", _zip_of({"a.txt": b"hello"})),
        {
            "r\ufffdport.pdf": (
                "failed",
                "content_mismatch",
                "content does not match its extension .pdf: a ZIP archive",
            )
        },
    ),
]


def write_documents_case(case: DocumentsCase, root: Path) -> Path:
    """The case's documents folder, `root/docs` (its `outside` beside it)."""
    folder, outside = root / "docs", root / "outside"
    folder.mkdir(parents=True)
    outside.mkdir()
    case.build(folder, outside)
    return folder


def main(out: Path) -> None:
    """Write every dataset case (folder) and archive case (file) under `out`."""
    for case in DATASET_CASES:
        root = out / "datasets" / case.name
        write_base(root)
        case.build(root)
    (out / "archives").mkdir(parents=True, exist_ok=True)
    for case in ARCHIVE_CASES:
        (out / "archives" / f"{case.name}.bin").write_bytes(case.blob())
    for doc_case in DOCUMENT_CASES:
        write_documents_case(doc_case, out / "documents" / doc_case.name)
    print(
        f"{len(DATASET_CASES)} datasets, {len(ARCHIVE_CASES)} archives and "
        f"{len(DOCUMENT_CASES)} documents folders under {out}"
    )


if __name__ == "__main__":
    main(Path(sys.argv[1]))
