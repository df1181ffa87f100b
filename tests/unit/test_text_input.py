"""Text entering ragrig: lone surrogates replaced by U+FFFD and counted (ragrig.core.text, and each
reader that takes JSON text), integer and number fields read as ASCII digits only."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ragrig.core.errors import DataValidationError
from ragrig.core.text import (
    replace_surrogates,
    replace_surrogates_in,
    strict_float,
    strict_int,
    surrogate_warning,
)

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
MTRAG_TINY = FIXTURES / "tiny_mtrag" / "reference_subset_with_human_evaluations.json"
MTRAG_TASKS = FIXTURES / "tiny_mtrag" / "mtragun_reference_generation_tasks.jsonl"


def test_clean_text_is_returned_as_it_is() -> None:
    for text in ("", "Phobos", "café 😀 ∑", "\ufffd already"):
        out, n = replace_surrogates(text)
        assert (out, n) == (text, 0)
        assert out is text


def test_a_lone_surrogate_from_a_json_escape_is_replaced_and_counted() -> None:
    text = json.loads('"a \\ud83d b \\udc00\\ud800 c"')
    out, n = replace_surrogates(text)
    assert (out, n) == ("a \ufffd b \ufffd\ufffd c", 3)
    out.encode("utf-8")  # now encodable


def test_a_surrogate_pair_escape_is_one_character_not_replaced() -> None:
    text = json.loads('"\\ud83d\\ude00"')
    assert replace_surrogates(text) == ("😀", 0)


def test_surrogateescape_bytes_are_replaced() -> None:
    text = b"caf\xe9.md".decode("utf-8", "surrogateescape")
    assert replace_surrogates(text) == ("caf\ufffd.md", 1)


# --- JSON values, warnings -------------------------------------------------------------------


def test_a_json_value_is_walked_keys_included() -> None:
    value = json.loads('{"a\\ud800": ["x", "\\udfff", 3, null, {"k": "\\ud83d\\ud83d"}], "n": 1.5}')
    out, n = replace_surrogates_in(value)
    assert n == 4
    assert out == {"a\ufffd": ["x", "\ufffd", 3, None, {"k": "\ufffd\ufffd"}], "n": 1.5}
    assert replace_surrogates_in({"clean": ["text", 1]}) == ({"clean": ["text", 1]}, 0)


def test_the_warning_names_the_first_line_and_the_count() -> None:
    assert surrogate_warning("c.jsonl:3", 2) == (
        "ragrig: warning: c.jsonl:3: 2 lone surrogate(s) replaced by U+FFFD"
    )
    assert surrogate_warning("c.jsonl:3", 5, lines=4).endswith("on 4 lines, the first here")


# --- strict integers and numbers -------------------------------------------------------------


@pytest.mark.parametrize("text", ["0", "7", "0012", "123456789012345678901234567890"])
def test_ascii_digits_are_integers(text: str) -> None:
    assert strict_int(text, "f:1") == int(text)
    assert strict_int(text, "f:1", signed=True) == int(text)


@pytest.mark.parametrize("text", ["-1", "+1", "-0"])
def test_a_sign_is_taken_where_allowed(text: str) -> None:
    assert strict_int(text, "f:1", signed=True) == int(text)
    with pytest.raises(DataValidationError) as exc:
        strict_int(text, "q.tsv:4", "grade")
    assert str(exc.value) == f"q.tsv:4: grade {text!r} is not an integer (ASCII digits only)"


# each of these but the last five is an integer to Python's int()
@pytest.mark.parametrize(
    "text",
    ["1_0", "\uff12", "\u0661", "\u096a", " 1", "1 ", "1\n", "", "-", "+-1", "1.0", "\u00b2"],
)
def test_int_reads_too_much_strict_int_refuses(text: str) -> None:
    with pytest.raises(DataValidationError) as exc:
        strict_int(text, "qrels/test.tsv:4", "grade", signed=True)
    assert str(exc.value) == (
        f"qrels/test.tsv:4: grade {text!r} is not an integer (ASCII digits with an optional sign)"
    )


@pytest.mark.parametrize(
    "text, value", [("1", 1.0), ("-1.5", -1.5), ("+.5", 0.5), ("3.", 3.0), ("2e-3", 0.002)]
)
def test_decimal_numbers(text: str, value: float) -> None:
    assert strict_float(text, "f:1") == value


@pytest.mark.parametrize(
    "text", ["1_0", "\uff12", "nan", "inf", "-Infinity", " 1", "0x10", "1e", ".", "", "1e999"]
)
def test_float_reads_too_much_strict_float_refuses(text: str) -> None:
    with pytest.raises(DataValidationError, match=r"^run:2: score .* is not a (finite )?number"):
        strict_float(text, "run:2", "score")


# --- readers ----------------------------------------------------------------------------------


def test_trec_readers_take_ascii_numbers_only(tmp_path: Path) -> None:
    from ragrig.metrics.trec import read_trec_qrels, read_trec_run

    qrels = tmp_path / "qrels.txt"
    qrels.write_text("1 0 a 1\n1 0 b -1\n2 0 c 1_0\n", encoding="utf-8")
    with pytest.raises(DataValidationError, match=r"qrels.txt:3: relevance '1_0' is not an int"):
        read_trec_qrels(qrels)
    qrels.write_text("1 0 a 1\n1 0 b -1\n", encoding="utf-8")
    assert read_trec_qrels(qrels)["relevance"].tolist() == [1, -1]
    run = tmp_path / "a.run"
    run.write_text("1 Q0 a 1 0.5 t\n1 Q0 b 2 \uff10.25 t\n", encoding="utf-8")
    with pytest.raises(DataValidationError, match=r"a.run:2: score '\uff10.25' is not a number"):
        read_trec_run(run)
    run.write_text("1 Q0 a 1 nan t\n", encoding="utf-8")
    with pytest.raises(DataValidationError, match=r"a.run:1: score 'nan' is not a number"):
        read_trec_run(run)
    run.write_bytes(b"1 Q0 a 1 0.5 t\n1 Q0 \xff 2 0.25 t\n")  # a byte that is not UTF-8
    with pytest.raises(DataValidationError, match=r"a.run:2: not valid UTF-8 \(byte 0xff"):
        read_trec_run(run)


def test_jsonl_records_are_repaired_counted_and_warned_about_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from ragrig.dataset.beir import Replaced, iter_jsonl

    path = tmp_path / "x.jsonl"
    path.write_text('{"a": "ok"}\n{"a": "\\ud83d", "\\udc00": 1}\n\n{"a": "\\ud800"}\n')
    replaced = Replaced()
    records = list(iter_jsonl(path, replaced))
    assert records == [(1, {"a": "ok"}), (2, {"a": "\ufffd", "\ufffd": 1}), (4, {"a": "\ufffd"})]
    assert replaced.count == 3
    assert capsys.readouterr().err.splitlines() == [
        f"ragrig: warning: {path}:2: 3 lone surrogate(s) replaced by U+FFFD on 2 lines, "
        "the first here"
    ]
    assert [r for _, r in iter_jsonl(path, warn=False)] == [r for _, r in records]
    assert capsys.readouterr().err == ""


def test_verifier_claims_are_repaired(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from ragrig.train_verifier.data import read_claims

    path = tmp_path / "claims_train.jsonl"
    path.write_text('{"id": 1, "claim": "Aspirin \\ud83d cures."}\n', encoding="utf-8")
    assert read_claims(path)[0]["claim"] == "Aspirin \ufffd cures."
    assert f"{path}:1: 1 lone surrogate(s)" in capsys.readouterr().err


def test_mtrag_human_ratings_are_repaired_and_counted(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from ragrig.tools.calibrate.mtrag import load_mtrag_human

    data = json.loads(MTRAG_TINY.read_text(encoding="utf-8"))
    assert "surrogates_replaced" not in load_mtrag_human(MTRAG_TINY).counts
    data["evaluations"][0]["model_response"] += " \ud83d"
    data["documents"][0]["text"] += " \udc00\udc01"
    path = tmp_path / "ratings.json"
    path.write_text(json.dumps(data), encoding="utf-8")  # the surrogates as JSON escapes
    rated = load_mtrag_human(path)
    assert rated.counts["surrogates_replaced"] == 3
    assert rated.answers[0].answer.endswith(" \ufffd")
    assert capsys.readouterr().err.splitlines() == [
        f"ragrig: warning: {path}: 3 lone surrogate(s) replaced by U+FFFD"
    ]


def test_mtrag_reference_answers_are_repaired_and_counted(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from ragrig.tools.calibrate.refusals import load_reference_answers

    lines = MTRAG_TASKS.read_text(encoding="utf-8").splitlines()
    rec = json.loads(lines[1])
    rec["targets"][0]["text"] = "I cannot \ud83d answer that."
    lines[1] = json.dumps(rec)
    path = tmp_path / "tasks.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    answers, counts = load_reference_answers(path)
    assert counts["surrogates_replaced"] == 1
    assert answers[1].answer == "I cannot \ufffd answer that."
    assert capsys.readouterr().err.splitlines() == [
        f"ragrig: warning: {path}:2: 1 lone surrogate(s) replaced by U+FFFD"
    ]


def test_a_content_length_that_is_not_ascii_digits_is_no_length(tmp_path: Path, monkeypatch):
    """str.isdigit() takes "²", which int() refuses: the download once crashed on it."""
    import http.server
    import threading

    from ragrig.dataset.download import download

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802
            self.send_response(200)
            self.send_header("Content-Length", "\u00b2")
            self.send_header("Connection", "close")
            self.end_headers()
            self.wfile.write(b"PK" * 10)

        def log_message(self, *args) -> None:
            pass

    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/x.zip"
        assert download(url, tmp_path / "x.zip", deadline_s=20, read_timeout_s=10) == 20
    finally:
        server.shutdown()
        server.server_close()


# --- lists in messages: how many, and at most a few ------------------------------------------


def test_counted_says_how_many_and_shows_three() -> None:
    from ragrig.core.text import counted, sample

    assert counted([3, 7, 9, *range(100, 139)], "line") == "42 lines (3, 7, 9, … and 39 more)"
    assert counted([3, 7, 9], "line") == "3 lines (3, 7, 9)"
    assert counted([3, 7, 9, 11], "line") == "4 lines (3, 7, 9, … and 1 more)"
    assert counted([3], "line") == "1 line (3)"
    assert counted([], "line") == "0 lines"
    assert counted(["a", "b"], "query", "queries", form=repr) == "2 queries ('a', 'b')"
    assert counted(iter("abcdef"), "id", shown=1) == "6 ids (a, … and 5 more)"
    assert sample(range(10**6)) == "0, 1, 2, … and 999997 more"
    assert sample([]) == ""


def test_a_million_duplicate_lines_give_a_short_message() -> None:
    from ragrig.core.text import counted

    msg = counted(range(1, 10**6 + 1), "line")
    assert msg == "1000000 lines (1, 2, 3, … and 999997 more)"


# --- ids TREC files and ragrig's tables hold as they are ---------------------------------------


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ("d1", None),
        ("MED-10", None),
        ("d\u200b1", None),  # zero-width space: a format character, not whitespace
        ("café/s001", None),
        ("", "is empty"),
        ("d 1", "holds whitespace (' ')"),
        ("d\t1", "holds whitespace ('\\t')"),
        ("d\xa01", "holds whitespace ('\\xa0')"),
        ("d\u20281", "holds whitespace ('\\u2028')"),
        ("d\u30001", "holds whitespace ('\\u3000')"),
        ("d\x001", "holds a control character ('\\x00')"),
        ("d\x7f1", "holds a control character ('\\x7f')"),
        ("d\x9b1", "holds a control character ('\\x9b')"),
    ],
)
def test_id_problem(value: str, problem: str | None) -> None:
    from ragrig.core.text import id_problem

    assert id_problem(value) == problem


@pytest.mark.parametrize("bad", ["d\x001", "d\xa01", "d 1"])
def test_the_trec_writer_refuses_what_parse_refuses(bad: str) -> None:
    import pandas as pd

    from ragrig.core.text import id_problem
    from ragrig.metrics.trec import trec_qrels_lines, trec_run_lines

    run = pd.DataFrame({"qid": ["1"], "doc_id": [bad], "score": [1.0], "rank": [1]})
    with pytest.raises(DataValidationError) as exc:
        trec_run_lines(run, "tag")
    assert str(exc.value) == (
        f"document id {bad!r} {id_problem(bad)}: TREC files separate fields by whitespace"
    )
    qrels = pd.DataFrame({"qid": [bad], "doc_id": ["d1"], "relevance": [1]})
    with pytest.raises(DataValidationError, match="^query id "):
        trec_qrels_lines(qrels)


# --- bounded reading: one line, and what a .gz inflates to ------------------------------------


def test_a_line_at_the_record_bound_is_read_one_past_it_is_not(tmp_path: Path) -> None:
    from ragrig.core.io import ReadLimits, iter_lines

    limits = ReadLimits(max_record_bytes=10)
    path = tmp_path / "a.jsonl"
    path.write_bytes(b"0123456789\r\n0123456789\n0123456789")
    assert [n for n, _ in iter_lines(path, limits)] == [1, 2, 3]
    bom = tmp_path / "bom.jsonl"
    bom.write_bytes(b"\xef\xbb\xbf0123456789\n")  # the byte-order mark is not the record's
    assert list(iter_lines(bom, limits)) == [(1, "0123456789\n")]
    path.write_bytes(b"short\n0123456789A\nnever read\n")
    with pytest.raises(DataValidationError) as exc:
        list(iter_lines(path, limits))
    assert str(exc.value) == (
        f"{path}:2: line longer than 10 bytes (the max_record_bytes limit); not read further"
    )
    path.write_bytes(b"0123456789A")  # the last line, no newline
    with pytest.raises(DataValidationError, match=r"a\.jsonl:1: line longer than 10 bytes"):
        list(iter_lines(path, limits))


def test_a_gzip_bomb_stops_at_the_bound_naming_the_setting(tmp_path: Path) -> None:
    import gzip

    from ragrig.core.io import ReadLimits, iter_lines

    path = tmp_path / "corpus.jsonl.gz"
    path.write_bytes(gzip.compress(b"{}\n" + b" " * 2**24 + b"\n", mtime=0))  # 16 MiB, 16 KB
    assert path.stat().st_size < 20_000
    with pytest.raises(DataValidationError) as exc:
        list(iter_lines(path, ReadLimits(max_record_bytes=2**20, setting="parse")))
    assert str(exc.value) == (
        f"{path}:2: line longer than 1 MiB (raise parse.max_record_bytes to read it); "
        "not read further"
    )
    many = b"{}\n" * 1000  # 3000 bytes inflated, on 1000 lines
    path.write_bytes(gzip.compress(many, mtime=0))
    limits = ReadLimits(max_record_bytes=100, max_inflated_bytes=1500)
    with pytest.raises(DataValidationError) as exc:
        list(iter_lines(path, limits))
    assert str(exc.value) == (
        f"{path}:501: inflates past 1.5 KiB (the max_inflated_bytes limit); not read further"
    )
    plain = tmp_path / "corpus.jsonl"  # the inflated bound is a .gz file's alone
    plain.write_bytes(many)
    assert sum(1 for _ in iter_lines(plain, limits)) == 1000


def test_size_text() -> None:
    from ragrig.core.io import size_text

    assert [size_text(n) for n in (1, 1023, 1024, 1536, 2**26, 16 * 2**30)] == [
        "1 bytes",
        "1023 bytes",
        "1 KiB",
        "1.5 KiB",
        "64 MiB",
        "16 GiB",
    ]
