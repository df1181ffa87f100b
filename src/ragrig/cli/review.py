"""The review round trip: `ragrig label --queue` (the review page of `ragrig traces`' queue)
and `ragrig golden add` (reviews appended to the versioned golden set,
ragrig.dataset.reviewed)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any


def label_queue(args: argparse.Namespace) -> int:
    """Write the review page of a review queue (reports/traces/review_queue.jsonl)."""
    from ragrig.core.errors import RagrigError
    from ragrig.dataset.label_page import write_label_page
    from ragrig.dataset.reviewed import page_items, read_queue

    queue_path = Path(args.queue)
    out = Path(args.out if args.out != "reports/labels" else "reports/review")
    try:
        queue = read_queue(queue_path)
    except RagrigError as exc:
        print(f"ragrig label: error: {exc}", file=sys.stderr)
        return 2
    out.mkdir(parents=True, exist_ok=True)
    page = out / "review.html"
    import hashlib

    sample_id = hashlib.sha256(queue_path.read_bytes()).hexdigest()[:16]
    write_label_page(
        page, sample_id, page_items(queue), f"Review {len(queue)} interactions", review=True
    )
    splits = {s: sum(it["split"] == s for it in queue.values()) for s in ("release", "monitoring")}
    print(
        f"ragrig label: {len(queue)} queued interactions ({splits['release']} release, "
        f"{splits['monitoring']} monitoring)"
    )
    print(f"  review them in {page} (saves reviews.jsonl); then")
    print(f"  ragrig golden add reviews.jsonl --queue {queue_path}")
    return 0


def cmd_golden_add(args: argparse.Namespace) -> int:
    from ragrig.core.errors import RagrigError
    from ragrig.dataset.reviewed import append

    try:
        s = append(Path(args.reviews), Path(args.queue), Path(args.set))
    except RagrigError as exc:
        print(f"ragrig golden: error: {exc}", file=sys.stderr)
        return 2
    skipped = ", ".join(f"{n} {why}" for why, n in s["skipped"].items()) or "none"
    if s["version"] is None:
        print(f"ragrig golden: {s['set']}: nothing added of {s['reviews']} reviews ({skipped})")
        return 0
    print(
        f"ragrig golden: {s['set']} version {s['version']}: {s['added']['release']} release and "
        f"{s['added']['monitoring']} monitoring queries added of {s['reviews']} reviews, "
        f"{s['new_passages']} new passages; skipped: {skipped}"
    )
    print(
        f"  read it: dvc exp run -S dataset=reviewed -S dataset.root={s['set']} "
        "(split release; monitoring is its own split)"
    )
    return 0


def add_parser(sub: Any) -> None:
    p = sub.add_parser("golden", help="grow the golden set from reviewed interactions")
    g = p.add_subparsers(dest="golden_command", required=True)
    a = g.add_parser(
        "add",
        help="append reviews (the review page's reviews.jsonl) to the versioned golden set",
    )
    a.add_argument("reviews", help="reviews.jsonl saved by the review page")
    a.add_argument("--queue", default="reports/traces/review_queue.jsonl")
    a.add_argument("--set", default="data/golden/reviewed", help="the set's folder")
    a.set_defaults(func=cmd_golden_add)
