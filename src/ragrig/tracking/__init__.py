"""MLflow: store URIs, one run's contents, logging, the UI server, a local PostgreSQL."""
