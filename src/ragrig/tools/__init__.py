"""Offline studies: compare runs, tune the first stage, calibrate the judge, the release gate."""
