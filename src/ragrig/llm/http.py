"""One chat-completions exchange with an OpenAI-compatible endpoint, bounded in every way.

A server may stall, trickle its body a byte at a time, flood, rate-limit, redirect elsewhere or
answer broken JSON. Each exchange therefore has:
- one overall deadline (`timeout_s`) over connecting, the headers and the whole body: a watchdog
  shuts the socket when it passes (a per-read timeout would let a trickle run for ever);
- a ceiling on the body (`max_response_bytes`), read no further than that;
- no redirect followed to another scheme, host or port (a 307/308 to the same origin is followed,
  at most MAX_REDIRECTS times);
- `Retry-After` of a 429 or 503 read, so the caller's retry loop can honour it (`retry_delay`).

Every failure is one of the error family below, its message naming the URL with secrets
redacted; none carries the request or its headers. Proxies come from the usual environment
variables (HTTP_PROXY, HTTPS_PROXY, NO_PROXY), CA bundles from REQUESTS_CA_BUNDLE or
SSL_CERT_FILE, else certifi's.
"""

from __future__ import annotations

import contextlib
import email.utils
import http.client
import json
import math
import os
import re
import socket
import threading
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import urljoin, urlsplit

from ragrig.core.text import replace_surrogates_in
from ragrig.llm.redact import redact

BODY_CHARS = 300  # of an error response kept in the message, after redaction
MAX_REDIRECTS = 3
READ_CHUNK = 65536
# A usage count above this is not a count (no context holds a billion tokens).
MAX_USAGE_TOKENS = 1_000_000_000


class TransientHTTPError(RuntimeError):
    """HTTP 5xx or a failed connection: worth retrying."""

    retry_after: float | None = None


class RateLimited(TransientHTTPError):
    """HTTP 429: retried after the server's `Retry-After` (`retry_after`, seconds) if it fits."""

    def __init__(self, message: str, retry_after: float | None):
        super().__init__(message)
        self.retry_after = retry_after


class MalformedResponse(RuntimeError):
    """HTTP 200 whose body is not a JSON object."""


class ResponseTooLarge(RuntimeError):
    """A body over `max_response_bytes`: refused, read no further."""


class RedirectRefused(RuntimeError):
    """A redirect to another scheme, host or port (or too many): not followed."""


class CallTimeout(TimeoutError):
    """No complete answer within the exchange's overall deadline."""


@dataclass(frozen=True)
class Reply:
    """A parsed JSON object body; `text` the raw body; `repaired` the lone surrogates of its
    strings replaced by U+FFFD (ragrig.core.text.replace_surrogates_in)."""

    data: dict[str, Any]
    text: str
    repaired: int = 0


def api_headers(api_key_env: str | None, where: str) -> tuple[dict[str, str], tuple[str, ...]]:
    """JSON headers, with a bearer key read from the environment variable `api_key_env` (never
    from params.yaml), and the secrets to redact; a ConfigError naming `where` if it is unset."""
    headers = {"Content-Type": "application/json"}
    if not api_key_env:
        return headers, ()
    key = os.environ.get(api_key_env)
    if not key:
        from ragrig.core.errors import ConfigError

        raise ConfigError(f"{where} names {api_key_env!r}, which is not set")
    headers["Authorization"] = f"Bearer {key}"
    return headers, (key,)


def http_failure(
    url: str, what: str, body: str, secrets: tuple[str, ...], cls: type = RuntimeError, **kw: Any
) -> RuntimeError:
    """An error naming the URL and the start of the response, secrets redacted first."""
    snippet = redact(body, secrets)[:BODY_CHARS]
    return cls(redact(f"{url} {what}: {snippet}", secrets), **kw)


def retry_after_seconds(value: str | None, now: float | None = None) -> float | None:
    """A `Retry-After` header in seconds (delta-seconds or an HTTP date), None if absent or
    unreadable; never negative."""
    if not value:
        return None
    value = value.strip()
    if re.fullmatch(r"[0-9]+", value):
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when is None:
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


def retry_delay(
    exc: BaseException, attempt: int, retries: int, backoff_s: float, max_wait_s: float
) -> float | None:
    """Seconds to wait before attempt `attempt + 1`, or None to give up: only a
    TransientHTTPError is retried, `retries` times at most, after exponential backoff or the
    server's Retry-After, whichever is longer; a Retry-After beyond `max_wait_s` gives up at
    once (the run would rather record the error than sleep past its budget)."""
    if not isinstance(exc, TransientHTTPError) or attempt > retries:
        return None
    wait = backoff_s * 2 ** (attempt - 1)
    asked = getattr(exc, "retry_after", None)
    if asked is not None:
        if asked > max_wait_s:
            return None
        wait = max(wait, asked)
    return min(wait, max_wait_s)


