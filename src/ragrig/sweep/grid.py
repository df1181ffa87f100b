"""The points of a sweep: presets, the grid of overrides, each point's validated config, its label.

Every override is checked before any point runs: a config group option that does not exist and a
key no section has both stop the sweep with one line listing the valid choices.
"""

from __future__ import annotations

import difflib
import itertools
import re
from pathlib import Path
from typing import Any

import yaml

from ragrig.core.errors import RagrigError

CONF_DIR = Path.cwd() / "conf"
_PLAIN = re.compile(r"[A-Za-z0-9_./:+@-]*")
PRESET_GROUP = "experiment"


class SweepError(RagrigError):
    """A sweep cannot start or one of its points failed."""


def quote(value: str) -> str:
    """A Hydra override value: as is when plain, else single-quoted."""
    if _PLAIN.fullmatch(value):
        return value
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def config_overrides(overrides: list[str]) -> list[str]:
    """The overrides that change the config (not Hydra's own `hydra/...` settings)."""
    return [o for o in overrides if not o.lstrip("+~").startswith("hydra")]


def _key(override: str) -> str:
    return override.split("=", 1)[0].lstrip("+~")


def preset_overrides(name: str, conf_dir: Path | None = None) -> list[str]:
    """The sweep a preset `conf/experiment/<name>.yaml` declares under `hydra.sweeper.params`,
    as overrides (`key=v1,v2`). A preset holds nothing else, so a point's params are those of a
    plain run with the same overrides."""
    conf = Path(conf_dir or CONF_DIR)
    path = conf / PRESET_GROUP / f"{name}.yaml"
    if not path.is_file():
        found = sorted(p.stem for p in (conf / PRESET_GROUP).glob("*.yaml"))
        raise SweepError(f"no sweep preset {name!r} ({path}); presets: {', '.join(found)}")
    data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    params = ((data.get("hydra") or {}).get("sweeper") or {}).get("params")
    other = sorted(k for k in data if k != "hydra")
    if not isinstance(params, dict) or not params or other:
        raise SweepError(
            f"{path}: a sweep preset holds only hydra.sweeper.params (a mapping of key to "
            f"values){'; found ' + ', '.join(other) if other else ''}"
        )
    return [f"{k}={v}" for k, v in params.items()]


def expand_presets(overrides: list[str], conf_dir: Path | None = None) -> list[str]:
    """Replace `+experiment=<name>` by its sweep; keys given on the command line win."""
    presets, rest = [], []
    for o in overrides:
        (presets if _key(o) == PRESET_GROUP else rest).append(o)
    given = {_key(o) for o in rest}
    expanded = [
        o
        for p in presets
        for o in preset_overrides(p.split("=", 1)[1], conf_dir)
        if _key(o) not in given
    ]
    return expanded + rest


def grid(overrides: list[str], conf_dir: Path | None = None) -> list[list[str]]:
    """Every point of a sweep: the product of each override's values (`a=1,2 b=x,y` -> 4). An
    override Hydra cannot read, or one reading the environment, is refused (ConfigError, one
    line quoting it) before any point exists."""
    from ragrig.compose.params import parse_overrides

    choices = []
    parsed = parse_overrides(config_overrides(expand_presets(overrides, conf_dir)))
    for o in parsed:
        if o.is_sweep_override():
            key = o.get_key_element()
            # each value comes back in override syntax (quoted when it needs to be)
            choices.append([f"{key}={v}" for v in o.sweep_string_iterator()])
        else:
            choices.append([o.input_line])
    return [list(p) for p in itertools.product(*choices)]


def swept_keys(overrides: list[str], conf_dir: Path | None = None) -> dict[str, list[str]]:
    """The keys that take more than one value, with their values in override syntax."""
    points = grid(overrides, conf_dir)
    values: dict[str, list[str]] = {}
    for point in points:
        for o in point:
            values.setdefault(_key(o), [])
            v = o.split("=", 1)[1]
            if v not in values[_key(o)]:
                values[_key(o)].append(v)
    return {k: v for k, v in values.items() if len(v) > 1}


def label(point: list[str], swept: dict[str, list[str]]) -> str:
    """The point's swept values only: `chunk=recursive retrieve.ef_search=64`."""
    shown = [o.lstrip("+~") for o in point if _key(o) in swept]
    return " ".join(shown) or "(single point)"


def _flat_keys(cfg: Any, prefix: str = "") -> list[str]:
    if not isinstance(cfg, dict):
        return []
    keys = []
    for k, v in cfg.items():
        name = f"{prefix}.{k}" if prefix else str(k)
        keys.append(name)
        keys += _flat_keys(v, name)
    return keys


def group_options(group: str, conf_dir: Path | None = None) -> list[str] | None:
    """The options of a config group (`retrieve`, `index/dense`), None when it is not a group."""
    folder = Path(conf_dir or CONF_DIR) / group
    if not folder.is_dir():
        return None
    return sorted(p.stem for p in folder.glob("*.yaml"))


def _check_groups(point: list[str], conf_dir: Path | None = None) -> list[str]:
    """Refuse an unknown config group option; return the overrides that set keys."""
    keys = []
    for o in point:
        if o.startswith(("+", "~")) or "=" not in o:
            continue  # `+k=v` adds a key on purpose; `~k` deletes one
        key, value = o.split("=", 1)
        options = group_options(key, conf_dir)
        if options is None:
            keys.append(key)
        elif value.strip("'\"") not in options:
            raise SweepError(
                f"unknown option {key}={value}: valid choices for {key} are {', '.join(options)}"
            )
    return keys


def check_overrides(point: list[str], conf_dir: Path | None = None) -> None:
    """Refuse an unknown config group option or an unknown key, naming the valid ones."""
    from ragrig.compose.params import compose

    keys = _check_groups(point, conf_dir)
    if not keys:
        return
    groups = [o for o in point if "=" in o and _key(o) not in keys and o[:1] not in "+~"]
    known = _flat_keys(compose(conf_dir or CONF_DIR, groups))
    for key in keys:
        if key in known:
            continue
        section = key.rsplit(".", 1)[0] if "." in key else ""
        same = [k for k in known if k.rsplit(".", 1)[0] == section] if section else []
        near = difflib.get_close_matches(key, same or known, n=3, cutoff=0.6)
        hint = (
            f"nearest valid keys: {', '.join(near)}"
            if near
            else (f"valid keys under {section}: {', '.join(same)}" if same else "no such section")
        )
        raise SweepError(f"unknown key {key!r} ({hint}); add a new key with +{key}=...")


def compose_point(point: list[str], conf_dir: Path | None = None) -> dict[str, Any]:
    """Check, compose and validate one point's config exactly as `dvc exp run -S` will."""
    from hydra.errors import HydraException

    from ragrig.compose.params import ConfigError, compose, validate_composition

    _check_groups(point, conf_dir)
    try:
        cfg = compose(conf_dir or CONF_DIR, point)
    except (HydraException, ConfigError):
        check_overrides(point, conf_dir)  # names the unknown key and its nearest valid ones
        raise
    validate_composition(cfg)
    return cfg
