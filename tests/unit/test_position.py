"""Position in the context: the reorder option, the lost-in-the-middle probe's contexts
(ragrig.generate.position) and what the report measures of them (ragrig.report.position)."""

from __future__ import annotations

import pandas as pd
import pytest

from ragrig.generate.base import Generation
from ragrig.generate.position import place, probe_contexts, reorder_ends
from ragrig.generate.step import answer_probe, assemble_contexts, generate_all
from ragrig.report.position import position_measures


def test_reorder_puts_the_strongest_at_both_ends():
    assert reorder_ends([1, 2, 3, 4, 5, 6]) == [1, 3, 5, 6, 4, 2]
    assert reorder_ends([1, 2, 3, 4, 5]) == [1, 3, 5, 4, 2]
    assert reorder_ends([]) == []
    assert place("g", ["a", "b", "c", "d"], "middle") == ["a", "b", "g", "c", "d"]
    assert place("g", ["a", "b"], "first") == ["g", "a", "b"]
    assert place("g", ["a", "b"], "last") == ["a", "b", "g"]


CHUNKS = pd.DataFrame(
    {
        "chunk_id": ["g#0", "g#1", "a#0", "b#0", "c#0", "d#0", "h#0"],
        "doc_id": ["g", "g", "a", "b", "c", "d", "h"],
        "text": ["G0", "G1", "A", "B", "C", "D", "H"],
        "start": [0, 10, 0, 0, 0, 0, 0],
        "end": [10, 20, 1, 1, 1, 1, 1],
    }
)
RUN = pd.DataFrame(
    {
        "qid": ["q1"] * 5 + ["q2"] * 4 + ["q3"] * 2,
        "doc_id": ["a", "g", "b", "c", "d", "a", "b", "c", "d", "a", "b"],
        "chunk_id": ["a#0", "g#1", "b#0", "c#0", "d#0", "a#0", "b#0", "c#0", "d#0", "a#0", "b#0"],
        "rank": [1, 2, 3, 4, 5, 1, 2, 3, 4, 1, 2],
        "score": [5.0, 4.0, 3.0, 2.0, 1.0, 4.0, 3.0, 2.0, 1.0, 2.0, 1.0],
    }
)


def test_probe_moves_the_gold_passage_among_the_same_distractors():
    qrels = pd.DataFrame(
        {
            "qid": ["q1", "q2", "q3", "q4"],
            "doc_id": ["g", "g", "h", "a"],
            "relevance": [1, 1, 1, 0],
        }
    )
    contexts, table, skipped = probe_contexts(RUN, CHUNKS, qrels, ["q1", "q2", "q3", "q4"], 5)
    ids = {k: [c for c, _ in v] for k, v in contexts.items()}
    # q1: the gold is the run's g#1 at rank 2; distractors a, b, c, d in rank order
    assert ids["q1|first"] == ["g#1", "a#0", "b#0", "c#0", "d#0"]
    assert ids["q1|middle"] == ["a#0", "b#0", "g#1", "c#0", "d#0"]
    assert ids["q1|last"] == ["a#0", "b#0", "c#0", "d#0", "g#1"]
    # by rank a, g, b, c, d -> a first, g last, the weakest (d) in the middle
    assert ids["q1|reorder"] == ["a#0", "b#0", "d#0", "c#0", "g#1"]
    # q2: the run missed its gold: the gold document's first chunk, weakest when reordered
    assert ids["q2|first"][0] == "g#0" and ids["q2|reorder"] == ["a#0", "c#0", "g#0", "d#0", "b#0"]
    assert contexts["q2|first"][0] == ("g#0", "G0")
    rows = table.set_index("key")
    assert rows.loc["q1|middle", "gold_at"] == 3 and bool(rows.loc["q1|first", "gold_retrieved"])
    assert not rows.loc["q2|first", "gold_retrieved"]
    # q3 has two distractors for a context of five; q4 no positive judgment
    assert skipped == {"no_gold": 1, "too_few_distractors": 1}
    assert set(table["qid"]) == {"q1", "q2"} and len(table) == 8


class _Echo:
    """Answers with the passages it was given, counting its calls."""

    model_name = "echo"

    def __init__(self):
        self.asked: list[list[str]] = []

    def generate(self, question, passages):
        self.asked.append(list(passages))
        return Generation(" / ".join(passages))


