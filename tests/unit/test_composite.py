"""The faithfulness composite: weights renormalised over the parts an answer has; its config,
its report lines, and the price check of the LLM judge's model."""

from __future__ import annotations

import dataclasses
import json

import pandas as pd
import pytest

from ragrig.compose.params import validate_composition
from ragrig.core.config import load_params, validate_section
from ragrig.core.errors import ConfigError, DataValidationError
from ragrig.judge.composite import composite, renormalised
from ragrig.report.judge import composite_summary, judge_measures
from ragrig.report.summary import composite_line

from ..conftest import PROJECT

W = {"claims": 0.4, "llm": 0.4, "entity": 0.2}


def test_llm_disabled_renormalises_claims_and_entity():
    value, used = composite({"claims": 0.75, "llm": None, "entity": 1.0}, W)
    assert value == pytest.approx((0.4 * 0.75 + 0.2 * 1.0) / 0.6)  # 0.8333...
    assert used == pytest.approx({"claims": 0.4 / 0.6, "entity": 0.2 / 0.6})
    assert renormalised(used, W)


def test_all_parts_use_the_configured_weights():
    value, used = composite({"claims": 0.75, "llm": 0.5, "entity": 1.0}, W)
    assert value == pytest.approx(0.4 * 0.75 + 0.4 * 0.5 + 0.2 * 1.0)  # 0.7
    assert used == pytest.approx(W) and not renormalised(used, W)


def test_claims_only_and_zero_weight_parts():
    assert composite({"claims": 0.75, "llm": None, "entity": None}, W) == (0.75, {"claims": 1.0})
    # a part weighted 0 is not used and leaving it out is no renormalisation
    w = {"claims": 0.5, "llm": 0.0, "entity": 0.5}
    value, used = composite({"claims": 0.0, "llm": 1.0, "entity": 1.0}, w)
    assert value == pytest.approx(0.5) and not renormalised(used, w)
    assert composite({"claims": None, "llm": None, "entity": None}, W) == (None, {})
    with pytest.raises(ValueError, match="unknown faithfulness part"):
        composite({"nli": 1.0}, W)


@pytest.mark.parametrize(
    ("weights", "message"),
    [
        ({"claims": -0.1}, "greater than or equal to 0"),
        ({"claims": 0.0, "llm": 1.0}, "judge.weights.claims must be > 0"),
        ({"claims": 0.4, "nli": 0.1}, "Extra inputs are not permitted"),
    ],
)
def test_weights_are_validated(weights, message):
    with pytest.raises(ConfigError, match=message):
        validate_section("judge", {"method": "overlap", "weights": weights})


def test_judge_config_defaults_and_llm_backends():
    cfg = validate_section("judge", {"method": "overlap"})
    assert cfg.llm is None and cfg.weights.model_dump() == W
    http = validate_section(
        "judge",
        {
            "method": "overlap",
            "llm": {"backend": "openai_http", "base_url": "http://127.0.0.1:1/v1", "model": "m"},
        },
    )
    assert (http.llm.retries, http.llm.backoff_s, http.llm.cache_dir) == (2, 1.0, None)
    local = validate_section("judge", {"method": "overlap", "llm": {"backend": "llama_cpp"}})
    assert local.llm.model == "packaged:SmolLM2-135M-Instruct"
    with pytest.raises(ConfigError, match="base_url"):
        validate_section(
            "judge", {"method": "overlap", "llm": {"backend": "openai_http", "model": "m"}}
        )
    with pytest.raises(ConfigError, match="does not match any of the expected tags"):
        validate_section("judge", {"method": "overlap", "llm": {"backend": "vllm"}})


def test_llm_judge_model_needs_a_dated_price():
    cfg = load_params(PROJECT / "params.yaml")
    cfg["judge"]["llm"] = {"backend": "openai_http", "base_url": "http://x/v1", "model": "jm-1"}
    with pytest.raises(ConfigError, match="no price for model 'jm-1': add 'jm-1' under report"):
        validate_composition(cfg)
    cfg["report"]["prices"]["jm-1"] = {"input_per_mtok": 1.0, "output_per_mtok": 2.0}
    validate_composition(cfg)


