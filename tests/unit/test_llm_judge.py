"""The LLM judge against a local server on 127.0.0.1 (answers well, slowly, with 500s, with
non-JSON and with schema-breaking replies), its cache and redaction, and the in-process GGUF path."""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pandas as pd
import pytest

from ragrig.core.config import validate_section
from ragrig.core.errors import ConfigError
from ragrig.core.schemas import LLM_JUDGE_STATUSES, validate
from ragrig.judge import judge_all
from ragrig.judge.llm import SCHEMA, LLMVerdict, judge_messages, make_llm_judge, parse_verdict
from ragrig.judge.overlap import OverlapJudge
from ragrig.llm.redact import REDACTED

CONTEXT = ["Mars has two moons, Phobos and Deimos.", "Curiosity landed on Mars in 2012."]
QUESTION = "How many moons does Mars have?"
ANSWER = "Mars has two moons, Phobos and Deimos [1]."
GOOD = {
    "unsupported_statements": [],
    "faithfulness": 1,
    "context_relevance": 0.75,
    "coverage": 1,
    "clarity": 0.75,
    "external_consistency": 1,
}
KEY = "sk-judge-0123456789abcdefXYZ"


def _completion(content: str) -> bytes:
    return json.dumps(
        {
            "choices": [
                {"message": {"role": "assistant", "content": content}, "finish_reason": "stop"}
            ],
            "usage": {"prompt_tokens": 321, "completion_tokens": 45},
        }
    ).encode()


@pytest.fixture(scope="module")
def server():
    """Routes by the path's first segment: /good, /slow (1.5 s, then good), /fail (500 echoing
    the request headers), /flaky (one 500, then good), /notjson (a reply that is not JSON),
    /schema (JSON breaking the schema), /html (HTTP 200 with a body that is not JSON), /e400."""
    hits: Counter[str] = Counter()
    bodies: list[dict] = []

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def _send(self, code: int, payload: bytes) -> None:
            # the client giving up on /slow is what the timeout test checks
            with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.end_headers()
                self.wfile.write(payload)

        def do_POST(self):  # noqa: N802
            route = self.path.strip("/").split("/")[0]
            hits[route] += 1
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            bodies.append(body)
            good = _completion(json.dumps(GOOD))
            if route == "slow":
                time.sleep(1.5)
            if route == "fail":
                self._send(500, f"upstream exploded; headers {dict(self.headers)!r}".encode())
            elif route == "flaky" and hits[route] == 1:
                self._send(503, b"warming up")
            elif route == "notjson":
                self._send(200, _completion("The answer is faithful to the passages."))
            elif route == "schema":
                self._send(200, _completion(json.dumps({**GOOD, "faithfulness": 1.7})))
            elif route == "html":
                self._send(200, b"<html>gateway</html>")
            elif route == "e400":
                self._send(400, b"bad model")
            elif route == "seeded":  # an unpinned judge: its rating depends on the seed
                rating = 1 if body.get("seed", 0) % 2 == 0 else 0.25
                self._send(200, _completion(json.dumps({**GOOD, "faithfulness": rating})))
            else:
                self._send(200, good)

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}", hits, bodies
    httpd.shutdown()
    httpd.server_close()


def _judge(url: str, route: str, tmp_path, **extra):
    cfg = validate_section(
        "judge",
        {
            "method": "overlap",
            "llm": {
                "backend": "openai_http",
                "base_url": f"{url}/{route}/v1",
                "model": "judge-model",
                "cache_dir": str(tmp_path / "cache"),
                "backoff_s": 0.0,
                **extra,
            },
        },
    )
    return make_llm_judge(cfg.llm)


def test_good_reply_is_parsed_with_tokens_and_schema_sent(server, tmp_path, monkeypatch):
    url, hits, bodies = server
    monkeypatch.setenv("RAGRIG_JUDGE_KEY", KEY)
    judge = _judge(url, "good", tmp_path, api_key_env="RAGRIG_JUDGE_KEY")
    out = judge.judge(QUESTION, ANSWER, CONTEXT)
    assert out.status == "ok" and not out.cached and out.attempts == 1
    assert out.latency_ms > 0 and out.cpu_s >= 0
    assert out.verdict == LLMVerdict(**GOOD)
    assert (out.prompt_tokens, out.completion_tokens) == (321, 45)
    body = bodies[-1]
    assert body["model"] == "judge-model" and body["temperature"] == 0.0
    assert body["response_format"]["json_schema"]["schema"] == SCHEMA
    user = body["messages"][1]["content"]
    assert f"Question: {QUESTION}" in user and "[2] Curiosity landed on Mars in 2012." in user
    assert f"Answer:\n{ANSWER}" in user
    # the cache keeps the reply, never the request's headers
    (entry,) = (tmp_path / "cache").rglob("*.json")
    assert KEY not in entry.read_text() and json.loads(entry.read_text())["content"]


