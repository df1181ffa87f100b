"""Packaged models located and fingerprinted, and the precision they run in."""
