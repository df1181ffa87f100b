"""Metrics: IR measures via ir_measures, aggregation by slice, latency and cost, MLflow keys."""