def test_cache_second_run_makes_no_request_and_a_changed_prompt_does(server, tmp_path):
    url, hits, _ = server
    before = hits["good"]
    first = _judge(url, "good", tmp_path).judge(QUESTION, ANSWER, CONTEXT)
    # a rerun: a new judge object, the same cache folder
    again = _judge(url, "good", tmp_path).judge(QUESTION, ANSWER, CONTEXT)
    assert hits["good"] == before + 1
    assert again.status == "ok" and again.cached and again.verdict == first.verdict
    assert (again.prompt_tokens, again.completion_tokens) == (0, 0)  # a cached call is free
    other = _judge(url, "good", tmp_path).judge(QUESTION, ANSWER + " Both are small.", CONTEXT)
    assert hits["good"] == before + 2 and not other.cached
    # other sampling parameters are another call too
    _judge(url, "good", tmp_path, max_tokens=100).judge(QUESTION, ANSWER, CONTEXT)
    assert hits["good"] == before + 3
    files = sorted((tmp_path / "cache").rglob("*.json"))
    assert len(files) == 3 and not list((tmp_path / "cache").rglob("*.tmp*"))


def test_timeout_is_counted_as_timeout_without_retry(server, tmp_path):
    url, hits, _ = server
    before = hits["slow"]
    out = _judge(url, "slow", tmp_path, timeout_s=0.3, retries=3).judge(QUESTION, ANSWER, CONTEXT)
    assert out.status == "timeout" and out.verdict is None and out.attempts == 1
    assert out.error.startswith("CallTimeout: no complete answer from")
    assert "within 0.3 s" in out.error
    assert hits["slow"] == before + 1
    assert not (tmp_path / "cache").exists()  # nothing paid, nothing cached


def test_500s_are_retried_with_exponential_backoff_then_error(server, tmp_path, monkeypatch):
    url, hits, _ = server
    monkeypatch.setenv("RAGRIG_JUDGE_KEY", KEY)
    judge = _judge(url, "fail", tmp_path, retries=2, backoff_s=0.5, api_key_env="RAGRIG_JUDGE_KEY")
    slept: list[float] = []
    judge.sleep = slept.append
    before = hits["fail"]
    out = judge.judge(QUESTION, ANSWER, CONTEXT)
    assert out.status == "error" and out.attempts == 3 and hits["fail"] == before + 3
    assert slept == [0.5, 1.0]
    assert "answered HTTP 500: upstream exploded" in out.error
    assert out.error.endswith("(after 3 attempts)")
    # the server echoed the Authorization header: the key never reaches the error
    assert KEY not in out.error and KEY[:8] not in out.error
    assert f"'Authorization': '{REDACTED}'" in out.error


def test_success_after_one_500(server, tmp_path):
    url, hits, _ = server
    out = _judge(url, "flaky", tmp_path, retries=1).judge(QUESTION, ANSWER, CONTEXT)
    assert out.status == "ok" and out.attempts == 2 and hits["flaky"] == 2
    assert out.verdict.faithfulness == 1.0


def test_client_error_is_not_retried(server, tmp_path):
    url, hits, _ = server
    out = _judge(url, "e400", tmp_path, retries=3).judge(QUESTION, ANSWER, CONTEXT)
    assert out.status == "error" and hits["e400"] == 1 and "HTTP 400: bad model" in out.error


@pytest.mark.parametrize(
    ("route", "why"),
    [
        ("notjson", "reply is not JSON"),
        ("schema", "reply breaks the schema"),
        ("html", "returned a malformed completion: <html>gateway</html>"),
    ],
)
def test_unparseable_or_schema_breaking_replies_are_invalid(server, tmp_path, route, why):
    url, hits, _ = server
    out = _judge(url, route, tmp_path).judge(QUESTION, ANSWER, CONTEXT)
    assert out.status == "invalid" and out.verdict is None
    assert why in out.error
    if route == "schema":
        assert "faithfulness" in out.error and "less than or equal to 1" in out.error
        assert (out.prompt_tokens, out.completion_tokens) == (321, 45)  # paid, and cached
        again = _judge(url, route, tmp_path).judge(QUESTION, ANSWER, CONTEXT)
        assert again.status == "invalid" and again.cached and hits[route] == 1


