"""Splits that do not leak (ragrig.dataset.splits, `ragrig split`): groups by gold document,
session and text computed by hand, the assignment's shares, development marks that stick, the
version record, and the parse stage reading a part (its version in the manifest, a marked query
refused)."""

from __future__ import annotations

import json

import pytest

from ragrig.core.errors import DataValidationError
from ragrig.dataset import splits as sp


def _set(root, queries, qrels, split="test"):
    """A BEIR folder: queries (qid -> text or (text, metadata)), qrels qid -> {doc: grade}."""
    (root / "qrels").mkdir(parents=True)
    docs = sorted({d for rels in qrels.values() for d in rels} | {"dz"})
    (root / "corpus.jsonl").write_text(
        "".join(json.dumps({"_id": d, "title": "", "text": f"text of {d}"}) + "\n" for d in docs)
    )
    lines = []
    for q, v in queries.items():
        text, meta = v if isinstance(v, tuple) else (v, None)
        rec = {"_id": q, "text": text} | ({"metadata": meta} if meta else {})
        lines.append(json.dumps(rec) + "\n")
    (root / "queries.jsonl").write_text("".join(lines))
    (root / "qrels" / f"{split}.tsv").write_text(
        "query-id\tcorpus-id\tscore\n"
        + "".join(f"{q}\t{d}\t{r}\n" for q, rels in qrels.items() for d, r in rels.items())
    )
    return root


def test_groups_join_shared_gold_documents_sessions_and_texts_by_hand():
    qrels = {"q1": {"d1": 1}, "q2": {"d1": 1, "d2": 1}, "q3": {"d2": 1}, "q4": {"d3": 1},
             "q5": {"d1": 0, "d4": 1}, "q6": {"d5": 1}, "q7": {"d6": 1}}  # fmt: skip
    texts = {"q1": "a", "q2": "b", "q3": "c", "q4": "d", "q5": "e", "q6": "Same  Text",
             "q7": "same text"}  # fmt: skip
    sessions = {"q4": "s1", "q5": "s1"}
    got = sp.groups(list(qrels), qrels, texts, sessions)
    # q1-q2-q3 by d1, d2 (a chain); q4-q5 by the session (d1 at grade 0 joins nothing);
    # q6-q7 by their case-folded text
    assert got == {"q1": "q1", "q2": "q1", "q3": "q1", "q4": "q4", "q5": "q4", "q6": "q6",
                   "q7": "q6"}  # fmt: skip
    alone = sp.groups(list(qrels), qrels, texts, None, by_documents=False)
    assert alone["q2"] == "q2" and alone["q5"] == "q5" and alone["q7"] == "q6"


def test_assignment_fills_the_part_furthest_below_its_target_in_the_seeds_order():
    group_of = {f"q{i}": f"q{i}" for i in range(10)}
    parts = {"development": 0.2, "release": 0.8}
    got = sp.assign(group_of, parts, seed=13)
    assert sum(v == "development" for v in got.values()) == 2
    assert sp.assign(group_of, parts, seed=13) == got  # deterministic
    assert sp.assign(group_of, parts, seed=14) != got  # the seed orders the groups
    # a marked query takes its whole group to development, beyond the target if need be
    group_of |= {"q1": "q0", "q2": "q0"}
    got = sp.assign(group_of, parts, seed=13, development={"q2"})
    assert {q for q, p in got.items() if p == "development"} >= {"q0", "q1", "q2"}
    with pytest.raises(DataValidationError, match="no 'development' part"):
        sp.assign(group_of, {"a": 0.5, "b": 0.5}, seed=13, development={"q2"})


@pytest.mark.parametrize(
    "parts, message",
    [({"a": 1.0}, "at least two parts"), ({"a": 0.5, "b": 0.6}, "sum to 1.1"),
     ({"a": 0.0, "b": 1.0}, "strictly between 0 and 1"), ({"a/b": 0.5, "c": 0.5}, "file name")],
)  # fmt: skip
def test_bad_parts_are_one_line(parts, message):
    with pytest.raises(DataValidationError, match=message):
        sp.check_parts(parts)


def test_split_writes_parts_that_do_not_leak_and_a_version(tmp_path):
    queries = {f"q{i}": (f"question {i}", {"session": f"s{i // 2}"}) for i in range(20)}
    qrels = {f"q{i}": {f"d{i % 7}": 1} for i in range(20)}  # d0..d6 shared: 7 doc groups
    root = _set(tmp_path / "set", queries, qrels)
    parts = {"development": 0.25, "release": 0.5, "monitoring": 0.25}
    # sessions join q0-q1 (d0, d1), q2-q3 (d2, d3), ...: every doc group chains into one group
    with pytest.raises(DataValidationError) as exc:
        sp.split(root, "test", parts, seed=13, session="session")
    assert str(exc.value) == (
        "2 parts (development, monitoring) got no query: 20 queries in 1 groups (the largest "
        "20) cannot fill 3 parts; give fewer parts or a set with more groups"
    )
    assert not (root / sp.VERSIONS).exists()  # nothing written
    rec = sp.split(root, "test", parts, seed=13)  # by gold document only: 7 groups
    assert rec["version"] == 1 and rec["groups"] == 7
    written = {p: sp._judged(root / "qrels" / f"{p}.tsv") for p in parts}
    assert sorted(q for qs in written.values() for q in qs) == sorted(qrels)
    for p, qs in written.items():
        assert rec["parts"][p]["queries"] == len(qs)
        docs = {d for q in qs for d in qrels[q]}
        assert all(d not in {d for q2 in written[o] for d in qrels[q2]}
                   for o in parts if o != p for d in docs)  # fmt: skip
    assert rec["leaks"] == {"groups_in_two_parts": 0, "documents": 0, "sessions": 0, "texts": 0}
    assert rec["source_sha256"] == sp.file_sha256(root / "qrels" / "test.tsv")
    # greedy by target: release (10 of 20) takes groups while furthest below its share
    assert sum(v["queries"] for v in rec["parts"].values()) == 20
    assert [r["version"] for r in sp.versions(root)] == [1]
    with pytest.raises(DataValidationError, match="cannot also be a part"):
        sp.split(root, "release", {"release": 0.5, "x": 0.5})


