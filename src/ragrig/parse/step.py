"""The parse stage's console: the lines of whichever parser ran."""

from __future__ import annotations

from ragrig.parse.base import Parsed
from ragrig.parse.beir import stats_lines


def console_lines(parsed: Parsed) -> list[str]:
    """What the parse stage prints after its counts: the parser's own lines."""
    if parsed.report is not None:
        from ragrig.parse.docling import stats_lines as docling_lines

        return docling_lines(parsed.stats, parsed.report)
    return stats_lines(parsed.stats)