@pytest.mark.parametrize(
    "reply",
    [
        {k: v for k, v in GOOD.items() if k != "clarity"},  # a required field missing
        {**GOOD, "coverage": "1"},  # a string for a number
        {**GOOD, "coverage": True},  # a boolean for a number
        {**GOOD, "clarity": -0.25},  # out of range
        {**GOOD, "verdict": "yes"},  # an unknown field
        {**GOOD, "unsupported_statements": "none"},  # not a list
        {**GOOD, "unsupported_statements": ["x"] * 6},  # more than the schema allows
        [GOOD],  # not an object
    ],
)
def test_validation_rejects_what_the_schema_forbids(reply):
    with pytest.raises(ValueError):
        parse_verdict(json.dumps(reply))


def test_validation_accepts_a_fenced_reply_and_integers():
    v = parse_verdict("```json\n" + json.dumps({**GOOD, "faithfulness": 0}) + "\n```")
    assert v.faithfulness == 0.0 and v.coverage == 1.0


def test_missing_api_key_is_a_config_error(tmp_path, monkeypatch):
    monkeypatch.delenv("RAGRIG_ABSENT_KEY", raising=False)
    with pytest.raises(ConfigError, match="judge.llm.api_key_env names 'RAGRIG_ABSENT_KEY'"):
        _judge("http://127.0.0.1:9", "x", tmp_path, api_key_env="RAGRIG_ABSENT_KEY")


def test_connection_refused_is_retried_then_error(tmp_path):
    judge = _judge("http://127.0.0.1:9", "v1", tmp_path, retries=1, timeout_s=2)
    out = judge.judge(QUESTION, ANSWER, CONTEXT)
    assert out.status == "error" and out.attempts == 2 and "request failed" in out.error


def test_messages_number_the_passages_and_say_when_there_are_none():
    user = judge_messages(QUESTION, ANSWER, [])[1]["content"]
    assert "Context passages:\n(none)" in user


# --- judge_all with the LLM judge ----------------------------------------------------------


def _gens(answers: dict[str, str], status: dict[str, str] | None = None) -> pd.DataFrame:
    return pd.DataFrame(
        [
            {
                "qid": q,
                "status": (status or {}).get(q, "ok"),
                "answer": a,
                "contexts": json.dumps(CONTEXT),
                "error": "",
            }
            for q, a in answers.items()
        ]
    )


ANSWERS = {
    "a": ANSWER,  # claims 1.0, entities Mars/Phobos/Deimos all found
    "b": "Mars has three moons [1].",  # a number not in the context
    "gen_err": "",
    "refusal": "I do not have specific information about that.",
}


def test_judge_all_with_a_failing_llm_keeps_the_answers_scored(server, tmp_path):
    url, _, _ = server
    llm = _judge(url, "fail", tmp_path, retries=0)
    out = judge_all(
        OverlapJudge(),
        _gens(ANSWERS, {"gen_err": "error"}),
        dict.fromkeys(ANSWERS, QUESTION),
        progress=False,
        llm=llm,
    )
    validate(out, "judgments")
    out = out.set_index("qid")
    assert out["status"].to_dict() == {
        "a": "scored",
        "b": "scored",
        "gen_err": "skipped",
        "refusal": "no_claims",
    }
    assert out["llm_status"].to_dict() == {
        "a": "error",
        "b": "error",
        "gen_err": "skipped",
        "refusal": "error",
    }
    assert set(out["llm_status"]) <= set(LLM_JUDGE_STATUSES)
    a = out.loc["a"]
    # no LLM part: claims and entity renormalised over 0.6
    expected = (0.4 * a["claim_support"] + 0.2 * a["entity_overlap"]) / 0.6
    assert a["faithfulness"] == pytest.approx(expected)
    assert json.loads(a["faithfulness_parts"]) == pytest.approx({"claims": 2 / 3, "entity": 1 / 3})
    assert pd.isna(a["llm_faithfulness"]) and a["judge_prompt_tokens"] == 0
    assert a["judge_model"] == "judge-model" and a["judge_cpu_s"] >= 0
    assert pd.isna(out.loc["refusal", "faithfulness"])  # not scored: no composite
    assert out.loc["refusal", "faithfulness_parts"] == "{}"


