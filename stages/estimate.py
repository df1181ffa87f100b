"""DVC stage estimate: what the run's model calls will cost, before one is made; a run whose
estimate exceeds budget.usd stops here, before generate loads a model."""

from __future__ import annotations

import _bootstrap  # noqa: F401  (this checkout's src/ first on sys.path)
from ragrig.runtime import stage


def main() -> None:
    args = stage.parser(__doc__).parse_args()
    from ragrig.core.errors import ConfigError
    from ragrig.core.io import atomic_dir, write_json
    from ragrig.report.estimate import OK_TEXT, estimate, refusal

    parse_dir, chunk_dir, rerank_dir = args.inputs
    est = estimate(args.params, parse_dir, chunk_dir, rerank_dir, generate_dir=None)
    if est.over_budget:  # nothing written: generate, which reads `ok`, cannot start
        raise ConfigError(refusal(est))
    record = est.record()
    with atomic_dir(args.out) as out:
        write_json(out / "estimate.json", record)
        # the same bytes whatever the estimate: generate depends on this file alone, so a changed
        # estimate (a judge parameter, a price) reruns nothing downstream
        (out / "ok").write_text(OK_TEXT, encoding="utf-8")
    rec = record["total"]
    budget = f" of the ${est.budget_usd:.4f} budget" if est.budget_usd is not None else ""
    print(
        f"estimate: {rec['calls']} model calls, {rec['prompt_tokens']} prompt tokens, "
        f"<= {rec['completion_tokens']} completion tokens, ${rec['usd']:.4f}{budget} "
        f"(prices of {est.prices_as_of}; `ragrig estimate` shows each part)"
    )


if __name__ == "__main__":
    stage.run("estimate", main)
