"""Every model output of every generation and judge backend is redacted before it is stored.

The generators all answer through generate_all (one call at a time, or generate_many for the
batching ones), the LLM judge backends all reply through LLMJudge.judge: a canary that a model
repeats is removed there, from answers, samples, errors, judge replies, the reply cache and
the judgment row. tests/test_canary_key.py proves the same on a real run over HTTP.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from ragrig.core.config import validate_section
from ragrig.core.registry import resolve
from ragrig.generate import GENERATORS, Generation, generate_all
from ragrig.judge import judge_all, make_judge
from ragrig.judge.llm import LLMJudge

KEY = "canary7Qx2Lm9Rt4Vw8Zp3Nk6"  # the configured secret: only an exact match finds it
SHAPED = "sk-proj-Zx81Qa0Lmw77Rt"  # a key no backend was given: found by its shape
CONTEXT = ["Mars has two moons, Phobos and Deimos."]


def _leaky(text: str) -> str:
    return f"{text} key {KEY}; Authorization: Bearer {KEY}; also {SHAPED}."


class _OneAtATime:
    model_name = "fake"
    secrets = (KEY,)

    def generate(self, question, passages, temperature=None, seed=None):
        if temperature is not None and seed == 2:
            raise RuntimeError(f"sample failed; header Authorization: Bearer {KEY}")
        return Generation(_leaky("Two moons [1]."), 5, 3)


class _Batched(_OneAtATime):
    batch_size = 2

    def generate_many(self, requests):
        return [
            RuntimeError(f"echo {KEY}")
            if r.question == "fail"
            else Generation(_leaky("Two."), 5, 3)
            for r in requests
        ]


def test_every_registered_generator_takes_one_of_the_two_paths_tested_here():
    """A new backend fails this until its path is named (and so tested) below."""
    batching = {
        name: hasattr(resolve(GENERATORS, name, "generator"), "generate_many")
        for name in GENERATORS
    }
    assert batching == {
        "extractive": False,
        "llama_cpp": False,
        "openai_http": False,
        "torch_gguf": True,
    }


@pytest.mark.parametrize("backend", [_OneAtATime, _Batched], ids=["one_at_a_time", "batched"])
def test_answers_samples_and_errors_hold_no_key(backend):
    qids = ["q1", "q2", "fail"]
    df = generate_all(
        backend(),
        qids,
        {"q1": "Moons?", "q2": "Moons of Mars?", "fail": "fail"},
        {q: [("d#0", CONTEXT[0])] for q in qids},
        500,
        progress=False,
        consistency_samples=2,
    )
    stored = df.to_json(orient="records")
    assert KEY not in stored and SHAPED not in stored
    ok = df[df["status"] == "ok"]
    assert ok["answer"].str.contains("[REDACTED]", regex=False).all()
    samples = [json.loads(s) for s in ok["samples"]]
    assert all("[REDACTED]" in s[0] for s in samples)


class _EchoTransport:
    """A judge model whose reply repeats the key, and whose usage is ordinary."""

    def __call__(self, body):
        verdict = {
            "unsupported_statements": [f"key {KEY}", SHAPED],
            "faithfulness": 0.5,
            "context_relevance": 1,
            "coverage": 1,
            "clarity": 1,
            "external_consistency": 1,
        }
        return {
            "choices": [{"message": {"content": json.dumps(verdict)}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 30, "completion_tokens": 12},
        }


@pytest.mark.parametrize("backend", ["openai_http", "llama_cpp"])
def test_judge_replies_hold_no_key_in_the_cache_or_the_row(backend, tmp_path: Path):
    """Both LLM judge backends are transports under LLMJudge: the HTTP one carries the key as a
    secret; the in-process one has none, so only the key's shape can be found."""
    secrets = (KEY,) if backend == "openai_http" else ()
    llm = LLMJudge(_EchoTransport(), "judge", tmp_path / "cache", secrets=secrets)
    judge = make_judge(validate_section("judge", {"method": "overlap"}))
    gens = pd.DataFrame(
        [
            {
                "qid": "q",
                "status": "ok",
                "answer": "Mars has two moons.",
                "contexts": json.dumps(CONTEXT),
            }
        ]
    )
    rows = judge_all(judge, gens, {"q": "Moons?"}, progress=False, llm=llm)
    stored = rows.to_json(orient="records")
    cached = "".join(p.read_text() for p in (tmp_path / "cache").rglob("*.json"))
    assert rows.iloc[0]["llm_status"] == "ok"
    assert SHAPED not in stored and SHAPED not in cached
    if secrets:
        assert KEY not in stored and KEY not in cached
    assert "[REDACTED]" in rows.iloc[0]["llm_unsupported"] and "[REDACTED]" in cached
