"""One whole-stage progress bar per stage, with rate and ETA, on stderr.

Each long stage counts its natural unit over the whole stage (parse: documents, embed: texts
encoded, index: vectors, retrieve / rerank: queries, generate: answers, judge: answers) with
one `bar(...)`. The bar is drawn only when stderr is a terminal, so DVC's captured logs, sweeps
and tests stay quiet; `RAGRIG_PROGRESS=1` forces it on (e.g. piped to a log you tail),
`RAGRIG_PROGRESS=0` off.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable, Iterator
from typing import IO, Any, TypeVar

ENV = "RAGRIG_PROGRESS"
T = TypeVar("T")


def enabled(stream: IO[str] | None = None) -> bool:
    """RAGRIG_PROGRESS=1/0 decides; unset (or anything else), a bar only on a terminal."""
    value = os.environ.get(ENV, "").strip().lower()
    if value in ("1", "true", "yes", "on"):
        return True
    if value in ("0", "false", "no", "off"):
        return False
    stream = sys.stderr if stream is None else stream
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())


class Bar:
    """A counter over `total` units: `update(n)`, `note(text)`; a no-op when disabled."""

    def __init__(
        self,
        desc: str,
        total: int | None,
        unit: str,
        stream: IO[str] | None = None,
        on: bool = True,
    ):
        self.count = 0
        self.total = total
        self._tqdm: Any = None
        if on and enabled(stream):  # on=False: never drawn (a caller asked for no progress)
            from tqdm import tqdm

            self._tqdm = tqdm(
                total=total,
                desc=desc,
                unit=" " + unit,
                file=sys.stderr if stream is None else stream,
                dynamic_ncols=True,
                mininterval=0.5,
                smoothing=0.1,
            )

    def update(self, n: int = 1) -> None:
        self.count += n
        if self._tqdm is not None:
            self._tqdm.update(n)

    def note(self, text: str) -> None:
        """A short phase label after the counts (e.g. `bm25` while the sparse index builds)."""
        if self._tqdm is not None:
            self._tqdm.set_postfix_str(text, refresh=True)

    def close(self) -> None:
        if self._tqdm is not None:
            self._tqdm.close()
            self._tqdm = None

    def __enter__(self) -> Bar:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def bar(
    desc: str, total: int | None, unit: str, stream: IO[str] | None = None, on: bool = True
) -> Bar:
    return Bar(desc, total, unit, stream, on)


def track(
    items: Iterable[T],
    desc: str,
    unit: str,
    total: int | None = None,
    stream: IO[str] | None = None,
) -> Iterator[T]:
    """Iterate `items`, one unit each, on a whole-stage bar (total: len(items) if it has one)."""
    if total is None and hasattr(items, "__len__"):
        total = len(items)  # type: ignore[arg-type]
    with Bar(desc, total, unit, stream) as b:
        for item in items:
            yield item
            b.update()