def _ssl_context() -> Any:
    import ssl

    cafile = os.environ.get("REQUESTS_CA_BUNDLE") or os.environ.get("SSL_CERT_FILE")
    if not cafile:
        with contextlib.suppress(ImportError):
            import certifi

            cafile = certifi.where()
    return ssl.create_default_context(cafile=cafile or None)


def _connection(url: str, timeout_s: float) -> tuple[http.client.HTTPConnection, str]:
    """The connection for `url` (through the environment's proxy, if any) and the request
    target to send on it."""
    import urllib.request

    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise RuntimeError(f"{url}: not an http(s) URL")
    port = parts.port or (443 if parts.scheme == "https" else 80)
    target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    proxy = urllib.request.getproxies().get(parts.scheme)
    if proxy and urllib.request.proxy_bypass(parts.hostname):
        proxy = None
    if proxy:
        p = urlsplit(proxy if "://" in proxy else f"http://{proxy}")
        if parts.scheme == "https":
            conn: http.client.HTTPConnection = http.client.HTTPSConnection(
                p.hostname, p.port or 8080, timeout=timeout_s, context=_ssl_context()
            )
            conn.set_tunnel(parts.hostname, port)
            return conn, target
        return http.client.HTTPConnection(p.hostname, p.port or 8080, timeout=timeout_s), url
    if parts.scheme == "https":
        conn = http.client.HTTPSConnection(
            parts.hostname, port, timeout=timeout_s, context=_ssl_context()
        )
    else:
        conn = http.client.HTTPConnection(parts.hostname, port, timeout=timeout_s)
    return conn, target


def _origin(url: str) -> tuple[str, str, int]:
    p = urlsplit(url)
    return (p.scheme, (p.hostname or "").lower(), p.port or (443 if p.scheme == "https" else 80))


def _exchange(
    url: str, payload: bytes, headers: dict[str, str], timeout_s: float, max_bytes: int
) -> tuple[int, dict[str, str], bytes]:
    """(status, headers lower-cased, body) of one POST, all of it within `timeout_s`: a
    watchdog shuts the socket at the deadline, whatever the server is doing."""
    deadline = time.monotonic() + timeout_s
    conn, target = _connection(url, timeout_s)
    expired = threading.Event()

    def stop() -> None:
        expired.set()
        sock = conn.sock
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)

    watchdog = threading.Timer(timeout_s, stop)
    watchdog.daemon = True
    watchdog.start()
    try:
        try:
            conn.connect()
            if expired.is_set():  # the deadline passed while connecting
                raise CallTimeout(f"no answer from {url} within {timeout_s:g} s")
            conn.request("POST", target, body=payload, headers=headers)
            resp = conn.getresponse()
            status = resp.status
            head = {k.lower(): v for k, v in resp.getheaders()}
            length = head.get("content-length", "")
            if re.fullmatch(r"[0-9]+", length) and int(length) > max_bytes:
                raise ResponseTooLarge(
                    f"{url} answered {int(length):,} bytes, more than max_response_bytes "
                    f"{max_bytes:,}: refused"
                )
            body = bytearray()
            while True:
                chunk = resp.read1(READ_CHUNK)
                if not chunk:
                    break
                body += chunk
                if len(body) > max_bytes:
                    raise ResponseTooLarge(
                        f"{url} sent more than max_response_bytes {max_bytes:,} bytes: refused"
                    )
                if time.monotonic() > deadline:
                    raise CallTimeout(f"no complete answer from {url} within {timeout_s:g} s")
        except (OSError, http.client.HTTPException) as exc:
            if expired.is_set() or isinstance(exc, TimeoutError):
                raise CallTimeout(f"no complete answer from {url} within {timeout_s:g} s") from None
            raise TransientHTTPError(f"{url} request failed: {type(exc).__name__}: {exc}") from None
        if expired.is_set():
            raise CallTimeout(f"no complete answer from {url} within {timeout_s:g} s")
        return status, head, bytes(body)
    finally:
        watchdog.cancel()
        conn.close()


