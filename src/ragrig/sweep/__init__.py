"""Sweeps through DVC experiments, as lazy in parallel as in sequence.

    python -m ragrig sweep --multirun retrieve.ef_search=32,64,128 chunk=document,recursive
    python -m ragrig sweep --multirun hydra/launcher=joblib ...   # or -j 2: two points at a time
    python -m ragrig sweep +experiment=hnsw_sweep                 # a preset of conf/experiment/
    python -m ragrig sweep queue -j 2 retrieve.ef_search=32,64,128  # through DVC's queue
    python -m ragrig sweep hydra/launcher=ray ...  # points as Ray tasks (or submitit_slurm,
                                                   # submitit_local): `launchers`
    python -m ragrig sweep prepare -S k=v  # the checks a sweep makes first (`make exp`)
    python -m ragrig sweep --executor worktree -j 2 ...  # long-lived in-process DVC workers,
                                                         # a git worktree per slot: `inprocess`

Every point is checked and composed before any runs (`grid`), and becomes
`dvc exp run --temp -S <override> ...`: stages whose command, code, inputs and params are
unchanged are restored from DVC's run-cache. Points that need the same not yet computed stage
configuration never run at once (`plan`): one computes it, the others restore it, so a parallel
sweep runs exactly the stages a sequential one does; a point that computes an embedding or
trains a model runs by itself, with every core (`--alone`). Each point prints one progress line; its
output goes to `<sweep dir>/logs/`. At the end the sweep prints a table of the swept values and
headline metrics, writes `<sweep dir>/rows.json`, and exits with the number of failed points.
MLflow: one parent run per sweep, each point's report run a child of it (`runs`).
"""

from ragrig.sweep.grid import (
    CONF_DIR,
    SweepError,
    check_overrides,
    compose_point,
    config_overrides,
    expand_presets,
    grid,
    label,
    preset_overrides,
    swept_keys,
)
from ragrig.sweep.prepare import link_dataset_root, missing_lock_outputs, prepare

__all__ = [
    "CONF_DIR",
    "SweepError",
    "check_overrides",
    "compose_point",
    "config_overrides",
    "expand_presets",
    "grid",
    "label",
    "link_dataset_root",
    "missing_lock_outputs",
    "prepare",
    "preset_overrides",
    "swept_keys",
]
