"""Verdict prompt and parser, self-consistency, citations against gold documents, refusal
correctness and cost per query (system and judge apart)."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from ragrig.core.config import validate_section
from ragrig.core.errors import ConfigError, DataValidationError
from ragrig.generate import Generation, generate_all
from ragrig.generate.prompt import VERDICT_GRAMMAR, VERDICT_SYSTEM_PROMPT, chat_messages
from ragrig.metrics.answers import (
    parse_verdict,
    refusal_summary,
    self_consistency,
    token_f1,
)
from ragrig.metrics.citations import gold_documents, score_citations
from ragrig.report import ReportInputs, build_report
from ragrig.report.answer_summary import summary_lines
from ragrig.report.cost import per_query_costs

# ---------------------------------------------------------------- the verdict prompt


def test_claim_verdict_config_selects_its_instruction_and_template():
    cfg = validate_section("generate", {"method": "llama_cpp", "prompt": "claim_verdict"})
    assert cfg.system_prompt == VERDICT_SYSTEM_PROMPT
    assert "SUPPORTED, CONTRADICTED, NOT ENOUGH INFORMATION" in cfg.system_prompt
    own = validate_section(
        "generate", {"method": "llama_cpp", "prompt": "claim_verdict", "system_prompt": "Mine."}
    )
    assert own.system_prompt == "Mine."
    msgs = chat_messages(cfg.system_prompt, "Aspirin cures gout.", ["P one."], cfg.prompt)
    assert msgs[1]["content"].startswith("Passages:\n[1] P one.\n\nClaim: Aspirin cures gout.\n")
    assert "Begin with the verdict" in msgs[1]["content"]
    with pytest.raises(ConfigError):  # the extractive baseline has no prompt and gives no verdict
        validate_section("generate", {"method": "extractive", "prompt": "claim_verdict"})
    with pytest.raises(ConfigError):
        validate_section("generate", {"method": "llama_cpp", "prompt": "verdict"})


def test_llama_cpp_constrains_only_verdict_answers_unless_told_not_to():
    from ragrig.generate.llama_cpp import grammar_for

    def grammar(**cfg):
        return grammar_for(validate_section("generate", {"method": "llama_cpp", **cfg}))

    assert grammar(prompt="claim_verdict") == VERDICT_GRAMMAR
    assert grammar(prompt="answer") is None
    assert grammar(prompt="claim_verdict", constrain_verdict=False) is None


def test_committed_default_asks_scifact_for_a_verdict():
    import yaml

    from ..conftest import PROJECT

    params = yaml.safe_load((PROJECT / "params.yaml").read_text())
    assert params["dataset"]["name"] == "scifact"
    assert params["generate"]["prompt"] == "claim_verdict"
    assert params["generate"]["consistency_samples"] == 0


class _FakeServer:
    """Stands in for xllamacpp.Server: records each request and answers a fixed verdict."""

    def __init__(self):
        self.requests: list[dict] = []

    def handle_chat_completions(self, request):
        self.requests.append(request)
        text = f"SUPPORTED [1] t={request['temperature']} s={request['seed']}"
        return {"choices": [{"message": {"content": text}}], "usage": {"prompt_tokens": 7}}


def _fake_llama(grammar):
    """The llama.cpp generator with its server faked: no model load."""
    from ragrig.generate.llama_cpp import LlamaCppGenerator

    gen = LlamaCppGenerator.__new__(LlamaCppGenerator)
    gen.server, gen.model_name = _FakeServer(), "fake"
    gen.system_prompt, gen.prompt = VERDICT_SYSTEM_PROMPT, "claim_verdict"
    gen.max_tokens, gen.temperature, gen.seed = 16, 0.0, 13
    gen.grammar, gen.stop = grammar, []
    return gen


def test_verdict_prompt_reaches_the_llama_cpp_chat_messages_and_samples_are_seeded():
    gen = _fake_llama(VERDICT_GRAMMAR)
    df = generate_all(
        gen,
        ["q"],
        {"q": "Aspirin cures gout."},
        {"q": [("d#0", "Aspirin does not cure gout.")]},
        100,
        progress=False,
        consistency_samples=2,
        consistency_temperature=0.7,
        seed=13,
    )
    first = gen.server.requests[0]
    assert first["messages"][0] == {"role": "system", "content": VERDICT_SYSTEM_PROMPT}
    assert "Claim: Aspirin cures gout." in first["messages"][1]["content"]
    assert (first["temperature"], first["seed"]) == (0.0, 13)
    assert all(r["grammar"] == VERDICT_GRAMMAR for r in gen.server.requests)  # samples too
    assert [(r["temperature"], r["seed"]) for r in gen.server.requests[1:]] == [
        (0.7, 14),
        (0.7, 15),
    ]
    row = df.iloc[0]
    assert row["answer"] == "SUPPORTED [1] t=0.0 s=13"
    assert json.loads(row["samples"]) == ["SUPPORTED [1] t=0.7 s=14", "SUPPORTED [1] t=0.7 s=15"]
    assert row["cpu_s"] >= 0.0 and row["prompt_tokens"] == 7  # samples' tokens not in the answer's


def test_a_samples_token_budget_reaches_the_llama_cpp_request():
    gen = _fake_llama(None)
    args = (["q"], {"q": "Aspirin cures gout."}, {"q": [("d#0", "Aspirin does not cure gout.")]})
    generate_all(gen, *args, 100, progress=False, consistency_samples=2,
                 consistency_max_tokens=5)  # fmt: skip
    assert [r["max_tokens"] for r in gen.server.requests] == [16, 5, 5]
    gen.server = _FakeServer()
    generate_all(gen, *args, 100, progress=False, consistency_samples=1,
                 consistency_max_tokens=99)  # fmt: skip
    assert [r["max_tokens"] for r in gen.server.requests] == [16, 16]  # never above max_tokens


def test_a_samples_budget_of_answer_is_the_answers_own_completion_tokens():
    class Counting:
        model_name = "counting"

        def __init__(self):
            self.budgets = []

        def generate(self, question, passages, temperature=None, seed=None, max_tokens=None):
            self.budgets.append(max_tokens)
            return Generation("one two three", completion_tokens=7)

    gen = Counting()
    generate_all(gen, ["q"], {"q": "x"}, {"q": []}, 10, progress=False, consistency_samples=2,
                 consistency_max_tokens="answer")  # fmt: skip
    assert gen.budgets == [None, 7, 7]


class _Flaky:
    model_name = "flaky"

    def generate(self, question, passages, temperature=None, seed=None):
        if seed == 2:
            raise RuntimeError("sample broke")
        return Generation(f"answer {seed}")


class _Keeping(_Flaky):
    """A batching generator that records what it is asked to keep."""

    batch_size = 3

    def __init__(self):
        self.kept: list[int] = []

    def generate_many(self, requests):
        return [self.generate(r.question, r.passages, r.temperature, r.seed) for r in requests]

    def keep_prompts(self, n):
        self.kept.append(n)


def test_a_batching_generator_keeps_its_batch_of_prompts_only_while_samples_are_drawn():
    gen = _Keeping()
    generate_all(gen, ["q"], {"q": "x"}, {"q": []}, 10, progress=False, seed=7)
    assert gen.kept == []  # no samples: nothing kept
    generate_all(gen, ["q"], {"q": "x"}, {"q": []}, 10, progress=False, consistency_samples=1)
    assert gen.kept == [3, 0]  # a batch's prompts for its samples, then let go


def test_samples_default_empty_and_a_failed_sample_is_null_and_named():
    df = generate_all(_Flaky(), ["q"], {"q": "x"}, {"q": []}, 10, progress=False)
    assert df["samples"].tolist() == ["[]"] and df["cpu_s"].dtype == float
    df = generate_all(
        _Flaky(), ["q"], {"q": "x"}, {"q": []}, 10, progress=False, consistency_samples=2, seed=0
    )
    assert json.loads(df.loc[0, "samples"]) == ["answer 1", None]
    assert (
        df.loc[0, "status"] == "ok" and "sample 2: RuntimeError: sample broke" in df.loc[0, "error"]
    )


# ---------------------------------------------------------------- verdicts, consistency


@pytest.mark.parametrize(
    ("answer", "verdict"),
    [
        ("SUPPORTED. The passage [1] shows it.", "SUPPORT"),
        ("**Supported** [2]", "SUPPORT"),
        ("Verdict: CONTRADICTED [1]", "CONTRADICT"),
        ("Refuted by [1].", "CONTRADICT"),
        ("NOT ENOUGH INFORMATION: the passages are silent.", "NOT_ENOUGH_INFO"),
        ("Not enough info.", "NOT_ENOUGH_INFO"),
        ("Not supported by the passages.", "CONTRADICT"),
        ("Unsupported.", "CONTRADICT"),
        ("The claim is SUPPORTED by [1].", "SUPPORT"),
        ("I cannot answer this from the passages.", "NOT_ENOUGH_INFO"),
        ("Supportive care helps.", None),
        ("", None),
    ],
)
def test_parse_verdict(answer, verdict):
    assert parse_verdict(answer) == verdict


def test_token_f1_squad_style():
    assert token_f1("The cat sat [1].", "cat sat") == 1.0
    assert token_f1("cat sat on mat", "cat sat") == pytest.approx(2 * 1.0 * 0.5 / 1.5)
    assert token_f1("", "") == 1.0 and token_f1("x", "") == 0.0


def test_self_consistency_verdicts_and_free_text():
    assert self_consistency("SUPPORTED [1]", []) is None
    assert self_consistency("SUPPORTED [1]", [None]) is None
    # verdicts: modal SUPPORT holds 3 of 4 answers; a verdict-less answer is its own value
    assert self_consistency("SUPPORTED [1]", ["Supported.", "CONTRADICTED", "SUPPORTED"]) == 0.75
    assert self_consistency("SUPPORTED", ["blah", "blah"]) == pytest.approx(2 / 3)
    # free text: medoid "x y" (F1 to "x y z" 0.8, to "x y" 1.0); mean F1 to it (1 + 0.8 + 1) / 3
    assert self_consistency("x y z", ["x y", "x y"]) == pytest.approx((0.8 + 1 + 1) / 3)
    assert self_consistency("x y", ["x y"]) == 1.0


def test_refusal_summary_counts_and_rates():
    s = refusal_summary(
        [
            ("NOT_ENOUGH_INFO", True),
            ("NOT_ENOUGH_INFO", False),
            ("SUPPORT", True),
            ("SUPPORT", False),
            ("CONTRADICT", False),
            ("MIXED", True),
        ]
    )
    assert (s["refusals"], s["correct_refusals"], s["precision"]) == (2, 1, 0.5)
    assert (s["answerable"], s["refused_answerable"], s["rate"]) == (3, 1, pytest.approx(1 / 3))
    assert (s["unanswerable"], s["recall"]) == (2, 0.5)
    assert (s["unlabelled"], s["refusals_unlabelled"]) == (1, 1)
    assert s["by_label"]["SUPPORT"] == {"answers": 2, "refusals": 1}
    empty = refusal_summary([("SUPPORT", False)])
    assert empty["precision"] is None and empty["recall"] is None  # no 0/0


# ---------------------------------------------------------------- citations


def _gens(**cols):
    base = {
        "qid": ["q1", "q2", "q3", "q4"],
        "status": ["ok", "ok", "ok", "error"],
        "answer": ["SUPPORTED [1][2]", "NOT ENOUGH INFORMATION", "CONTRADICTED [2]", ""],
        "context_chunk_ids": [
            json.dumps(["d1#0", "d9#0", "d2#0"]),
            json.dumps(["d5#0"]),
            json.dumps(["d7#0", "d3#0"]),
            "[]",
        ],
        "contexts": ["[]"] * 4,
        "citations": ["[1, 2]", "[]", "[2]", "[]"],
        "model": ["m"] * 4,
        "prompt_tokens": [1000, 2000, 0, 0],
        "completion_tokens": [10, 20, 0, 0],
        "latency_ms": [5.0] * 4,
        "error": ["", "", "", "boom"],
        "cpu_s": [3.6, 7.2, 0.0, 0.0],
        "samples": ['["SUPPORTED", "CONTRADICTED"]', "[]", "[]", "[]"],
    }
    base.update(cols)
    return pd.DataFrame(base)


RUN = pd.DataFrame(
    {
        "qid": ["q1", "q1", "q1", "q2", "q3", "q3"],
        "doc_id": ["d1", "d9", "d2", "d5", "d7", "d3"],
        "chunk_id": ["d1#0", "d9#0", "d2#0", "d5#0", "d7#0", "d3#0"],
        "score": [3.0, 2.0, 1.0, 1.0, 2.0, 1.0],
        "rank": [1, 2, 3, 1, 1, 2],
    }
)
QUERIES = pd.DataFrame(
    {
        "qid": ["q1", "q2", "q3", "q4"],
        "text": ["c1", "c2", "c3", "c4"],
        "claim_label": ["SUPPORT", "NOT_ENOUGH_INFO", "CONTRADICT", "SUPPORT"],
        # q2 (NOT_ENOUGH_INFO) has a qrels positive but no rationale document
        "evidence": [
            json.dumps({"d1": [], "d2": []}),
            "{}",
            json.dumps({"d8": []}),
            json.dumps({"d4": []}),
        ],
        "n_gold": [2, 1, 1, 1],
        "n_words": [1, 1, 1, 1],
    }
)
QRELS = pd.DataFrame(
    {
        "qid": ["q1", "q1", "q2", "q3", "q4"],
        "doc_id": ["d1", "d2", "d5", "d8", "d4"],
        "relevance": [1, 1, 1, 1, 1],
    }
)


def test_gold_documents_are_rationale_documents_else_qrels():
    gold = gold_documents(QUERIES, QRELS)
    assert gold["q1"] == {"d1", "d2"} and gold["q2"] == frozenset()
    assert gold_documents(QUERIES.drop(columns="evidence"), QRELS)["q2"] == {"d5"}


def test_citation_precision_recall_per_answer_and_counted_apart():
    scores, counts = score_citations(_gens(), RUN, gold_documents(QUERIES, QRELS))
    by = {s.qid: s for s in scores}
    # q1 cites d1 (gold) and d9 (not): precision 1/2; gold in context {d1, d2}, cited {d1}: 1/2
    assert (by["q1"].precision, by["q1"].recall) == (0.5, 0.5)
    # q3 cites d3, not gold; its gold d8 is not in the context: recall undefined, not 0
    assert (by["q3"].precision, by["q3"].recall) == (0.0, None)
    assert "q2" not in by  # no rationale document: neither value
    assert counts == {"answers": 3, "no_gold": 1, "no_citations": 0, "no_gold_in_context": 1}
    bad_run = RUN[RUN["chunk_id"] != "d9#0"]
    with pytest.raises(DataValidationError, match="query 'q1' was given chunk 'd9#0'"):
        score_citations(_gens(), bad_run, gold_documents(QUERIES, QRELS))


# ---------------------------------------------------------------- cost and the report


def _judgments(**cols):
    base = {
        "qid": ["q1", "q2", "q3", "q4"],
        "status": ["scored", "no_claims", "scored", "skipped"],
        "n_claims": [1, 0, 1, 0],
        "n_supported": [1, 0, 0, 0],
        "faithfulness": [1.0, None, 0.0, None],
        "claims": ["[]"] * 4,
        "latency_ms": [1800.0, 0.0, 0.0, 0.0],
        "error": [""] * 4,
        "answer_kind": ["answer", "refusal", "answer", ""],
    }
    base.update(cols)
    return pd.DataFrame(base)


LATENCY = pd.DataFrame(
    {
        "qid": ["q1", "q1", "q2", "q3"],
        "stage": ["embed_query", "retrieve", "rerank", "retrieve"],
        "latency_ms": [1800.0, 1800.0, 3600.0, 0.0],
    }
)


def _report_cfg(**extra):
    return validate_section(
        "report",
        {
            "k_values": [10],
            "prices": {
                "m": {"input_per_mtok": 1.0, "output_per_mtok": 100.0},
                "judge-m": {"input_per_mtok": 10.0, "output_per_mtok": 0.0},
            },
            "core_hour_usd": 3.6,  # $0.001 per core-second
            **extra,
        },
    )


def test_cost_system_and_judge_apart_with_exact_values():
    judg = _judgments(
        judge_prompt_tokens=[100, 0, 0, 0],
        judge_completion_tokens=[5, 0, 0, 0],
        judge_cpu_s=[2.0, 1.0, 0.0, 0.0],
        judge_model=["judge-m", "", "", ""],
    )
    costs, notes = per_query_costs(_gens(), judg, LATENCY, _report_cfg())
    c = costs.set_index("qid")
    # q1: tokens 1000*1 + 10*100 = 2000 /1e6; CPU 3.6 s + stages 3.6 s at $0.001/s
    assert c.loc["q1", "system_usd"] == pytest.approx(0.002 + 0.0072)
    assert c.loc["q2", "system_usd"] == pytest.approx(0.004 + (7.2 + 3.6) * 0.001)
    assert c.loc["q3", "system_usd"] == 0.0
    # judge: q1 100 tokens at $10/M + 2 CPU s; q2 1 CPU s (no judge model: no tokens priced)
    assert c.loc["q1", "judge_usd"] == pytest.approx(0.001 + 0.002)
    assert c.loc["q2", "judge_usd"] == pytest.approx(0.001)
    assert notes == []
    with pytest.raises(ConfigError, match="no price for model 'judge-m'"):
        per_query_costs(
            _gens(),
            judg,
            LATENCY,
            _report_cfg(prices={"m": {"input_per_mtok": 0, "output_per_mtok": 0}}),
        )


def test_cost_without_judge_columns_uses_judge_latency_and_says_so():
    costs, notes = per_query_costs(_gens(), _judgments(), LATENCY, _report_cfg())
    assert costs.set_index("qid").loc["q1", "judge_usd"] == pytest.approx(1.8 * 0.001)
    assert any("judge_cpu_s" in n for n in notes) and any("token" in n for n in notes)


EVIDENCE = ("answerable_evidence_seen", "answerable_evidence_missed", "unanswerable")


def test_report_has_cost_citations_refusals_and_consistency():
    inp = ReportInputs(
        QUERIES,
        QRELS,
        RUN,
        RUN.assign(lane="dense"),
        RUN,
        None,
        None,
        LATENCY,
        _gens(),
        _judgments(),
    )
    rep = build_report(inp, _report_cfg())
    m = rep.metrics
    cost = m["cost_usd_per_query"]
    systems = [0.0092, 0.0148, 0.0, 0.0]
    assert cost["system"]["mean"] == pytest.approx(sum(systems) / 4)
    assert cost["mean"] == cost["system"]["mean"] and cost["p99"] == cost["system"]["p99"]
    assert cost["judge"]["mean"] == pytest.approx(0.0018 / 4)
    assert (cost["prices_as_of"], cost["core_hour_usd"]) == ("2026-11-01", 3.6)
    cit = m["citations"]
    assert (cit["precision"], cit["n_citations"]) == (pytest.approx(1 / 3), 3)
    assert (cit["recall"], cit["n_gold_in_context"], cit["n_answers_with_context_gold"]) == (
        0.5,
        2,
        1,
    )
    r = m["refusal"]
    # q2 refused (judge: refusal; verdict NEI) and is NOT_ENOUGH_INFO: a correct refusal
    assert (r["refusals"], r["correct_refusals"], r["precision"]) == (1, 1, 1.0)
    assert (r["answerable"], r["refused_answerable"], r["rate"]) == (2, 0, 0.0)
    assert r["not_judged"] == 1  # q4: generation error, judgment skipped
    assert m["self_consistency"] == {
        "n": 1,
        "mean": pytest.approx(2 / 3),
        "samples_per_answer": 2,
        "failed_samples": 0,
    }
    pq = rep.per_query.set_index(["qid", "measure"])["value"]
    assert pq[("q1", "citation/precision")] == 0.5 and pq[("q3", "citation/precision")] == 0.0
    assert ("q3", "citation/recall") not in pq.index
    assert pq[("q2", "refusal/refused")] == 1.0 and pq[("q2", "refusal/correct")] == 1.0
    assert pq[("q1", "refusal/correct")] == 1.0
    assert pq[("q1", "correctness/self_consistency_lexical")] == pytest.approx(2 / 3)
    assert pq[("q1", "cost/system_usd")] == pytest.approx(0.0092)
    lines = "\n".join(summary_lines(json.loads(json.dumps(m))))
    assert "system p50 $" in lines and "judge p50 $" in lines and "p99" in lines
    assert "citations vs gold documents (document level): precision 0.3333 (3 citations)" in lines
    assert "refusals: 1 on labelled claims, 1 correct (precision 1.0000)" in lines
    # against the evidence given: q3's gold never reached its context, so answering it was not
    # what the context allowed; q1 had its gold and answered; q2 has nothing that answers it
    ev = r["by_evidence"]
    assert {k: (ev[k]["answers"], ev[k]["refusals"], ev[k]["correct"]) for k in EVIDENCE} == {
        "answerable_evidence_seen": (1, 0, 1.0),
        "answerable_evidence_missed": (1, 0, 0.0),
        "unanswerable": (1, 1, 1.0),
    }
    assert pq[("q3", "refusal/correct_given_context")] == 0.0
    assert pq[("q1", "refusal/correct_given_context")] == 1.0
    assert (
        "refusals vs the evidence given: answerable, gold in context: refused 0/1 (should answer: "
        "right 1.0000); answerable, retrieval missed the gold: refused 0/1 (should refuse: right "
        "0.0000); unanswerable: refused 1/1 (should refuse: right 1.0000)" in lines
    )


def test_summary_of_an_old_metrics_file_keeps_its_cost_line():
    assert summary_lines({"cost_usd_per_query": {"mean": 0.5, "prices_as_of": "x"}}) == [
        "cost per query: $0.500000 mean (prices as of x)"
    ]


class _Batching:
    """A batching backend: records each generate_many call; request 'bad' fails alone, a batch
    holding 'all-bad' fails whole."""

    model_name = "batching"

    def __init__(self, batch_size):
        self.batch_size = batch_size
        self.calls: list[list[tuple]] = []

    def generate(self, question, passages, temperature=None, seed=None):
        raise AssertionError("a batching backend is called through generate_many")

    def generate_many(self, requests):
        self.calls.append([(r.question, r.temperature, r.seed) for r in requests])
        if any(r.question == "all-bad" for r in requests):
            raise RuntimeError("the batch broke")
        return [
            ValueError("too long")
            if r.question == "bad"
            else Generation(f"{r.question} t={r.temperature} s={r.seed}", 5, 2, seconds=0.5 + i)
            for i, r in enumerate(requests)
        ]


def test_batching_backend_gets_batch_size_requests_and_each_answer_its_own_time():
    gen = _Batching(batch_size=2)
    qids = ["a", "b", "c"]
    queries = {"a": "qa", "b": "bad", "c": "qc"}
    df = generate_all(gen, qids, queries, {q: [] for q in qids}, 10, progress=False)
    assert gen.calls == [[("qa", None, None), ("bad", None, None)], [("qc", None, None)]]
    assert df["status"].tolist() == ["ok", "error", "ok"]
    assert df.loc[1, "error"] == "ValueError: too long"  # the others of its batch answered
    assert df["answer"].tolist() == ["qa t=None s=None", "", "qc t=None s=None"]
    # the backend's attribution: 0.5 s for the first of a batch (a failed one: what is left)
    assert df.loc[0, "latency_ms"] == df.loc[2, "latency_ms"] == 500.0
    assert (df["cpu_s"] >= 0).all() and df["cpu_s"].dtype == float


def test_batching_backend_samples_in_batches_and_a_failed_batch_fails_each_row():
    gen = _Batching(batch_size=3)
    df = generate_all(
        gen, ["a"], {"a": "qa"}, {"a": []}, 10, progress=False, consistency_samples=2, seed=7
    )
    assert gen.calls == [[("qa", None, None)], [("qa", 0.7, 8), ("qa", 0.7, 9)]]
    assert json.loads(df.loc[0, "samples"]) == ["qa t=0.7 s=8", "qa t=0.7 s=9"]
    gen = _Batching(batch_size=2)
    df = generate_all(
        gen, ["a", "b"], {"a": "qa", "b": "all-bad"}, {"a": [], "b": []}, 10, progress=False
    )
    assert df["status"].tolist() == ["error", "error"]
    assert set(df["error"]) == {"RuntimeError: the batch broke"}
    assert (df["latency_ms"] > 0).all()  # the failed call's time, shared evenly
