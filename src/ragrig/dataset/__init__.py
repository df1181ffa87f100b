"""Dataset loading (BEIR layout, SciFact claim files) and verified download."""
