"""Time the newcomer's commands on this machine, each on a fresh clone: `make test`, `make
test-all` and a cold `make repro`, with the CPU that ran them.

    python benchmarks/bench_suite.py                       # all three, one after the other
    python benchmarks/bench_suite.py --targets test test-all --baseline-s 2746
    python benchmarks/bench_suite.py --markdown docs/benchmarks.md   # the figures into §18

Each target runs alone (nothing else should run beside it: every figure is a wall time) in its
own clone of this checkout's HEAD, next to a `shared` link to the data (../shared), so it sees
what a fresh clone sees. `make setup` (the venv, ~2-3 min) is timed apart, before the target,
unless --venv links an existing one. A target's figure is its wall time, its exit code and its
test runner's closing line; with --baseline-s, its ratio to that many seconds (the full suite as
it was: issue targets are ratios, since machines differ several-fold). --markdown rewrites the
part of the file between `<!-- bench_suite:start -->` and `<!-- bench_suite:end -->`.

The cold run is read against its floor, what the default experiment cannot avoid: a bare
encode of the chunks and the queries with the configured embedder (at its resolved precision),
plus a bare generation of the run's own sample from the very passages each answer saw, each
timed alone in the same clone right after the run. Reported: the inference path (every stage
but train_*, from the stage log) over that floor (target <= 1.3), and training's share of the
whole run (target <= 0.25).

--repro-args passes ARGS to `make repro` (e.g. "generate.position_probe.enabled=true": the cold
run with the position probe). --isa avx2 runs every target and the floor on the AVX2-only path of
a CPU that has more: torch's ATen and oneDNN kernels, MKL and FAISS held at AVX2 (ISA_CAPS), so
`precision: auto` resolves to fp32 as on a CPU without AVX-512 (ragrig.weights.precision
.isa_cap). It is the same arithmetic as such a CPU's, not its speed: the figures name the CPU
they ran on. The caps are checked in the venv the targets use, and the run fails if one did not
hold.

--smoke runs the whole path (clone, linked venv, timing, the stage log, the floor, the markdown
section) on `make repro` of the 20-document fixture with the extractive generator.
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import _common as C

TARGETS = {
    "test": ["make", "test"],
    "test-all": ["make", "test-all"],
    "repro": ["make", "repro"],
}
SMOKE_TARGET = {"repro": ["make", "repro", "ARGS=dataset=tiny generate=extractive"]}
# environment variables that hold each library to an instruction set (read when it loads)
ISA_CAPS = {
    "avx2": {
        "ATEN_CPU_CAPABILITY": "avx2",  # torch's own vectorised kernels
        "ONEDNN_MAX_CPU_ISA": "AVX2",  # torch's oneDNN: no AVX-512, no bf16 units, no AMX
        "MKL_ENABLE_INSTRUCTIONS": "AVX2",  # MKL's fp32 matrix products
        "FAISS_SIMD_LEVEL": "AVX2",  # faiss-cpu's dynamic-dispatch build
    }
}
# what each library says it runs, printed by the venv's python under the caps
ISA_PROBE = (
    "import json, torch, faiss; from ragrig.weights.precision import isa_cap, resolve_precision; "
    "print(json.dumps({'torch': torch.backends.cpu.get_cpu_capability(), "
    "'faiss': faiss.SIMDConfig.get_level_name(), 'onednn_cap': isa_cap(), "
    "'auto': resolve_precision('auto')}))"
)
START, END = "<!-- bench_suite:start -->", "<!-- bench_suite:end -->"
# pytest's closing line: "== 12 passed, 1 skipped in 3.21s ==" (also "N passed, N failed")
CLOSING = re.compile(r"^=*\s*(\d+ (?:passed|failed|error|errors|skipped|deselected).*?)\s*=*$")


def check_isa(python: Path, isa: str) -> dict[str, Any]:
    """What torch, FAISS and `precision: auto` run under ISA_CAPS[isa] in `python`'s venv;
    raises if any of them is not held to it."""
    import json

    env = {**os.environ, **ISA_CAPS[isa]}
    out = subprocess.run(
        [str(python), "-c", ISA_PROBE], env=env, capture_output=True, text=True, check=True
    )
    seen = json.loads(out.stdout.strip().splitlines()[-1])
    level = isa.upper()  # what torch and FAISS name the level the caps set
    want = {"torch": level, "faiss": level, "onednn_cap": level, "auto": "fp32"}
    if seen != want:
        raise RuntimeError(f"--isa {isa}: the caps did not hold: {seen} (wanted {want})")
    return seen


def cpu_summary() -> dict[str, Any]:
    """The CPU model, core count and the flags that decide speed here (vector and bf16 units)."""
    sys.path.insert(0, str(C.PROJECT_ROOT / "src"))
    from ragrig.weights.precision import NATIVE_BF16, cpu_info

    model, flags = cpu_info()
    wanted = ("avx2", "avx512f", "avx512_vnni", *NATIVE_BF16, "amx_tile", "amx_int8")
    return {
        "cpu_model": model,
        "cpus": os.cpu_count(),
        "flags": [f for f in wanted if f in flags],
    }


def closing_line(log: str) -> str:
    """The last test-runner summary line of a log ('' if none)."""
    found = ""
    for line in log.splitlines():
        m = CLOSING.match(line.strip())
        if m:
            found = m.group(1)
    return found


def clone(src: Path, parent: Path) -> Path:
    """A fresh clone of src's HEAD at parent/ragrig, with parent/shared -> src/../shared."""
    dest = parent / "ragrig"
    subprocess.run(["git", "clone", "-q", str(src), str(dest)], check=True)
    shared = src.parent / "shared"
    if shared.exists():
        (parent / "shared").symlink_to(shared.resolve())
    return dest


