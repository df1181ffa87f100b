"""ragrig: a reproducible, cached experiment pipeline for evaluating retrieval-augmented generation."""

from __future__ import annotations

__version__ = "0.1.0"
