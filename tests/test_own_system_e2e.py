"""The team's own system through the pipeline, on the fixture run (tiny_run): its rankings
(retrieve=run_file) and its answers (generate=answers_file) read from files. Fed the pipeline's
own TREC run and its own answers, the report gives exactly the pipeline's retrieval metrics,
judge scores and scorecard; an edited answers file reruns generate and what follows only."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from .conftest import BIN, copy_run, sh

PY = str(BIN / "python")


def _ran(ws: Path) -> set[str]:
    lines = (ws / ".ragrig" / "stage_log.jsonl").read_text().splitlines()
    return {json.loads(x)["stage"] for x in lines if x.strip() and '"ok"' in x}


def _export_answers(generations: pd.DataFrame, path: Path) -> None:
    with path.open("w", encoding="utf-8") as fh:
        for g in generations.itertuples(index=False):
            obj = {
                "qid": g.qid,
                "answer": g.answer,
                "passage_ids": json.loads(g.context_chunk_ids),
                "passages": json.loads(g.contexts),
                "citations": json.loads(g.citations),
                "latency_ms": g.latency_ms,
                "prompt_tokens": int(g.prompt_tokens),
                "completion_tokens": int(g.completion_tokens),
            }
            fh.write(json.dumps(obj) + "\n")


def test_the_pipelines_own_run_and_answers_read_back_give_its_metrics(tmp_path, tiny_run):
    ws = copy_run(tiny_run, tmp_path / "ws")
    before = json.loads((ws / "reports" / "metrics.json").read_text())
    judged = pd.read_parquet(ws / "data" / "judge" / "judgments.parquet")
    scorecard = pd.read_csv(ws / "reports" / "run" / "scorecard.csv")
    system = tmp_path / "system"
    system.mkdir()
    (system / "team.run").write_text((ws / "reports" / "run" / "trec" / "retrieve.run").read_text())
    _export_answers(pd.read_parquet(ws / "data" / "generate" / "generations.parquet"),
                    system / "answers.jsonl")  # fmt: skip

    (ws / ".ragrig" / "stage_log.jsonl").unlink(missing_ok=True)
    sh([PY, "-m", "ragrig", "params", "write", "dataset=tiny", "retrieve=run_file",
        "generate=answers_file", f"system.run_file={system / 'team.run'}",
        f"system.answers_file={system / 'answers.jsonl'}"], ws)  # fmt: skip
    out = sh(["dvc", "repro"], ws).stdout
    assert _ran(ws) == {"retrieve", "rerank", "estimate", "generate", "judge", "report"}
    assert "retrieve: run_file" in out and "0 passages the run does not rank" in out

    after = json.loads((ws / "reports" / "metrics.json").read_text())
    assert after["retrieval"] == before["retrieval"]
    assert after["rerank"] == before["rerank"]
    assert after["citations"] == before["citations"]
    for axis in ("faithfulness", "relevance", "correctness"):
        assert after["scorecard"][axis] == before["scorecard"][axis], axis
    again = pd.read_parquet(ws / "data" / "judge" / "judgments.parquet")
    cols = [c for c in judged.columns if not c.endswith(("latency_ms", "cpu_s"))]  # timings
    pd.testing.assert_frame_equal(again[cols], judged[cols])
    pd.testing.assert_frame_equal(pd.read_csv(ws / "reports" / "run" / "scorecard.csv"), scorecard)

    # an edited answer reruns generate and what follows, never retrieval
    lines = (system / "answers.jsonl").read_text().splitlines()
    first = json.loads(lines[0])
    first["answer"] = "I cannot answer from these passages."
    (system / "answers.jsonl").write_text("\n".join([json.dumps(first), *lines[1:]]) + "\n")
    (ws / ".ragrig" / "stage_log.jsonl").unlink()
    sh(["dvc", "repro"], ws)
    assert _ran(ws) == {"generate", "judge", "report"}
    gens = pd.read_parquet(ws / "data" / "generate" / "generations.parquet")
    assert gens.set_index("qid").loc[first["qid"], "answer"] == first["answer"]
