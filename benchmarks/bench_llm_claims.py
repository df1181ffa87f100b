"""Bias probes of the LLM claim judge (judge=llm_claims): position, verbosity, self-preference.

Over the first --n MTRAG answers that people rated faithful (the calibration half's order), each
answer is judged claim by claim (ragrig.judge.llm_claims) three ways:

* as it is;
* position: its passages in reverse order. Share of claims whose verdict is unchanged, and of
  answers whose decision (soft score >= 0.5 and no vetoed finding) is unchanged;
* verbosity: the answer padded with a faithful but irrelevant sentence (the passage sentence of
  6+ words sharing the fewest words with the answer, so it is supported and off its point).
  Share of the original claims whose verdict is unchanged and of answers whose decision is
  unchanged; the share of padding sentences judged supported beside it.

Self-preference: the judge stage warns when the judge model's family equals the generator's
(ragrig.judge.llm.self_preference); here it is checked for the judge against each MTRAG
responder and against the packaged generator.

Verifiers (--verifier, repeatable): `fake` (benchmarks/_claim_server.py: a lexical reader on
127.0.0.1, position-blind by construction), `fake_first` (the same reading passage [1] only: a
judge with position bias, which the position probe must catch), `packaged` (the packaged
SmolLM2 in process, llama.cpp) or an OpenAI-compatible base URL (model from --model). Each
verifier's calls are cached in a fresh folder (or --cache-dir); claims/s counts uncached calls.

    python benchmarks/bench_llm_claims.py [--n 20] [--verifier fake --verifier packaged]
"""

from __future__ import annotations

import argparse
import re
import sys
import tempfile
import time
from pathlib import Path

import _claim_server
import _common as C

DEFAULT_ROOT = (C.PROJECT_ROOT / ".." / "shared" / "datasets" / "mtrag_human").resolve()
MTRAG_FILE = "reference_subset_with_human_evaluations.json.gz"
_WORD = re.compile(r"[a-z0-9]+")


def filler_sentence(answer: str, contexts: list[str]) -> str | None:
    """The passage sentence of 6+ words sharing the fewest words with the answer."""
    from ragrig.core.text import split_sentences

    mine = set(_WORD.findall(answer.lower()))
    best = None
    for ctx in contexts:
        for s in split_sentences(ctx):
            words = _WORD.findall(s.lower())
            if len(words) < 6:
                continue
            key = (len(set(words) & mine) / len(set(words)), len(s), s)
            if best is None or key < best:
                best = key
    return best[2].strip() if best else None


def _decision(v, veto) -> float | None:
    """The judge stage's decision of a verdict (ragrig.judge.decide) at the default threshold."""
    from ragrig.judge import DEFAULT_DECISION_THRESHOLD, decide

    return decide(
        v.soft_score,
        len(v.extracted),
        len(v.supported),
        list(v.contradictions),
        DEFAULT_DECISION_THRESHOLD,
        veto,
    )[0]


def _verifier_cfg(name: str, url: str, model: str, cache: Path) -> dict:
    common = {"cache_dir": str(cache), "backoff_s": 0.0, "max_tokens": 16}
    if name == "fake":
        return {"backend": "openai_http", "base_url": f"{url}/reader/v1", "model": "fake", **common}
    if name == "fake_first":
        return {"backend": "openai_http", "base_url": f"{url}/first/v1", "model": "fake", **common}
    if name == "packaged":
        return {"backend": "llama_cpp", "model": "packaged:SmolLM2-135M-Instruct", **common}
    return {"backend": "openai_http", "base_url": name, "model": model, **common}


