"""Secrets out of everything a model or an endpoint sends back, before it is stored or logged.

A server, a proxy or a prompt-injected context can make a model repeat the request's bearer key
in its answer, in a judge's reply or in an error body. Every such text passes through `redact`
first: the configured key values exactly, and anything shaped like an Authorization value, an
api_key value or an `sk-` key.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

REDACTED = "[REDACTED]"
_SECRET_PATTERNS = (
    # an Authorization header or field, whatever its scheme: `Authorization: Bearer x`,
    # `"authorization": "x"`, `authorization=x`
    re.compile(
        r"(\b(?:proxy-)?authorization\b[\"']?\s*[:=]\s*[\"']?)"
        r"(?:(?:bearer|basic|token)\s+)?[^\s\"',;}&]+",
        re.IGNORECASE,
    ),
    # `Bearer <token>`: 8 or more token characters with a digit, a symbol or an inner dot in
    # them, so that prose ("bearer bonds", "bearer instruments.") is left as it is
    re.compile(
        r"(\bbearer\s+)(?=[A-Za-z0-9._~+/=-]{8})"
        r"(?=[A-Za-z0-9._~+/=-]*(?:[0-9_~+/=-]|\.[A-Za-z0-9]))[A-Za-z0-9._~+/=-]+",
        re.IGNORECASE,
    ),
    # api_key / api-key / apikey / x-api-key as a field, header or query parameter
    re.compile(r"(\b(?:x-)?api[_-]?key\b[\"']?\s*[:=]\s*[\"']?)[^\s\"',;}&]+", re.IGNORECASE),
    # OpenAI-style secret keys: sk-..., sk-proj-...
    re.compile(r"()\bsk-[A-Za-z0-9_-]{8,}"),
)


def redact(text: str, secrets: Iterable[str] = ()) -> str:
    """`text` with each exact secret value, and anything shaped like an Authorization value, an
    api_key value or an `sk-` key, replaced by [REDACTED]."""
    for secret in sorted({s for s in secrets if s}, key=len, reverse=True):
        text = text.replace(secret, REDACTED)
    for pattern in _SECRET_PATTERNS:
        text = pattern.sub(rf"\g<1>{REDACTED}", text)
    return text
