"""Exception types raised at ragrig's boundaries."""

from __future__ import annotations


class RagrigError(Exception):
    """Base class for errors ragrig reports to the user (non-zero exit, clear message)."""


class DataValidationError(RagrigError):
    """Input data violates the contract (malformed lines, duplicate or unknown ids, empty texts)."""


class SchemaError(RagrigError):
    """A table passed between stages does not match its column contract."""


class ConfigError(RagrigError):
    """A config section does not validate."""


class ServiceError(RagrigError):
    """A service ragrig starts or reaches (the MLflow server) is unavailable."""


class ArtifactError(RagrigError):
    """A stage output could not be written (a full disk), or one read back is corrupt, not of
    its kind, or no longer the bytes its stage recorded."""
