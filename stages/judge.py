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
    from ragrig.weights.precision import resolve_precision

    parse_dir, generate_dir, verifier_dir = args.inputs
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
    judgments = judge_all(
        make_judge(cfg),
        gens,
        dict(zip(queries["qid"], queries["text"], strict=True)),
        llm=llm,
        weights=cfg.weights.model_dump(),
        threshold=cfg.decision_threshold,
        veto=cfg.veto,
        citation_checks=cfg.citation_checks,
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
            },
        )
    print(f"judge: {len(judgments)} answers, status {status}, LLM judge {llm_status}")


if __name__ == "__main__":
    stage.run("judge", main)
