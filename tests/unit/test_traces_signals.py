"""`ragrig traces`'s online axes and feedback signals: the log's sample and signal fields and
their bad values, relevance and correctness computed as the scorecard computes them (each part
named), and each signal per window and against the judged axes with its interval."""

from __future__ import annotations

import json
import math
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

from ragrig.metrics import correctness as corr
from ragrig.metrics.relevance import keyword_overlap, map_similarity
from ragrig.traces.axes import OnlineAxes
from ragrig.traces.config import SignalsConfig
from ragrig.traces.read import UNKNOWN_FOLLOWED, Interaction, Problems, interactions, parse
from ragrig.traces.signals import Signals, WindowSignals, doubt_pattern, spearman_interval

T0 = datetime(2026, 11, 30, tzinfo=UTC)


def _row(i: int, **kw) -> dict:
    return {
        "id": f"x{i}",
        "timestamp": (T0 + timedelta(minutes=i)).isoformat(),
        "question": "How many moons does Mars have?",
        "contexts": [{"id": "d1", "text": "Mars has two moons."}],
        "answer": "Mars has two moons.",
        **kw,
    }


def test_sample_and_signal_fields_read_and_each_bad_value_is_counted_by_reason(tmp_path):
    good = _row(1, samples=["Two.", None], feedback=0, feedback_reason=" Wrong ", copied=True,
                dwell_ms=4200, follows="x0")  # fmt: skip
    rows = [
        good,
        _row(2, samples="Two."),
        _row(3, samples=[1]),
        _row(4, feedback_reason=3),
        _row(5, copied="yes"),
        _row(6, dwell_ms=-1),
        _row(7, follows=True),
        _row(8, contexts=[{"id": "d1", "text": "a"}, "b"]),  # a context without an id
    ]
    path = tmp_path / "t.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    problems = Problems()
    got = [x for _, x in interactions(path, problems)]
    assert [x.id for x in got] == ["x1", "x8"]
    x = got[0]
    assert (x.samples, x.feedback_reason, x.copied, x.dwell_ms, x.follows) == (
        ("Two.", None),
        "wrong",
        True,
        4200.0,
        "x0",
    )
    assert x.context_ids == ("d1",) and got[1].context_ids is None
    assert dict(problems.counts) == {
        "with bad samples (a list of sampled answers: strings, or null for a failed one)": 2,
        "with a bad feedback_reason (a category name)": 1,
        "with a bad copied (true/false, 1/0)": 1,
        "with a bad dwell_ms (a number >= 0)": 1,
        "with a bad follows (the id of an earlier interaction)": 1,
    }
    assert dict(problems.noted) == {UNKNOWN_FOLLOWED: 1}  # x0 is on no earlier line


class _Bag:
    """A deterministic embedder: a vector of letter counts."""

    def encode(self, texts):
        out = np.zeros((len(texts), 26), dtype=np.float32)
        for i, t in enumerate(texts):
            for ch in t.lower():
                if "a" <= ch <= "z":
                    out[i, ord(ch) - 97] += 1
        return out


class _Pair:
    def pair(self):
        return _Bag(), _Bag()


def _agree(pairs):
    """Two texts support each other when they begin with the same word."""
    return [(float(a.split()[0] == b.split()[0]), 0.0) for a, b in pairs]


def _x(i, question, contexts, answer, **kw) -> Interaction:
    got = parse(_row(i, question=question, contexts=contexts, answer=answer, **kw))
    assert isinstance(got, Interaction), got
    return got


def test_relevance_and_correctness_are_the_scorecards_parts_renormalised_and_named():
    from ragrig.report.config import ScorecardConfig

    sc = ScorecardConfig()
    axes = OnlineAxes(
        dict(sc.relevance_weights),
        dict(sc.correctness_surrogate_weights),
        (sc.similarity_range.irrelevant, sc.similarity_range.relevant),
        _Pair(),
        _agree,
        0.5,
    )
    ctx = [{"id": "d1", "text": "Phobos orbits Mars."}, {"id": "d2", "text": "Mars has two moons."}]
    q = "How many moons does Mars have?"
    plain = _x(1, q, ctx, "Mars has two moons.")
    reviewed = _x(2, q, ctx, "Mars has two moons.", gold=["d2"], samples=["Mars has 2.", "Two."])
    refused = _x(3, q, ctx, "I cannot answer that.")
    got = axes.score([plain, reviewed, refused], [False, False, True])

    bag = _Bag().encode([q, *(c["text"] for c in ctx)]).astype(np.float64)
    bag /= np.linalg.norm(bag, axis=1, keepdims=True)
    semantic = map_similarity(float((bag[1:] @ bag[0]).max()), 0.1, 0.6)
    from ragrig.core.text import tokenize

    keyword = keyword_overlap(tokenize([q])[0], [t for c in ctx for t in tokenize([c["text"]])[0]])
    assert got[0].relevance_parts == {"semantic": semantic, "keyword": keyword}
    assert got[0].relevance == pytest.approx((0.25 * semantic + 0.15 * keyword) / 0.4)
    # gold d2 at rank 2 of 2: ranked precision 1/2, recall 1 -> the context part 0.75
    assert got[1].relevance_parts["context"] == 0.75
    assert got[1].relevance == pytest.approx((0.25 * semantic + 0.15 * keyword + 0.3 * 0.75) / 0.7)

    cover, clear = (
        corr.coverage_by_parts(q, "Mars has two moons."),
        corr.clarity("Mars has two moons."),
    )
    assert got[0].correctness_parts == {"coverage": cover, "clarity": clear}
    assert got[0].correctness == pytest.approx((0.25 * cover + 0.2 * clear) / 0.45)
    # samples: "Mars has 2." agrees with the answer, "Two." does not -> agreement 1/2
    assert got[1].correctness_parts["self_consistency"] == 0.5
    assert got[1].correctness == pytest.approx((0.3 * 0.5 + 0.25 * cover + 0.2 * clear) / 0.75)
    assert got[2].correctness_parts["coverage"] == 0.0  # a refusal addresses nothing
    assert axes._semantic([_x(4, q, [], "x")]) == [0.0]  # nothing retrieved: 0, as offline