def test_a_marked_query_moves_to_development_and_a_run_of_another_part_is_refused(tmp_path):
    from ragrig.dataset.beir import load_qrels

    queries = {f"q{i}": f"question {i}" for i in range(12)}
    qrels = {f"q{i}": {f"d{i}": 1} for i in range(12)}
    root = _set(tmp_path / "set", queries, qrels)
    parts = {"development": 0.25, "release": 0.75}
    rec = sp.split(root, "test", parts, seed=13)
    release = sorted(load_qrels(root / "qrels" / "release.tsv"))
    assert len(release) == rec["parts"]["release"]["queries"] == 9
    got = sp.mark_development(root, [release[0], release[0]], "fitted the judge's threshold")
    assert got == {"added": [release[0]], "already": 1, "held": {"release": [release[0]]}}
    with pytest.raises(DataValidationError) as exc:
        sp.check_not_development(root, "release", release)
    assert str(exc.value) == (
        f"qrels/release.tsv holds 1 query ({release[0]}) marked development in "
        f"{root / sp.LEDGER} (they guided tuning): run ragrig split {root} to move them, or "
        "evaluate dataset.split=development"
    )
    sp.check_not_development(root, "development", release)  # development may hold them
    rec2 = sp.split(root, "test", parts, seed=13)
    assert rec2["version"] == 2 and rec2["development_marked"] == 1
    assert release[0] in load_qrels(root / "qrels" / "development.tsv")
    assert rec2["ledger_sha256"] == sp.file_sha256(root / sp.LEDGER)
    sp.check_not_development(root, "release", sorted(load_qrels(root / "qrels" / "release.tsv")))
    with pytest.raises(DataValidationError, match="has no 1 query"):
        sp.mark_development(root, ["nope"], "x")
    with pytest.raises(DataValidationError, match="--reason"):
        sp.mark_development(root, [release[1]], " ")


def test_the_parse_stage_records_the_parts_version_and_refuses_a_marked_query(tmp_path, capsys):
    from types import SimpleNamespace

    from ragrig.cli import app as cli
    from ragrig.parse.beir import BeirParser, stats_lines

    queries = {f"q{i}": f"question {i}" for i in range(8)}
    root = _set(tmp_path / "set", queries, {f"q{i}": {f"d{i}": 1} for i in range(8)})
    argv = ["split", str(root), "--parts", "development=0.5,release=0.5", "--seed", "3"]
    assert cli.main(argv) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith(f"ragrig split: version 1 of {root / sp.VERSIONS}: 8 queries of "
                             "qrels/test.tsv in 8 groups (by gold document, text")  # fmt: skip
    assert out[-2] == ("leak checks on what was written: groups in two parts 0, gold documents "
                       "0, sessions 0, texts 0")  # fmt: skip
    dataset = SimpleNamespace(root=str(root), split="release", claims=None, name="t")
    parsed = BeirParser().parse(dataset)
    v = parsed.stats["split_version"]
    assert (v["version"], v["part"], v["unchanged"], v["seed"]) == (1, "release", True, 3)
    assert stats_lines(parsed.stats)[-1] == (
        "parse: split release: version 1 of splits.jsonl (from test, seed 3)"
    )
    release = sorted(parsed.qrels["qid"].unique())
    (tmp_path / "ids.txt").write_text(f"# tuned on\n{release[0]}\n")
    assert cli.main(["split", str(root), "--mark-development", str(tmp_path / "ids.txt"),
                     "--reason", "read its failures"]) == 0  # fmt: skip
    assert capsys.readouterr().out.splitlines()[-1] == (
        f"ragrig split: qrels/release.tsv holds 1 query ({release[0]}) now marked: run ragrig "
        f"split {root} to move them to development"
    )
    with pytest.raises(DataValidationError, match="marked development"):
        BeirParser().parse(dataset)
    assert cli.main(["split", str(root), "--parts", "a=0.5,a=0.5"]) == 2
    assert capsys.readouterr().err.strip() == (
        "ragrig split: error: --parts 'a=0.5,a=0.5': part 'a' named twice"
    )


def test_a_tuning_command_marks_its_queries_only_in_a_set_ragrig_split_made(tmp_path):
    queries = {f"q{i}": f"question {i}" for i in range(6)}
    root = _set(tmp_path / "set", queries, {f"q{i}": {f"d{i}": 1} for i in range(6)})
    assert sp.record_tuning(root, ["q1"], "tuned") is None  # not split by ragrig: not written
    assert not (root / sp.LEDGER).exists()
    sp.split(root, "test", {"development": 0.5, "release": 0.5}, seed=13)
    got = sp.record_tuning(root, ["q1", "q2"], "tune-first-stage chose on them")
    assert (got["added"], got["already"]) == (["q1", "q2"], 0)
    assert sp.read_ledger(root).reasons == {"q1": "tune-first-stage chose on them",
                                            "q2": "tune-first-stage chose on them"}  # fmt: skip
