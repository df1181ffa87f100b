"""Warm stage processes: a server that has imported the heavy libraries once forks a process for
each stage DVC starts, so a stage of a small experiment does not spend most of its time in
`import` (sentence-transformers ~7 s, MLflow ~4 s of a ~9 s report on 2 cores).

Opt-in: `ragrig warm SOCKET` in one terminal, then RAGRIG_WARM_SOCKET=SOCKET in the environment
of `dvc repro`, `dvc exp run` or `ragrig sweep` (docs/sweeps.md "Warm stage processes"). The stage command DVC runs is unchanged: the
stage wrapper's first import (stages/_bootstrap.py) hands its arguments, working folder,
environment and standard streams to the server and waits; the server forks, the fork takes
them over, drops every `ragrig` module it holds (the stage imports this checkout's library, as a
new interpreter would) and runs the wrapper as `__main__`. The waiting process exits with the
fork's status, or dies of the fork's signal; SIGINT, SIGTERM, SIGHUP and SIGQUIT sent to it are
passed on, and if it is killed the fork is killed too.

Nothing changes what a stage computes: the libraries' thread pools are set by the stage
(`stage.apply_threads` also limits pools already loaded), Python's global generator is reseeded
as at start-up, and a request whose environment differs from the server's in a variable that
libraries read when they load (HF_*, TRANSFORMERS_*, OMP_*, PYTHONHASHSEED, ...) or that comes
from another interpreter is refused: the stage then runs in its own process, as without a server.
The stage log records `"warm": true` for a stage that ran in a fork. A forked stage's peak memory
(ru_maxrss) includes the server's preloaded libraries.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import struct
import sys

ENV_SOCKET = "RAGRIG_WARM_SOCKET"
# Variables read when a library or the interpreter loads (thread pools, offline flags, hash seed,
# stream buffering, backends): a request must agree with the server on all of them. Variables
# read when used (MLFLOW_*, TOKENIZERS_PARALLELISM, PYTHONBREAKPOINT, RAGRIG_*) are the
# request's own.
ENV_PREFIXES = (
    "HF_",
    "HUGGINGFACE_",
    "TRANSFORMERS_",
    "SENTENCE_TRANSFORMERS",
    "TORCH",
    "PYTORCH_",
    "OMP_",
    "MKL_",
    "OPENBLAS_",
    "KMP_",
    "GOMP_",
    "MPL",
    "CUDA",
    "ATEN_",  # ATEN_CPU_CAPABILITY, and the instruction-set caps (benchmarks/bench_suite.py --isa)
    "ONEDNN_",
    "DNNL_",
    "FAISS_",
    "LD_",
    "LC_",
    "LANG",
)
ENV_PYTHON = frozenset(
    {
        "PYTHONHASHSEED",
        "PYTHONIOENCODING",
        "PYTHONUTF8",
        "PYTHONWARNINGS",
        "PYTHONOPTIMIZE",
        "PYTHONNOUSERSITE",
        "PYTHONUSERBASE",
        "PYTHONSAFEPATH",
        "PYTHONINTMAXSTRDIGITS",
        "PYTHONUNBUFFERED",
        "PYTHONHOME",
        "PYTHONPLATLIBDIR",
        "PYTHONFAULTHANDLER",
        "PYTHONTRACEMALLOC",
        "PYTHONDEVMODE",
        "PYTHONDONTWRITEBYTECODE",
        "PYTHONMALLOC",
    }
)
# What the server imports once. Not faiss (its OpenMP pool is sized when it loads; 0.2 s) and no
# ragrig module (a stage runs its own checkout's code).
PRELOAD = (
    "numpy",
    "pandas",
    "pyarrow.parquet",
    "yaml",
    "scipy.stats",
    "sklearn.metrics",
    "torch",
    "transformers",
    "sentence_transformers",
    "matplotlib",
    "matplotlib.pyplot",
    "mlflow",
    "mlflow.tracking",
    "sqlalchemy",
)
FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT)
_HEADER = struct.Struct("!I")


def fingerprint(env: dict[str, str]) -> dict[str, str]:
    """The variables of `env` a request and the server must agree on (PYTHONPATH apart: see
    _shadowed)."""
    return {k: v for k, v in env.items() if k.startswith(ENV_PREFIXES) or k in ENV_PYTHON}


def _entries(pythonpath: str | None) -> list[str]:
    return [os.path.abspath(p) for p in (pythonpath or "").split(os.pathsep) if p]


def _shadowed(pythonpath: str | None) -> str:
    """A module the server loaded that an entry of `pythonpath` (a request's PYTHONPATH) would
    have given a new interpreter instead, as "entry: name"; "" when none would. A stage's own
    checkout (src/ with ragrig) is the usual entry, and ragrig is never preloaded."""
    loaded = {n.partition(".")[0] for n in sys.modules} - {"ragrig", "_bootstrap", "__main__"}
    own = set(_entries(os.environ.get("PYTHONPATH")))
    for entry in _entries(pythonpath):
        if entry in own or not os.path.isdir(entry):
            continue
        names = {n.partition(".")[0] for n in os.listdir(entry)}
        hit = sorted(names & loaded)
        if hit:
            return f"{entry}: {hit[0]}"
    return ""


def in_fork() -> bool:
    """True inside a stage the server forked."""
    return bool(getattr(sys, "_ragrig_warm_fork", False))


# --- the stage's side -----------------------------------------------------------------------


def started_for(script: str) -> bool:
    """True when this interpreter was started to run `script` (`python [options] script ...`),
    so that handing it over ends nothing else: a stage wrapper run in-process by other code
    (runpy in a test, a driver running several stages) is not handed over."""
    args = list(getattr(sys, "orig_argv", []))[1:]
    while args:
        arg = args.pop(0)
        if arg in ("-c", "-m", "-"):
            return False
        if arg in ("-X", "-W"):
            args = args[1:]
        elif not arg.startswith("-"):
            return os.path.realpath(arg) == os.path.realpath(script)
    return False


def handoff(path: str) -> None:
    """Run this process's stage in a fork of the server at `path` and exit with its status;
    return (the stage then runs here) when there is no server, it refuses the request, or this
    interpreter was not started for the stage's script (started_for)."""
    if not sys.argv or not started_for(sys.argv[0]):
        return
    try:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.connect(path)
    except OSError:
        return
    request = json.dumps(
        {
            "argv": sys.argv,
            "script": os.path.abspath(sys.argv[0]),
            "cwd": os.getcwd(),
            "env": dict(os.environ),
            "executable": sys.executable,
            "umask": _umask(),
        }
    ).encode()
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    try:
        socket.send_fds(sock, [_HEADER.pack(len(request))], [0, 1, 2])
        sock.sendall(request)
        reader = sock.makefile("rb")
        reply = reader.readline().decode().split()
    except OSError:
        sock.close()
        return
    if reply[:1] != ["ok"]:
        sock.close()
        return

    def forward(signum: int, frame: object) -> None:
        with contextlib.suppress(OSError):
            sock.sendall(f"sig {signum}\n".encode())

    for signum in FORWARDED:
        signal.signal(signum, forward)
    while True:
        try:
            line = reader.readline().decode().split()
        except InterruptedError:
            continue
        except OSError:
            line = []
        if not line:
            print("ragrig: the warm stage server stopped before the stage ended", file=sys.stderr)
            os._exit(1)
        kind, value = line[0], int(line[1])
        if kind == "exit":
            os._exit(value)
        if kind == "signal":
            for signum in FORWARDED:
                signal.signal(signum, signal.SIG_DFL)
            signal.signal(value, signal.SIG_DFL)
            os.kill(os.getpid(), value)
            os._exit(128 + value)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


# --- the server's side ----------------------------------------------------------------------


def preload(modules: tuple[str, ...] = PRELOAD) -> None:
    """Import `modules` (those not installed are skipped)."""
    import importlib

    for name in modules:
        with contextlib.suppress(ImportError):
            importlib.import_module(name)


def serve(
    path: str, modules: tuple[str, ...] = PRELOAD, ready: object = None, until: int | None = None
) -> None:
    """Preload `modules`, listen at `path` and fork a process per request until SIGTERM or
    SIGINT, or until process `until` ends. The socket appears only once the libraries are
    loaded: a stage that starts earlier finds no server and runs in its own process."""
    import gc
    import selectors
    import time

    if not hasattr(os, "pidfd_open"):
        from ragrig.core.errors import ConfigError

        raise ConfigError("ragrig warm needs Linux 5.3 or later (os.pidfd_open)")
    try:
        watched = os.pidfd_open(until) if until is not None else None
    except ProcessLookupError:
        return  # what it was to outlive has already ended
    t0 = time.perf_counter()
    before = dict(os.environ)
    own = fingerprint(before)
    preload(modules)
    loaded_s = time.perf_counter() - t0
    # variables the libraries set as they loaded (sklearn's KMP_*, ...): a stage that loads them
    # has them too, so a fork gets them where its request does not set them
    added = {k: v for k, v in os.environ.items() if k not in before}
    gc.collect()
    gc.freeze()  # the preloaded objects stay out of the forks' collections (fewer copied pages)
    tmp = f"{path}.{os.getpid()}.tmp"
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(tmp)
    listener.listen(64)
    os.replace(tmp, path)
    stopping = []
    signal.signal(signal.SIGTERM, lambda s, f: stopping.append(s))
    signal.signal(signal.SIGINT, lambda s, f: stopping.append(s))
    sel = selectors.DefaultSelector()
    sel.register(listener, selectors.EVENT_READ, ("listen", None))
    if watched is not None:
        sel.register(watched, selectors.EVENT_READ, ("until", None))
    forks: dict[int, dict] = {}  # pid -> {"conn", "pidfd"}
    if ready is not None:
        print(
            f"ragrig warm: serving at {path} (pid {os.getpid()}, libraries loaded in "
            f"{loaded_s:.1f} s)",
            file=ready,
            flush=True,
        )
    try:
        while not stopping:
            try:
                events = sel.select(timeout=0.5)
            except InterruptedError:
                continue
            for key, _ in events:
                kind, pid = key.data
                if kind == "listen":
                    _accept(listener, sel, forks, own, added)
                elif kind == "conn":
                    _from_client(key.fileobj, pid, sel, forks)
                elif kind == "pid":
                    _reap(pid, sel, forks)
                elif kind == "until":
                    stopping.append(until)
    finally:
        if watched is not None:
            os.close(watched)
        for pid in list(forks):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        listener.close()
        with contextlib.suppress(OSError):
            os.unlink(path)


def _recv_exact(conn: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = conn.recv(n - len(data))
        if not chunk:
            raise ConnectionError("the request ended early")
        data += chunk
    return data


def _accept(listener, sel, forks, own, added) -> None:
    import selectors

    conn, _ = listener.accept()
    conn.settimeout(10)
    fds: list[int] = []
    try:
        head, fds, _, _ = socket.recv_fds(conn, _HEADER.size, 3)
        if len(head) < _HEADER.size:
            head += _recv_exact(conn, _HEADER.size - len(head))
        req = json.loads(_recv_exact(conn, _HEADER.unpack(head)[0]))
        reason = _refusal(req, fds, own, added)
        if reason:
            print(f"ragrig warm: {req.get('script')} runs cold: {reason}", file=sys.stderr)
            conn.sendall(f"no {reason}\n".encode())
            raise ConnectionError(reason)
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            _run_fork(req, fds, [conn, listener], added)  # never returns
        conn.sendall(b"ok\n")
    except (OSError, ValueError, ConnectionError):
        conn.close()
        return
    finally:
        for fd in fds:
            os.close(fd)
    conn.settimeout(None)
    pidfd = os.pidfd_open(pid)
    forks[pid] = {"conn": conn, "pidfd": pidfd}
    sel.register(conn, selectors.EVENT_READ, ("conn", pid))
    sel.register(pidfd, selectors.EVENT_READ, ("pid", pid))


def _refusal(req: dict, fds: list[int], own: dict[str, str], added: dict[str, str]) -> str:
    if len(fds) != 3:
        return "three standard streams expected"
    if req.get("executable") != sys.executable:
        return f"another interpreter ({req.get('executable')})"
    env = req.get("env") or {}
    # a variable the preloaded libraries set (sklearn's KMP_*): the request's parent may have
    # loaded them too; the same value is the same state
    theirs = {k: v for k, v in fingerprint(env).items() if added.get(k) != v}
    if theirs != own:
        differ = sorted(set(theirs.items()) ^ set(own.items()))
        return f"environment differs in {sorted({k for k, _ in differ})}"
    shadow = _shadowed(env.get("PYTHONPATH"))
    if shadow:
        return f"PYTHONPATH shadows a loaded module ({shadow})"
    return ""


def _from_client(conn, pid, sel, forks) -> None:
    try:
        data = conn.recv(4096)
    except OSError:
        data = b""
    if not data:  # the stage's process is gone (killed): its fork goes too
        sel.unregister(conn)
        conn.close()
        forks[pid]["conn"] = None
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
        return
    for line in data.decode(errors="replace").splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[0] == "sig" and parts[1].isdigit():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, int(parts[1]))


def _reap(pid, sel, forks) -> None:
    entry = forks.pop(pid)
    sel.unregister(entry["pidfd"])
    os.close(entry["pidfd"])
    _, status = os.waitpid(pid, 0)
    conn = entry["conn"]
    if conn is None:
        return
    sel.unregister(conn)
    if os.WIFSIGNALED(status):
        reply = f"signal {os.WTERMSIG(status)}\n"
    else:
        reply = f"exit {os.waitstatus_to_exitcode(status)}\n"
    with contextlib.suppress(OSError):
        conn.sendall(reply.encode())
    conn.close()


def _run_fork(req: dict, fds: list[int], close: list[socket.socket], added: dict[str, str]) -> None:
    """The fork: take over the request's process state, run its script as __main__, exit."""
    code = 1
    try:
        for s in close:
            s.close()
        _die_with_parent()
        for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGCHLD):
            signal.signal(sig, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
            os.close(fd)
        fds.clear()
        _reopen_streams()
        os.chdir(req["cwd"])
        server_path = _entries(os.environ.get("PYTHONPATH"))
        os.environ.clear()
        os.environ.update({**added, **req["env"]})
        os.umask(int(req["umask"]))
        code = _run_script(req["script"], req["argv"], server_path)
    except BaseException:  # noqa: BLE001 - a fork must never return into the server's loop
        import traceback

        traceback.print_exc()
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)