def run_target(
    name: str, cmd: list[str], src: Path, venv: Path | None, workdir: Path
) -> dict[str, Any]:
    parent = Path(tempfile.mkdtemp(prefix=f"suite-{name}-", dir=workdir))
    ws = clone(src, parent)
    env = {k: v for k, v in os.environ.items() if not k.startswith("VIRTUAL_ENV")}
    env["CI"] = "true"
    # a conversion cache of the clone's own (ragrig.generate.torch_gguf.load_gguf): the cold
    # run converts the packaged GGUF model as a new machine does, whatever this one has cached
    # (`make setup` converts it, `ragrig prepare`; with a linked venv that step is timed apart)
    env["RAGRIG_GGUF_CACHE"] = str(parent / "gguf-cache")
    out: dict[str, Any] = {"target": name, "command": " ".join(c for c in cmd if c != "STAMP=")}
    if venv is not None:
        (ws / ".venv").symlink_to(venv.resolve())
        if cmd[0] == "make":
            # STAMP empty: make must not run `setup` (the clone's files are newer than the
            # linked venv's stamp), which would point that venv's editable install at this
            # clone, deleted afterwards
            cmd = [*cmd, "STAMP="]
        if name == "repro":  # the part of `make setup` a run reads: the generator's conversion
            t0 = time.perf_counter()
            prep = subprocess.run(
                [str(ws / ".venv/bin/python"), "-m", "ragrig", "prepare"],
                cwd=ws,
                env=env,
                capture_output=True,
                text=True,
            )
            out["prepare_s"] = round(time.perf_counter() - t0, 1)
            if prep.returncode != 0:
                out.update(exit_code=prep.returncode, error=prep.stderr[-2000:])
                return out
    else:
        t0 = time.perf_counter()
        setup = subprocess.run(["make", "setup"], cwd=ws, env=env, capture_output=True, text=True)
        out["setup_s"] = round(time.perf_counter() - t0, 1)
        if setup.returncode != 0:
            out.update(exit_code=setup.returncode, error=setup.stderr[-2000:])
            return out
    log_path = workdir / f"{name}.log"
    t0 = time.perf_counter()
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    with open(log_path, "w", encoding="utf-8") as log:
        proc = subprocess.run(
            cmd, cwd=ws, env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT
        )
    out["wall_s"] = round(time.perf_counter() - t0, 1)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    # CPU time of every process the target waited for (servers it detached are not counted):
    # how busy the cores were, the headroom more test workers could use
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    out["cpu_s"] = round(cpu, 1)
    out["cpu_utilisation"] = round(cpu / (out["wall_s"] * (os.cpu_count() or 1)), 3)
    out["exit_code"] = proc.returncode
    out["closing_line"] = closing_line(log_path.read_text(encoding="utf-8", errors="replace"))
    out["log"] = str(log_path)
    if name == "repro" and proc.returncode == 0:
        out.update(cold_run_parts(ws))
        if out["warm_stages"]:  # forks of make's own warm server: not children of the target
            out["cpu_s"] = out["cpu_utilisation"] = None
        out["floor"] = floor_seconds(ws)
        inference = out["inference_path_s"] + out.get("warm_load_s", 0.0)
        out["inference_over_floor"] = round(inference / out["floor"]["total_s"], 3)
        out["training_share"] = round(out["training_s"] / out["wall_s"], 3)
    shutil.rmtree(parent, ignore_errors=True)
    return out