def test_judge_all_with_a_good_llm_uses_all_three_parts(server, tmp_path):
    url, _, _ = server
    llm = _judge(url, "good", tmp_path)
    answers = {"a": ANSWER, "b": ANSWERS["b"]}
    out = judge_all(
        OverlapJudge(), _gens(answers), dict.fromkeys(answers, QUESTION), progress=False, llm=llm
    )
    validate(out, "judgments")
    a = out.set_index("qid").loc["a"]
    assert a["llm_status"] == "ok" and a["llm_faithfulness"] == 1.0
    assert (a["llm_relevance"], a["llm_coverage"], a["llm_clarity"]) == (0.75, 1.0, 0.75)
    assert a["llm_external_consistency"] == 1.0
    assert a["claim_support"] == 1.0 and a["entity_overlap"] == 1.0
    assert a["faithfulness"] == pytest.approx(0.4 * 1.0 + 0.4 * 1.0 + 0.2 * 1.0)
    assert json.loads(a["faithfulness_parts"]) == pytest.approx(
        {"claims": 0.4, "llm": 0.4, "entity": 0.2}
    )
    assert (a["judge_prompt_tokens"], a["judge_completion_tokens"]) == (321, 45)
    # the rerun is free
    again = judge_all(
        OverlapJudge(), _gens(answers), dict.fromkeys(answers, QUESTION), progress=False, llm=llm
    )
    assert again["llm_cached"].all() and again["judge_prompt_tokens"].sum() == 0
    assert again["faithfulness"].tolist() == pytest.approx(out["faithfulness"].tolist())


def test_judge_all_without_llm_is_disabled_and_renormalised():
    answers = {"a": ANSWER}
    out = judge_all(OverlapJudge(), _gens(answers), {"a": QUESTION}, progress=False)
    validate(out, "judgments")
    row = out.iloc[0]
    assert row["llm_status"] == "disabled" and row["judge_model"] == ""
    assert json.loads(row["faithfulness_parts"]) == pytest.approx(
        {"claims": 2 / 3, "entity": 1 / 3}
    )


# --- the in-process GGUF judge (the packaged SmolLM2) --------------------------------------


@pytest.mark.full  # make test-all: the in-process GGUF judge
def test_llama_cpp_judge_gives_schema_valid_output(tmp_path):
    cfg = validate_section(
        "judge",
        {
            "method": "overlap",
            "llm": {"backend": "llama_cpp", "cache_dir": str(tmp_path)},
        },
    )
    judge = make_llm_judge(cfg.llm)
    t0 = time.perf_counter()
    out = judge.judge(QUESTION, "Mars has three moons [1].", CONTEXT)
    seconds = time.perf_counter() - t0
    assert out.status == "ok", out.error  # the grammar keeps a 135M model inside the schema
    assert isinstance(out.verdict, LLMVerdict)
    assert out.prompt_tokens > 100 and 0 < out.completion_tokens <= cfg.llm.max_tokens
    assert out.cpu_s > 0.1  # the inference's CPU (in the bounded worker's child) is counted
    again = judge.judge(QUESTION, "Mars has three moons [1].", CONTEXT)
    assert again.cached and again.verdict == out.verdict
    print(f"SmolLM2 judge call: {seconds:.2f} s, {out.completion_tokens} tokens")


@pytest.mark.full  # make test-all: the in-process GGUF judge
def test_llama_cpp_judge_call_past_its_timeout_is_stopped_and_counted(tmp_path):
    cfg = validate_section(
        "judge",
        {
            "method": "overlap",
            "llm": {"backend": "llama_cpp", "cache_dir": str(tmp_path), "timeout_s": 0.3},
        },
    )
    judge = make_llm_judge(cfg.llm)
    t0 = time.perf_counter()
    out = judge.judge(QUESTION, "Mars has three moons [1].", CONTEXT)
    assert out.status == "timeout" and out.verdict is None and out.attempts == 1
    assert "no answer within 0.3 s" in out.error
    assert time.perf_counter() - t0 < 60  # the model load is not the call's; the call is cut
    worker = judge.transport.worker
    assert worker.restarts == 1 and worker._proc is None  # the generation really stopped
    assert not list(tmp_path.rglob("*.json"))  # nothing cached
    worker.timeout_s = 120.0
    again = judge.judge(QUESTION, "Mars has three moons [1].", CONTEXT)
    assert again.status == "ok" and not again.cached  # a fresh worker answers the next call
    worker.close()


