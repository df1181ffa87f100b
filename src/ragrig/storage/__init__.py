"""The shared DVC run-cache on S3."""
