"""SIGTERM as an exception: raised where the process was, so that every `with` on the way out
cleans up (a temporary folder removed, an open MLflow run ended FAILED)."""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Callable, Iterator


class Terminated(BaseException):  # noqa: N818 - a signal, not an error of the code
    """SIGTERM arrived inside a `sigterm_raises` block."""


@contextlib.contextmanager
def sigterm_raises(
    exc: Callable[[int], BaseException] = lambda signum: Terminated(f"signal {signum}"),
) -> Iterator[None]:
    """Within the block, SIGTERM raises `exc(signum)`; the previous handler is back on the way
    out. Only the main thread can install a handler, and a process told to ignore SIGTERM keeps
    ignoring it: in either case nothing changes."""
    if (
        threading.current_thread() is not threading.main_thread()
        or signal.getsignal(signal.SIGTERM) is signal.SIG_IGN
    ):
        yield
        return

    def handler(signum: int, frame: object) -> None:
        raise exc(signum)

    previous = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
