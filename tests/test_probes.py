"""The probe builder and the probe benchmark, run as scripts on tiny fixtures."""

from __future__ import annotations

import io
import json
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import yaml

from .conftest import FIXTURE, PROJECT, project_env

BENCH = PROJECT / "benchmarks"
MTRAG = PROJECT / "tests" / "fixtures" / "tiny_mtrag_probes"


def _run(script: str, *args) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(BENCH / script), *map(str, args)],
        cwd=PROJECT,
        env=project_env(),
        capture_output=True,
        text=True,
        timeout=600,
    )


def _build(out: Path, *args) -> list[dict]:
    proc = _run("build_probes.py", "--out", out, *args)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]


def test_build_probes_on_the_fixtures_is_exact_and_deterministic(tmp_path):
    args = ["--scifact-root", FIXTURE, "--mtrag-root", MTRAG]
    everything = _build(tmp_path / "a.jsonl", *args)
    rows = [r for r in everything if r["level"] == "claim"]
    assert len(rows) == 25
    # the answer level: MTRAG's edits made inside the whole answer (each a sentence here)
    answers = {r["id"]: r for r in everything if r["level"] == "answer"}
    assert len(answers) == 11 == len(everything) - 25
    changed = answers["mtrag:t2:reference:answer:changed_number"]
    assert changed["answer"] == (
        "Refunds are processed within 48 hours of the request, but orders shipped to Norway "
        "take longer."
    )
    assert changed["question"] == "How fast are refunds?" and changed["kind"] == "changed_number"
    assert changed["claim"] == answers["mtrag:t2:reference:answer:original"]["answer"]
    kinds = {}
    for r in rows:
        kinds[(r["source"], r["kind"])] = kinds.get((r["source"], r["kind"]), 0) + 1
    assert kinds == {
        ("scifact", "original"): 4,
        ("scifact", "negation"): 4,
        ("scifact", "changed_number"): 1,
        ("scifact", "swapped_entity"): 2,
        ("scifact", "reversed_relation"): 2,
        ("mtrag", "original"): 3,
        ("mtrag", "negation"): 3,
        ("mtrag", "changed_number"): 1,
        ("mtrag", "swapped_entity"): 2,
        ("mtrag", "reversed_relation"): 2,
        ("mtrag", "split_evidence"): 1,
    }
    by_id = {r["id"]: r for r in rows}
    neg = by_id["scifact:1:d01:negation"]
    assert neg == {
        "id": "scifact:1:d01:negation",
        "kind": "negation",
        "claim": "Mars does not have two moons named Phobos and Deimos.",
        "contexts": [
            "Mars has two moons, Phobos and Deimos. Phobos orbits closer to the planet than Deimos."
        ],
        "expected": "not_supported",
        "source": "scifact",
        "source_id": "scifact:1:d01",
        "original": "Mars has two moons named Phobos and Deimos.",
        "level": "claim",
    }
    # only the answers rated faithful (mean >= 3) with a claim sentence: t2/gpt-4o is rated 1.33,
    # t3/reference is a refusal
    assert sorted({r["source_id"] for r in rows if r["source"] == "mtrag"}) == [
        "mtrag:t1:reference",
        "mtrag:t2:reference",
        "mtrag:t3:gpt-4o",
    ]
    assert by_id["mtrag:t2:reference:changed_number"]["claim"].startswith(
        "Refunds are processed within 48 hours"
    )
    split = by_id["mtrag:t1:reference:split_evidence"]
    assert split["expected"] == "supported" and split["claim"] == split["original"]
    assert split["contexts"] == [
        "Law libraries The county law library is open to the public on weekdays. It offers "
        "self-help guides for appeals. Visitors can reserve study rooms up to 3 days in advance."
    ]
    again = tmp_path / "b.jsonl"
    _build(again, *args)
    assert again.read_bytes() == (tmp_path / "a.jsonl").read_bytes()
    sampled = _build(tmp_path / "c.jsonl", *args, "--max-claims", "2")
    assert len({r["source_id"] for r in sampled}) == 4  # two claims per source


def _scifact_with_sentence_lists(root: Path) -> None:
    """SciFact as staged: rationale indices refer to the sentence lists inside the export zip."""
    (root / "original").mkdir(parents=True)
    abstract = (
        "['Fever is common.'\n 'Aspirin reduces fever in adults, and it lowers pain in "
        "children.'\n 'Doses vary.']"
    )
    buf = io.StringIO()
    buf.write("doc_id,title,abstract,structured\n")
    buf.write('7,Aspirin,"' + abstract + '",False\n')
    with zipfile.ZipFile(root / "original" / "scifact_hf_export_csv.zip", "w") as z:
        z.writestr("corpus_train.csv", buf.getvalue())
    claim = {
        "id": 9,
        "claim": "Aspirin reduces fever in adults.",
        "evidence": {"7": [{"sentences": [1], "label": "SUPPORT"}]},
        "cited_doc_ids": [7],
    }
    (root / "original" / "claims_dev.jsonl").write_text(json.dumps(claim) + "\n")


def test_build_probes_reads_sentence_lists_from_the_export_zip(tmp_path):
    root = tmp_path / "scifact"
    _scifact_with_sentence_lists(root)
    rows = _build(tmp_path / "p.jsonl", "--scifact-root", root, "--mtrag-root", "none")
    by_kind = {r["kind"]: r for r in rows}
    assert sorted(by_kind) == [
        "dropped_qualifier",
        "negation",
        "original",
        "reversed_relation",
        "split_evidence",
    ]
    assert by_kind["dropped_qualifier"]["claim"] == "Aspirin reduces fever."
    whole = "Fever is common. Aspirin reduces fever in adults, and it lowers pain in children. Doses vary."
    assert by_kind["original"]["contexts"] == [whole]
    assert by_kind["split_evidence"]["contexts"] == [
        "Fever is common. Aspirin reduces fever in adults. It lowers pain in children. Doses vary."
    ]
    assert by_kind["negation"]["claim"] == "Aspirin does not reduce fever in adults."
    assert by_kind["reversed_relation"]["claim"] == "Aspirin increases fever in adults."