def _run_script(script: str, argv: list[str], server_path: list[str]) -> int:
    import atexit
    import importlib
    import random
    import runpy

    for name in [n for n in sys.modules if n == "ragrig" or n.startswith("ragrig.")]:
        del sys.modules[name]
    sys.modules.pop("_bootstrap", None)
    # a new interpreter's path: the script's folder, the request's PYTHONPATH, then the rest
    # (the server's own PYTHONPATH entries left out)
    rest = [p for p in sys.path[1:] if not p or os.path.abspath(p) not in set(server_path)]
    sys.path[:] = [os.path.dirname(script), *_entries(os.environ.get("PYTHONPATH")), *rest]
    importlib.invalidate_caches()
    random.seed()  # a new interpreter's state, not the server's
    sys.argv = list(argv)
    sys._ragrig_warm_fork = True  # type: ignore[attr-defined]
    code: int = 0
    try:
        runpy.run_path(script, run_name="__main__")
    except SystemExit as exc:
        if exc.code is None:
            code = 0
        elif isinstance(exc.code, int):
            code = exc.code
        else:
            print(exc.code, file=sys.stderr)
            code = 1
    except KeyboardInterrupt:
        import traceback

        traceback.print_exc()
        atexit._run_exitfuncs()
        sys.stderr.flush()
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGINT)
        code = 130
    except BaseException:  # noqa: BLE001 - printed as the interpreter would, exit 1
        sys.excepthook(*sys.exc_info())
        code = 1
    atexit._run_exitfuncs()
    return code