def stage_seconds(log: Path, skip: int = 0) -> tuple[dict[str, float], int]:
    """Seconds per stage of the stage log's finished runs after its first `skip` lines, and how
    many of them ran warm."""
    import json

    stages: dict[str, float] = {}
    warm_stages = 0
    for line in log.read_text(encoding="utf-8").splitlines()[skip:]:
        entry = json.loads(line)
        if entry.get("status") == "ok":
            stages[entry["stage"]] = stages.get(entry["stage"], 0.0) + float(entry["seconds"])
            warm_stages += bool(entry.get("warm"))
    return stages, warm_stages


def cold_run_parts(ws: Path) -> dict[str, Any]:
    """Per-stage seconds of the run (its stage log), the inference path (every stage but the
    training ones) and training apart."""
    import json

    stages, warm_stages = stage_seconds(ws / ".ragrig" / "stage_log.jsonl")
    training = sum(s for k, s in stages.items() if k.startswith("train_"))
    out = {
        "stages_s": {k: round(v, 1) for k, v in stages.items()},
        "inference_path_s": round(sum(stages.values()) - training, 1),
        "training_s": round(training, 1),
        "warm_stages": warm_stages,
    }
    # `make repro`'s warm server loads the libraries beside the first stages; its loading time
    # is counted in full on top of the stages' (as if nothing ran beside it)
    warm = ws / ".ragrig" / "warm.log"
    loaded = (
        re.findall(r"libraries loaded in ([\d.]+) s", warm.read_text()) if warm.exists() else []
    )
    if loaded:
        out["warm_load_s"] = round(sum(float(x) for x in loaded), 1)
    # what each torch model ran in, as its stage recorded it (ragrig.weights.precision)
    out["precision"] = {}
    for stage in ("embed", "generate", "judge"):
        manifest = ws / "data" / stage / "manifest.json"
        decided = json.loads(manifest.read_text()).get("precision_decision")
        if decided:
            out["precision"][stage] = f"{decided['resolved']} ({decided['requested']})"
    return out


