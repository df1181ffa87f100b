"""Whether a configured Ray cluster can be reached: a TCP connect to its head, in seconds,
before anything waits on Ray's own connect (which retries for about a minute).

Used by the sweep's Ray launcher (`hydra.launcher.ray.init.address`) and by embedding over
Ray Data (`embed.executor.address`); each error names the address and the key that set it.
"""

from __future__ import annotations

import os
import socket
from typing import Any

from ragrig.core.errors import ServiceError

PROBE_TIMEOUT_S = 3.0
GCS_PORT = 6379  # Ray's default head (GCS) port
CLIENT_PORT = 10001  # Ray Client's default port (ray://host)


def _tcp(host: str, port: int, what: str, key: str) -> None:
    try:
        with socket.create_connection((host, port), timeout=PROBE_TIMEOUT_S):
            return
    except OSError as exc:
        if isinstance(exc, TimeoutError):
            reason = f"no answer within {PROBE_TIMEOUT_S:.0f} s"
        else:
            reason = exc.strerror or type(exc).__name__
        raise ServiceError(
            f"Ray cluster at {what} ({key}) is unreachable: {reason} ({host}:{port})"
        ) from None


def _split(address: str, default_port: int, key: str) -> tuple[str, int]:
    host, _, port = address.rpartition(":") if ":" in address else (address, "", "")
    try:
        return (host or address).strip("[]"), int(port) if port else default_port
    except ValueError:
        raise ServiceError(
            f"{key}={address!r}: expected host:port, ray://host:port, auto or null (a local "
            "cluster)"
        ) from None


def current_cluster() -> str | None:
    """The address `ray.init(address="auto")` would use: RAY_ADDRESS, else the cluster this
    machine last started (`ray start`), as Ray records it."""
    if os.environ.get("RAY_ADDRESS"):
        return os.environ["RAY_ADDRESS"]
    try:
        from ray._private.utils import read_ray_address

        return read_ray_address()
    except Exception:
        return None


def probe(address: Any, key: str) -> None:
    """Fail in seconds, naming the address and `key`, when that Ray cluster cannot be reached;
    null, "" or "local" (a cluster started here) pass."""
    if address in (None, "", "local"):
        return
    address = str(address)
    if address == "auto":
        found = current_cluster()
        if not found:
            raise ServiceError(
                f"no running Ray cluster found for {key}=auto "
                "(RAY_ADDRESS unset and no `ray start` cluster on this machine)"
            )
        address = found
    if address.startswith("ray://"):
        host, port = _split(address[len("ray://") :], CLIENT_PORT, key)
    else:
        host, port = _split(address, GCS_PORT, key)
    _tcp(host, port, address, key)
