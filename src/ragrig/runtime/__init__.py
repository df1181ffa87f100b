"""The process a stage runs in: the wrapper kit, bounded calls, signals, install guards."""
