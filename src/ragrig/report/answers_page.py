"""The answers page (`reports/run/answers.html`): each answer beside its passages, with its
claims marked and, for an unfaithful one, the deciding claim, its verdict and the evidence read.

Every answer shows the judge's decision (`judged_faithful`), its failure mode and answer-level
score, its claims marked supported / contradicted / not addressed with P(support) where the judge
gives one (ragrig.metrics.reasons), and the passages the generator saw (generations `contexts`),
the evidence window marked in them where the verifier read one. The page filters by verdict,
failure mode and slice value with radio inputs and CSS `:has()` rules alone: like the scorecard
it runs no script and fetches nothing, and a CSS counter says how many answers the filters
leave. A run may hold thousands of answers: at most `limit` are rendered, unfaithful first, then
undecided, then faithful, and the page says how many of how many.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Collection, Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from ragrig.core.io import atomic_write_text
from ragrig.core.schemas import FAILURE_MODES
from ragrig.metrics.aggregate import slice_value_key
from ragrig.metrics.reasons import (
    NO_EVIDENCE,
    Reason,
    claim_marks,
    deciding,
    verdict_words,
)
from ragrig.report.html import esc, fmt_score, note, page

# enough to read a run's failures in one page without a multi-megabyte file: every passage of
# every rendered answer is on it
MAX_ANSWERS = 200
UNFAITHFUL, UNDECIDED, FAITHFUL = "unfaithful", "undecided", "faithful"
VERDICTS = (UNFAITHFUL, UNDECIDED, FAITHFUL)
NAME = "answers.html"

ANSWERS_STYLE = """
.filters{position:sticky;top:0;background:#fff;border-bottom:1px solid #d8dce4;padding:6px 0;z-index:1}
.filters fieldset{display:inline-block;border:1px solid #d8dce4;border-radius:6px;margin:2px 6px 2px 0;
padding:2px 8px;font-size:.9em;vertical-align:top}
.filters legend{color:#5a6272;font-size:.85em}.filters label{margin-right:8px;white-space:nowrap}
.answers{counter-reset:shown}
.answer{counter-increment:shown;border:1px solid #d8dce4;border-radius:8px;margin:12px 0;padding:8px 12px}
.answer.v-unfaithful{border-left:5px solid #c62828}.answer.v-faithful{border-left:5px solid #2e7d32}
.answer.v-undecided{border-left:5px solid #6b7280}
.answer header{font-size:.9em;color:#5a6272}.answer header b{color:#1d2330}
.tag{display:inline-block;padding:1px 8px;border-radius:10px;color:#fff;font-weight:600;margin-left:6px}
.tag.unfaithful{background:#c62828}.tag.faithful{background:#2e7d32}.tag.undecided{background:#6b7280}
.tag.mode{background:#8a4b08}
.text{white-space:pre-wrap;margin:4px 0}
.why{background:#fdecec;border-radius:6px;padding:6px 10px;margin:6px 0}
.cols{display:grid;grid-template-columns:1fr 1fr;gap:12px}
.cols h4{margin:6px 0 2px;font-size:.95em}
ol.claims li,ol.passages li{margin:2px 0}
ol.passages{max-height:24em;overflow-y:auto}
.mark{display:inline-block;font-size:.8em;font-weight:600;padding:0 6px;border-radius:8px;color:#fff}
.c-supported .mark{background:#2e7d32}.c-contradicted .mark{background:#c62828}
.c-not_addressed .mark{background:#c77700}
li.deciding{outline:2px solid #c62828;outline-offset:2px}
.p{color:#5a6272;font-size:.85em}.finding{color:#8a1c1c;font-size:.85em;display:block}
mark{background:#ffe08a}
#shown{position:fixed;bottom:8px;right:12px;background:#1d2330;color:#fff;padding:4px 10px;
border-radius:12px;font-size:.9em}
#shown::after{content:counter(shown)}
"""


def verdict_of(status: str, judged_faithful: Any) -> str:
    """unfaithful / faithful by the judge's decision; undecided for any other answer (no
    claims, a refusal, a judge or generation failure)."""
    if status != "scored" or judged_faithful is None or judged_faithful != judged_faithful:
        return UNDECIDED
    return FAITHFUL if judged_faithful >= 0.5 else UNFAITHFUL


def _slice_table(slices: pd.DataFrame | None) -> tuple[list[str], dict[str, dict[str, str]]]:
    """(slice names, qid -> {name: value}) from a table of qid and one column per slice."""
    if slices is None or not len(slices):
        return [], {}
    names = [c for c in slices.columns if c not in ("qid", "measure", "value")]
    table = slices.drop_duplicates("qid").set_index("qid")
    out = {
        str(q): {n: str(v) for n, v in row.items() if n in names and v == v and v is not None}
        for q, row in table.iterrows()
    }
    return names, out


def _highlight(passage: str, evidence: str | None) -> str:
    """The passage escaped, the evidence window marked where it occurs (whitespace may differ:
    the window's sentences were joined by single spaces)."""
    if evidence:
        words = evidence.split()
        m = re.search(r"\s+".join(map(re.escape, words)), passage) if words else None
        if m:
            return (
                esc(passage[: m.start()])
                + f"<mark>{esc(m.group(0))}</mark>"
                + esc(passage[m.end() :])
            )
    return esc(passage)


def _why(reason: Reason | None) -> str:
    if reason is None:
        return ""
    parts = [f"<b>why unfaithful</b> ({esc(reason.failure_mode)}): "]
    if reason.claim is None:
        parts.append(esc(reason.text().partition(": ")[2]))
    else:
        lead = "weakest claim" if reason.failure_mode == "overgeneralisation" else "deciding claim"
        parts.append(f'{lead} &ldquo;<span class="claim">{esc(reason.claim)}</span>&rdquo;, ')
        parts.append(f'<span class="verdict">{esc(verdict_words(reason.mark or ""))}</span>')
        if reason.p_supported is not None:
            parts.append(f", P(support) {reason.p_supported:.3f}")
        if reason.finding is not None:
            parts.append(f'; <span class="reading">{esc(reason.finding.reading)}</span>')
        ev = reason.evidence
        parts.append(
            f'<br>evidence read: &ldquo;<span class="evidence">{esc(ev)}</span>&rdquo;'
            if ev
            else f'<br><span class="evidence none">{NO_EVIDENCE}</span>'
        )
    return '<div class="why">' + "".join(parts) + "</div>"


def _claims(marks: list, reason: Reason | None) -> str:
    if not marks:
        return note("no claims")
    rows = []
    for m in marks:
        cls = f"c-{m.mark}" + (" deciding" if reason and m.claim == reason.claim else "")
        p = (
            f' <span class="p">P(support) {m.p_supported:.3f}</span>'
            if m.p_supported is not None
            else ""
        )
        found = "".join(f'<span class="finding">{esc(f.reading)}</span>' for f in m.findings)
        rows.append(
            f'<li class="{cls}"><span class="mark">{esc(verdict_words(m.mark))}</span> '
            f"{esc(m.claim)}{p}{found}</li>"
        )
    return '<ol class="claims">' + "".join(rows) + "</ol>"


def _answer(item: Mapping[str, Any], modes: dict[str, int], values: dict[tuple, int]) -> str:
    classes = [f"v-{item['verdict']}"]
    if item["mode"]:
        classes.append(f"m-{modes[item['mode']]}")
    classes += [f"s-{values[(n, v)]}" for n, v in item["slices"].items()]
    j = item["judgment"]
    marks = claim_marks(j.get("claims"), j.get("contradictions"))
    reason = item["reason"]
    ev = reason.evidence if reason is not None else None
    head = [
        f"<b>{esc(item['qid'])}</b>",
        f'<span class="tag {item["verdict"]}">{item["verdict"]}</span>',
    ]
    if item["mode"]:
        head.append(f'<span class="tag mode">{esc(item["mode"])}</span>')
    head.append(f"judge {esc(j.get('status', 'none'))}")
    if j.get("answer_support") is not None and j.get("answer_support") == j.get("answer_support"):
        head.append(f"answer support {fmt_score(j['answer_support'])}")
    if marks:
        n_sup = sum(m.mark == "supported" for m in marks)
        head.append(f"{n_sup} of {len(marks)} claims supported")
    head += [f"{esc(n)} = {esc(v)}" for n, v in item["slices"].items()]
    passages = item["passages"]
    g = item["generation"]
    answer = (
        f'<p class="text answer-text">{esc(g["answer"])}</p>'
        if str(g.get("status")) == "ok" or str(g.get("answer", "")).strip()
        else note(f"no answer: generation {g.get('status')} {g.get('error', '')}".strip())
    )
    return (
        f'<article class="answer {" ".join(classes)}" id="a-{esc(item["qid"])}">'
        f"<header>{' &middot; '.join(head)}</header>"
        f'<p class="text question"><b>Q:</b> {esc(item["question"])}</p>{answer}'
        f"{_why(reason)}"
        f'<div class="cols"><div><h4>claims</h4>{_claims(marks, reason)}</div>'
        f"<div><h4>passages the generator saw ({len(passages)})</h4>"
        + (
            '<ol class="passages">'
            + "".join(f'<li class="text">{_highlight(p, ev)}</li>' for p in passages)
            + "</ol>"
            if passages
            else note("none")
        )
        + "</div></div></article>"
    )


def _radios(group: str, title: str, options: list[tuple[str, str, int]], total: int) -> str:
    """A fieldset of radio inputs: `all` checked, then (id suffix, label, count) per option."""
    out = [
        f'<fieldset id="{group}"><legend>{esc(title)}</legend>'
        f'<label><input type="radio" name="{group}" id="{group}-all" checked> all ({total})</label>'
    ]
    out += [
        f'<label><input type="radio" name="{group}" id="{group}-{key}"> {esc(label)} ({n})</label>'
        for key, label, n in options
    ]
    return "".join(out) + "</fieldset>"


def _items(
    queries: pd.DataFrame,
    generations: pd.DataFrame,
    judgments: pd.DataFrame,
    slices: dict[str, dict[str, str]],
    veto: Collection[str] | None,
) -> list[dict[str, Any]]:
    question = dict(zip(queries["qid"].astype(str), queries["text"], strict=True))
    judged = {str(r["qid"]): r for r in judgments.to_dict("records")}
    items = []
    for g in generations.to_dict("records"):
        qid = str(g["qid"])
        j = judged.get(qid, {})
        verdict = verdict_of(str(j.get("status", "")), j.get("judged_faithful"))
        mode = str(j.get("failure_mode") or "") if verdict == UNFAITHFUL else ""
        items.append(
            {
                "qid": qid,
                "question": str(question.get(qid, "")),
                "generation": g,
                "judgment": j,
                "passages": [str(p) for p in json.loads(g.get("contexts") or "[]")],
                "verdict": verdict,
                "mode": mode,
                "reason": (
                    deciding(j.get("claims"), j.get("contradictions"), mode, veto) if mode else None
                ),
                "slices": slices.get(qid, {}),
            }
        )
    # unfaithful first, then undecided, then faithful; the generations' order within each
    order = {v: i for i, v in enumerate(VERDICTS)}
    return sorted(items, key=lambda it: order[it["verdict"]])


def answers_page_html(
    queries: pd.DataFrame,
    generations: pd.DataFrame,
    judgments: pd.DataFrame,
    slices: pd.DataFrame | None = None,
    veto: Collection[str] | None = None,
    limit: int = MAX_ANSWERS,
    back: str | None = None,
) -> str:
    """The answers page as a string. `slices`: qid and one column per slice (the report's
    per-query table serves: its measure and value columns are ignored); `veto`: the judge's
    vetoed kinds (data/judge/manifest.json); `back`: the scorecard's address, for a link."""
    names, by_qid = _slice_table(slices)
    items = _items(queries, generations, judgments, by_qid, veto)
    shown = items[:limit]
    in_all = Counter(it["verdict"] for it in items)
    verdicts = Counter(it["verdict"] for it in shown)
    mode_count = Counter(it["mode"] for it in shown if it["mode"])
    mode_order = [m for m in FAILURE_MODES if m in mode_count] + sorted(
        m for m in mode_count if m not in FAILURE_MODES
    )
    modes = {m: i for i, m in enumerate(mode_order)}
    value_count = Counter((n, v) for it in shown for n, v in it["slices"].items())
    keys = sorted(value_count, key=lambda nv: (names.index(nv[0]), slice_value_key(nv[1])))
    values = {nv: i for i, nv in enumerate(keys)}
    rules = [f"body:has(#fv-{v}:checked) .answer:not(.v-{v}){{display:none}}" for v in VERDICTS]
    rules += [
        f"body:has(#fm-{i}:checked) .answer:not(.m-{i}){{display:none}}" for i in modes.values()
    ]
    rules += [
        f"body:has(#fs-{i}:checked) .answer:not(.s-{i}){{display:none}}" for i in values.values()
    ]
    body = ["<h1>ragrig answers</h1>"]
    if back:
        body.append(f'<p class="sub"><a href="{esc(back)}">back to the run scorecard</a></p>')
    body.append(
        f'<p class="sub" id="answers-count">{len(shown)} of {len(items)} answers shown'
        + (
            f" (at most {limit}: unfaithful first, then undecided, then faithful)"
            if len(shown) < len(items)
            else ""
        )
        + "; in all "
        + ", ".join(f"{in_all[v]} {v}" for v in VERDICTS)
        + "</p>"
    )
    filters = [
        _radios("fv", "verdict", [(v, v, verdicts[v]) for v in VERDICTS], len(shown)),
        _radios(
            "fm", "failure mode", [(str(i), m, mode_count[m]) for m, i in modes.items()], len(shown)
        ),
    ]
    if values:
        filters.append(
            _radios(
                "fs",
                "slice",
                [(str(i), f"{n} = {v}", value_count[(n, v)]) for (n, v), i in values.items()],
                len(shown),
            )
        )
    body.append('<div class="filters">' + "".join(filters) + "</div>")
    body.append(
        '<div class="answers">'
        + "".join(_answer(it, modes, values) for it in shown)
        + '</div><p id="shown">shown: </p>'
    )
    return page("ragrig answers", body, ANSWERS_STYLE + "\n".join(rules))


def write_answers_page(
    out: Path,
    queries: pd.DataFrame,
    generations: pd.DataFrame,
    judgments: pd.DataFrame,
    slices: pd.DataFrame | None = None,
    veto: Collection[str] | None = None,
    limit: int = MAX_ANSWERS,
    back: str | None = None,
) -> Path:
    """Write the answers page (answers_page_html) to `out` atomically and return it."""
    text = answers_page_html(queries, generations, judgments, slices, veto, limit, back)
    atomic_write_text(Path(out), text)
    return Path(out)


def scorecard_section(judgments: pd.DataFrame, href: str) -> str:
    """The run scorecard's pointer to the answers page: how many answers it holds, by verdict
    and failure mode."""
    verdicts = Counter(
        verdict_of(str(s), f)
        for s, f in zip(judgments["status"], judgments["judged_faithful"], strict=True)
    )
    modes = Counter(m for m in judgments["failure_mode"] if m)
    text = ", ".join(f"{verdicts[v]} {v}" for v in VERDICTS)
    if modes:
        text += " (" + ", ".join(f"{m} {n}" for m, n in sorted(modes.items())) + ")"
    return (
        '<h2>Answers</h2><p id="answers-link">'
        f'<a href="{esc(href)}">each answer with its claims, passages and the judge&rsquo;s '
        f"reasons</a>: {esc(text)}</p>"
    )


def slice_columns(per_query: pd.DataFrame | None, names: Sequence[str]) -> pd.DataFrame | None:
    """qid and the slice columns `names` of the report's per-query table."""
    if per_query is None:
        return None
    cols = ["qid", *(n for n in names if n in per_query.columns)]
    return per_query[cols].drop_duplicates("qid")
