"""Which points of a sweep may run at the same time without computing the same stage twice.

A stage's result is fixed by its own params (the sections `dvc.yaml` lists for it) and the
results of the stages it reads. So each point gets one key per stage: a hash of the stage's
params and its upstream stages' keys. A point that runs computes every stage key it needs that
no finished point has produced (the others come from DVC's run-cache). Two running points must
never need the same uncomputed key: the first runs it and caches it, the second then restores it.
`Schedule` hands out points under that rule, so a parallel sweep runs exactly the stages a
sequential one runs.

Some stages already use every core they are given (`runtime.threads`), and their output may
depend on that thread count (bf16 products round by it on some CPUs): the embedder and the
training stages. Two of them side by side on the same cores take far longer than one after the
other (on 2 cores, two SciFact embeddings took 719 s and 671 s where one at a time took 173 s and
120 s). A point that still has to compute one of these `alone` stages runs by itself; the points
that only need cheaper stages (index, retrieve onwards) fan out.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

# A dependency on a file of this name is a gate: its stage writes the same bytes whenever it lets
# the run go on (data/estimate/ok: within budget) and fails otherwise, so the stage reading it
# runs after it but its result does not depend on the gate's params.
GATE_FILE = "ok"


@dataclass(frozen=True)
class StageGraph:
    """The stages of dvc.yaml in order: the params each reads and the stages it reads from
    (`upstream`; `gates`: those it reads only a gate file of, which order it but key nothing)."""

    params: dict[str, list[str]]
    upstream: dict[str, list[str]]
    gates: dict[str, list[str]] = field(default_factory=dict)

    @classmethod
    def from_dvc_yaml(cls, path: Path) -> StageGraph:
        stages = (yaml.safe_load(path.read_text(encoding="utf-8")) or {}).get("stages") or {}
        outs = {
            name: [str(o) for o in (spec.get("outs") or []) if isinstance(o, str)]
            for name, spec in stages.items()
        }
        params: dict[str, list[str]] = {}
        upstream: dict[str, list[str]] = {}
        gates: dict[str, list[str]] = {}

        def reads(deps: list[str], paths: list[str]) -> bool:
            return any(d == p or d.startswith(p.rstrip("/") + "/") for d in deps for p in paths)

        for name, spec in stages.items():
            params[name] = [str(p) for p in spec.get("params") or [] if isinstance(p, str)]
            deps = [str(d) for d in spec.get("deps") or []]
            data = [d for d in deps if Path(d).name != GATE_FILE]
            gated = [d for d in deps if Path(d).name == GATE_FILE]
            upstream[name] = [o for o, paths in outs.items() if o != name and reads(data, paths)]
            gates[name] = [
                o
                for o, paths in outs.items()
                if o != name and o not in upstream[name] and reads(gated, paths)
            ]
        return cls(params, upstream, gates)


#: stages that run with every core: a point computing one of them runs alone on this machine
ALONE_STAGES = frozenset({"train_embed", "embed", "train_rerank", "train_verifier"})


def _lookup(cfg: dict[str, Any], dotted: str) -> Any:
    node: Any = cfg
    for part in dotted.split("."):
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return node


def stage_keys(cfg: dict[str, Any], graph: StageGraph) -> dict[str, str]:
    """One key per stage: its params and its upstream stages' keys, hashed."""
    keys: dict[str, str] = {}

    def key(stage: str) -> str:
        if stage not in keys:
            body = {
                "stage": stage,
                "params": {p: _lookup(cfg, p) for p in graph.params[stage]},
                "upstream": sorted(key(u) for u in graph.upstream[stage]),
            }
            keys[stage] = hashlib.sha256(
                json.dumps(body, sort_keys=True, default=str).encode()
            ).hexdigest()[:16]
        return keys[stage]

    for stage in graph.params:
        key(stage)
    return keys


@dataclass
class Schedule:
    """Hands out the points (by index) in order, never two at once that need the same stage
    key no finished point has produced, and a point that needs an uncomputed key of an `alone`
    stage only when nothing else runs (nothing else starts beside it)."""

    keys: list[dict[str, str]]
    alone: frozenset[str] = frozenset()
    done: set[str] = field(default_factory=set)
    running: dict[int, set[str]] = field(default_factory=dict)
    pending: list[int] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.pending = list(range(len(self.keys)))

    def _needs(self, i: int) -> set[str]:
        return set(self.keys[i].values()) - self.done

    def needs_alone(self, i: int) -> bool:
        """Point i would compute a stage that runs with every core."""
        return any(self.keys[i][s] not in self.done for s in self.alone if s in self.keys[i])

    def ready(self, slots: int) -> list[int]:
        """Points that may start now, at most `slots` of them."""
        started: list[int] = []
        for i in list(self.pending):
            if len(started) >= slots or any(self.needs_alone(r) for r in self.running):
                break
            busy = set().union(*self.running.values()) if self.running else set()
            needs = self._needs(i)
            if needs & busy or (self.running and self.needs_alone(i)):
                continue
            self.pending.remove(i)
            self.running[i] = needs
            started.append(i)
        return started

    def finish(self, i: int, ok: bool) -> None:
        """A point ended; when it succeeded its stage keys are computed (cached) from now on."""
        needs = self.running.pop(i)
        if ok:
            self.done |= needs | set(self.keys[i].values())

    def batches(self, slots: int) -> list[list[int]]:
        """The whole order as successive batches, each batch finishing before the next starts
        (for executors that cannot be fed one point at a time); assumes every point succeeds."""
        out = []
        while self.pending:
            batch = self.ready(len(self.keys))
            for i in batch:
                self.finish(i, True)
            out.append(batch)
        return out

    def distinct(self, stage: str) -> int:
        """How many different configurations of `stage` the points need (the minimum runs)."""
        return len({k[stage] for k in self.keys})
