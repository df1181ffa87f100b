"""Hydra multirun entry point: every sweep point runs the DVC pipeline as a temporary experiment.

    python -m ragrig.sweep --multirun retrieve.ef_search=32,64,128 chunk=document,recursive

Each point becomes `dvc exp run --temp -S <override> ...`, so stages whose command, code, inputs
and params are unchanged are restored from DVC's run-cache instead of being recomputed, and each
point's report stage logs its own MLflow run into the project's store.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

CONF_DIR = str(Path.cwd() / "conf")


def point_overrides(task_overrides: list[str], dataset_root: str, project: Path) -> list[str]:
    """The point's overrides, plus an absolute dataset root when the configured one is a relative
    path outside the project (a temporary experiment copy lives elsewhere)."""
    overrides = list(task_overrides)
    root = Path(dataset_root)
    if not root.is_absolute():
        resolved = (project / root).resolve()
        if not resolved.is_relative_to(project.resolve()):
            overrides.append(f"dataset.root={resolved}")
    return overrides


def run_point(overrides: list[str], project: Path) -> int:
    from ragrig.report.tracking import ENV_URI, tracking_uri
    from ragrig.stage import ENV_STAGE_LOG, stage_log_path

    env = dict(os.environ)
    env.setdefault(ENV_URI, tracking_uri(None, project))
    env.setdefault(ENV_STAGE_LOG, str(stage_log_path()))
    cmd = ["dvc", "exp", "run", "--temp"]
    for o in overrides:
        cmd += ["-S", o]
    print("sweep point:", " ".join(cmd), flush=True)
    return subprocess.run(cmd, cwd=project, env=env).returncode


def _app() -> None:
    import hydra
    from hydra.core.hydra_config import HydraConfig
    from omegaconf import DictConfig, OmegaConf

    @hydra.main(config_path=CONF_DIR, config_name="config", version_base=None)
    def point(cfg: DictConfig) -> int:
        from ragrig.config import validate_all

        validate_all(OmegaConf.to_container(cfg, resolve=True))  # fail before any compute
        project = Path(hydra.utils.get_original_cwd())
        overrides = point_overrides(
            list(HydraConfig.get().overrides.task), cfg.dataset.root, project
        )
        code = run_point(overrides, project)
        if code != 0:
            raise RuntimeError(f"sweep point {overrides} failed with exit code {code}")
        return code

    point()


def main() -> None:
    # Hydra's own outputs stay out of the project tree's tracked folders.
    if not any(a.startswith("hydra.sweep.dir=") for a in sys.argv[1:]):
        sys.argv.append("hydra.sweep.dir=.ragrig/multirun/${now:%Y-%m-%d_%H-%M-%S}")
    if not any(a.startswith("hydra.run.dir=") for a in sys.argv[1:]):
        sys.argv.append("hydra.run.dir=.ragrig/run/${now:%Y-%m-%d_%H-%M-%S}")
    _app()


if __name__ == "__main__":
    main()
