"""`ragrig split`: a BEIR-layout set's judged queries split into parts that do not leak
(grouped by gold document, session and text), versioned; `--mark-development` records the
queries that guided tuning (ragrig.dataset.splits)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any


def parse_parts(text: str) -> dict[str, float]:
    from ragrig.core.errors import DataValidationError

    out: dict[str, float] = {}
    for item in text.split(","):
        name, eq, share = item.strip().partition("=")
        try:
            if not eq:
                raise ValueError
            value = float(share)
        except ValueError:
            raise DataValidationError(
                f"--parts {text!r}: each part is name=share, e.g. development=0.2,release=0.8"
            ) from None
        if name.strip() in out:
            raise DataValidationError(f"--parts {text!r}: part {name.strip()!r} named twice")
        out[name.strip()] = value
    return out


def _read_qids(path: Path) -> list[str]:
    from ragrig.core.errors import DataValidationError

    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise DataValidationError(f"cannot read {path}: {exc}") from None
    qids = [x.strip() for x in lines if x.strip() and not x.startswith("#")]
    if not qids:
        raise DataValidationError(f"{path}: no query id (one per line)")
    return qids


def cmd_split(args: argparse.Namespace) -> int:
    from ragrig.core.errors import DataValidationError, RagrigError
    from ragrig.core.text import counted
    from ragrig.dataset import splits as sp

    root = Path(args.root)
    try:
        if not root.is_dir():
            raise DataValidationError(f"not a dataset folder: {root}")
        if args.mark_development:
            got = sp.mark_development(root, _read_qids(Path(args.mark_development)), args.reason)
            print(
                f"ragrig split: {len(got['added'])} queries marked development in "
                f"{root / sp.LEDGER}"
                + (f" ({got['already']} were already)" if got["already"] else "")
            )
            for part, qids in got["held"].items():
                print(
                    f"ragrig split: qrels/{part}.tsv holds {counted(qids, 'query', 'queries')} "
                    f"now marked: run ragrig split {root} to move them to {sp.DEVELOPMENT}"
                )
            return 0
        rec = sp.split(
            root, args.source, parse_parts(args.parts), args.seed, args.session,
            not args.no_documents,
        )  # fmt: skip
    except RagrigError as exc:
        print(f"ragrig split: error: {exc}", file=sys.stderr)
        return 2
    g = rec["group_by"]
    by = ", ".join(
        ["gold document"] * g["documents"] + [f"session {g['session']!r}"] * bool(g["session"])
        + ["text"]
    )  # fmt: skip
    print(
        f"ragrig split: version {rec['version']} of {root / sp.VERSIONS}: {rec['queries']} "
        f"queries of qrels/{rec['source']}.tsv in {rec['groups']} groups (by {by}; the largest "
        f"{rec['largest_group']}), seed {rec['seed']}; {rec['development_marked']} marked "
        "development"
    )
    print(f"{'part':<14} {'target':>7} {'share':>7} {'queries':>8} {'groups':>7}")
    for name, p in rec["parts"].items():
        print(f"{name:<14} {p['target']:>7.3f} {p['share']:>7.3f} {p['queries']:>8} "
              f"{p['groups']:>7}")  # fmt: skip
    leaks = rec["leaks"]
    print(
        "leak checks on what was written: groups in two parts "
        f"{leaks['groups_in_two_parts']}, gold documents {leaks['documents']}, sessions "
        f"{leaks['sessions']}, texts {leaks['texts']}"
    )
    print(f"ragrig split: read a part with dataset.root={root} dataset.split=<part>")
    return 0


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "split",
        help="split a BEIR set's judged queries into development / calibration / release / "
        "monitoring parts grouped so nothing leaks, versioned; or mark queries development",
    )
    p.add_argument("root", help="the BEIR-layout dataset folder (queries.jsonl, qrels/)")
    p.add_argument("--from", dest="source", default="test", help="the split to divide")
    p.add_argument(
        "--parts",
        default="development=0.2,calibration=0.2,release=0.4,monitoring=0.2",
        help="name=share,... (shares sum to 1)",
    )
    p.add_argument("--seed", type=int, default=13)
    p.add_argument("--session", default=None, help="a queries metadata field: the session")
    p.add_argument(
        "--no-documents",
        action="store_true",
        help="do not group queries that share a gold document",
    )
    p.add_argument(
        "--mark-development",
        default=None,
        metavar="FILE",
        help="instead: query ids (one per line) that guided tuning, added to development.jsonl",
    )
    p.add_argument("--reason", default="", help="with --mark-development: what they tuned")
    p.set_defaults(func=cmd_split)
