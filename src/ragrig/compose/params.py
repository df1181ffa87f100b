"""Compose conf/ into params.yaml exactly as `dvc exp run` does with Hydra enabled."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from ragrig.core.errors import ConfigError

QUOTING_HINT = (
    "a value with spaces or any of ( ) [ ] { } , = ~ ' # needs Hydra quotes inside the shell's: "
    "\"dataset.root='/a b/c'\" (dvc exp run -S \"dataset.root='/a b/c'\"; see docs/configuration.md)"
)


def compose(conf_dir: str | Path, overrides: list[str] | None = None) -> dict[str, Any]:
    """Compose conf/config.yaml with Hydra overrides and return it as plain data."""
    text = compose_yaml(conf_dir, overrides)
    return yaml.safe_load(text)


def compose_yaml(conf_dir: str | Path, overrides: list[str] | None = None) -> str:
    """Return the YAML text DVC would write to params.yaml for these overrides."""
    import tempfile

    from dvc.utils.hydra import compose_and_dump
    from hydra.errors import (
        ConfigCompositionException,
        HydraException,
        MissingConfigException,
        OverrideParseException,
    )
    from omegaconf.errors import OmegaConfBaseException

    parse_overrides(overrides or [])  # unreadable or reading the environment: one line, first
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "params.yaml"
        try:
            compose_and_dump(
                out,
                str(Path(conf_dir).resolve()),
                None,
                "config",
                str(Path(conf_dir).resolve().parent),
                list(overrides or []),
            )
        except OverrideParseException as exc:
            raise ConfigError(_override_error(exc, overrides)) from exc
        except MissingConfigException as exc:
            raise ConfigError(_missing_option(exc, conf_dir)) from exc
        except ConfigCompositionException as exc:
            if "Ambiguous value" in str(exc):
                raise ConfigError(_override_error(exc, overrides)) from exc
            # e.g. a key the config does not have: Hydra's two lines and their cause, as one
            cause = str(exc.__cause__).splitlines()[0] if exc.__cause__ is not None else ""
            text = " ".join(str(exc).split()) + (f" ({cause})" if cause else "")
            raise ConfigError(text) from exc
        except (HydraException, OmegaConfBaseException) as exc:
            # e.g. an interpolation of a key the config does not have, resolved on writing
            raise ConfigError(" ".join(str(exc).split()) or type(exc).__name__) from exc
        return out.read_text(encoding="utf-8")


# Resolvers that read the process environment. Composition resolves every interpolation before
# params.yaml is written, so `${oc.env:VAR}` puts the variable's value into params.yaml, dvc.lock,
# the experiment's commit and the stage manifests; oc.decode resolves interpolations inside a
# string, `env` is OmegaConf 1's spelling. A secret is named in the config instead (e.g.
# generate.api_key_env) and read when the stage runs.
ENV_RESOLVERS = frozenset({"oc.env", "env", "oc.decode"})


def parse_overrides(overrides: list[str]) -> list[Any]:
    """Hydra's reading of each override (hydra.core.override_parser Override objects). ConfigError,
    one line quoting the override, for the first that Hydra cannot read and for one that calls a
    resolver reading the environment (ENV_RESOLVERS) or a resolver whose name is computed."""
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.errors import HydraException

    parser = OverridesParser.create()
    parsed = []
    for o in overrides:
        try:
            override = parser.parse_override(o)
        except HydraException as exc:
            raise ConfigError(_override_error(exc, [o])) from None
        for name in _resolver_names(override.value()):
            if name in ENV_RESOLVERS or "${" in name:
                what = (
                    f"calls a resolver whose name is computed ({name})"
                    if "${" in name
                    else f"reads the environment (${{{name}:...}})"
                )
                raise ConfigError(
                    f"override {o!r} {what}: composition would write the value into "
                    "params.yaml, dvc.lock and the experiment's commit; give the value itself, "
                    "or name a secret's variable in the config (e.g. generate.api_key_env) so "
                    "the stage reads it when it runs"
                )
        parsed.append(override)
    return parsed


def _resolver_names(value: Any) -> list[str]:
    """The resolvers an override's value calls (`${name:...}`, nested ones too), as OmegaConf will
    read them; a name computed from an interpolation (`${${x}:y}`) is given as its text."""
    from omegaconf.grammar.gen.OmegaConfGrammarParser import OmegaConfGrammarParser as G
    from omegaconf.grammar_parser import parse

    names: list[str] = []

    def walk(node: Any) -> None:
        if isinstance(node, G.InterpolationResolverContext):
            names.append(node.resolverName().getText())
        for child in getattr(node, "children", None) or []:
            walk(child)

    for text in _strings(value):
        if "${" not in text:
            continue
        try:
            walk(parse(text))
        except Exception:  # not an interpolation OmegaConf reads: it fails composing, named there
            continue
    return names


def _strings(value: Any) -> list[str]:
    """Every string inside an override's value: lists, dicts and sweeps (choice, glob) included."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for k, v in value.items() for s in (*_strings(k), *_strings(v))]
    if isinstance(value, list | tuple):
        return [s for v in value for s in _strings(v)]
    parts = [getattr(value, a, None) for a in ("list", "include", "exclude")]
    return [s for part in parts if part for s in _strings(part)]