def floor_seconds(ws: Path) -> dict[str, Any]:
    """The bare encode and the bare generation of the finished run in `ws`, each timed alone
    (model loading timed apart): what no pipeline around them can save."""
    import json

    import pandas as pd

    sys.path.insert(0, str(C.PROJECT_ROOT / "src"))
    from ragrig.core.config import load_section
    from ragrig.embed import make_embedder
    from ragrig.generate import generate_all, make_generator
    from ragrig.weights.precision import resolve_precision

    cwd = Path.cwd()
    os.chdir(ws)  # relative model paths (data/train_embed/model) as the stages see them
    try:
        params = ws / "params.yaml"
        runtime = load_section("runtime", params)
        import torch

        torch.set_num_threads(runtime.threads)
        ecfg = load_section("embed", params)
        chunks = pd.read_parquet(ws / "data/chunk/chunks.parquet")["text"].tolist()
        queries = pd.read_parquet(ws / "data/parse/queries.parquet")
        t0 = time.perf_counter()
        embedder = make_embedder(ecfg, role="passage")
        embed_load = time.perf_counter() - t0
        t0 = time.perf_counter()
        embedder.encode(chunks)
        embedder.with_prefix(ecfg.query_prefix).encode(queries["text"].tolist())
        encode = time.perf_counter() - t0
        gcfg = load_section("generate", params)
        gens = pd.read_parquet(ws / "data/generate/generations.parquet")
        contexts = {
            g.qid: list(zip(json.loads(g.context_chunk_ids), json.loads(g.contexts), strict=True))
            for g in gens.itertuples(index=False)
        }
        t0 = time.perf_counter()
        generator = make_generator(gcfg, seed=runtime.seed, threads=runtime.threads)
        gen_load = time.perf_counter() - t0
        t0 = time.perf_counter()
        generate_all(
            generator,
            gens["qid"].tolist(),
            dict(zip(queries["qid"], queries["text"], strict=True)),
            contexts,
            gcfg.max_passage_chars,
            progress=False,
            max_answer_chars=gcfg.max_answer_chars,
        )
        generate = time.perf_counter() - t0
    finally:
        os.chdir(cwd)
    precision = getattr(ecfg, "precision", None)
    return {
        "encode_s": round(encode, 1),
        "generate_s": round(generate, 1),
        "total_s": round(encode + generate, 1),
        "model_load_s": round(embed_load + gen_load, 1),
        "chunks": len(chunks),
        "queries": len(queries),
        "answers": len(gens),
        "embed_precision": resolve_precision(precision) if precision else None,
    }


def markdown(result: dict[str, Any]) -> str:
    cpu = result["machine"]
    lines = [
        f"Measured {result['date']} with `python benchmarks/bench_suite.py"
        f"{' ' + result['args'] if result['args'] else ''}` on {cpu['cpu_model'] or 'an unnamed CPU'}"
        f" ({cpu['cpus']} cores; flags: {', '.join(cpu['flags']) or 'none of note'}), each target "
        "alone on a fresh clone:",
        "",
        "| target | wall | × baseline | CPU busy | setup apart | exit | closing line |",
        "|---|---:|---:|---:|---:|---:|---|",
    ]
    for r in result["targets"]:
        ratio = r.get("ratio_to_baseline")
        busy = r.get("cpu_utilisation")
        lines.append(
            f"| `{r['command']}` | {r.get('wall_s', '—')} s | "
            f"{f'{ratio:.3f}' if ratio is not None else '—'} | "
            f"{f'{busy:.0%}' if busy is not None else '—'} | "
            f"{str(r['setup_s']) + ' s' if 'setup_s' in r else 'linked venv'} | "
            f"{r.get('exit_code')} | {r.get('closing_line', '') or '—'} |"
        )
    if result.get("isa"):
        caps = " ".join(f"{k}={v}" for k, v in ISA_CAPS[result["isa"]].items())
        lines[0] = lines[0].replace(
            "each target alone",
            f"held to its {result['isa'].upper()} path ({caps}; checked: {result['isa_check']}), "
            "each target alone",
        )
    for r in result["targets"]:
        if "floor" not in r:
            continue
        f = r["floor"]
        stages = ", ".join(f"{k} {v}" for k, v in r["stages_s"].items())
        lines += [
            "",
            f"Cold `{r['command']}`: inference path {r['inference_path_s']} s"
            + (
                f" + the warm server's loading {r['warm_load_s']} s ({r['warm_stages']} stages "
                "forked)"
                if r.get("warm_load_s")
                else ""
            )
            + " against a floor of "
            f"{f['total_s']} s (bare encode of {f['chunks']} chunks and {f['queries']} queries "
            f"{f['encode_s']} s in {f['embed_precision']}, bare generation of {f['answers']} "
            f"answers {f['generate_s']} s; models loaded in {f['model_load_s']} s apart): "
            f"**{r['inference_over_floor']}x the floor** (target <= 1.3); training "
            f"{r['training_s']} s, **{r['training_share']} of the run** (target <= 0.25). "
            f"Stages (s): {stages}."
            + (
                " Precisions: " + ", ".join(f"{k} {v}" for k, v in r["precision"].items()) + "."
                if r.get("precision")
                else ""
            )
            + (
                f" The generator's conversion (`ragrig prepare`, part of `make setup`) "
                f"{r['prepare_s']} s apart."
                if "prepare_s" in r
                else ""
            ),
        ]
    if result.get("baseline_s"):
        lines += ["", f"Baseline: {result['baseline_s']} s (the full suite before the two tiers)."]
    return "\n".join(lines)


