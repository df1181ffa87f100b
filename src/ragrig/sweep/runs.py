"""The sweep's MLflow parent run and its child runs (one per point).

The sweep creates the parent before any point; every point's process gets
`RAGRIG_SWEEP_PARENT_RUN_ID` and `RAGRIG_SWEEP_POINT` (its label), which the report stage reads to
log its run as a child named after the point. A point that fails before its report gets a FAILED
child run from the sweep, tagged with its error. Rerunning the same grid reuses the parent of the
earlier sweep (tag `ragrig.sweep_grid`), so a fully cached rerun creates no run at all.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from dataclasses import dataclass
from typing import Any

from ragrig.tracking.contents import ENV_PARENT, ENV_POINT, TAG_PARENT
from ragrig.tracking.contents import TAG_SWEEP_POINT as TAG_POINT
from ragrig.tracking.run import TAG_ERROR

TAG_SWEEP = "ragrig.sweep"
TAG_GRID = "ragrig.sweep_grid"
TAG_NAME = "mlflow.runName"


def grid_hash(point_params: list[dict[str, Any]]) -> str:
    """The identity of a sweep: its points' full params, in order."""
    return hashlib.sha256(json.dumps(point_params, sort_keys=True).encode()).hexdigest()


@dataclass
class ParentRun:
    uri: str
    experiment_id: str
    run_id: str
    reused: bool

    @classmethod
    def open(
        cls,
        uri: str,
        experiment: str,
        swept: dict[str, list[str]],
        point_params: list[dict[str, Any]],
        artifacts: str | None = None,
    ) -> ParentRun:
        """The parent of this grid: the earlier sweep's when the same grid ran before (set
        RUNNING again), else a new run `sweep <timestamp> <swept keys>`."""
        from mlflow.tracking import MlflowClient

        from ragrig.tracking.run import ensure_experiment

        exp_id = ensure_experiment(uri, experiment, artifacts=artifacts)
        client = MlflowClient(tracking_uri=uri)
        ghash = grid_hash(point_params)
        found = client.search_runs(
            [exp_id],
            filter_string=f"tags.`{TAG_GRID}` = '{ghash}'",
            order_by=["attributes.start_time DESC"],
            max_results=1,
        )
        if found:
            run_id = found[0].info.run_id
            client.update_run(run_id, status="RUNNING")
            return cls(uri, exp_id, run_id, True)
        stamp = time.strftime("%Y-%m-%d %H:%M:%S")
        name = f"sweep {stamp} {' '.join(swept) or '(one point)'}"
        run = client.create_run(exp_id, run_name=name, tags={TAG_SWEEP: "1", TAG_GRID: ghash})
        from ragrig.metrics.aggregate import mlflow_key

        params = {mlflow_key(k): ",".join(v)[:6000] for k, v in swept.items()}
        params["n_points"] = str(len(point_params))
        for k, v in params.items():
            client.log_param(run.info.run_id, k, v)
        return cls(uri, exp_id, run.info.run_id, False)

    def env(self, point_label: str) -> dict[str, str]:
        return {ENV_PARENT: self.run_id, ENV_POINT: point_label}

    def child(self, point_label: str, params_hash: str, since_ms: int) -> Any | None:
        """The point's run: the child logged under this parent with the point's label, else
        the latest finished run of exactly these params (a report restored from DVC's
        run-cache logs none: its earlier run holds its metrics)."""
        from mlflow.tracking import MlflowClient

        client = MlflowClient(tracking_uri=self.uri)
        label = point_label.replace("'", "\\'")
        for filt in (
            f"tags.`{TAG_PARENT}` = '{self.run_id}' and tags.`{TAG_POINT}` = '{label}' "
            "and attributes.status = 'FINISHED'",
            f"tags.params_hash = '{params_hash}' and attributes.status = 'FINISHED'",
        ):
            runs = client.search_runs(
                [self.experiment_id],
                filter_string=filt,
                order_by=["attributes.start_time DESC"],
                max_results=1,
            )
            if runs:
                run = runs[0]
                if run.info.start_time >= since_ms and run.data.tags.get(TAG_PARENT) is None:
                    # logged by this sweep by a report stage that does not read the sweep's
                    # variables (a DVC queue worker keeps the environment it started with)
                    self.adopt(run.info.run_id, point_label)
                return run
        return None

    def adopt(self, run_id: str, point_label: str) -> None:
        from mlflow.tracking import MlflowClient

        client = MlflowClient(tracking_uri=self.uri)
        client.set_tag(run_id, TAG_PARENT, self.run_id)
        client.set_tag(run_id, TAG_POINT, point_label)
        client.set_tag(run_id, TAG_NAME, point_label)

    def has_child(self, point_label: str, since_ms: int) -> bool:
        """Whether the point's report stage logged a run (of any status) in this sweep."""
        from mlflow.tracking import MlflowClient

        label = point_label.replace("'", "\\'")
        runs = MlflowClient(tracking_uri=self.uri).search_runs(
            [self.experiment_id],
            filter_string=f"tags.`{TAG_PARENT}` = '{self.run_id}' and tags.`{TAG_POINT}` = '{label}'",
            max_results=5,
        )
        return any(r.info.start_time >= since_ms for r in runs)

    def failed_child(self, point_label: str, params: dict[str, str], error: str) -> str:
        """A FAILED child run for a point that ended before its report stage logged one."""
        from mlflow.tracking import MlflowClient

        client = MlflowClient(tracking_uri=self.uri)
        run = client.create_run(
            self.experiment_id,
            run_name=point_label,
            tags={
                TAG_PARENT: self.run_id,
                TAG_POINT: point_label,
                TAG_ERROR: error[-4000:],
            },
        )
        for k, v in params.items():
            client.log_param(run.info.run_id, k, v)
        client.set_terminated(run.info.run_id, status="FAILED")
        return run.info.run_id

    def close(self, n_failed: int, n_points: int) -> None:
        from mlflow.tracking import MlflowClient

        client = MlflowClient(tracking_uri=self.uri)
        if not self.reused:
            client.log_metric(self.run_id, "n_failed", n_failed)
            client.log_metric(self.run_id, "n_points", n_points)
        client.set_terminated(self.run_id, status="FAILED" if n_failed else "FINISHED")


def now_ms() -> int:
    return int(time.time() * 1000)


def run_metrics(run: Any) -> dict[str, float]:
    return {k: float(v) for k, v in run.data.metrics.items()} if run is not None else {}


os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