# --- the judge stage with an LLM judge ---------------------------------------------------


def _stage_inputs(tmp_path) -> None:
    """A parse and a generate folder of two answers for stages/judge.py."""
    (tmp_path / "parse").mkdir()
    (tmp_path / "gen").mkdir()
    pd.DataFrame(
        {
            "qid": ["a", "b"],
            "text": [QUESTION, QUESTION],
            "claim_label": ["SUPPORT", "SUPPORT"],
            "n_gold": [1, 1],
            "n_words": [6, 6],
        }
    ).to_parquet(tmp_path / "parse" / "queries.parquet")
    gens = _gens({"a": ANSWER, "b": "Mars has three moons [1]."}).assign(
        context_chunk_ids="[]",
        citations="[1]",
        model="m",
        prompt_tokens=0,
        completion_tokens=0,
        cpu_s=0.0,
        samples="[]",
        latency_ms=0.0,
    )
    gens.to_parquet(tmp_path / "gen" / "generations.parquet")


# the verifier, chunk and index folders: unread by overlap, and chunk and index by every judge
# without judge.external
STAGE_INPUTS = ["--inputs", "parse", "gen", "verifier", "chunk", "index"]


def test_judge_stage_with_an_llm_judge_writes_its_columns_and_caches_under_the_project(
    server, tmp_path
):
    """stages/judge.py end to end against the local server: statuses in the manifest, the
    cache in <project>/.cache/judge by default, and a rerun that sends no request."""
    import subprocess
    import sys

    import yaml

    from ragrig.core.io import read_json

    from ..conftest import PROJECT

    url, hits, _ = server
    _stage_inputs(tmp_path)
    judge = {
        "method": "overlap",
        "llm": {"backend": "openai_http", "base_url": f"{url}/good/v1", "model": "judge-model"},
    }
    (tmp_path / "params.yaml").write_text(yaml.safe_dump({"judge": judge}))
    cmd = [sys.executable, str(PROJECT / "stages" / "judge.py"), "--out", "out", *STAGE_INPUTS]
    before = hits["good"]
    for run in range(2):
        proc = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, proc.stderr[-2000:]
        manifest = read_json(tmp_path / "out" / "manifest.json")
        assert manifest["llm_status"] == {"ok": 2} and manifest["llm_model"] == "judge-model"
        assert manifest["llm_cached"] == 2 * run
        assert manifest["weights"] == {"claims": 0.4, "llm": 0.4, "entity": 0.2}
    assert hits["good"] == before + 2  # the second run sent nothing
    assert len(list((tmp_path / ".cache" / "judge").rglob("*.json"))) == 2
    out = pd.read_parquet(tmp_path / "out" / "judgments.parquet").set_index("qid")
    assert out.loc["a", "faithfulness"] == pytest.approx(1.0)  # claims, llm, entity all 1.0
    assert out["llm_cached"].all() and out["judge_prompt_tokens"].sum() == 0


def test_the_judge_stage_runs_the_shipped_verifier_with_an_llm_judge_beside_it(server, tmp_path):
    """judge=verifier takes the settings every claim checker shares (weights, llm, veto): the
    stage reads them for every method."""
    import subprocess
    import sys

    import yaml

    from ragrig.core.io import read_json

    from ..conftest import PROJECT

    url, _, _ = server
    _stage_inputs(tmp_path)
    judge = {
        "method": "verifier",
        "llm": {"backend": "openai_http", "base_url": f"{url}/good/v1", "model": "judge-model"},
    }
    (tmp_path / "params.yaml").write_text(yaml.safe_dump({"judge": judge}))
    cmd = [sys.executable, str(PROJECT / "stages" / "judge.py"), "--out", "out", *STAGE_INPUTS]
    proc = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    manifest = read_json(tmp_path / "out" / "manifest.json")
    assert (manifest["method"], manifest["llm_status"]) == ("verifier", {"ok": 2})
    assert manifest["weights"] == {"claims": 0.4, "llm": 0.4, "entity": 0.2}
    out = pd.read_parquet(tmp_path / "out" / "judgments.parquet").set_index("qid")
    assert (out["status"] == "scored").all() and out["llm_faithfulness"].tolist() == [1.0, 1.0]


