"""DVC stage judge: claim-level faithfulness of each answer against its own context."""

from __future__ import annotations

import _bootstrap  # noqa: F401  (this checkout's src/ first on sys.path)
from ragrig.runtime import stage


def main() -> None:
    args = stage.parser(__doc__).parse_args()
    from ragrig.core.config import load_section
    from ragrig.core.errors import ConfigError
    from ragrig.core.io import atomic_dir, read_table, write_json, write_table
    from ragrig.judge import decision_record, judge_all, make_judge
    from ragrig.judge.step import consistency_record, external_record
    from ragrig.weights.precision import resolve_precision

    parse_dir, generate_dir, verifier_dir, chunk_dir, index_dir = args.inputs
    cfg = load_section("judge", args.params)
    if cfg.method == "verifier" and cfg.model is None:  # the train_verifier stage's output
        cfg = cfg.model_copy(update={"model": str(verifier_dir)})
    queries = read_table(parse_dir / "queries.parquet", "queries")
    gens = read_table(generate_dir / "generations.parquet", "generations")
    ref_col = cfg.correctness.reference_column if cfg.correctness is not None else None
    if ref_col is not None and ref_col not in queries.columns:  # before any answer is judged
        raise ConfigError(
            f"judge.correctness.reference_column: the queries table has no column {ref_col!r} "
            f"(columns: {sorted(queries.columns)})"
        )
    llm = None
    if cfg.llm is not None:
        from ragrig.judge.llm import make_llm_judge

        llm = make_llm_judge(cfg.llm)
    qtext = dict(zip(queries["qid"], queries["text"], strict=True))
    extra, notes = {}, {}
    if cfg.consistency is not None:  # the verifier loads only when some answer has samples
        from ragrig.judge.step import consistency_fields

        extra = consistency_fields(
            gens, _verifier(cfg.consistency).readings, cfg.consistency.threshold
        )
    if cfg.external is not None:
        from ragrig.judge.step import external_fields

        check, notes["external"] = _external_check(cfg.external, chunk_dir, index_dir)
        if check is not None:
            for q, fields in external_fields(
                gens, qtext, check, cfg.external.min_content_words
            ).items():
                extra.setdefault(q, {}).update(fields)
        print(f"judge: external consistency: {notes['external']}")
    judgments = judge_all(
        make_judge(cfg),
        gens,
        qtext,
        llm=llm,
        weights=cfg.weights.model_dump(),
        threshold=cfg.decision_threshold,
        veto=cfg.veto,
        citation_checks=cfg.citation_checks,
        extra=extra,
    )
    probe_path = generate_dir / "position_probe.parquet"
    probe = None
    if probe_path.exists():  # the lost-in-the-middle probe's answers, judged alike
        probe_gens = read_table(probe_path, "generations")
        text = dict(zip(queries["qid"], queries["text"], strict=True))
        probe = judge_all(
            make_judge(cfg),
            probe_gens,
            {k: text[q] for k, q in zip(probe_gens["qid"], probe_gens["query_qid"], strict=True)},
            weights=cfg.weights.model_dump(),
            threshold=cfg.decision_threshold,
            veto=cfg.veto,
        )
    from ragrig.judge.llm import self_preference

    judge_models = [m.model for m in (cfg.llm, getattr(cfg, "verifier", None)) if m is not None]
    generators = sorted({str(m) for m in gens["model"] if str(m)})
    warning = self_preference(judge_models, generators)
    if warning:
        print(f"judge: warning: {warning}")
    precision = None
    if cfg.method == "verifier":  # the verifier's matrix products on this CPU
        from ragrig.weights.precision import precision_record

        precision = precision_record(cfg.quantize, resolve_precision(cfg.quantize, fp32="none"))
    correctness = None
    if cfg.correctness is not None:  # claim-level correctness against a reference answer
        from ragrig.judge.confirm import shared_verifier
        from ragrig.judge.correctness import (
            ReferenceCorrectness,
            correctness_all,
            correctness_record,
        )

        cc = cfg.correctness
        verifier = shared_verifier(
            str(verifier_dir) if cc.model is None else cc.model,
            cc.max_length,
            cc.batch_size,
            cc.threads,
            resolve_precision(cc.quantize, fp32="none"),
        )
        scorer = ReferenceCorrectness.from_config(cc, verifier)
        correctness = correctness_all(scorer, gens, queries, cc.reference_column)
    status = judgments["status"].value_counts().sort_index().to_dict()
    llm_status = judgments["llm_status"].value_counts().sort_index().to_dict()
    with atomic_dir(args.out) as out:
        write_table(judgments, out / "judgments.parquet", "judgments")
        if probe is not None:
            write_table(probe, out / "position_judgments.parquet", "judgments")
        if correctness is not None:
            write_table(correctness, out / "correctness.parquet", "correctness")
        write_json(
            out / "manifest.json",
            {
                "method": cfg.method,
                "status": status,
                "weights": cfg.weights.model_dump(),
                "llm_model": llm.model_name if llm is not None else None,
                "llm_status": llm_status,
                "llm_cached": int(judgments["llm_cached"].sum()),
                "precision_decision": precision,
                "decision": decision_record(cfg.decision_threshold, judgments, cfg.veto),
                "self_preference": warning,
                "correctness": (
                    correctness_record(correctness) if correctness is not None else None
                ),
                "consistency": consistency_record(cfg.consistency, judgments),
                "external": external_record(cfg.external, judgments, notes.get("external")),
            },
        )
    print(f"judge: {len(judgments)} answers, status {status}, LLM judge {llm_status}")


def _verifier(cfg):
    from ragrig.judge.confirm import LazyVerifier

    return LazyVerifier(cfg)


def _external_check(cfg, chunk_dir, index_dir):
    """The corpus check over the index stage's BM25 index, and one line on what it reads;
    (None, why) when the corpus gives nothing to retrieve from."""
    from ragrig.core.config import validate_section
    from ragrig.core.io import loading, read_json, read_table, verify_tree
    from ragrig.core.registry import resolve
    from ragrig.index import SPARSE_INDEXES
    from ragrig.judge.external import ExternalCheck, index_search
    from ragrig.judge.overlap import OverlapJudge

    chunks = read_table(chunk_dir / "chunks.parquet", "chunks")
    if not len(chunks):
        return None, "not measured: the corpus has no chunks to retrieve from"
    manifest = read_json(index_dir / "manifest.json")
    sparse_cfg = validate_section(
        "index", {"dense": manifest["dense"], "sparse": manifest["sparse"]}
    ).sparse
    verify_tree(index_dir / "sparse")
    with loading(index_dir / "sparse", f"{sparse_cfg.method} index"):
        sparse = resolve(SPARSE_INDEXES, sparse_cfg.method, "sparse index").load(
            index_dir / "sparse", sparse_cfg
        )
    k = min(cfg.k, len(chunks))
    check = ExternalCheck(
        index_search(sparse),
        chunks["text"].tolist(),
        chunks["doc_id"].tolist(),
        _verifier(cfg).readings,
        k,
        cfg.window,
        cfg.windows_per_claim,
        cfg.support_threshold,
        cfg.contradict_threshold,
        cfg.checks,
        OverlapJudge(min_content_words=cfg.min_content_words),
    )
    small = f" (the corpus has only {len(chunks)} chunks)" if k < cfg.k else ""
    return check, f"each claim against the top {k} of {len(chunks)} chunks (BM25){small}"


if __name__ == "__main__":
    stage.run("judge", main)
