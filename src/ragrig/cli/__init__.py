"""The only command-line code: `ragrig <verb>` (and `python -m ragrig`)."""

from ragrig.cli.app import build_parser, main

__all__ = ["build_parser", "main"]