def probe(judge, answers, veto) -> dict:
    same_pos = same_pos_answer = same_pad = same_pad_answer = 0
    claims = answers_n = padded_n = padded_claims = filler_supported = 0
    errors = 0
    t0, calls0 = time.perf_counter(), judge.calls["ok"]
    for a in answers:
        q, ctx = a.judge_question(), list(a.contexts)
        try:
            base = judge.judge(q, a.answer, ctx)
            rev = judge.judge(q, a.answer, ctx[::-1])
        except RuntimeError as exc:  # a failed call: counted, the answer left out
            errors += 1
            print(f"  {a.task_id}: {exc}", file=sys.stderr)
            continue
        if not base.extracted:
            continue
        answers_n += 1
        verdict = dict(zip(base.extracted, base.claim_scores, strict=True))
        rverdict = dict(zip(rev.extracted, rev.claim_scores, strict=True))
        kinds = {c: {k for cc, k, _ in base.contradictions if cc == c} for c in base.extracted}
        rkinds = {c: {k for cc, k, _ in rev.contradictions if cc == c} for c in rev.extracted}
        claims += len(base.extracted)
        same_pos += sum(
            verdict[c] == rverdict.get(c) and kinds[c] == rkinds.get(c) for c in base.extracted
        )
        same_pos_answer += _decision(base, veto) == _decision(rev, veto)
        filler = filler_sentence(a.answer, ctx)
        if filler is None:
            continue
        try:
            pad = judge.judge(q, f"{a.answer.rstrip()} {filler}", ctx)
        except RuntimeError as exc:
            errors += 1
            print(f"  {a.task_id} padded: {exc}", file=sys.stderr)
            continue
        pverdict = dict(zip(pad.extracted, pad.claim_scores, strict=True))
        padded_n += 1
        padded_claims += len(base.extracted)
        same_pad += sum(verdict[c] == pverdict.get(c) for c in base.extracted)
        same_pad_answer += _decision(base, veto) == _decision(pad, veto)
        extra = [c for c in pad.extracted if c not in verdict]
        filler_supported += bool(extra) and all(c in pad.supported for c in extra)
    seconds = time.perf_counter() - t0
    paid = judge.calls["ok"] - calls0
    return {
        "answers": answers_n,
        "claims": claims,
        "failed_answers": errors,
        "position": {
            "claims_unchanged": same_pos / claims if claims else None,
            "answers_unchanged": same_pos_answer / answers_n if answers_n else None,
        },
        "verbosity": {
            "answers_padded": padded_n,
            "claims_unchanged": same_pad / padded_claims if padded_claims else None,
            "answers_unchanged": same_pad_answer / padded_n if padded_n else None,
            "padding_supported": filler_supported / padded_n if padded_n else None,
        },
        "uncached_calls": paid,
        "seconds": seconds,
        "claims_per_s": paid / seconds if seconds > 0 and paid else None,
    }


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--dataset-root", type=Path, default=DEFAULT_ROOT)
    p.add_argument("--params", type=Path, default=C.DEFAULT_PARAMS, help="unused")
    p.add_argument("--n", type=int, default=20)
    p.add_argument("--verifier", action="append", default=None)
    p.add_argument("--model", default="judge", help="model name of a base-URL verifier")
    p.add_argument("--cache-dir", type=Path, default=None)
    p.add_argument("--json", "--out", dest="out", type=Path, default=None)
    args = p.parse_args(argv)
    verifiers = args.verifier or ["fake", "fake_first", "packaged"]

    from ragrig.core.config import validate_section
    from ragrig.judge import make_judge
    from ragrig.judge.llm import self_preference
    from ragrig.tools.calibrate.core import split_tasks
    from ragrig.tools.calibrate.mtrag import load_mtrag_human, resolve_dataset_file

    path = resolve_dataset_file(args.dataset_root / MTRAG_FILE)
    rated = load_mtrag_human(path).answers
    split = split_tasks({a.task_id for a in rated}, seed=13)
    faithful = [a for a in rated if a.task_id in split.calibration and a.faithful][: args.n]
    url, _hits, httpd = _claim_server.start()
    results = {}
    try:
        for name in verifiers:
            cache = args.cache_dir or Path(tempfile.mkdtemp(prefix="llm-claims-cache-"))
            cache = cache / name if args.cache_dir else cache
            cfg = validate_section(
                "judge",
                {"method": "llm_claims", "verifier": _verifier_cfg(name, url, args.model, cache)},
            )
            judge = make_judge(cfg)
            results[name] = {"model": cfg.verifier.model, **probe(judge, faithful, set(cfg.veto))}
            r = results[name]
            print(
                f"{name}: {r['answers']} answers, {r['claims']} claims; position unchanged "
                f"{C.fmt(r['position']['claims_unchanged'])} of claims, "
                f"{C.fmt(r['position']['answers_unchanged'])} of decisions; padded unchanged "
                f"{C.fmt(r['verbosity']['claims_unchanged'])} / "
                f"{C.fmt(r['verbosity']['answers_unchanged'])}; {C.fmt(r['claims_per_s'])} claims/s"
            )
    finally:
        httpd.shutdown()
        httpd.server_close()
    responders = sorted({a.model_id for a in rated})
    judge_models = sorted({r["model"] for r in results.values()})
    result = {
        **C.header("llm_claims"),
        "config": {"dataset": str(path), "n": args.n, "verifiers": verifiers},
        "verifiers": results,
        "self_preference": {
            "judge_vs_mtrag_responders": self_preference(judge_models, responders),
            "packaged_judge_vs_packaged_generator": self_preference(
                ["packaged:SmolLM2-135M-Instruct"], ["packaged:SmolLM2-135M-Instruct"]
            ),
        },
        "target_met": None,  # the probes report; the issue sets no figure for them
    }
    C.write_json(args.out, result)
    return result


if __name__ == "__main__":
    main()
