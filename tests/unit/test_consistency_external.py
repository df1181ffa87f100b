"""Self-consistency by mutual entailment and external consistency against the corpus: exact
values with stub readings, the bad inputs, and one reading of the shipped verifier."""

from __future__ import annotations

import json
import math

import pandas as pd
import pytest

from ragrig.judge.consistency import consistency_all, pairs_for
from ragrig.judge.external import ExternalCheck
from ragrig.judge.overlap import OverlapJudge
from ragrig.judge.step import consistency_fields
from ragrig.report.answer_summary import consistency_lines
from ragrig.report.answers import external_summary, semantic_consistency_summary

# Meaning by hand: texts naming the same drug entail each other; "lower" and "reduce" are one
MEANING = {"A": "aspirin", "B": "aspirin", "C": "ibuprofen", "D": "aspirin", "E": "placebo"}


def stub(pairs):
    """P(support) 0.9 when claim and evidence name the same drug, else 0.1; one-way for 'D',
    which the others do not support (a more specific answer)."""
    out = []
    for claim, evidence in pairs:
        same = MEANING[claim[0]] == MEANING[evidence[0]]
        ps = 0.9 if same and not claim.startswith("D") else 0.1
        out.append((ps, 0.0))
    return out


def test_clusters_agreement_and_entropy_on_hand_made_samples():
    calls = []

    def counted(pairs):
        calls.append(len(pairs))
        return stub(pairs)

    [c] = consistency_all(
        [("A1 aspirin", ["B1 aspirin", "C1 ibuprofen", "D1 aspirin", "a1  ASPIRIN", None])],
        counted,
        0.5,
    )
    # A, B, and A's refolded copy together; C alone; D alone (A does not support D)
    assert c.labels == (0, 0, 1, 2, 0)
    assert (c.agreement, c.clusters, c.samples, c.failed) == (0.5, 3, 4, 1)
    assert c.entropy == pytest.approx(-(0.6 * math.log(0.6) + 2 * 0.2 * math.log(0.2)))
    assert not c.identical
    assert calls == [12]  # 4 distinct texts: 12 ordered pairs, read once


def test_bad_samples_all_failed_identical_and_no_samples():
    read = []
    out = consistency_all(
        [
            ("A1 aspirin", [None, None, "  "]),  # every sample failed or blank
            ("A1 aspirin", ["A1 aspirin", "a1 aspirin"]),  # the same text every time
            ("A1 aspirin", []),
        ],
        lambda pairs: read.append(pairs) or stub(pairs),
        0.5,
    )
    assert [(c.agreement, c.clusters, c.failed) for c in out] == [
        (None, 0, 3),
        (1.0, 1, 0),
        (None, 0, 0),
    ]
    assert out[1].identical and out[1].entropy == 0.0
    assert read == []  # nothing to read: the verifier is never loaded
    assert pairs_for("x", ["x", None]) == []


def _gens(samples):
    return pd.DataFrame(
        {
            "qid": [f"q{i}" for i in range(len(samples))],
            "status": ["ok"] * len(samples),
            "answer": ["A1 aspirin"] * len(samples),
            "samples": [json.dumps(s) for s in samples],
        }
    )


def _judgments(fields, n):
    rows = []
    for i in range(n):
        f = {
            "self_consistency": None,
            "consistency_clusters": 0,
            "consistency_entropy": None,
            "consistency_samples": 0,
            "consistency_failed": 0,
            "consistency_identical": False,
            "consistency_ms": 0.0,
            **fields.get(f"q{i}", {}),
        }
        rows.append({"qid": f"q{i}", **f})
    return pd.DataFrame(rows)


def test_report_lists_low_agreement_and_counts_bad_inputs_without_nan():
    gens = _gens(
        [
            ["B1 aspirin", "B2 aspirin"],  # agreement 1
            ["C1 ibuprofen", "E1 placebo"],  # agreement 0: listed
            [None, None],  # all failed
            ["A1 aspirin", "A1 aspirin"],  # identical
            [],  # no samples: not counted
        ]
    )
    fields = consistency_fields(gens, stub, 0.5)
    assert sorted(fields) == ["q0", "q1", "q2", "q3"]
    m = semantic_consistency_summary(_judgments(fields, 5))
    assert (m["n"], m["mean"], m["all_samples_failed"], m["identical_samples"]) == (
        3,
        pytest.approx(2 / 3),
        1,
        1,
    )
    assert m["mean_clusters"] == pytest.approx(5 / 3)
    assert m["review"] == [{"qid": "q1", "agreement": 0.0, "clusters": 3}]
    lines = "\n".join(consistency_lines(m))
    assert "not measured for 1 answers: every sample failed" in lines
    assert "1 answers have samples identical to the answer" in lines
    assert "review: q1 (0.00, 3 clusters)" in lines
    # every sample failed everywhere: no mean, never NaN
    none = semantic_consistency_summary(
        _judgments(consistency_fields(_gens([[None]]), stub, 0.5), 1)
    )
    assert (none["n"], none["mean"], none["all_samples_failed"]) == (0, None, 1)


