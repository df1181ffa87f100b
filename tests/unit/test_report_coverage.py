"""The report's coverage section (report.coverage): the same matrix as `ragrig coverage`, on the
run's own per-query axis values, in metrics.json, coverage.csv, the console and the run page."""

from __future__ import annotations

import pandas as pd
import pytest

from ragrig.core.config import validate_section
from ragrig.core.errors import DataValidationError
from ragrig.report.coverage import coverage_section
from ragrig.report.html import coverage_html


def _tables():
    queries = pd.DataFrame({"qid": ["q1", "q2", "q3", "q4"],
                            "meta_kind": ["per_chunk", "per_chunk", "negation", "late"]})  # fmt: skip
    qrels = pd.DataFrame({"qid": ["q1", "q2", "q3", "q4"], "doc_id": ["d1", "d2", "d1", "d2"],
                          "relevance": [1, 1, 1, 1]})  # fmt: skip
    documents = pd.DataFrame({"doc_id": ["d1", "d2"], "source": ["pdf", "html"]})
    per_query = pd.DataFrame({"qid": ["q1", "q2", "q3", "q1"],
                              "measure": ["axis/faithfulness"] * 3 + ["axis/relevance"],
                              "value": [1.0, 0.0, 1.0, 0.5]})  # fmt: skip
    return queries, qrels, documents, per_query


def test_the_section_counts_cells_names_empty_ones_and_sizes_them():
    queries, qrels, documents, per_query = _tables()
    cfg = validate_section("report", {"coverage": {"intent": "meta_kind", "doc_type": "source",
                                                   "half_width": 0.1}}).coverage  # fmt: skip
    record, cells, lines = coverage_section(queries, qrels, documents, per_query, cfg, 0.95, 13,
                                            200)  # fmt: skip
    assert record["counts"] == {"late": {"html": 1, "pdf": 0}, "negation": {"html": 0, "pdf": 1},
                                "per_chunk": {"html": 1, "pdf": 1}}  # fmt: skip
    assert record["empty"] == [["late", "pdf"], ["negation", "html"]]
    assert record["axis_measured"] is True
    # q4 has no faithfulness value: its cell sizes from the prior
    by = {(c["intent"], c["doc_type"]): c for c in cells.to_dict(orient="records")}
    assert by[("late", "html")]["values"] == 0 and by[("late", "html")]["needed"] == 97
    assert record["no_interval"] == 4  # every cell with queries holds one value or none
    assert lines[1] == "coverage: 4 queries by meta_kind x source, axis faithfulness"
    assert "  empty cells: 2 (late x pdf, negation x html)" in lines
    html = "".join(coverage_html(record))
    assert 'id="coverage"' in html and '<span class="warn">0</span>' in html
    assert "empty cells 2" in html


def test_an_inline_ontology_gives_branch_rows_and_its_errors_are_one_line():
    queries, qrels, documents, per_query = _tables()
    onto = {"questions": None, "per_chunk": "questions", "negation": "adversarial",
            "adversarial": None, "multi_hop": "questions"}  # fmt: skip
    cfg = validate_section("report", {"coverage": {"intent": "meta_kind",
                                                   "ontology": onto}}).coverage  # fmt: skip
    record, _, lines = coverage_section(queries, qrels, None, per_query, cfg, 0.95, 13, 200)
    assert record["intents"] == ["adversarial", "questions", "unknown"]
    assert record["counts"]["questions"] == {"all": 2}
    assert record["unknown_intents"] == {"late": 1}
    assert lines[2] == (
        "  1 queries of intents the ontology does not name (late 1) in the row 'unknown'"
    )
    cfg = cfg.model_copy(update={"ontology": {"a": "b"}})
    with pytest.raises(DataValidationError, match="'a' has the unknown parent 'b'"):
        coverage_section(queries, qrels, None, per_query, cfg, 0.95, 13, 200)
    cfg = cfg.model_copy(update={"ontology": None, "intent": "intent"})
    with pytest.raises(DataValidationError, match="intent column 'intent' is not in the queries"):
        coverage_section(queries, qrels, None, per_query, cfg, 0.95, 13, 200)
