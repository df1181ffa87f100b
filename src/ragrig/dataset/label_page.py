"""The self-contained HTML page for rating a label sample (`ragrig label`): no server, no
network; the sample is embedded in the page.

Per answer: the question, the answer, the passages the generator saw (folded), the judge's
verdict (hidden until asked for, so that it does not anchor the rating), a faithful / unfaithful
choice and an optional note. Ratings are kept in the browser's localStorage under the sample's
id while rating, and "Save labels" downloads them as `labels.jsonl` in the labels-file format
(ragrig.dataset.labels) and shows the same lines in a text box, for copying where downloads are blocked.
Only rated answers are written.

With `review=True` (`ragrig label --queue`: the review queue of `ragrig traces`), each passage
also has a "relevant" box and each answer a box for the reviewer's corrected answer, and "Save"
downloads `reviews.jsonl` (ragrig.dataset.golden's reviews format: the rating, the ids of the
passages marked relevant, the corrected answer and the note).
"""

from __future__ import annotations

import html
import json
from pathlib import Path
from typing import Any

from ragrig.core.io import atomic_write_text

_STYLE = """
body{font:15px/1.45 system-ui,sans-serif;max-width:60rem;margin:1.5rem auto;padding:0 1rem;color:#222}
h1{font-size:1.4rem} .item{border:1px solid #ccc;border-radius:6px;padding:.8rem 1rem;margin:1rem 0}
.item.rated{border-color:#4a8} .q{font-weight:600} .a{background:#f6f6f6;padding:.5rem;margin:.5rem 0;
white-space:pre-wrap} details{margin:.3rem 0} .p{white-space:pre-wrap;font-size:13px;border-left:3px
solid #ddd;padding-left:.5rem;margin:.3rem 0} label{margin-right:1rem} textarea{width:100%}
#bar{position:sticky;top:0;background:#fff;padding:.5rem 0;border-bottom:1px solid #ddd}
"""

_SCRIPT = """
const SAMPLE = JSON.parse(document.getElementById('sample').textContent);
const KEY = 'ragrig-labels-' + SAMPLE.id;
const saved = JSON.parse(localStorage.getItem(KEY) || '{}');
function marked(item) {
  return Array.from(document.querySelectorAll(`input[name="rel-${item.i}"]:checked`))
    .map(b => b.value);
}
function ratings() {
  const out = {};
  for (const item of SAMPLE.items) {
    const r = document.querySelector(`input[name="r-${item.i}"]:checked`);
    const note = document.getElementById(`n-${item.i}`).value;
    if (!r) continue;
    out[item.qid] = {rating: r.value, note: note};
    if (SAMPLE.review) {
      out[item.qid].relevant = marked(item);
      out[item.qid].corrected_answer = document.getElementById(`c-${item.i}`).value;
    }
  }
  return out;
}
function lines() {
  const r = ratings();
  return SAMPLE.items.filter(it => r[it.qid]).map(it => JSON.stringify(SAMPLE.review ? {
    id: it.qid, answer_sha256: it.answer_sha256, rating: r[it.qid].rating,
    relevant: r[it.qid].relevant, corrected_answer: r[it.qid].corrected_answer,
    note: r[it.qid].note} : {
    qid: it.qid, answer_sha256: it.answer_sha256, rating: r[it.qid].rating,
    note: r[it.qid].note}));
}
function refresh() {
  const r = ratings();
  localStorage.setItem(KEY, JSON.stringify(r));
  for (const item of SAMPLE.items)
    document.getElementById(`item-${item.i}`).classList.toggle('rated', !!r[item.qid]);
  document.getElementById('count').textContent = Object.keys(r).length;
}
function save() {
  const text = lines().join('\\n') + '\\n';
  document.getElementById('out').value = text;
  const a = document.createElement('a');
  a.href = URL.createObjectURL(new Blob([text], {type: 'application/x-ndjson'}));
  a.download = SAMPLE.file;
  a.click();
}
for (const item of SAMPLE.items) {
  const s = saved[item.qid];
  if (s) {
    const r = document.querySelector(`input[name="r-${item.i}"][value="${s.rating}"]`);
    if (r) r.checked = true;
    document.getElementById(`n-${item.i}`).value = s.note || '';
    if (SAMPLE.review) {
      for (const id of s.relevant || []) {
        const b = Array.from(document.querySelectorAll(`input[name="rel-${item.i}"]`))
          .find(x => x.value === id);
        if (b) b.checked = true;
      }
      document.getElementById(`c-${item.i}`).value = s.corrected_answer || '';
    }
  }
}
document.body.addEventListener('change', refresh);
document.body.addEventListener('input', refresh);
document.getElementById('save').addEventListener('click', save);
refresh();
"""