def _judgments() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "qid": ["a", "b", "c", "d"],
            "status": ["scored", "scored", "no_claims", "skipped"],
            "claim_support": [1.0, 0.5, None, None],
            "faithfulness_parts": [
                json.dumps({"claims": 0.4, "llm": 0.4, "entity": 0.2}),
                json.dumps({"claims": 2 / 3, "entity": 1 / 3}),
                "{}",
                "{}",
            ],
            "llm_status": ["ok", "invalid", "ok", "skipped"],
            "llm_faithfulness": [0.75, None, 0.25, None],
            "llm_relevance": [1.0, None, 0.5, None],
            "llm_coverage": [1.0, None, 0.5, None],
            "llm_clarity": [1.0, None, 0.5, None],
            "llm_external_consistency": [1.0, None, 0.5, None],
            "llm_cached": [True, False, False, False],
            "judge_prompt_tokens": [0, 300, 200, 0],
            "judge_completion_tokens": [0, 40, 30, 0],
            "judge_cpu_s": [0.5, 0.25, 0.25, 0.0],
            "judge_model": ["jm", "jm", "jm", "jm"],
        }
    )


def test_report_says_which_weights_were_used_and_how_the_llm_calls_went():
    s = composite_summary(_judgments(), W)
    assert s["weights"] == W
    assert s["weights_used"] == {"claims+entity": 1, "claims+llm+entity": 1}
    assert s["renormalised"] == 1
    assert s["llm_status"] == {
        "disabled": 0,
        "skipped": 1,
        "ok": 2,
        "error": 0,
        "timeout": 0,
        "invalid": 1,
    }
    assert (s["llm_cached"], s["prompt_tokens"], s["completion_tokens"]) == (1, 500, 70)
    assert s["cpu_s"] == pytest.approx(1.0) and s["llm_model"] == "jm"
    line = composite_line(s)
    assert line == (
        "faithfulness composite: weights claims 0.4 / llm 0.4 / entity 0.2; parts used "
        "claims+entity 1, claims+llm+entity 1; 1 answers with weights renormalised over their "
        "available parts; LLM judge jm: {'skipped': 1, 'ok': 2, 'invalid': 1}, 1 cached"
    )
    # LLM scores are per-query measures only where the call is ok: never a 0 for the others
    long = pd.concat(judge_measures(_judgments()))
    llm = long[long["measure"] == "judge/llm_faithfulness"]
    assert llm["qid"].tolist() == ["a", "c"] and llm["value"].tolist() == [0.75, 0.25]
    claims = long[long["measure"] == "judge/claim_support"]
    assert claims["qid"].tolist() == ["a", "b"]


def test_report_rejects_an_unknown_llm_status():
    j = _judgments()
    j.loc[0, "llm_status"] = "maybe"
    with pytest.raises(DataValidationError, match="unknown llm_status"):
        composite_summary(j, W)


def test_build_report_and_summary_say_when_weights_were_renormalised():
    from ragrig.judge import judge_all
    from ragrig.judge.overlap import OverlapJudge
    from ragrig.report import build_report
    from ragrig.report.summary import format_summary

    from .test_report import _inputs

    inp = _inputs()
    gens = inp.generations.assign(
        answer=["Curiosity landed on Mars in 2012 [1].", "I cannot answer"],
        contexts=json.dumps(["Curiosity landed on Mars in 2012."]),
    )
    judg = judge_all(OverlapJudge(), gens, {"q1": "When?", "q2": "Why?"}, progress=False)
    inp = dataclasses.replace(inp, generations=gens, judgments=judg, judge_weights=W)
    cfg = validate_section(
        "report",
        {
            "k_values": [10],
            "prices": {"api-model": {"input_per_mtok": 1.0, "output_per_mtok": 10.0}},
        },
    )
    m = build_report(inp, cfg).metrics
    j = m["judge"]
    assert (j["n_scored"], j["no_claims"]) == (1, 1)
    assert j["weights"] == W and j["weights_used"] == {"claims+entity": 1}
    assert j["renormalised"] == 1 and j["llm_status"]["disabled"] == 2
    # claims 1.0 and entities (Curiosity, Mars, 2012) 1.0: the composite is 1.0
    assert (j["faithfulness"], j["claim_support"]) == (1.0, 1.0)
    assert "judge/llm_faithfulness" not in m["slices"]["claim_label"]["SUPPORT"]
    summary = format_summary(m)
    assert (
        "faithfulness composite: weights claims 0.4 / llm 0.4 / entity 0.2; parts used "
        "claims+entity 1; 1 answers with weights renormalised over their available parts; "
        "no LLM judge"
    ) in summary.splitlines()