def test_axes_from_params_read_samples_through_the_judges_verifier(monkeypatch):
    """The command's own wiring: the consistency settings' verifier reads the sample pairs."""
    from pathlib import Path

    import ragrig.judge.confirm as confirm

    class _Verifier:
        def readings(self, pairs):
            return _agree(pairs)

    loaded = []
    monkeypatch.setattr(confirm, "shared_verifier", lambda *a: loaded.append(a) or _Verifier())
    axes = OnlineAxes.from_params(Path(__file__).parents[2] / "params.yaml", semantic=False)
    ctx = [{"id": "d1", "text": "Mars has two moons."}]
    x = _x(1, "How many moons?", ctx, "Mars has two moons.", samples=["Mars has 2.", "Two."])
    (got,) = axes.score([x], [False])
    assert got.correctness_parts["self_consistency"] == 0.5 and len(loaded) == 1
    assert axes.score([_x(2, "q", ctx, "Mars.")], [False])[0].correctness is not None
    assert len(loaded) == 1  # no samples: the verifier is not read again


def test_each_signal_per_window_and_against_the_axes_with_its_interval():
    cfg = SignalsConfig(min_pairs=4)
    signals, window = Signals(cfg), WindowSignals()
    faithful = [1.0] * 5 + [0.0] * 5
    thumbs = [1, 1, 1, 1, 0, 0, 0, 0, 0, 1]
    lines = [
        _x(
            i,
            "Q?",
            ["c"],
            "A.",
            feedback=t,
            feedback_reason=None if t else "wrong",
            copied=i < 3,
            dwell_ms=1000.0 * i,
        )  # fmt: skip
        for i, t in enumerate(thumbs)
    ]
    # the unfaithful five are regenerated; two are doubted, one followed up without doubt
    lines += [_x(10 + i, "Again", ["c"], "A.", regenerates=f"x{i}") for i in range(5, 10)]
    lines += [
        _x(20, "Are you sure?", ["c"], "Yes.", follows="x5"),
        _x(21, "Hmm, is that right", ["c"], "Yes.", follows="x6"),
        _x(22, "Tell me more about it", ["c"], "More.", follows="x0"),
    ]
    for x in lines:
        window.observe(x, signals.doubt)
        signals.line(x)
    for x, f in zip(lines[:10], faithful, strict=True):
        signals.judged(x, {"faithfulness": f, "relevance": None})
    row = window.row()
    assert (row["thumbs"], row["thumbs_up_rate"], row["down_reasons"]) == (10, 0.5, "wrong 5")
    assert row["copy_rate"] == 3 / 10 and row["dwell_p50_ms"] == 4500.0
    assert row["doubt_rate"] == 2 / len(lines)

    t = signals.table(0.95).set_index(["signal", "axis"])
    thumb = t.loc[("thumbs_up", "faithfulness")]
    # 2x2: faithful & up 4, faithful & down 1, unfaithful & up 1, unfaithful & down 4 -> phi 0.6
    assert thumb["spearman"] == pytest.approx(0.6) and thumb["n"] == 10
    se = math.sqrt((1 + 0.18) / 7)
    z = 1.959963984540054
    assert thumb["low"] == pytest.approx(math.tanh(math.atanh(0.6) - z * se))
    assert thumb["high"] == pytest.approx(math.tanh(math.atanh(0.6) + z * se))
    assert not thumb["tracks"]  # its interval holds 0 with ten pairs
    regen = t.loc[("regenerated", "faithfulness")]
    assert regen["spearman"] == pytest.approx(-1.0) and regen["tracks"]
    doubted = t.loc[("doubted", "faithfulness")]
    # doubted & faithful 0, doubted & not 2, neither 5 / 3: phi = -10 / sqrt(2 * 8 * 5 * 5)
    assert doubted["spearman"] == pytest.approx(-0.5) and not doubted["tracks"]
    assert t.loc[("dwell_ms", "faithfulness")]["expected"] == 0
    assert t.loc[("thumbs_up", "relevance")]["note"] == "fewer than 4 pairs"
    few = Signals(SignalsConfig(min_pairs=4))
    for x in lines[:5]:
        few.judged(x, {"faithfulness": 1.0})
    assert few.table(0.95).set_index("signal").loc["thumbs_up", "note"] == "constant: axis"


def test_doubt_patterns_and_the_interval_at_its_limits():
    doubt = doubt_pattern(SignalsConfig().doubt_patterns)
    for q in ("Are you sure?", "is that correct", "That's wrong.", "I don't think so", "really?"):
        assert doubt.search(q), q
    for q in ("Tell me more", "Is the sun a star?", "Really good answer"):
        assert not doubt.search(q), q
    low, high = spearman_interval(1.0, 50, 1.96)
    assert 0.99 < low < high <= 1.0
    with pytest.raises(ValueError, match="not a regular expression"):
        SignalsConfig(doubt_patterns=["(unclosed"])
