"""What the judge still accepts after a change of meaning: perturbation probes per kind.

Builds the probe set of `build_probes.py` (SciFact dev claims with SUPPORT rationales from
--dataset-root, MTRAG answers rated faithful from --mtrag-root; or reads one with --probes) and
runs each judge over every probe as a one-claim answer against the probe's contexts. A probe is
*flagged* when the judge scores it below 1 (a claim not supported), *accepted* at 1, and counted
apart when the judge finds no claim in it.

Judges: the configured `judge` section of params.yaml (`overlap` with its entity/number and
negation checks), and, for comparison, the same judge without its negation check
(`overlap_entities`) and without both (`overlap_lexical`, the lexical overlap alone). Per kind: the
share flagged, and, for the perturbations, the share flagged among probes whose original claim
the judge accepted (what a perturbation does to an answer the judge believed; for the split
case, the share still supported among those). Per source (SciFact, MTRAG) in the JSON. Targets,
on those conditional shares (a probe changes a claim the judge believed; a judge that flags
every claim has no accepted original and meets nothing): negation >= 95%, changed number >= 90%,
swapped entity >= 90% flagged; the claim with its evidence split across two adjacent sentences
still supported >= 90%. The share of originals accepted is the judge's recall beside them.

At the answer level (MTRAG, what the scorecard and the gate read): the same edits made to one
sentence of a whole answer rated faithful, judged by the configured judge (and the verifier) at
its decision threshold (ragrig.judge.decide: a contradicted claim decides, else the answer-level
score against judge.decision_threshold). Per edit: the share of edited answers judged unfaithful
among those whose unedited answer was judged faithful (targets: negation, changed number,
swapped entity >= 90%), beside what the soft score alone would flag; and the share of unedited
answers judged faithful (target >= 90%).

It also times the sentence segmenter (sentences/s over the first --segmenter-docs abstracts of
--dataset-root, uncached) and the configured judge over every rated MTRAG answer (answers/s,
cold segmentation cache; target: >= 10 answers/s).

    python benchmarks/bench_probes.py [--quick] [--mtrag-root DIR|none] [--probes FILE]
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import defaultdict
from pathlib import Path

import _common as C
import build_probes as B

# kind -> (measure, target): shares among the probes whose original claim the judge accepted
TARGETS = {
    "negation": ("flagged_given_original_accepted", 0.95),
    "changed_number": ("flagged_given_original_accepted", 0.90),
    "swapped_entity": ("flagged_given_original_accepted", 0.90),
    "split_evidence": ("supported_given_original_accepted", 0.90),
}
QUICK_MAX_CLAIMS = 40
# Answer level, at the judge's operating point (what the scorecard and the gate read): the
# share of edited answers judged unfaithful among those whose unedited answer was judged
# faithful, and the share of unedited human-rated faithful answers judged faithful.
ANSWER_TARGETS = {"negation": 0.90, "changed_number": 0.90, "swapped_entity": 0.90}
ORIGINAL_ACCEPTED_TARGET = 0.90


def judges(params: Path, verifier: Path | None = None) -> dict:
    """The configured judge; before it, for an overlap judge, the same without its negation
    check, and without both checks (the lexical overlap alone); with `verifier` (a trained
    model folder), last, judge=verifier as conf/judge/verifier.yaml sets it (and the same
    without its entity check), so that the targets are checked on it."""
    import yaml

    from ragrig.core.config import load_section, validate_section
    from ragrig.judge import make_judge

    cfg = load_section("judge", params)
    out = {}
    if cfg.method == "overlap":
        off = {"entity_check": False, "negation_check": False}
        out["overlap_lexical"] = make_judge(cfg.model_copy(update=off))
        out["overlap_entities"] = make_judge(cfg.model_copy(update={"negation_check": False}))
    out[f"{cfg.method}_configured"] = make_judge(cfg)
    if verifier is not None:
        from ragrig.judge.verifier import VerifierJudge
        from ragrig.judge.verifier_model import Verifier

        path = C.PROJECT_ROOT / "conf" / "judge" / "verifier.yaml"
        vcfg = validate_section("judge", yaml.safe_load(path.read_text(encoding="utf-8")))
        shared = _Memo(Verifier(verifier, vcfg.max_length, vcfg.batch_size, vcfg.threads))
        settings = dict(
            support_threshold=vcfg.support_threshold,
            windows_per_claim=vcfg.windows_per_claim,
            window=vcfg.window,
            min_content_words=vcfg.min_content_words,
            verifier=shared,  # both read the same pairs: scored once
        )
        out["verifier_model_only"] = VerifierJudge(entity_check=False, **settings)
        out["verifier"] = VerifierJudge(entity_check=vcfg.entity_check, **settings)
    return out


class _Memo:
    """A verifier that scores each distinct (claim, evidence) pair once."""

    def __init__(self, verifier):
        self.verifier, self.memo = verifier, {}

    def support(self, pairs):
        todo = [p for p in dict.fromkeys(pairs) if p not in self.memo]
        self.memo.update(zip(todo, self.verifier.support(todo), strict=True))
        return [self.memo[p] for p in pairs]


def run_judge(judge, probes: list[dict]) -> tuple[dict[str, str], float]:
    """probe id -> accepted / flagged / no_claims, and the wall time."""
    out = {}
    t0 = time.perf_counter()
    for p in probes:
        v = judge.judge("", p["claim"], p["contexts"])
        out[p["id"]] = "no_claims" if v.score is None else "accepted" if v.score == 1 else "flagged"
    return out, time.perf_counter() - t0


def judge_decision(name: str, params: Path) -> tuple[float | None, list[str]]:
    """The decision threshold and veto of a judge of `judges`: the configured judge's, or
    conf/judge/verifier.yaml's for the verifier (threshold None: ragrig.judge's default)."""
    import yaml

    from ragrig.core.config import load_section, validate_section

    if name.startswith("verifier"):
        path = C.PROJECT_ROOT / "conf" / "judge" / "verifier.yaml"
        cfg = validate_section("judge", yaml.safe_load(path.read_text(encoding="utf-8")))
    else:
        cfg = load_section("judge", params)
    return cfg.decision_threshold, list(cfg.veto)


ALL_CHECKS = ("negation", "number", "entity", "fabricated")


def run_answers(
    judge, probes: list[dict], threshold: float | None, veto: list[str]
) -> tuple[dict, float]:
    """probe id -> (decision, soft-score-only decision, decision with every hard check), each
    accepted / flagged / no_claims, at the operating point: ragrig.judge.decide, as the judge
    stage decides with its `veto`; and the wall time."""
    from ragrig.judge import DEFAULT_DECISION_THRESHOLD, decide

    t = DEFAULT_DECISION_THRESHOLD if threshold is None else threshold
    word = {None: "no_claims", 1.0: "accepted", 0.0: "flagged"}
    out = {}
    t0 = time.perf_counter()
    for p in probes:
        v = judge.judge(p.get("question", ""), p["answer"], p["contexts"])
        n, k = len(v.extracted), len(v.supported)
        found = list(v.contradictions)
        decision, _ = decide(v.soft_score, n, k, found, t, veto)
        soft_only, _ = decide(v.soft_score, n, k, [], t)
        every, _ = decide(v.soft_score, n, k, found, t, ALL_CHECKS)
        out[p["id"]] = (word[decision], word[soft_only], word[every])
    return out, time.perf_counter() - t0


def summarise_answers(probes: list[dict], result: dict, which: int = 0) -> dict:
    """Per kind at the operating point (`which` 0: the decision, 1: the soft score alone, 2: with
    every hard check deciding): the
    share flagged; for the edits, the share flagged among probes whose unedited answer was
    accepted; for the unedited answers, the share accepted (a judge that rejects everything
    meets no edit target and fails this one)."""
    outcome = {pid: r[which] for pid, r in result.items()}
    originals = [p for p in probes if p["kind"] == "original"]
    accepted = {p["source_id"] for p in originals if outcome[p["id"]] == "accepted"}
    judged = [p for p in originals if outcome[p["id"]] != "no_claims"]
    rows: dict = {
        "original": {
            "n": len(originals),
            "no_claims": len(originals) - len(judged),
            "accepted": len(accepted) / len(judged) if judged else None,
            "target": {"accepted": ORIGINAL_ACCEPTED_TARGET},
        }
    }
    r = rows["original"]
    r["target_met"] = None if r["accepted"] is None else r["accepted"] >= ORIGINAL_ACCEPTED_TARGET
    for kind in B.PERTURBATIONS:
        ps = [p for p in probes if p["kind"] == kind]
        cond = [p for p in ps if p["source_id"] in accepted]
        flagged = sum(outcome[p["id"]] == "flagged" for p in cond)
        row = {
            "n": len(ps),
            "flagged": (sum(outcome[p["id"]] == "flagged" for p in ps) / len(ps) if ps else None),
            "n_original_accepted": len(cond),
            "flagged_given_original_accepted": flagged / len(cond) if cond else None,
        }
        if kind in ANSWER_TARGETS:
            row["target"] = {"flagged_given_original_accepted": ANSWER_TARGETS[kind]}
            m = row["flagged_given_original_accepted"]
            row["target_met"] = None if m is None else m >= ANSWER_TARGETS[kind]
        rows[kind] = row
    return rows


def summarise(probes: list[dict], result: dict[str, str]) -> dict:
    accepted_original = {
        p["source_id"] for p in probes if p["kind"] == "original" and result[p["id"]] == "accepted"
    }
    by_kind: dict[str, list[dict]] = defaultdict(list)
    for p in probes:
        by_kind[p["kind"]].append(p)
    rows = {}
    for kind in B.KINDS:
        ps = by_kind.get(kind, [])
        n = len(ps)
        counts = {s: sum(result[p["id"]] == s for p in ps) for s in ("accepted", "flagged")}
        no_claims = n - counts["accepted"] - counts["flagged"]
        judged = n - no_claims
        row = {
            "n": n,
            "no_claims": no_claims,
            "flagged": counts["flagged"] / judged if judged else None,
            "supported": counts["accepted"] / judged if judged else None,
        }
        if kind in B.PERTURBATIONS:
            cond = [p for p in ps if p["source_id"] in accepted_original]
            flagged = sum(result[p["id"]] == "flagged" for p in cond)
            row["n_original_accepted"] = len(cond)
            row["flagged_given_original_accepted"] = flagged / len(cond) if cond else None
        if kind == "split_evidence":
            cond = [p for p in ps if p["source_id"] in accepted_original]
            kept = sum(result[p["id"]] == "accepted" for p in cond)
            row["n_original_accepted"] = len(cond)
            row["supported_given_original_accepted"] = kept / len(cond) if cond else None
        if kind in TARGETS:
            measure, target = TARGETS[kind]
            row["target"] = {measure: target}
            row["target_met"] = None if row[measure] is None else row[measure] >= target
        rows[kind] = row
    return rows


def segmenter_speed(root: Path, n_docs: int) -> dict:
    """Sentences/s of `ragrig.core.text.sentence_spans` (uncached) on the first abstracts of a corpus."""
    from ragrig.core.text import sentence_spans
    from ragrig.dataset.beir import iter_jsonl

    corpus = root / "corpus.jsonl"
    if not corpus.exists():
        corpus = root / "corpus.jsonl.gz"
    texts = []
    for _, rec in iter_jsonl(corpus):
        texts.append(rec.get("text", ""))
        if len(texts) == n_docs:
            break
    t0 = time.perf_counter()
    n = sum(len(sentence_spans.__wrapped__(t)) for t in texts)
    seconds = time.perf_counter() - t0
    return {
        "documents": len(texts),
        "sentences": n,
        "seconds": round(seconds, 3),
        "sentences_per_s": round(n / seconds, 1) if seconds else None,
        "documents_per_s": round(len(texts) / seconds, 1) if seconds else None,
    }


def judge_speed(judge, mtrag_root: Path) -> dict:
    """Answers/s of a judge over every rated MTRAG answer with its task's passages (question:
    the last user turn), segmentation cache cleared first, as a fresh judge stage would be."""
    from ragrig.core.text import sentence_spans

    data = B._read_mtrag(mtrag_root)
    docs = {d["document_id"]: d.get("text", "") for d in data.get("documents", [])}
    tasks = {t["task_id"]: t for t in data.get("tasks", [])}
    items = []
    for ev in data.get("evaluations", []):
        task = tasks[ev["task_id"]]
        question = next(
            (t["text"] for t in reversed(task.get("input", [])) if t.get("speaker") == "user"), ""
        )
        contexts = [docs[c["document_id"]] for c in task.get("contexts", [])]
        items.append((question, ev.get("model_response", ""), contexts))
    sentence_spans.cache_clear()
    t0 = time.perf_counter()
    for question, answer, contexts in items:
        judge.judge(question, answer, contexts)
    seconds = time.perf_counter() - t0
    return {
        "answers": len(items),
        "seconds": round(seconds, 3),
        "answers_per_s": round(len(items) / seconds, 1) if seconds else None,
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    C.add_common_args(p)
    p.add_argument("--mtrag-root", type=B.root_or_none, default=B.DEFAULT_MTRAG_ROOT)
    p.add_argument("--probes", type=Path, default=None, help="a built probe file instead")
    p.add_argument(
        "--verifier",
        type=Path,
        default=None,
        help="a trained verifier (e.g. data/train_verifier): also run judge=verifier, last",
    )
    p.add_argument("--seed", type=int, default=13)
    p.add_argument("--max-claims", type=int, default=None, help="per source (seeded sample)")
    p.add_argument("--segmenter-docs", type=int, default=300, help="abstracts timed")
    p.add_argument(
        "--quick", action="store_true", help=f"--max-claims {QUICK_MAX_CLAIMS}, 100 abstracts"
    )
    args = p.parse_args(argv)
    if args.quick:
        args.segmenter_docs = min(args.segmenter_docs, 100)
    C.setup_env()
    C.apply_threads(args.params)
    max_claims = args.max_claims or (QUICK_MAX_CLAIMS if args.quick else None)
    t0 = time.perf_counter()
    try:
        if args.probes is not None:
            probes, stats = B.read_jsonl(args.probes), None
        else:
            probes, stats = B.build(args.dataset_root, args.mtrag_root, args.seed, max_claims)
    except B.ProbeError as exc:
        print(f"bench_probes: {exc}", file=sys.stderr)
        return 2
    build_s = time.perf_counter() - t0
    if not probes:
        print("bench_probes: no probe was built (no supported claim found)", file=sys.stderr)
        return 2

    answer_probes = [p for p in probes if p.get("level") == "answer"]
    probes = [p for p in probes if p.get("level", "claim") == "claim"]
    result = {
        **C.header("probes", ["pysbd"]),
        "config": {
            "dataset_root": str(args.dataset_root),
            "mtrag_root": str(args.mtrag_root),
            "probes_file": str(args.probes) if args.probes else None,
            "seed": args.seed,
            "max_claims": max_claims,
            "probes": len(probes),
            "answer_probes": len(answer_probes),
            "build_s": round(build_s, 2),
            "by_source": stats,
        },
        "backends": {},
    }
    from ragrig.core.text import split_sentences

    t0 = time.perf_counter()  # the segmenter caches contexts: warm it for every judge alike
    for ctx in {c for p in probes for c in p["contexts"]}:
        split_sentences(ctx)
    result["config"]["segment_contexts_s"] = round(time.perf_counter() - t0, 2)
    built = judges(args.params, args.verifier)
    for name, judge in built.items():
        outcome, seconds = run_judge(judge, probes)
        rows = summarise(probes, outcome)
        sources = sorted({p.get("source", "") for p in probes})
        result["backends"][name] = {
            "claims_per_s": round(len(probes) / seconds, 1) if seconds else None,
            "kinds": rows,
            "by_source": {
                src: {
                    kind: {k: r[k] for k in ("n", "flagged", "supported")}
                    for kind, r in summarise(
                        [p for p in probes if p.get("source", "") == src], outcome
                    ).items()
                }
                for src in sources
            },
        }
        C.print_table(
            f"judge {name}: {len(probes)} probes, {len(probes) / seconds:.0f} claims/s",
            [
                "kind",
                "n",
                "no_claims",
                "flagged",
                "supported",
                "same|orig ok",
                "target (same|orig ok)",
            ],
            [
                [
                    kind,
                    r["n"],
                    r["no_claims"],
                    r["flagged"],
                    r["supported"],
                    r.get(
                        "flagged_given_original_accepted",
                        r.get("supported_given_original_accepted"),
                    ),
                    ""
                    if "target" not in r
                    else f">= {next(iter(r['target'].values()))} met={r['target_met']}",
                ]
                for kind, r in rows.items()
            ],
            digits=3,
        )
    # answer level, for the judges the pipeline would use: the configured one (and the verifier)
    result["answer_level"] = {}
    for name in [n for n in built if n.endswith("_configured") or n == "verifier"]:
        threshold, veto = judge_decision(name, args.params)
        outcome, seconds = run_answers(built[name], answer_probes, threshold, veto)
        rows = summarise_answers(answer_probes, outcome)
        soft = summarise_answers(answer_probes, outcome, which=1)
        every = summarise_answers(answer_probes, outcome, which=2)
        result["answer_level"][name] = {
            "threshold": threshold,
            "veto": veto,
            "every_check": every,
            "answers_per_s": round(len(answer_probes) / seconds, 1) if seconds else None,
            "kinds": rows,
            "soft_score_only": soft,
        }
        C.print_table(
            f"judge {name} at its operating point (threshold {threshold}, veto {veto}): "
            f"{len(answer_probes)} whole answers",
            ["kind", "n", "flagged|orig ok", "soft only", "every check", "accepted", "target"],
            [
                [
                    kind,
                    r["n"],
                    r.get("flagged_given_original_accepted"),
                    soft[kind].get("flagged_given_original_accepted"),
                    every[kind].get("flagged_given_original_accepted", every[kind].get("accepted")),
                    r.get("accepted"),
                    ""
                    if "target" not in r
                    else f">= {next(iter(r['target'].values()))} met={r['target_met']}",
                ]
                for kind, r in rows.items()
            ],
            digits=3,
        )
    result["segmenter"] = segmenter_speed(args.dataset_root, args.segmenter_docs)
    print(
        f"\nsegmenter: {result['segmenter']['sentences']} sentences of "
        f"{result['segmenter']['documents']} documents, "
        f"{result['segmenter']['sentences_per_s']} sentences/s"
    )
    if args.mtrag_root is not None:
        judge = list(built.values())[-1]
        result["judge_speed_mtrag"] = judge_speed(judge, args.mtrag_root)
        print(
            f"judge: {result['judge_speed_mtrag']['answers']} MTRAG answers, "
            f"{result['judge_speed_mtrag']['answers_per_s']} answers/s"
        )
    default = list(result["backends"])[-1]
    mets = [r["target_met"] for r in result["backends"][default]["kinds"].values() if "target" in r]
    if default in result["answer_level"]:
        kinds = result["answer_level"][default]["kinds"].values()
        mets += [r["target_met"] for r in kinds if "target" in r]
    result["target_met"] = False if False in mets else None if None in mets or not mets else True
    result["target_judge"] = default
    C.write_json(args.json, result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