@pytest.mark.parametrize(
    ("case", "message"),
    [
        ("rating", "evaluations[0]: faithfulness rating '5' of a1 not in 1-4"),
        ("doc", "claims_dev.jsonl:1: evidence names unknown document 99"),
    ],
)
def test_build_probes_bad_input_is_one_line(tmp_path, case, message):
    if case == "rating":
        data = json.loads((MTRAG / "reference_subset_with_human_evaluations.json").read_text())
        data["evaluations"][0]["annotations"]["faithfulness"]["a1"]["value"] = "5"
        bad = tmp_path / "mtrag"
        bad.mkdir()
        (bad / "reference_subset_with_human_evaluations.json").write_text(json.dumps(data))
        args = ["--scifact-root", "none", "--mtrag-root", bad]
    else:
        root = tmp_path / "scifact"
        _scifact_with_sentence_lists(root)
        claim = {
            "id": 1,
            "claim": "X binds Y.",
            "evidence": {"99": [{"sentences": [0], "label": "SUPPORT"}]},
        }
        (root / "original" / "claims_dev.jsonl").write_text(json.dumps(claim) + "\n")
        args = ["--scifact-root", root, "--mtrag-root", "none"]
    proc = _run("build_probes.py", "--out", tmp_path / "x.jsonl", *args)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("build_probes: ") and message in lines[0]
    assert not (tmp_path / "x.jsonl").exists()


def test_bench_probes_on_the_fixtures(tmp_path):
    out = tmp_path / "r.json"
    proc = _run("bench_probes.py", "--dataset-root", FIXTURE, "--mtrag-root", MTRAG, "--json", out)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    r = json.loads(out.read_text())
    assert r["benchmark"] == "probes" and r["config"]["probes"] == 25
    assert list(r["backends"]) == ["overlap_lexical", "overlap_entities", "overlap_configured"]
    flagged = {
        name: {k: row["flagged"] for k, row in b["kinds"].items() if row["n"]}
        for name, b in r["backends"].items()
    }
    # two-sentence windows: the lexical overlap alone accepts every perturbation of the fixture
    assert flagged["overlap_lexical"]["negation"] == 0.0
    assert flagged["overlap_lexical"]["changed_number"] == 0.0
    assert flagged["overlap_entities"]["changed_number"] == 1.0
    assert flagged["overlap_entities"]["swapped_entity"] == 1.0
    assert flagged["overlap_configured"]["negation"] == 1.0
    # the split evidence is read as one window: still supported, as its original is
    split = r["backends"]["overlap_configured"]["kinds"]["split_evidence"]
    assert (split["n"], split["supported"], split["supported_given_original_accepted"]) == (1, 1, 1)
    assert split["target"] == {"supported_given_original_accepted": 0.9}
    # whole answers at the operating point, with the judge's veto (number, fabricated, and the
    # findings the verifier confirms): a changed number decides where the soft score alone flags
    # none; every hard check on also rejects one of the three unedited answers
    assert r["config"]["answer_probes"] == 11
    level = r["answer_level"]["overlap_configured"]
    assert level["threshold"] == pytest.approx(0.7467, abs=1e-4)
    assert level["veto"] == ["number", "fabricated", "contradicted"]
    kinds, soft, every = level["kinds"], level["soft_score_only"], level["every_check"]
    assert kinds["changed_number"]["flagged"] == 1.0 and soft["changed_number"]["flagged"] == 0.0
    # the negation finding decides where the shipped verifier confirms it: 2 of the 3
    assert kinds["negation"]["flagged_given_original_accepted"] == pytest.approx(2 / 3)
    assert every["negation"]["flagged_given_original_accepted"] == 1.0
    assert every["swapped_entity"]["flagged_given_original_accepted"] == 1.0
    assert (kinds["original"]["n"], kinds["original"]["accepted"]) == (3, 1.0)
    assert every["original"]["accepted"] == pytest.approx(2 / 3)
    # the claim-level targets are met, the answer-level negation target is not
    assert r["target_met"] is False and r["target_judge"] == "overlap_configured"
    assert (r["segmenter"]["documents"], r["segmenter"]["sentences"]) == (20, 35)
    assert r["judge_speed_mtrag"]["answers"] == 5 and r["judge_speed_mtrag"]["answers_per_s"] > 0


def test_bench_probes_with_one_sentence_windows_misses_the_split_target(tmp_path):
    params = yaml.safe_load((PROJECT / "params.yaml").read_text())
    params["judge"]["window"] = 1
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params))
    out = tmp_path / "r.json"
    args = ["--dataset-root", FIXTURE, "--mtrag-root", MTRAG, "--params", tmp_path / "params.yaml"]
    proc = _run("bench_probes.py", *args, "--json", out)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    r = json.loads(out.read_text())
    split = r["backends"]["overlap_configured"]["kinds"]["split_evidence"]
    # one sentence of evidence: the split claim is rejected though its original was accepted
    assert (split["n"], split["supported_given_original_accepted"], split["target_met"]) == (
        1,
        0.0,
        False,
    )
    assert r["target_met"] is False
