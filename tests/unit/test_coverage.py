"""The coverage matrix: counts per intent x document type, empty cells, per-cell intervals and
the sizes a decision's half-width needs, computed by hand; bad input in one line."""

from __future__ import annotations

import math

import pytest

from ragrig.core.errors import DataValidationError
from ragrig.metrics.coverage import adjusted_sd, doc_types, matrix, needed_n


def test_matrix_empty_cells_and_sizes_by_hand():
    # intents by rule (a claim label), document types from the gold documents' metadata
    intents = {"q1": "support", "q2": "support", "q3": "support", "q4": "contradict",
               "q5": "contradict"}  # fmt: skip
    qrels = {"q1": {"d1": 1}, "q2": {"d1": 1, "d2": 1, "d3": 1}, "q3": {"d2": 1},
             "q4": {"d3": 1}, "q5": {"d9": 0}}  # fmt: skip
    kinds = {"d1": "pdf", "d2": "html", "d3": "html"}
    types = doc_types(qrels, kinds)
    assert types == {"q1": "pdf", "q2": "html", "q3": "html", "q4": "html", "q5": "none"}
    values = {"q1": 1.0, "q2": 0.0, "q3": 1.0, "q4": 1.0}  # q5 not scored
    m = matrix(intents, types, values, half_width=0.1, level=0.95, resamples=200)
    assert m["counts"].to_dict(orient="index") == {
        "contradict": {"html": 1, "none": 1, "pdf": 0},
        "support": {"html": 2, "none": 0, "pdf": 1},
    }
    assert m["empty"] == [("contradict", "pdf"), ("support", "none")]
    assert m["no_interval"] == 3  # contradict x html, support x pdf: one value; q5 none
    cell = {(x["intent"], x["doc_type"]): x for x in m["cells"]}
    both = cell[("support", "html")]  # values 0 and 1
    z2 = 1.959964**2
    mean = (1 + z2 / 2) / (2 + z2)  # 0.5
    sd = math.sqrt(((0 - mean) ** 2 + (1 - mean) ** 2 + z2 / 2 * 2 * 0.25) / (2 + z2 - 1))
    assert both["sd"] == pytest.approx(sd, rel=1e-5)
    assert both["needed"] == math.ceil((1.959964 * sd / 0.1) ** 2)
    assert both["missing"] == both["needed"] - 2 and both["mean"] == 0.5
    # no value: the prior 0.5, (1.96 * 0.5 / 0.1)^2 = 96.04 -> 97
    assert cell[("contradict", "pdf")]["needed"] == 97
    assert cell[("contradict", "pdf")]["sd_from"] == "prior 0.5"
    # four of four faithful: no variance of 0, a size well above 2
    assert (
        adjusted_sd([1.0] * 4, 0.95) > 0.4
        and needed_n(adjusted_sd([1.0] * 4, 0.95), 0.1, 0.95) > 60
    )


@pytest.mark.parametrize("h", [0.0, 1.0, 1.5, -0.1])
def test_a_half_width_of_0_or_at_least_1_is_refused(h):
    with pytest.raises(DataValidationError, match="strictly between 0 and 1"):
        needed_n(0.3, h, 0.95)


def test_the_command_says_what_is_missing_in_one_line(tmp_path):
    import subprocess

    from ..conftest import BIN, project_env

    cmd = [str(BIN / "python"), "-m", "ragrig", "coverage", "--intent", "claim_label",
           "--data", str(tmp_path)]  # fmt: skip
    proc = subprocess.run(cmd, env=project_env(), capture_output=True, text=True)
    assert proc.returncode == 2
    (line,) = proc.stderr.strip().splitlines()
    assert line.startswith("ragrig coverage: error: ") and "queries.parquet" in line
    proc = subprocess.run([*cmd, "--half-width", "0"], env=project_env(), capture_output=True,
                          text=True)  # fmt: skip
    assert proc.stderr.strip() == (
        "ragrig coverage: error: half-width 0: a decision's interval half-width lies strictly "
        "between 0 and 1"
    )


