"""conf/ composed into params.yaml, and what the sections require of each other."""