def test_llama_cpp_prompt_beyond_the_context_is_an_error_naming_it(tmp_path):
    cfg = validate_section(
        "judge",
        {
            "method": "overlap",
            "llm": {"backend": "llama_cpp", "cache_dir": str(tmp_path), "n_ctx": 256},
        },
    )
    out = make_llm_judge(cfg.llm).judge(QUESTION, ANSWER, ["Mars has two moons. " * 100])
    assert out.status == "error" and out.verdict is None
    assert "exceeds the available context size (256 tokens)" in out.error
    assert not list(tmp_path.rglob("*.json"))  # nothing cached


def test_a_repeated_judge_gives_mean_ratings_a_k_of_n_verdict_and_its_spread(server, tmp_path):
    """Asked 3 times (seeds 0, 1, 2: ratings 1, 0.25, 1), the majority verdict is faithful, the
    rating their mean, the spread their standard deviation; each call is cached."""
    url, _, bodies = server
    llm = _judge(url, "seeded", tmp_path, repeats=3, temperature=0.7)
    assert (llm.repeats, llm.agree) == (3, 2)
    n = len(bodies)
    out = judge_all(OverlapJudge(), _gens({"a": ANSWER}), {"a": QUESTION}, progress=False, llm=llm)
    validate(out, "judgments")
    a = out.iloc[0]
    assert [b["seed"] for b in bodies[n:]] == [0, 1, 2]
    assert (a["llm_repeats"], a["llm_repeats_ok"], a["llm_votes"], a["llm_verdict"]) == (
        3,
        3,
        2,
        1.0,
    )
    assert a["llm_faithfulness"] == pytest.approx(0.75)
    assert a["llm_spread"] == pytest.approx((2 * 0.25**2 + 0.5**2) ** 0.5 / 3**0.5)
    assert (a["judge_prompt_tokens"], a["judge_completion_tokens"]) == (3 * 321, 3 * 45)
    again = judge_all(
        OverlapJudge(), _gens({"a": ANSWER}), {"a": QUESTION}, progress=False, llm=llm
    )
    assert len(bodies) == n + 3 and bool(again.iloc[0]["llm_cached"])  # all three cached
    # all three must agree: two of three is not enough
    strict = _judge(url, "seeded", tmp_path, repeats=3, agree=3)
    out = judge_all(
        OverlapJudge(), _gens({"a": ANSWER}), {"a": QUESTION}, progress=False, llm=strict
    )
    assert out.iloc[0]["llm_verdict"] == 0.0
    with pytest.raises(ConfigError, match="agree \\(4\\) exceeds repeats \\(3\\)"):
        _judge(url, "seeded", tmp_path, repeats=3, agree=4)


@pytest.mark.parametrize(
    ("votes", "ok", "k", "agree", "expected"),
    [
        (2, 3, 3, 2, 1.0),
        (1, 3, 3, 2, 0.0),
        (1, 2, 3, 2, None),
        (0, 1, 3, 2, None),  # two failed calls could still have made two votes
        (0, 2, 3, 2, 0.0),
        (3, 3, 3, 3, 1.0),
    ],
)
def test_k_of_n_counts_a_failed_call_as_neither_vote(votes, ok, k, agree, expected):
    from ragrig.judge.step import k_of_n

    assert k_of_n(votes, ok, k, agree) == expected


def test_the_report_reads_the_repeated_judge_apart_from_the_system():
    from ragrig.report.judge import judge_measures, repeated_judge_summary

    j = pd.DataFrame(
        {
            "qid": ["a", "b", "c"],
            "status": ["scored"] * 3,
            "llm_status": ["ok", "ok", "error"],
            "llm_repeats": [3, 3, 3],
            "llm_repeats_ok": [3, 2, 0],
            "llm_votes": [2, 2, 0],
            "llm_verdict": [1.0, 1.0, None],
            "llm_spread": [0.3, 0.1, None],
            "faithfulness_parts": ["{}"] * 3,
            **{c: [0.5, 0.5, None] for c in ("llm_faithfulness", "llm_relevance")},
            **{c: [None] * 3 for c in ("llm_coverage", "llm_clarity", "llm_external_consistency")},
        }
    )
    assert repeated_judge_summary(j) == {
        "repeats": 3,
        "answers": 2,
        "calls_failed": 1,
        "split": 1,  # a: 2 of 3 voted faithful; b: both calls that answered did
        "undecided": 0,
        "judged_faithful": 1.0,
        "judge_variance": pytest.approx((0.09 + 0.01) / 2),
        "judge_sd": pytest.approx(0.05**0.5),
    }
    long = pd.concat(judge_measures(j))
    assert sorted(long.loc[long["measure"] == "judge/llm_spread", "value"]) == [0.1, 0.3]