def test_production_traffic_is_the_target_and_its_uncovered_share_is_named(tmp_path):
    import json

    from ragrig.cli.coverage import traffic_shares
    from ragrig.metrics.coverage import format_traffic, traffic_coverage

    log = tmp_path / "log.jsonl"
    rows = []
    for i, intent in enumerate(["a"] * 5 + ["b"] * 3 + ["c"] * 2):
        rows.append(json.dumps({"id": f"i{i}", "timestamp": 1000 + i, "question": "q?",
                                "contexts": ["p"], "answer": "x.", "slices": {"intent": intent}}))  # fmt: skip
    rows.append("not json")
    log.write_text("\n".join(rows) + "\n")
    shares, lines, left_out = traffic_shares(log, "intent")
    assert (shares, lines, left_out) == ({"a": 0.5, "b": 0.3, "c": 0.2}, 10, 1)
    t = traffic_coverage(shares, {"q1": "a", "q2": "a", "q3": "b", "q4": "d"})
    assert t["uncovered"] == ["c"] and t["uncovered_share"] == pytest.approx(0.2)
    assert t["not_in_production"] == ["d"]
    by = {r["intent"]: r for r in t["rows"]}
    assert (by["a"]["set_share"], by["a"]["queries"], by["d"]["production_share"]) == (0.5, 2, 0.0)
    assert format_traffic(t, lines, left_out, "intent")[0] == (
        "production traffic (10 lines, 1 left out; slice 'intent'): 0.200 of it in intents the "
        "set does not cover (c 0.200)"
    )


def _ontology(tmp_path, text):
    path = tmp_path / "ontology.yaml"
    path.write_text(text)
    return path


def test_an_ontology_makes_every_branch_a_row_and_names_intents_it_lacks(tmp_path):
    from ragrig.metrics.coverage import branch_shares, branches, read_ontology

    parents = read_ontology(
        _ontology(
            tmp_path,
            "billing: null\nrefunds: billing\ninvoices: billing\nlate_refunds: refunds\n"
            "support: null\nlogin: support\n",
        )
    )
    assert parents["late_refunds"] == "refunds" and parents["support"] is None
    intents = {"q1": "late_refunds", "q2": "invoices", "q3": "invoices", "q4": "weather"}
    got, rows, unknown = branches(intents, parents, 2)
    assert got == {"q1": "billing/refunds", "q2": "billing/invoices", "q3": "billing/invoices",
                   "q4": "unknown"}  # fmt: skip
    assert rows == ["billing", "billing/invoices", "billing/refunds", "support", "support/login"]
    assert unknown == {"weather": 1}
    m = matrix(got, dict.fromkeys(got, "all"), half_width=0.1, rows=rows)
    assert m["empty_rows"] == ["billing", "support", "support/login"]
    assert m["counts"]["all"].to_dict() == {
        "billing": 0, "billing/invoices": 2, "billing/refunds": 1, "support": 0,
        "support/login": 0, "unknown": 1,
    }  # fmt: skip
    assert branches(intents, parents, 1)[0]["q1"] == "billing"
    # production's intents summed on the same branches
    assert branch_shares({"late_refunds": 0.2, "refunds": 0.3, "login": 0.4, "x": 0.1},
                         parents, 1) == {"billing": 0.5, "support": 0.4, "unknown": 0.1}  # fmt: skip


@pytest.mark.parametrize(
    "text, message",
    [
        ("a: null\nb: c\n", "'b' has the unknown parent 'c' (not a node)"),
        ("a: b\nb: c\nc: a\n", "a cycle (a -> b -> c -> a)"),
        ("a: a\n", "a cycle (a -> a)"),
        ("- a\n- b\n", "expected a mapping of each intent to its parent"),
        ("a: [b]\n", "the parent of 'a' is a list, not a node name"),
        ("a: null\nb: c: d\n", "line 2: not readable"),
    ],
)
def test_an_ontology_with_a_cycle_or_an_unknown_parent_is_one_line(tmp_path, text, message):
    from ragrig.metrics.coverage import read_ontology

    with pytest.raises(DataValidationError, match="ontology .*") as exc:
        read_ontology(_ontology(tmp_path, text))
    assert message in str(exc.value) and "\n" not in str(exc.value)
