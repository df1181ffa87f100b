"""The five guardrails of `ragrig traces` on a synthetic day with injected incidents.

    python benchmarks/bench_guardrails.py [--per-hour 3000] [--sample-rate 0.05]
    python benchmarks/bench_guardrails.py --smoke        # the 20-document fixture, 200 lines/h

A day of traffic (ragrig.traces.synthetic.write_incident_day, built from the dataset's corpus)
is clean for 18 hours; in the last six, a retrieval regression in one locale (hours 18-23), a
latency spike (19-20), a cost spike (21) and a filter that starts excluding one locale's gold
(22-23). The command itself evaluates it in a child process (the project's params.yaml judge,
hourly windows, conf/traces.yaml's guardrail bounds, no MLflow, no query-drift embedding), and
its `traces.json` is read back.

Target: every injected fault raises its guardrail's alert in each of its hours, and no alert
fires in the 18 clean hours. Reported per guardrail: the hours expected, alerted, missed, the
alerts outside its hours (in a clean hour, a false alarm; in another incident hour, a side
effect: a regression's users regenerate its answers), and the slices the alerts named; the exit
status, the wall time and the throughput.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time

import _common as C

# the five guardrails, then the two other axes' floors (no injected fault of their own: their
# alerts in an incident's hours are side effects, in a clean hour false alarms)
GUARDRAILS = ("faithfulness", "latency", "filter_false_exclusion", "regeneration", "cost",
              "relevance", "correctness")  # fmt: skip


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--per-hour", type=int, default=3000)
    p.add_argument("--sample-rate", type=float, default=0.05)
    p.add_argument("--seed", type=int, default=13)
    p.add_argument("--workdir", type=C.Path, default=None)
    p.add_argument("--smoke", action="store_true", help="the fixture's corpus, 200 lines a hour")
    C.add_common_args(p)
    args = p.parse_args(argv)
    C.setup_env()
    import yaml

    from ragrig.traces.synthetic import (
        FILTERED_LOCALE,
        INCIDENTS,
        REGRESSED_LOCALE,
        write_incident_day,
    )

    per_hour = 200 if args.smoke else args.per_hour
    work = args.workdir or C.Path(tempfile.mkdtemp(prefix="bench-guardrails-"))
    work.mkdir(parents=True, exist_ok=True)
    corpus = args.dataset_root / "corpus.jsonl"
    if not corpus.exists():  # BEIR folders ship it gzipped too
        corpus = corpus.with_suffix(".jsonl.gz")
    log = write_incident_day(work / "day.jsonl", corpus, per_hour, args.seed)
    raw = yaml.safe_load((C.PROJECT_ROOT / "conf/traces.yaml").read_text())
    raw.update(sample_rate=args.sample_rate, mlflow=False, drift={**raw["drift"], "queries": False})
    config = work / "traces.yaml"
    config.write_text(yaml.safe_dump(raw), encoding="utf-8")
    out = work / "out"
    cmd = [sys.executable, "-m", "ragrig", "traces", str(log), "--params", str(args.params),
           "--config", str(config), "--out", str(out), "--no-mlflow", "--quiet"]  # fmt: skip
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=work)
    wall = time.perf_counter() - t0
    if proc.returncode not in (0, 1):
        raise SystemExit(f"ragrig traces failed ({proc.returncode}): {proc.stderr[-2000:]}")
    summary = json.loads((out / "traces.json").read_text())
    checks = summary["guardrails"]
    hour = {c["window"]: int(c["window"][11:13]) for c in checks}
    incident_hours = set().union(*(set(h) for h in INCIDENTS.values()))
    per: dict[str, dict] = {}
    for g in GUARDRAILS:
        mine = [c for c in checks if c["guardrail"] == g or c["guardrail"].startswith(g + "[")]
        alerted = sorted({hour[c["window"]] for c in mine if c["status"] == "alert"})
        expected = sorted(INCIDENTS.get(g, ()))
        per[g] = {
            "expected_hours": expected,
            "alerted_hours": alerted,
            "missed_hours": sorted(set(expected) - set(alerted)),
            "false_alarm_hours": sorted(set(alerted) - incident_hours),
            "side_effect_hours": sorted((set(alerted) & incident_hours) - set(expected)),
            "too_few_windows": sum(c["status"] == "too few" for c in mine),
            "slices_named": sorted(
                {s.split(" ")[0] for c in mine if c["status"] == "alert" for s in c["slices"]}
            ),
        }
    missed = sum(len(v["missed_hours"]) for v in per.values())
    # every alert line (the relevance and correctness floors too) in a clean hour is a false one
    clean_lines = [
        a for a in summary["alerts"] if int(a.split(" ")[2][11:13]) not in incident_hours
    ]
    false = len(clean_lines)
    result = {
        **C.header("guardrails"),
        "config": {
            "per_hour": per_hour,
            "lines": 24 * per_hour,
            "sample_rate": args.sample_rate,
            "seed": args.seed,
            "corpus": str(corpus),
            "incidents": {k: list(v) for k, v in INCIDENTS.items()},
            "regressed_locale": REGRESSED_LOCALE,
            "filtered_locale": FILTERED_LOCALE,
            "guardrails": raw["guardrails"],
            "floors": raw["floors"],
        },
        "exit": proc.returncode,
        "wall_s": round(wall, 2),
        "evaluate_s": summary["seconds"],
        "lines": summary["lines"],
        "judged": summary["judged"],
        "lines_per_s": round(summary["lines"] / wall, 1),
        "judged_per_s": round(summary["judged"] / wall, 1),
        "alerts": summary["alerts"],
        "per_guardrail": per,
        "missed": missed,
        "false_alarms": false,
        "false_alarm_lines": clean_lines,
        "target_met": missed == 0 and false == 0,
    }

    def hours(h: list[int]) -> str:
        return ",".join(map(str, h)) or "-"

    rows = [
        [g, hours(v["expected_hours"]), hours(v["alerted_hours"]), hours(v["missed_hours"]),
         hours(v["false_alarm_hours"]), hours(v["side_effect_hours"]),
         ", ".join(v["slices_named"]) or "-"]
        for g, v in per.items()
    ]  # fmt: skip
    C.print_table(
        "guardrails on the injected day (hours of the day)",
        ["guardrail", "injected", "alerted", "missed", "false alarms", "side effects", "slices"],
        rows,
    )
    print(
        f"{result['lines']} lines, {result['judged']} judged, exit {proc.returncode}, "
        f"{result['wall_s']} s ({result['lines_per_s']} lines/s); missed {missed}, false "
        f"alarms {false}: target {'met' if result['target_met'] else 'NOT met'}"
    )
    C.write_json(args.json, result)
    return result


if __name__ == "__main__":
    main()
