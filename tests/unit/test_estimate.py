"""`ragrig estimate` and the estimate stage: calls, tokens and price of a run's model calls, counted
before any is made, and the refusal of a run over its budget."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml

from ragrig.core.errors import ConfigError
from ragrig.generate.prompt import PROMPTS, chat_messages
from ragrig.report.estimate import CHARS_PER_TOKEN, OK_TEXT, TOKENS_PER_MESSAGE, estimate

from ..conftest import PROJECT, write_tiny_stage_inputs

PRICE = {"input_per_mtok": 0.15, "output_per_mtok": 0.6}
HTTP = {"backend": "openai_http", "base_url": "http://127.0.0.1:9/v1", "model": "m-judge"}


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> Path:
    """The fixture's queries and chunks (parse, chunk) and a rerank run: each query's first
    three chunks, ranked in order."""
    root = tmp_path_factory.mktemp("estimate") / "data"
    chunks = write_tiny_stage_inputs(root)
    queries = pd.read_parquet(root / "parse" / "queries.parquet")
    rows = [
        {"qid": q, "doc_id": c.doc_id, "chunk_id": c.chunk_id, "score": 1.0 / r, "rank": r}
        for q in queries["qid"]
        for r, c in enumerate(chunks.head(3).itertuples(), start=1)
    ]
    (root / "rerank").mkdir()
    pd.DataFrame(rows).to_parquet(root / "rerank" / "run.parquet")
    return root


def _params(tmp: Path, generate: dict, judge: dict | None = None, budget=None) -> Path:
    from ragrig.compose.params import compose_yaml

    cfg = yaml.safe_load(compose_yaml(PROJECT / "conf", ["dataset=tiny"]))
    cfg["generate"] = generate or cfg["generate"]
    if judge is not None:
        cfg["judge"] = judge
    cfg["report"]["prices"]["m-gen"] = PRICE
    cfg["report"]["prices"]["m-judge"] = {"input_per_mtok": 1.0, "output_per_mtok": 2.0}
    cfg["budget"] = {"usd": budget}
    path = tmp / "params.yaml"
    path.write_text(yaml.safe_dump(cfg), encoding="utf-8")
    return path


def _extractive() -> dict:
    return yaml.safe_load((PROJECT / "conf/generate/extractive.yaml").read_text())


def _http(**extra) -> dict:
    """An OpenAI-compatible generator: no tokenizer known to ragrig, so its tokens are estimated."""
    raw = yaml.safe_load((PROJECT / "conf/generate/openai_http.yaml").read_text())
    return {**raw, "model": "m-gen", "max_tokens": 100, **extra}


def _run(data: Path, params: Path, generate_dir: Path | None = None):
    return estimate(params, data / "parse", data / "chunk", data / "rerank", generate_dir)


def test_an_endpoints_answers_and_samples_are_counted_at_four_characters_a_token(data, tmp_path):
    est = _run(data, _params(tmp_path, _http(consistency_samples=2)))
    answers, samples = est.parts
    # the prompts the generator sends: the system prompt and the claim over its three passages
    queries = pd.read_parquet(data / "parse/queries.parquet")
    chunks = pd.read_parquet(data / "chunk/chunks.parquet").head(3)["text"].str[:1200].tolist()
    system = PROMPTS["claim_verdict"][0]  # the default system prompt of the claim prompt
    tokens = 0
    for text in queries["text"]:
        messages = chat_messages(system, text, chunks, "claim_verdict")
        chars = sum(len(m["content"]) for m in messages)
        tokens += math.ceil(chars / CHARS_PER_TOKEN) + TOKENS_PER_MESSAGE * 2
    n = len(queries)
    assert (answers.part, answers.calls, answers.prompt_tokens) == ("answers", n, tokens)
    assert answers.completion_tokens == 100 * n and answers.tokens == "estimated"
    assert answers.usd == pytest.approx((tokens * 0.15 + 100 * n * 0.6) / 1e6)
    assert (samples.part, samples.calls, samples.prompt_tokens) == ("samples", 2 * n, 2 * tokens)
    assert est.total_usd == pytest.approx(3 * answers.usd)
    assert est.budget_usd is None and not est.over_budget
    # the record names the stage folder, not the run's root: the same run, the same bytes anywhere
    assert est.read["passages"] == "rerank/run.parquet (the last rerank output)"
    # a sample token budget of its own bounds the samples' completions
    _, capped = _run(data, _params(tmp_path, _http(consistency_samples=2,
                                                   consistency_max_tokens=8))).parts  # fmt: skip
    assert capped.completion_tokens == 8 * 2 * n and capped.prompt_tokens == 2 * tokens


def test_the_claim_judge_counts_the_claims_and_citations_of_the_answers_there(data, tmp_path):
    """With generations at hand, llm_claims makes one call per claim and one per claim of a
    citing sentence and passage it cites: two claims citing one passage each are four calls."""
    judge = {"method": "llm_claims", "verifier": {**HTTP, "max_tokens": 16}}
    params = _params(tmp_path, _extractive(), judge)
    gens = tmp_path / "generate"
    gens.mkdir()
    qids = pd.read_parquet(data / "parse/queries.parquet")["qid"].tolist()
    answer = "SUPPORTED. Mars has two small moons [1]. Phobos orbits Mars three times a day [2]."
    passages = ["Mars has two small moons, Phobos and Deimos.", "Phobos orbits Mars fast."]
    row = {"status": "ok", "context_chunk_ids": "[]", "citations": "[]", "model": "m-gen",
           "prompt_tokens": 0, "completion_tokens": 0, "latency_ms": 1.0, "error": "",
           "cpu_s": 0.0, "samples": "[]", "contexts": json.dumps(passages)}  # fmt: skip
    rows = [{**row, "qid": qids[0], "answer": answer}]
    rows.append({**row, "qid": qids[1], "answer": "", "status": "error", "error": "timeout"})
    pd.DataFrame(rows).to_parquet(gens / "generations.parquet")
    est = _run(data, params, gens)
    claims, cited = est.parts
    # one answer judged: the failed one and the queries the file does not answer are not
    got = (claims.part, claims.calls, cited.part, cited.calls)
    assert got == ("claims", 2, "citation checks", 2)
    assert est.read["answers"].endswith("(the last generate output)")
    assert claims.completion_tokens == 32 and claims.model == "m-judge"
    assert claims.prompt_tokens > cited.prompt_tokens  # three passages each, against one


def test_an_llm_judge_is_asked_repeats_times_per_answer_not_generated_yet(data, tmp_path):
    judge = yaml.safe_load(_params(tmp_path, {}).read_text())["judge"]
    params = _params(tmp_path, _extractive(), {**judge, "llm": {**HTTP, "repeats": 3}})
    (part,) = _run(data, params).parts
    n = len(pd.read_parquet(data / "parse/queries.parquet"))
    assert (part.part, part.calls, part.tokens) == ("llm judge", 3 * n, "estimated")
    # an extractive answer is at most a passage: 1,200 characters, 300 tokens
    assert f"{n} answers not generated yet, each at 300 tokens" in part.notes


def test_over_budget_the_command_exits_1_and_the_stage_writes_nothing(data, tmp_path):
    params = _params(tmp_path, _http(), budget=0.0001)
    est = _run(data, params)
    assert est.over_budget and est.total_usd > 0.0001
    out = tmp_path / "estimate"
    inputs = [str(data / s) for s in ("parse", "chunk", "rerank")]
    cmd = [sys.executable, str(PROJECT / "stages/estimate.py"), "--params", str(params)]
    proc = subprocess.run(
        [*cmd, "--out", str(out), "--inputs", *inputs], capture_output=True, text=True
    )
    assert proc.returncode == 1 and not out.exists()
    (line,) = proc.stderr.strip().splitlines()
    assert line.startswith("ragrig estimate: error: the run's estimated cost $0.00")
    assert "exceeds budget.usd $0.0001" in line and "no model was called" in line
    # within budget: the estimate and the gate file generate reads, the same bytes every time
    within = _params(tmp_path, _http(), budget=1.0)
    proc = subprocess.run(
        [*cmd[:-1], str(within), "--out", str(out), "--inputs", *inputs],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stderr
    assert (out / "ok").read_text() == OK_TEXT
    record = json.loads((out / "estimate.json").read_text())
    assert record["budget_usd"] == 1.0 and record["over_budget"] is False
    assert record["total"]["usd"] == pytest.approx(est.total_usd)


def test_cli_prints_the_table_and_exits_1_over_budget(data, tmp_path, monkeypatch, capsys):
    import argparse

    from ragrig.report.estimate import cmd_estimate

    monkeypatch.chdir(data.parent)  # data/parse, data/chunk, data/rerank as the stages see them
    params = _params(tmp_path, _http(), budget=0.0001)
    record = tmp_path / "estimate.json"
    assert cmd_estimate(argparse.Namespace(params=str(params), json=str(record))) == 1
    out = capsys.readouterr().out
    assert "generate  answers  m-gen" in out and "budget $0.0001: OVER" in out
    assert json.loads(record.read_text())["over_budget"] is True
    with pytest.raises(ConfigError, match="no params file at nope.yaml"):
        cmd_estimate(argparse.Namespace(params="nope.yaml", json=None))


def test_a_model_without_a_price_and_a_project_without_queries_are_one_line_each(data, tmp_path):
    params = _params(tmp_path, _http(model="unpriced"))
    with pytest.raises(ConfigError, match="no price for model 'unpriced'"):
        _run(data, params)
    with pytest.raises(ConfigError, match="run `dvc repro parse` first"):
        estimate(params, tmp_path / "parse", data / "chunk", data / "rerank", None)


def test_a_local_extractive_run_calls_no_model(data, tmp_path):
    est = _run(data, _params(tmp_path, _extractive()))
    assert est.parts == [] and est.total_usd == 0
