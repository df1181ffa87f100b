"""Config loading: each stage validates its own params.yaml section with a frozen pydantic model.

The models live beside their stage (`ragrig/<stage>/config.py`) and are imported lazily, so a
stage depends on its own schema only: editing the judge's schema never invalidates the embed
stage's cache.
"""

from __future__ import annotations

import importlib
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from ragrig.core.errors import ConfigError


class Section(BaseModel):
    """Base of every config section: frozen, unknown keys rejected."""

    # allow_inf_nan off: a timeout, threshold or weight of inf or nan passes every bound as a
    # number but means nothing
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


# Every seed: numpy's legacy `np.random.seed` (ragrig.runtime.stage.apply_seed, transformers'
# set_seed) takes 0 .. 2**32 - 1, and llama.cpp's seed is a uint32.
Seed = Annotated[int, Field(ge=0, le=2**32 - 1)]
# an item of a list of names, paths, patterns or separators: the empty string means nothing
NonEmptyStr = Annotated[str, Field(min_length=1)]
# The longest wait before a retry of an HTTP model call (generate, the LLM judge): a 429 whose
# Retry-After asks for more is an error at once (ragrig.llm.http.retry_delay).
RetryWait = Annotated[
    float,
    Field(
        gt=0,
        le=3600,
        description="longest wait before a retry: a 429 whose Retry-After asks for more is an "
        "error at once",
    ),
]


class RuntimeConfig(Section):
    seed: Seed = 13
    threads: int = Field(2, gt=0)


# The first line of the placeholder files conf/system/none.* (DVC warns about an empty dependency).
PLACEHOLDER = "# ragrig placeholder"


def refuse_placeholder(path: Path, key: str) -> None:
    """A ConfigError when `path` is one of the placeholders: `key` was left at its default."""
    try:
        with open(path, encoding="utf-8") as fh:
            first = fh.readline()
    except (OSError, UnicodeDecodeError):
        return
    if first.startswith(PLACEHOLDER):
        raise ConfigError(f"{key} is the placeholder {path}: set it to your file")


class SystemConfig(Section):
    """The team's own system under test (docs/own-system.md): the files retrieve=run_file and
    generate=answers_file read, each a DVC dependency of its stage only."""

    run_file: NonEmptyStr = Field(
        "conf/system/none.run", description="rankings: TREC run, JSONL or parquet"
    )
    answers_file: NonEmptyStr = Field(
        "conf/system/none.jsonl", description="answers: JSONL, one object per query"
    )


SECTIONS: dict[str, str] = {
    "dataset": "ragrig.dataset.config:DatasetConfig",
    "parse": "ragrig.parse.config:ParseConfig",
    "chunk": "ragrig.chunk.config:ChunkConfig",
    "embed": "ragrig.embed.config:EmbedConfig",
    "index": "ragrig.index.config:IndexConfig",
    "retrieve": "ragrig.retrieve.config:RetrieveConfig",
    "filters": "ragrig.retrieve.config:FilterConfig",
    "rerank": "ragrig.rerank.config:RerankConfig",
    "generate": "ragrig.generate.config:GenerateConfig",
    "train_verifier": "ragrig.train_verifier.config:TrainVerifierConfig",
    "train_rerank": "ragrig.train_rerank.config:TrainRerankConfig",
    "train_embed": "ragrig.train_embed.config:TrainEmbedConfig",
    "judge": "ragrig.judge.config:JudgeConfig",
    "report": "ragrig.report.config:ReportConfig",
    "runtime": "ragrig.core.config:RuntimeConfig",
    "system": "ragrig.core.config:SystemConfig",
    "budget": "ragrig.report.estimate:BudgetConfig",
    # the shared run-cache (a DVC remote); no stage reads it, so choosing one recomputes nothing
    "storage": "ragrig.storage.remote:StorageConfig",
}


def section_schema(name: str) -> Any:
    """The pydantic type (model or discriminated union) of one section."""
    if name not in SECTIONS:
        raise ConfigError(f"unknown config section {name!r}; known: {sorted(SECTIONS)}")
    module, _, attr = SECTIONS[name].partition(":")
    return getattr(importlib.import_module(module), attr)


# DVC's run-cache key silently drops every parameter with one of these names, at any depth
# (treeverse/dvc#10296): a stage whose only change is such a parameter would be restored from the
# cache entry of its old value. No ragrig parameter may carry them.
RESERVED_KEYS = frozenset({"size", "nfiles"})


def reserved_key_paths(raw: Any, prefix: str = "") -> list[str]:
    """Dotted paths of every mapping key named `size` or `nfiles`, at any depth (lists included)."""
    found: list[str] = []
    if isinstance(raw, dict):
        for key, value in raw.items():
            path = f"{prefix}.{key}" if prefix else str(key)
            if str(key) in RESERVED_KEYS:
                found.append(path)
            found.extend(reserved_key_paths(value, path))
    elif isinstance(raw, list):
        for i, value in enumerate(raw):
            found.extend(reserved_key_paths(value, f"{prefix}[{i}]"))
    return found


def reject_reserved_keys(raw: Any, prefix: str = "") -> None:
    """Raise ConfigError naming every parameter DVC's run-cache would ignore."""
    paths = reserved_key_paths(raw, prefix)
    if paths:
        raise ConfigError(
            f"parameter name(s) {', '.join(paths)} not allowed: DVC's run-cache ignores "
            "parameters named 'size' or 'nfiles' (treeverse/dvc#10296), so a change to them "
            "would silently restore stale outputs; rename the key (e.g. chunk.max_tokens)"
        )


