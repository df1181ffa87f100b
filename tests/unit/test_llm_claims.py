"""The LLM claim judge (judge=llm_claims, ragrig.judge.llm_claims) against a local server that
verifies claims lexically (benchmarks/_claim_server.py): verdicts per claim, the contradicted
verdict deciding the answer, the cache, and a failed call counted as the answer's error."""

from __future__ import annotations

import importlib.util
import json

import pandas as pd
import pytest

from ragrig.core.config import validate_section
from ragrig.judge import judge_all, make_judge

from ..conftest import PROJECT


def _server_module():
    spec = importlib.util.spec_from_file_location(
        "ragrig_claim_server", PROJECT / "benchmarks" / "_claim_server.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def server():
    url, hits, httpd = _server_module().start()
    yield url, hits
    httpd.shutdown()
    httpd.server_close()


def _cfg(url: str, route: str, tmp_path, **extra):
    return validate_section(
        "judge",
        {
            "method": "llm_claims",
            "verifier": {
                "backend": "openai_http",
                "base_url": f"{url}/{route}/v1",
                "model": "reader",
                "cache_dir": str(tmp_path / "cache"),
                "backoff_s": 0.0,
                "retries": 0,
            },
            **extra,
        },
    )


PASSAGES = ["The Eiffel Tower stands in Paris.", "Mount Everest is the highest mountain."]


def test_each_claim_gets_the_models_verdict_and_a_contradiction_decides(server, tmp_path):
    url, hits = server
    judge = make_judge(_cfg(url, "reader", tmp_path))
    v = judge.judge(
        "Tell me about landmarks.",
        "The Eiffel Tower stands in Paris. Mount Everest is not the highest mountain. "
        "Giraffes sleep standing upright nightly.",
        PASSAGES,
    )
    assert len(v.extracted) == 3
    assert v.supported == [v.extracted[0]] and v.claim_scores == [1.0, 0.0, 0.0]
    # the lexical negation check and the model agree on the second claim; both are listed
    assert [(c, k) for c, k, _ in v.contradictions] == [
        (v.extracted[1], "negation"),
        (v.extracted[1], "contradicted"),
    ]
    assert v.soft_score == pytest.approx(1 / 3)
    # through the judge stage's loop: the contradicted claim decides, its mode named
    gens = pd.DataFrame(
        {
            "qid": ["q1", "q2"],
            "status": ["ok", "ok"],
            "answer": [
                "The Eiffel Tower stands in Paris.",
                "Mount Everest is not the highest mountain.",
            ],
            "contexts": [json.dumps(PASSAGES)] * 2,
        }
    )
    before = hits["reader"]
    out = judge_all(
        judge, gens, {"q1": "Where?", "q2": "Which?"}, threshold=0.5, veto=("contradicted",)
    )
    rows = out.set_index("qid")
    assert rows.loc["q1", "judged_faithful"] == 1.0
    assert rows.loc["q2", "judged_faithful"] == 0.0
    assert rows.loc["q2", "failure_mode"] == "contradiction"
    # the two claims were asked before: both answers come from the cache
    assert hits["reader"] == before


def test_a_failed_claim_call_is_the_answers_error_never_a_verdict(server, tmp_path):
    url, _ = server
    judge = make_judge(_cfg(url, "fail", tmp_path))
    gens = pd.DataFrame(
        {
            "qid": ["q1"],
            "status": ["ok"],
            "answer": ["The Eiffel Tower stands in Paris."],
            "contexts": [json.dumps(PASSAGES)],
        }
    )
    row = judge_all(judge, gens, {"q1": "Where?"}).iloc[0]
    assert (
        row["status"] == "error"
        and row["judged_faithful"] is None
        or pd.isna(row["judged_faithful"])
    )
    assert "LLM call error" in row["error"] and "The Eiffel Tower stands in Paris" in row["error"]


def test_committed_llm_claims_config_validates():
    import yaml

    cfg = validate_section(
        "judge", yaml.safe_load((PROJECT / "conf/judge/llm_claims.yaml").read_text())
    )
    assert (cfg.method, cfg.verifier.backend, cfg.veto) == (
        "llm_claims",
        "llama_cpp",
        ["contradicted", "number", "fabricated"],
    )


def test_self_preference_warns_when_judge_and_generator_share_a_family():
    from ragrig.judge.llm import model_family, self_preference

    assert model_family("packaged:SmolLM2-135M-Instruct") == "smollm"
    assert model_family("/models/Meta-Llama-3.1-8B-Instruct.Q4_K_M.gguf") == "llama"
    assert model_family("gpt-4o-mini") == "gpt"
    warning = self_preference(
        ["packaged:SmolLM2-135M-Instruct"], ["packaged:SmolLM2-135M-Instruct"]
    )
    assert warning.startswith("the judge and the generator are of one model family (smollm:")
    assert (
        self_preference(["gpt-4o-mini"], ["packaged:SmolLM2-135M-Instruct", "extractive"]) is None
    )