CORPUS = [
    ("d1", "Aspirin reduces fever in adults. It was given at 300 mg daily."),
    ("d2", "Vitamin D does not prevent fractures in older women."),
    ("d3", "Coffee contains caffeine."),
]


def _search(texts, k):
    # rows of the chunks sharing a word with the text, in corpus order
    return [
        [i for i, (_, t) in enumerate(CORPUS) if set(q.lower().split()) & set(t.lower().split())][
            :k
        ]
        for q in texts
    ]


def read_stub(pairs):
    out = []
    for claim, evidence in pairs:
        if "not" in evidence and "not" not in claim:
            out.append((0.05, 0.9))  # the corpus negates it
        elif set(claim.lower().split()) <= set(evidence.lower().rstrip(".").lower().split()):
            out.append((0.95, 0.01))
        else:
            out.append((0.2, 0.1))
    return out


def _check(**kw):
    return ExternalCheck(
        _search,
        [t for _, t in CORPUS],
        [d for d, _ in CORPUS],
        read_stub,
        k=2,
        window=1,
        windows_per_claim=2,
        **kw,
    )


def test_claims_against_the_corpus_supported_contradicted_and_silent():
    judge = OverlapJudge()
    answer = (
        "Aspirin reduces fever in adults. Vitamin D prevents fractures in older women. "
        "It was given at 500 mg daily. Unicorns sing loudly tonight."
    )
    [e] = _check().check_all([judge.claim_set("", answer)])
    got = [(c.supported, c.contradicted, c.kind, c.doc_ids) for c in e.claims]
    assert got == [
        (True, False, "", ("d1",)),
        (False, True, "verifier", ("d2",)),
        (False, True, "number", ("d1",)),  # 500 absent where the claim's other words are
        (False, False, "", ()),  # the corpus is silent: not supported, not flagged
    ]
    assert (e.value, e.supported, e.contradicted) == (0.25, 1, 2)
    record = e.record()
    assert record[1]["p_contradict"] == 0.9 and record[2]["evidence"] == "number: 500"


def test_a_swapped_name_another_retrieved_document_mentions_is_flagged_against_the_source():
    """The name is checked where the claim's other words are (Curie's chunk), not in every
    retrieved chunk: Einstein's own document is retrieved too, and names him."""
    corpus = [
        ("curie", "Radium and polonium were discovered by Marie Curie in Paris."),
        ("einstein", "Albert Einstein lectured in Paris on relativity."),
    ]

    def search(texts, k):
        return [[0, 1][:k] for _ in texts]

    check = ExternalCheck(
        search, [t for _, t in corpus], [d for d, _ in corpus], read_stub, k=2, window=1
    )
    judge = OverlapJudge()
    swapped, original = check.check_all(
        [
            judge.claim_set("", "Radium and polonium were discovered by Albert Einstein in Paris."),
            judge.claim_set("", "Radium and polonium were discovered by Marie Curie in Paris."),
        ]
    )
    [c] = swapped.claims
    assert (c.contradicted, c.kind, c.doc_ids, c.evidence) == (
        True,
        "entity",
        ("curie",),
        "entity: Albert Einstein",
    )
    [c] = original.claims
    assert (c.supported, c.contradicted, c.doc_ids) == (True, False, ("curie",))


def test_external_bad_inputs_empty_corpus_and_no_claims():
    judge = OverlapJudge()
    empty = ExternalCheck(_search, [], [], read_stub)
    assert [e.value for e in empty.check_all([judge.claim_set("", "Aspirin reduces fever.")])] == [
        None
    ]
    assert [e.value for e in _check().check_all([judge.claim_set("", "")])] == [None]
    jd = pd.DataFrame(
        {
            "qid": ["q1", "q2"],
            "external_consistency": [0.5, None],
            "external_claims": [2, 0],
            "external_supported": [1, 0],
            "external_contradicted": [1, 0],
            "external_checks": [
                json.dumps(
                    [
                        {"claim": "a", "contradicted": False, "kind": "", "doc_ids": ["d1"]},
                        {"claim": "b", "contradicted": True, "kind": "number", "doc_ids": ["d1"]},
                    ]
                ),
                "[]",
            ],
            "external_ms": [10.0, 0.0],
        }
    )
    s = external_summary(jd)
    assert (s["n"], s["mean"], s["claims"], s["contradicted"]) == (1, 0.5, 2, 1)
    assert s["flagged"] == [{"qid": "q1", "claim": "b", "kind": "number", "doc_ids": ["d1"]}]
    assert external_summary(jd.assign(external_claims=0)) is None


def test_the_shipped_verifier_clusters_by_meaning(shipped):
    [c] = consistency_all(
        [
            (
                "SUPPORTED. Aspirin reduces fever in most adults within a few hours.",
                [
                    "SUPPORTED. Aspirin reduces fever in most adults within a few hours.",
                    "CONTRADICTED. Aspirin does not reduce fever.",
                ],
            )
        ],
        shipped.readings,
        0.5,
    )
    assert (c.labels, c.agreement, c.clusters) == ((0, 0, 1), 0.5, 2)


@pytest.fixture(scope="module")
def shipped():
    from ragrig.judge.confirm import shared_verifier

    return shared_verifier("shipped", 192, 32, 2, "none")
