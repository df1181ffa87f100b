"""report: per-query long table, slice aggregates, latency quantiles, cost, and metrics.json."""

from ragrig.report.base import Report, ReportInputs
from ragrig.report.step import build_report, query_counts

__all__ = ["Report", "ReportInputs", "build_report", "query_counts"]