def post_chat(
    url: str,
    body: dict[str, Any],
    headers: dict[str, str],
    timeout_s: float,
    secrets: tuple[str, ...] = (),
    max_response_bytes: int = 4_000_000,
) -> Reply:
    """POST one chat-completions request; the parsed JSON object reply.

    Raises CallTimeout (no complete answer within `timeout_s`, all told), TransientHTTPError
    (HTTP 5xx or a failed connection; RateLimited for 429, with its Retry-After),
    ResponseTooLarge, RedirectRefused, MalformedResponse (HTTP 200 that is not a JSON object)
    or RuntimeError (any other status); every message names the URL, with secrets redacted."""
    payload = json.dumps(body).encode("utf-8")
    current = url
    for _ in range(MAX_REDIRECTS + 1):
        try:
            status, head, raw = _exchange(current, payload, headers, timeout_s, max_response_bytes)
        except (CallTimeout, TransientHTTPError, ResponseTooLarge, RuntimeError) as exc:
            raise type(exc)(redact(str(exc), secrets)) from None
        text = raw.decode("utf-8", errors="replace")
        if status in (301, 302, 303, 307, 308):
            location = urljoin(current, head.get("location", ""))
            if status in (307, 308) and _origin(location) == _origin(url):
                current = location
                continue
            where = urlsplit(location).netloc or "?"
            raise RedirectRefused(
                redact(
                    f"{current} redirected (HTTP {status}) to {where}: not followed "
                    "(only a 307/308 to the same scheme, host and port is); set base_url to "
                    "the endpoint itself",
                    secrets,
                )
            )
        if status == 429 or status >= 500:
            delay = retry_after_seconds(head.get("retry-after"))
            if status == 429:
                raise http_failure(
                    current, "answered HTTP 429", text, secrets, RateLimited, retry_after=delay
                )
            err = http_failure(
                current, f"answered HTTP {status}", text, secrets, TransientHTTPError
            )
            err.retry_after = delay
            raise err
        if status != 200:
            raise http_failure(current, f"answered HTTP {status}", text, secrets)
        try:
            parsed = json.loads(text)
        except ValueError:
            parsed = None
        if not isinstance(parsed, dict):
            raise http_failure(
                current, "returned a malformed completion", text, secrets, MalformedResponse
            )
        parsed, repaired = replace_surrogates_in(parsed)
        return Reply(parsed, text, repaired)
    raise RedirectRefused(redact(f"{url}: more than {MAX_REDIRECTS} redirects", secrets))


def usage_counts(usage: Any) -> tuple[int, int, str]:
    """(prompt_tokens, completion_tokens, problem) of a response's `usage` block: counts that
    are absent are 0; counts that are not whole numbers in [0, MAX_USAGE_TOKENS] make both 0
    and `problem` names them (the answer's usage is then counted invalid, never priced)."""
    if usage is None:
        return 0, 0, ""
    if not isinstance(usage, dict):
        return 0, 0, f"usage is {type(usage).__name__}, not an object"
    counts = []
    for name in ("prompt_tokens", "completion_tokens"):
        value = usage.get(name, 0)
        if value is None:
            value = 0
        whole = isinstance(value, int) and not isinstance(value, bool)
        if isinstance(value, float) and math.isfinite(value) and value.is_integer():
            value, whole = int(value), True
        if not whole or not 0 <= value <= MAX_USAGE_TOKENS:
            return 0, 0, f"usage {name} {value!r} is not a count in [0, {MAX_USAGE_TOKENS:,}]"
        counts.append(value)
    return counts[0], counts[1], ""


def post_with_retries(
    url: str,
    body: dict[str, Any],
    headers: dict[str, str],
    timeout_s: float,
    secrets: tuple[str, ...],
    max_response_bytes: int,
    retries: int,
    backoff_s: float,
    max_wait_s: float,
    sleep: Any = time.sleep,
    on_attempt: Any = None,
) -> Reply:
    """post_chat, tried again after a TransientHTTPError as retry_delay says. A timeout is
    raised as is (CallTimeout); any other failure as one RuntimeError naming the URL (secrets
    redacted) and the attempts. `on_attempt()` is called before each request sent."""
    attempt = 0
    while True:
        attempt += 1
        if on_attempt is not None:
            on_attempt()
        try:
            return post_chat(url, body, headers, timeout_s, secrets, max_response_bytes)
        except CallTimeout:
            raise
        except Exception as exc:
            wait = retry_delay(exc, attempt, retries, backoff_s, max_wait_s)
            if wait is None:
                tries = f" (after {attempt} attempts)" if attempt > 1 else ""
                raise RuntimeError(f"{exc}{tries}") from None
            sleep(wait)