def validation_problems(name: str, exc: ValidationError) -> str:
    """pydantic's errors on one line: each as `<section>.<field path>: <message>`, a number
    given shown after it (a string is not: it may be a URL holding a secret)."""
    problems = []
    for err in exc.errors(include_url=False):
        where = ".".join(str(part) for part in (name, *err["loc"]))
        given = err.get("input")
        shown = f" (got {given!r})" if isinstance(given, int | float) else ""
        problems.append(f"{where}: {err['msg']}{shown}")
    return "; ".join(problems)


def validate_section(name: str, raw: Any) -> Any:
    """Validate one config section; raise ConfigError naming the section, each field path and
    its problem, on one line."""
    reject_reserved_keys(raw, name)
    schema = section_schema(name)
    try:
        return TypeAdapter(schema).validate_python(raw)
    except ValidationError as exc:
        raise ConfigError(
            f"invalid config section {name!r}: {validation_problems(name, exc)}"
        ) from exc


def validate_all(cfg: dict[str, Any]) -> dict[str, Any]:
    """Validate every section of a composed config; raise on a missing or unknown section."""
    reject_reserved_keys(cfg)
    missing = set(SECTIONS) - set(cfg)
    extra = set(cfg) - set(SECTIONS)
    if missing or extra:
        raise ConfigError(f"config sections missing: {sorted(missing)}, unknown: {sorted(extra)}")
    return {name: validate_section(name, cfg[name]) for name in SECTIONS}


# Environment variables whose values are credentials, by name. A value shorter than 8
# characters is too likely to occur by chance (a flag, a port) to be matched.
_SECRET_NAME = re.compile(
    r"SECRET|TOKEN|PASSW|API_?KEY|ACCESS_?KEY|PRIVATE_?KEY|CREDENTIAL|SESSION_?KEY", re.I
)
_SECRET_MIN_LEN = 8


def secret_params(raw: Any, env: Mapping[str, str] | None = None) -> list[tuple[str, str]]:
    """(parameter path, environment variable name) for every string parameter that holds the
    value of a credential-named environment variable, whole or inside it (a URL, a path)."""
    env = os.environ if env is None else env
    secrets = {
        value: name
        for name, value in sorted(env.items())
        if _SECRET_NAME.search(name) and len(value) >= _SECRET_MIN_LEN
    }
    found: list[tuple[str, str]] = []

    def walk(value: Any, where: str) -> None:
        if isinstance(value, dict):
            for key, item in value.items():
                walk(item, f"{where}.{key}" if where else str(key))
        elif isinstance(value, list):
            for i, item in enumerate(value):
                walk(item, f"{where}[{i}]")
        elif isinstance(value, str):
            for secret, name in secrets.items():
                if secret in value:
                    found.append((where, name))
                    break

    if secrets:
        walk(raw, "")
    return sorted(found)


def refuse_secret_params(raw: Any, path: str | Path) -> None:
    """Raise one ConfigError line naming each parameter that holds a credential's value (never
    the value): resolved into params.yaml (e.g. `dvc exp run -S 'x=${oc.env:AWS_SECRET_...}'`),
    it would reach dvc.lock, the stage outputs, the DVC cache and the experiment's commits."""
    found = secret_params(raw)
    if found:
        shown = ", ".join(f"{p} (${n})" for p, n in found[:3])
        more = f", … and {len(found) - 3} more" if len(found) > 3 else ""
        word, verb = ("parameter", "holds") if len(found) == 1 else ("parameters", "hold")
        named = f"{len(found)} {word} ({shown}{more})"
        raise ConfigError(
            f"{path}: {named} {verb} the value of a credential environment variable; a secret "
            "is never written into the configuration: restore it (make params) and pass "
            "credentials through the environment at run time (docs/configuration.md)"
        )


def load_params(path: str | Path = "params.yaml") -> dict[str, Any]:
    """Read the composed params file DVC tracks; refused when a parameter holds the value of a
    credential environment variable (checked before any stage writes anything)."""
    with open(path, encoding="utf-8") as fh:
        data = yaml.safe_load(fh)
    if not isinstance(data, dict):
        raise ConfigError(f"{path} does not hold a mapping")
    refuse_secret_params(data, path)
    return data


def load_section(name: str, path: str | Path = "params.yaml") -> Any:
    """Read and validate one section of params.yaml (what a stage wrapper calls)."""
    params = load_params(path)
    if name not in params:
        raise ConfigError(f"{path} has no {name!r} section")
    return validate_section(name, params[name])


def load_config_file(model: type[Section], path: Path | None, default: str) -> Any:
    """A command's own YAML config (conf/gate.yaml, conf/traces.yaml) validated by `model`: the
    model's defaults when `path` is None or is the `default` path and absent; any other missing
    file, YAML error or schema error is one ConfigError line naming the file."""
    if path is None or not Path(path).exists():
        if path is not None and str(path) != default:
            raise ConfigError(f"no config file {path}")
        return model()
    try:
        raw = yaml.safe_load(Path(path).read_text(encoding="utf-8")) or {}
        return model.model_validate(raw)
    except Exception as exc:  # one line, whatever the YAML or schema said
        raise ConfigError(f"{path}: {' '.join(str(exc).split())[:300]}") from None