def _missing_option(exc: Exception, conf_dir: str | Path) -> str:
    """One line: the unknown option of a config group (e.g. embed=foo) and the available ones."""
    missing = getattr(exc, "missing_cfg_file", None) or ""
    group, _, option = str(missing).rpartition("/")
    folder = Path(conf_dir) / group
    if not group or not folder.is_dir():
        return next((ln.strip() for ln in str(exc).splitlines() if ln.strip()), str(exc))
    available = sorted(p.stem for p in folder.glob("*.yaml"))
    return (
        f"unknown {group} option {option!r} ({group}={option}); available: {', '.join(available)}"
    )


def _override_error(exc: Exception, overrides: list[str] | None) -> str:
    """One line: which override Hydra could not read, why, and how to quote it."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    parser = OverridesParser.create()
    bad = []
    for o in overrides or []:
        try:
            parser.parse_override(o)
        except Exception:
            bad.append(o)
    why = next((ln.strip() for ln in str(exc).splitlines() if ln.strip()), type(exc).__name__)
    if bad and "=" not in bad[0]:
        which = f"override {bad[0]!r} is not key=value (a path with spaces split by the shell?)"
    else:
        which = f"cannot read override {bad[0]!r} ({why})" if bad else why
    return f"{which}; {QUOTING_HINT}"


def write_params(
    conf_dir: str | Path, output: str | Path, overrides: list[str] | None = None
) -> str:
    """Validate the composition (every section and what sections require of each other), then
    write it atomically; return its text. An invalid composition leaves `output` untouched."""
    from ragrig.core.io import atomic_write_text

    text = compose_yaml(conf_dir, overrides)
    validate_composition(yaml.safe_load(text))
    atomic_write_text(Path(output), text)
    return text


def cross_section_problems(validated: dict[str, Any]) -> list[str]:
    """What one section requires of another, checked before any stage runs: a price for the
    generator's model and the LLM judge's (else the report would fail after paid calls), and report k values and
    a context size the retrieved candidate lists can reach."""
    from ragrig.embed.config import TRAINED_MODEL
    from ragrig.report.config import missing_prices, price_hint
    from ragrig.rerank.config import TRAINED_OUTPUT

    gen, rep, ret = validated["generate"], validated["report"], validated["retrieve"]
    models = [getattr(gen, "model", gen.method)]
    llm_judge = getattr(validated["judge"], "llm", None)
    if llm_judge is not None:  # the LLM judge's calls are priced too (judge cost)
        models.append(llm_judge.model)
    problems = [
        price_hint(m, rep.prices_as_of)
        for model in dict.fromkeys(models)
        for m in missing_prices(model, rep.prices)
    ]
    too_deep = [k for k in rep.k_values if k > ret.depth]
    if too_deep:
        problems.append(
            f"report.k_values {too_deep} exceed retrieve.depth {ret.depth}: a ranking is cut at "
            "depth, so recall@k would be measured on a shorter list; raise retrieve.depth"
        )
    if getattr(gen, "n_passages", 0) > ret.depth:
        problems.append(f"generate.n_passages {gen.n_passages} exceeds retrieve.depth {ret.depth}")
    judge, train = validated["judge"], validated.get("train_verifier")
    if (
        judge.method == "verifier"
        and judge.model is None
        and train is not None
        and not train.enabled
    ):
        problems.append(
            "judge=verifier reads the model the train_verifier stage trains, which is off: "
            "add train_verifier.enabled=true (or set judge.model to a trained model folder)"
        )
    judged_ref = getattr(getattr(judge, "correctness", None), "reference_column", None)
    if judged_ref is not None and judged_ref != rep.scorecard.reference_column:
        problems.append(
            f"judge.correctness.reference_column {judged_ref!r} is not "
            f"report.scorecard.reference_column {rep.scorecard.reference_column!r}: the report "
            "would score long answers against one reference and short ones against another; "
            "set both to the same column"
        )
    rerank, train_rerank = validated["rerank"], validated.get("train_rerank")
    if (
        rerank.method == "trained"
        and train_rerank is not None
        and not train_rerank.enabled
        and rerank.model == TRAINED_OUTPUT
    ):
        problems.append(
            "rerank=trained reads the model the train_rerank stage trains, which is off: add "
            "train_rerank.enabled=true (or use rerank=identity / rerank=cross_encoder)"
        )
    embed, train_embed = validated["embed"], validated.get("train_embed")
    if (
        getattr(embed, "model", None) == TRAINED_MODEL
        and train_embed is not None
        and not train_embed.enabled
    ):
        problems.append(
            "embed=trained reads the model the train_embed stage trains, which is off: add "
            "train_embed.enabled=true (or use embed=minilm)"
        )
    return problems


def validate_composition(cfg: dict[str, Any]) -> dict[str, Any]:
    """Validate a composed config: every section (ragrig.core.config.validate_all), then what the
    sections require of each other; raise ConfigError listing every problem. Every entry point
    that composes (params write/check, sweeps, the queue) calls this before any stage runs."""
    from ragrig.core.config import validate_all

    validated = validate_all(cfg)
    problems = cross_section_problems(validated)
    if problems:
        raise ConfigError("; ".join(problems))
    return validated
