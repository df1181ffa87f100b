"""Known inputs for the HTML scorecard tests: a metrics tree and per-query table whose headline
values are written out by hand (tests/unit/test_html.py, tests/test_html_chromium.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from ragrig.metrics.scorecard import evaluate

SEED = 13
QIDS = ["q1", "q2", "q3", "q4", "q5", "q6"]
LABEL = dict(zip(QIDS, ["SUPPORT"] * 3 + ["CONTRADICT"] * 3, strict=True))
PER_QUERY = {
    "retrieval/ndcg@10": [1.0, 0.5, 0.25, 0.0, 0.75, 0.6],  # mean 0.51667
    "retrieval/recall@10": [1.0, 1.0, 0.5, 0.0, 1.0, 1.0],  # 0.75
    "retrieval/recall@100": [1.0] * 6,  # 1.0, interval [1, 1]
    "retrieval/rr": [1.0, 0.5, 1 / 3, 0.0, 1.0, 0.5],  # 0.55556
    "axis/faithfulness": [0.9, 0.8, 0.7, 0.6],  # q1..q4: 0.75
    "axis/relevance": [0.8] * 6,
    "axis/correctness": [1.0, 0.0, 1.0, 1.0, 0.0, 1.0],  # 0.66667
    "cost/system_usd": [2.5e-05] * 6,
}
# what the page must show for them
EXPECTED_CARDS = {
    "ndcg_at_10": "0.5167",
    "recall_at_10": "0.7500",
    "recall_at_100": "1.0000",
    "mrr": "0.5556",
    "faithfulness": "0.7500",
    "relevance": "0.8000",
    "correctness": "0.6667",
    "weighted_score": "0.7417",  # 0.5 * 0.75 + 0.25 * 0.8 + 0.25 * 0.66667
    "cost_per_query_usd": "2.5e-05",
}
LATENCY = {
    "embed_query": {"p50": 3.5, "p95": 4.25, "p99": 4.9},
    "retrieve": {"p50": 1.234, "p95": 5.678, "p99": 9.1},
    "generate": {"p50": 812.5, "p95": 1500.25, "p99": 2000.0},
}
SWEEP_ROWS = Path(__file__).parent / "fixtures" / "sweep_rows" / "rows.json"


def _mean(xs: list[float]) -> float:
    return sum(xs) / len(xs)


def per_query_table() -> pd.DataFrame:
    rows = [
        (q, m, v) for m, values in PER_QUERY.items() for q, v in zip(QIDS, values, strict=False)
    ]
    df = pd.DataFrame(rows, columns=["qid", "measure", "value"])
    df["claim_label"] = df["qid"].map(LABEL)
    return df


def known_metrics() -> dict:
    pq = per_query_table()

    def slice_mean(measure: str, label: str) -> float | None:
        sel = pq[(pq["measure"] == measure) & (pq["claim_label"] == label)]["value"]
        return float(sel.mean()) if len(sel) else None

    axes = {a: _mean(PER_QUERY[f"axis/{a}"]) for a in ("faithfulness", "relevance", "correctness")}
    counts = {a: len(PER_QUERY[f"axis/{a}"]) for a in axes}
    card = evaluate(
        axes,
        {"faithfulness": 0.5, "relevance": 0.25, "correctness": 0.25},
        {
            "faithfulness": {"min": 0.85, "kind": "hard"},
            "relevance": {"min": 0.75, "kind": "soft"},
            "correctness": {"min": 0.70, "kind": "soft"},
        },
        counts,
    ).to_dict()
    card["diagnosis_counts"] = {"faithfulness_low": 4, "all_pass": 0}
    slices = {
        "claim_label": {
            label: {
                "retrieval/ndcg@10": slice_mean("retrieval/ndcg@10", label),
                "judge/faithfulness": slice_mean("axis/faithfulness", label),
                "n_queries": 3,
                "n_judged": int(
                    ((pq["measure"] == "axis/faithfulness") & (pq["claim_label"] == label)).sum()
                ),
            }
            for label in ("SUPPORT", "CONTRADICT")
        }
    }
    return {
        "counts": {
            "queries": 6,
            "scored": 6,
            "no_positive": 0,
            "missing_runs": 0,
            "unjudged": 0,
            "generated": 6,
        },
        "retrieval": {
            m.removeprefix("retrieval/"): _mean(v)
            for m, v in PER_QUERY.items()
            if m.startswith("retrieval/")
        },
        "judge": {"faithfulness": axes["faithfulness"], "n_scored": 4, "no_claims": 0},
        "scorecard": card,
        "slices": slices,
        "slices_dropped": {"query_length": "a single bucket"},
        "latency_ms": LATENCY,
        "cost_usd_per_query": {"mean": 2.5e-05, "system": {"mean": 2.5e-05}},
    }


def sweep_rows() -> list[dict]:
    return json.loads(SWEEP_ROWS.read_text())


# The answers page (ragrig.report.answers_page): five answers whose every reason is known.
# q1 contradicted, its deciding finding the verifier's confirmation with the window it read;
# q2 a fabrication read by a verifier (claim probabilities, no finding); q3 faithful; q4 a
# failed generation; q5 a wrong number. The answer of q1 and a passage hold markup.
VETO = ("number", "fabricated", "contradicted")
PASSAGES = [
    "The trial did not reduce mortality.\nIt enrolled 40 patients.",
    "Aspirin <b>lowers</b> fever.",
]
WINDOW = "The trial did not reduce mortality. It enrolled 40 patients."
CONFIRMED = f"negation finding confirmed by the verifier: P(support) 0.012 against: {WINDOW}"


def answers_pair() -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """(queries, generations, judgments, slices) of the five answers above."""
    qids = ["q1", "q2", "q3", "q4", "q5"]
    queries = pd.DataFrame(
        {
            "qid": qids,
            "text": [
                "Did the trial reduce mortality?",
                "What does aspirin do?",
                "How many enrolled?",
                "Why?",
                "How many were enrolled?",
            ],
        }
    )
    generations = pd.DataFrame(
        {
            "qid": qids,
            "status": ["ok", "ok", "ok", "error", "ok"],
            "answer": [
                "The trial reduced mortality <script>alert(1)</script>. It enrolled 40 patients.",
                "Aspirin lowers fever. It cures colds. It prevents flu.",
                "40 patients.",
                "",
                "It enrolled 25 patients.",
            ],
            "contexts": [
                json.dumps(PASSAGES),
                json.dumps(PASSAGES[1:]),
                json.dumps(PASSAGES[:1]),
                "[]",
                json.dumps(PASSAGES[:1]),
            ],
            "error": ["", "", "", "HTTP 500", ""],
        }
    )

    def claims(*rows: tuple) -> str:
        return json.dumps(
            [
                {"claim": c, "supported": s, **({"p_supported": p} if p is not None else {})}
                for c, s, p in rows
            ]
        )

    def found(*rows: tuple) -> str:
        return json.dumps([{"claim": c, "kind": k, "detail": d} for c, k, d in rows])

    nan = float("nan")
    judgments = pd.DataFrame(
        {
            "qid": qids,
            "status": ["scored", "scored", "scored", "skipped", "scored"],
            "n_claims": [2, 3, 1, 0, 1],
            "n_supported": [1, 1, 1, 0, 0],
            "judged_faithful": [0.0, 0.0, 1.0, nan, 0.0],
            "answer_support": [0.5, 0.4433, 1.0, nan, 0.0],
            "failure_mode": ["contradiction", "fabrication", "", "", "wrong_number"],
            "claims": [
                claims(
                    ("The trial reduced mortality", False, None),
                    ("It enrolled 40 patients", True, None),
                ),
                claims(
                    ("Aspirin lowers fever", True, 0.91),
                    ("It cures colds", False, 0.12),
                    ("It prevents flu", False, 0.3),
                ),
                claims(("Q: How many enrolled? A: 40 patients", True, None)),
                "[]",
                claims(("It enrolled 25 patients", False, None)),
            ],
            "contradictions": [
                found(
                    (
                        "The trial reduced mortality",
                        "negation",
                        "the context negates what the claim states",
                    ),
                    ("The trial reduced mortality", "contradicted", CONFIRMED),
                ),
                "[]",
                "[]",
                "[]",
                found(("It enrolled 25 patients", "number", "25")),
            ],
        }
    )
    slices = pd.DataFrame(
        {
            "qid": qids,
            "claim_label": ["SUPPORT", "CONTRADICT", "SUPPORT", "NOT_ENOUGH_INFO", "SUPPORT"],
        }
    )
    return queries, generations, judgments, slices