def _reopen_streams() -> None:
    """New sys.stdin/stdout/stderr on descriptors 0-2, buffered as a new interpreter's."""
    import io

    encoding = (sys.stdout or sys.__stdout__).encoding or "utf-8"

    def wrap(fd: int, mode: str, errors: str, line: bool):
        raw = io.FileIO(fd, mode, closefd=False)
        buf = io.BufferedReader(raw) if mode == "r" else io.BufferedWriter(raw)
        return io.TextIOWrapper(buf, encoding=encoding, errors=errors, line_buffering=line)

    try:
        sys.stdin = wrap(0, "r", "strict", False)
    except OSError:
        sys.stdin = None  # type: ignore[assignment]
    sys.stdout = wrap(1, "w", "strict", os.isatty(1))
    sys.stderr = wrap(2, "w", "backslashreplace", True)
    sys.__stdin__, sys.__stdout__, sys.__stderr__ = sys.stdin, sys.stdout, sys.stderr


def _die_with_parent() -> None:
    """SIGKILL this fork when the server exits (Linux prctl PR_SET_PDEATHSIG)."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):
        pass


def cmd_warm(args) -> int:
    """`ragrig warm SOCKET`: serve until SIGTERM or SIGINT (or until process --until ends);
    with --detach, start that server in the background, its messages to --log, and return."""
    path = os.path.abspath(args.socket)
    modules = tuple(m for m in args.preload.split(",") if m) if args.preload else PRELOAD
    if not args.detach:
        serve(path, modules, ready=sys.stderr, until=args.until)
        return 0
    import subprocess

    cmd = [sys.executable, "-m", "ragrig", "warm", path, "--preload", ",".join(modules)]
    if args.until is not None:
        cmd += ["--until", str(args.until)]
    log = os.path.abspath(args.log or os.devnull)
    os.makedirs(os.path.dirname(log), exist_ok=True)
    with open(log, "a", encoding="utf-8") as out:
        proc = subprocess.Popen(
            cmd, stdin=subprocess.DEVNULL, stdout=out, stderr=out, start_new_session=True
        )
    print(
        f"ragrig warm: loading the libraries in the background (pid {proc.pid}, log {log}); "
        "stages run warm once it serves at " + path
    )
    return 0
