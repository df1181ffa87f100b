"""Robustness sets (ragrig.tools.robustness): the transformations, the sets built from the tiny
fixture and its MTRAG questions, parsed as a dataset whose every query names its set, and
`ragrig data ensure` building the folder once."""

from __future__ import annotations

import json

import yaml

from ragrig.cli import app as cli
from ragrig.core.config import validate_section
from ragrig.tools.robustness import (
    build,
    change_numbers,
    counterfactual,
    exclusive,
    negate,
    write,
)

from ..conftest import FIXTURE, PROJECT

MTRAG = PROJECT / "tests" / "fixtures" / "tiny_mtrag" / "mtragun_reference_generation_tasks.jsonl"


def test_transformations():
    assert negate("Glaciers are growing in the Alps.") == "Glaciers are not growing in the Alps."
    assert negate("Aspirin does not cure colds.") is None  # already negated right there
    assert negate("Mars has moons.") == "Mars has not moons."
    assert negate("Phobos orbits Mars.") is None
    assert change_numbers("Landed in 2012 after 8.5 months.") == "Landed in 4025 after 10 months."
    assert change_numbers("No numbers here.") is None
    assert counterfactual(["A is big.", "It took 3 days."], [1]) == ["A is big.", "It took 7 days."]
    assert counterfactual(["Phobos orbits Mars."], [0]) is None
    assert exclusive("Aspirin reduces fever.") == "Only aspirin reduces fever."
    assert exclusive("ALDH1 expression is prognostic.") == "Only ALDH1 expression is prognostic."
    assert exclusive("Aspirin does not reduce fever.") is None
    assert exclusive("Only aspirin reduces fever.") is None
    assert exclusive("Aspirin reduces fever.", "Nothing except") == (
        "Nothing except aspirin reduces fever."
    )
    assert exclusive("Nothing except aspirin reduces fever.", "Nothing except") is None
    assert exclusive("All NSAIDs except aspirin reduce fever.") is None


def test_sets_from_the_fixture_are_deterministic_and_counted():
    built = build(FIXTURE, MTRAG, 2, 13)
    assert built.counts == {
        "original": {"built": 2, "left_out": 0},
        "counterfactual": {"built": 1, "left_out": 1},
        "negation": {"built": 1, "left_out": 1},
        "near_duplicate": {"built": 2, "left_out": 0},
        "out_of_scope": {"built": 2, "left_out": 0},
        "only": {"built": 1, "left_out": 1},  # claim 7 is contradicted: not made exclusive
        "except": {"built": 1, "left_out": 1},
    }
    sets = {q["_id"]: q["metadata"]["robustness_set"] for q in built.queries}
    assert sets == {
        "3": "original",
        "3000003": "near_duplicate",
        "7": "original",
        "1000007": "counterfactual",
        "2000007": "negation",
        "3000007": "near_duplicate",
        "4000000": "out_of_scope",
        "4000001": "out_of_scope",
        "5000003": "only",
        "6000003": "except",
    }
    texts = {q["_id"]: q["text"] for q in built.queries}
    assert texts["5000003"] == "Only vitamin B12 deficiency raises homocysteine levels in blood."
    assert texts["6000003"] == (
        "Nothing except vitamin B12 deficiency raises homocysteine levels in blood."
    )
    for qid in ("5000003", "6000003"):
        claim = next(c for c in built.claims if c["id"] == int(qid))
        assert claim["evidence"] == {}  # NOT_ENOUGH_INFO: the support of the inclusive claim only
        assert sorted(d for q, d, r in built.qrels if q == qid and r > 0) == ["d05"]
    added = {d["_id"]: d["text"] for d in built.corpus[20:]}
    assert (
        added["cf-7-d20"] == "Mountain glaciers are not retreating worldwide as temperatures rise."
    )
    assert sorted(added) == sorted(
        ["cf-7-d20", *(f"nd{k}-3-d06" for k in range(3)), *(f"nd{k}-7-d01" for k in range(3))]
    )
    again = build(FIXTURE, MTRAG, 2, 13)
    assert (again.corpus, again.queries, again.qrels) == (built.corpus, built.queries, built.qrels)


def test_the_folder_parses_with_a_set_per_query_and_the_swapped_labels(tmp_path):
    from ragrig.parse import make_parser

    write(build(FIXTURE, MTRAG, 2, 13), tmp_path / "rob")
    ds = validate_section(
        "dataset",
        {
            "name": "rob",
            "root": str(tmp_path / "rob"),
            "claims": {"files": ["original/claims.jsonl"]},
        },
    )
    parsed = make_parser(validate_section("parse", {"method": "beir"})).parse(ds)
    q = parsed.queries.set_index("qid")
    assert q["meta_robustness_set"].to_dict()["2000007"] == "negation"
    # claim 7 is contradicted by its abstract: its negation is supported by it
    assert (q.loc["7", "claim_label"], q.loc["2000007", "claim_label"]) == ("CONTRADICT", "SUPPORT")
    assert q.loc["4000000", "claim_label"] == "NOT_ENOUGH_INFO" and q.loc["4000000", "n_gold"] == 0
    # the exclusive claim: not enough information, its topic's document still relevant
    assert (q.loc["5000003", "claim_label"], q.loc["5000003", "n_gold"]) == ("NOT_ENOUGH_INFO", 1)
    assert (q.loc["6000003", "claim_label"], q.loc["6000003", "n_gold"]) == ("NOT_ENOUGH_INFO", 1)
    assert len(parsed.documents) == 27


def test_data_ensure_builds_the_sets_once(tmp_path, capsys):
    params = yaml.safe_load((PROJECT / "params.yaml").read_text())
    params["dataset"] = {
        "name": "rob",
        "root": str(tmp_path / "rob"),
        "split": "test",
        "robustness": {"source": str(FIXTURE), "mtrag_tasks": str(MTRAG), "per_set": 2},
        "claims": {"files": ["original/claims.jsonl"]},
    }
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump(params))
    assert cli.main(["data", "ensure", "--params", str(path)]) == 0
    out = capsys.readouterr().out
    assert "robustness sets built at" in out and "negation 1" in out
    manifest = json.loads((tmp_path / "rob" / "manifest.json").read_text())
    assert manifest["built_from"]["per_set"] == 2
    assert cli.main(["data", "ensure", "--params", str(path)]) == 0
    assert "built at" not in capsys.readouterr().out  # present and current: not rebuilt