def write_section(path: Path, text: str) -> None:
    body = path.read_text(encoding="utf-8") if path.exists() else ""
    block = f"{START}\n{text}\n{END}"
    if START in body and END in body:
        head, rest = body.split(START, 1)
        body = head + block + rest.split(END, 1)[1]
    else:
        body = body.rstrip("\n") + ("\n\n" if body else "") + block + "\n"
    path.write_text(body, encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--targets", nargs="+", choices=list(TARGETS), default=list(TARGETS))
    p.add_argument("--baseline-s", type=float, default=None, help="seconds the ratios refer to")
    p.add_argument("--venv", type=Path, default=None, help="link this venv instead of make setup")
    p.add_argument(
        "--workdir", type=Path, default=None, help="clones and logs (default: a temp dir)"
    )
    p.add_argument("--markdown", type=Path, default=None, help="file whose section is rewritten")
    p.add_argument("--smoke", action="store_true", help="one short pytest run, not the targets")
    p.add_argument("--repro-args", default=None, help='ARGS of `make repro`, e.g. "a.b=1 c=d"')
    p.add_argument(
        "--isa", choices=sorted(ISA_CAPS), default=None, help="run on this ISA's path (see above)"
    )
    p.add_argument("--json", type=Path, default=None)
    p.add_argument("--dataset-root", type=Path, help=argparse.SUPPRESS)  # run_all's; unused
    args = p.parse_args(argv)
    C.setup_env()
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="bench-suite-"))
    workdir.mkdir(parents=True, exist_ok=True)
    venv = args.venv
    if args.smoke and venv is None:
        venv = C.PROJECT_ROOT / ".venv" if (C.PROJECT_ROOT / ".venv").exists() else None
        venv = venv or Path(sys.executable).parent.parent
    targets = SMOKE_TARGET if args.smoke else {t: TARGETS[t] for t in args.targets}
    if args.repro_args and "repro" in targets:
        targets["repro"] = [*TARGETS["repro"], f"ARGS={args.repro_args}"]
    isa_check = None
    if args.isa:  # before this process loads torch (the floor runs here)
        os.environ.update(ISA_CAPS[args.isa])
        python = (venv / "bin/python") if venv is not None else Path(sys.executable)
        isa_check = check_isa(python, args.isa)
    results = []
    for name, cmd in targets.items():
        r = run_target(name, cmd, C.PROJECT_ROOT, venv, workdir)
        if args.baseline_s and "wall_s" in r:
            r["ratio_to_baseline"] = round(r["wall_s"] / args.baseline_s, 4)
        print(
            f"{name}: {r.get('wall_s')} s, exit {r.get('exit_code')}, {r.get('closing_line', '')}",
            flush=True,
        )
        results.append(r)
    result = {
        **C.header("suite"),
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "args": " ".join(argv if argv is not None else sys.argv[1:]),
        "machine": cpu_summary(),
        "baseline_s": args.baseline_s,
        "isa": args.isa,
        "isa_check": isa_check,
        "targets": results,
    }
    text = markdown(result)
    print(text)
    if args.markdown is not None:
        write_section(args.markdown, text)
    C.write_json(args.json, result)
    return 0 if all(r.get("exit_code") == 0 for r in results) else 1


if __name__ == "__main__":
    raise SystemExit(main())