def _verdict(it: dict[str, Any]) -> str:
    judge = it.get("judge")
    if not judge:
        return "not judged"
    decision = judge.get("judged_faithful")
    verdict = (
        f"judged {'faithful' if decision == 1 else 'unfaithful'}"
        if decision is not None
        else "undecided"
    )
    score = judge.get("answer_support", judge.get("faithfulness"))
    out = f"{verdict}; score {score}; failure mode: {judge.get('failure_mode') or 'none'}"
    if it.get("reasons"):
        out += f"; queued: {', '.join(it['reasons'])}"
    return out


def _passages(i: int, it: dict[str, Any], review: bool) -> str:
    e = html.escape
    if not review:
        return "".join(f'<div class="p">{e(p)}</div>' for p in it["passages"])
    return "".join(
        f'<div class="p"><label><input type="checkbox" name="rel-{i}" value="{e(pid)}"> '
        f"relevant</label> {e(p)}</div>"
        for pid, p in zip(it["passage_ids"], it["passages"], strict=True)
    )


def _item(i: int, it: dict[str, Any], review: bool = False) -> str:
    e = html.escape
    n = len(it["passages"])
    corrected = (
        f'<textarea id="c-{i}" rows="2" placeholder="corrected answer (optional)"></textarea>'
        if review
        else ""
    )
    return (
        f'<div class="item" id="item-{i}"><div class="q">{i + 1}. {e(it["question"])}</div>'
        f'<div class="a">{e(it["answer"])}</div>'
        f"<details{' open' if review else ''}><summary>passages ({n})</summary>"
        f"{_passages(i, it, review)}</details>"
        f"<details><summary>the judge's verdict</summary>{e(_verdict(it))}</details>"
        f'<label><input type="radio" name="r-{i}" value="faithful"> faithful</label>'
        f'<label><input type="radio" name="r-{i}" value="unfaithful"> unfaithful</label>'
        f"{corrected}"
        f'<textarea id="n-{i}" rows="1" placeholder="note (optional)"></textarea></div>'
    )


def write_label_page(
    path: Path, sample_id: str, items: list[dict[str, Any]], title: str, review: bool = False
) -> None:
    """The rating page of `items` (ragrig.dataset.labels.sample's rows, with question, answer,
    passages, answer_sha256 and judge; with `review`, passage_ids too), written atomically."""
    data = {
        "id": sample_id,
        "review": review,
        "file": "reviews.jsonl" if review else "labels.jsonl",
        "items": [
            {"i": i, "qid": it["qid"], "answer_sha256": it["answer_sha256"]}
            for i, it in enumerate(items)
        ],
    }
    # `</` would end the script element early; JSON allows it escaped
    embedded = json.dumps(data).replace("</", "<\\/")
    body = "".join(_item(i, it, review) for i, it in enumerate(items))
    ask = (
        "Mark the passages that are relevant to the question, and give a corrected answer "
        "when the answer is wrong or incomplete. "
        if review
        else ""
    )
    page = (
        "<!doctype html><html><head><meta charset='utf-8'>"
        f"<title>{html.escape(title)}</title><style>{_STYLE}</style></head><body>"
        f"<h1>{html.escape(title)}</h1>"
        "<p>Rate each answer against the passages shown with it: <b>faithful</b> when every "
        "statement it makes is supported by them, <b>unfaithful</b> when any is not. Ratings "
        f"stay in this browser until saved.</p><p>{ask}</p>"
        f'<div id="bar"><span id="count">0</span> of {len(items)} rated '
        f'<button id="save">Save {"reviews" if review else "labels"}</button></div>'
        f"{body}"
        f"<p>Saved lines ({data['file']}):</p>"
        '<textarea id="out" rows="6" readonly></textarea>'
        f'<script type="application/json" id="sample">{embedded}</script>'
        f"<script>{_SCRIPT}</script></body></html>"
    )
    atomic_write_text(path, page)