def test_a_probe_context_the_pipeline_already_answered_is_not_asked_again():
    qrels = pd.DataFrame({"qid": ["q1", "q2"], "doc_id": ["g", "a"], "relevance": [1, 1]})
    text = dict(zip(CHUNKS["chunk_id"], CHUNKS["text"], strict=True))
    pipeline_ctx = assemble_contexts(RUN, text, ["q1", "q2"], 3)  # q1: a, g, b; q2: a, b, c
    gen = _Echo()
    queries = {"q1": "claim one", "q2": "claim two"}
    pipeline = generate_all(gen, ["q1", "q2"], queries, pipeline_ctx, 100, progress=False)
    contexts, keys, _ = probe_contexts(RUN, CHUNKS, qrels, ["q1", "q2"], 3)
    gen.asked.clear()
    table, counts = answer_probe(
        gen, keys, contexts, pipeline_ctx, pipeline, queries, max_passage_chars=100, progress=False
    )
    # q1's gold g#1 is ranked 2nd among a and b: its middle context is the pipeline's own;
    # q2's gold a#0 is ranked 1st: its first context is
    assert sorted(table.loc[table["pipeline_answer"], "qid"]) == ["q1|middle", "q2|first"]
    # q1 reordered by strength a, g, b is a, b, g: its last context, asked once
    assert counts == {"pipeline_answers": 2, "repeated_contexts": 1}
    assert len(gen.asked) == 5 and len(table) == 8
    assert ["A", "G1", "B"] not in gen.asked and ["A", "B", "C"] not in gen.asked
    assert len({tuple(a) for a in gen.asked}) == 5
    rows = table.set_index("qid")
    assert rows.loc["q1|middle", "answer"] == pipeline.set_index("qid").loc["q1", "answer"]
    assert rows.loc["q1|last", "answer"] == "A / B / G1"  # asked: the gold moved last
    assert rows.loc["q1|reorder", "answer"] == "A / B / G1"
    assert rows.loc["q2|reorder", "answer"] == "A / C / B"
    assert list(table["qid"]) == list(keys["key"]) and set(table["query_qid"]) == {"q1", "q2"}
    # an answer that failed in the pipeline is asked again, never copied
    failed = pipeline.assign(status=["error", "ok"])
    _, counts = answer_probe(
        gen, keys, contexts, pipeline_ctx, failed, queries, max_passage_chars=100, progress=False
    )
    assert counts == {"pipeline_answers": 1, "repeated_contexts": 1}


def test_the_probes_context_is_the_pipelines_unless_set_and_needs_a_middle():
    from ragrig.core.config import validate_section
    from ragrig.core.errors import ConfigError

    on = {"method": "extractive", "position_probe": {"enabled": True}}
    assert validate_section("generate", on).position_probe.context_size is None
    with pytest.raises(ConfigError, match="n_passages .2. and have no middle"):
        validate_section("generate", {**on, "n_passages": 2})
    two = validate_section(
        "generate", {**on, "n_passages": 2, "position_probe": {"enabled": True, "context_size": 5}}
    )
    assert two.position_probe.context_size == 5


def test_assemble_contexts_reorders_when_asked():
    text = dict(zip(CHUNKS["chunk_id"], CHUNKS["text"], strict=True))
    ranked = assemble_contexts(RUN, text, ["q1"], 4)
    assert [c for c, _ in ranked["q1"]] == ["a#0", "g#1", "b#0", "c#0"]
    reordered = assemble_contexts(RUN, text, ["q1"], 4, "reorder")
    assert [c for c, _ in reordered["q1"]] == ["a#0", "b#0", "c#0", "g#1"]


def test_report_gives_each_position_its_mean_and_the_paired_differences():
    rows = []
    for i in range(4):
        for position, correct in (("first", 1.0), ("middle", 0.0 if i < 2 else 1.0), ("last", 1.0)):
            rows.append(
                {
                    "qid": f"q{i}",
                    "position": position,
                    "gold_at": 1,
                    "correctness": correct,
                    "faithfulness": 1.0,
                }
            )
        rows.append(
            {
                "qid": f"q{i}",
                "position": "reorder",
                "gold_at": 1,
                "correctness": 1.0,
                "faithfulness": None,
            }
        )
    metrics, lines = position_measures(pd.DataFrame(rows), seed=13)
    by = metrics["by_position"]
    assert by["first"]["correctness"]["mean"] == 1.0 and by["middle"]["correctness"]["mean"] == 0.5
    assert by["reorder"]["faithfulness"] == {"mean": None, "n": 0, "ci_low": None, "ci_high": None}
    paired = metrics["paired"]
    assert paired["middle-first"]["correctness"]["mean"] == -0.5
    assert paired["reorder-middle"]["correctness"]["mean"] == 0.5
    lo, hi = (
        paired["middle-first"]["correctness"]["ci_low"],
        paired["middle-first"]["correctness"]["ci_high"],
    )
    assert -1.0 <= lo <= -0.5 <= hi <= 0.0
    assert paired["reorder-middle"]["faithfulness"]["n"] == 0
    assert lines[0] == "position probe: 4 queries, each answered with the gold passage moved"
    assert lines[1].startswith("  correctness: first 1.0000 [1.00, 1.00], middle 0.5000 [")
    assert "reorder n/a" in lines[3]
    assert metrics["queries"] == 4
    assert pytest.approx(by["last"]["correctness"]["mean"]) == 1.0
