"""Every number and every list of every config section has a domain, checked at composition.

The walk reads each section's schema (discriminated unions, nested models, Optional, list /
tuple / dict item types) and fails on a number without a bound or a list whose items are not
bounded, so a field added without one is caught here rather than run with a value that means
nothing (report.k_values=[0], latency_quantiles=[1.5], chunk.separators=['']...).
"""

from __future__ import annotations

import types
import typing
from typing import Annotated, Any, Literal, Union

import annotated_types as at
import pytest
from pydantic import BaseModel
from pydantic.fields import FieldInfo

from ragrig.core.config import SECTIONS, Section, section_schema, validate_section
from ragrig.core.errors import ConfigError
from ragrig.tools.calibrate.config import CalibrateConfig
from ragrig.tools.gate import GateConfig
from ragrig.tools.testset import SynthConfig
from ragrig.traces.config import TracesConfig

from ..conftest import PROJECT

CONF = PROJECT / "conf"

BOUNDS = (at.Ge, at.Gt, at.Le, at.Lt, at.Interval)

# Values that are any finite real, so no bound means something; each must still refuse NaN and
# infinity (allow_inf_nan=False), which the walk checks.
ANY_FINITE_REAL = {
    # a fitted logistic model's weights and intercept (ragrig calibrate writes them)
    "AnswerModelConfig.coef": "logistic coefficients: any sign, any size",
    "AnswerModelConfig.intercept": "logistic intercept: any sign, any size",
    # cut points on whatever numeric column a slice reads; their order is checked by the model
    "SliceConfig.bins": "cut points of an arbitrary numeric column",
}


def _strip(tp: Any) -> tuple[Any, list[Any]]:
    """The type inside any Annotated layers, and the constraints those layers carry."""
    meta: list[Any] = []
    while typing.get_origin(tp) is Annotated:
        tp, *extra = typing.get_args(tp)
        for m in extra:
            meta.extend(m.metadata if isinstance(m, FieldInfo) else [m])
    return tp, meta


def _has(meta: list[Any], kinds: tuple[type, ...]) -> bool:
    return any(isinstance(m, kinds) for m in meta)


def _finite(meta: list[Any]) -> bool:
    return any(getattr(m, "allow_inf_nan", True) is False for m in meta)


def _nonempty_text(meta: list[Any]) -> bool:
    return any(
        (isinstance(m, at.MinLen) and m.min_length >= 1) or getattr(m, "pattern", None)
        for m in meta
    )


def _problems(tp: Any, path: str, meta: list[Any], owner: str, item: bool, seen: set) -> list:
    """Why the values `tp` (with constraints `meta`) at `path` have no domain; [] when they do.
    `owner` is 'Model.field' (the allowlist's key); `item`: inside a list or a dict."""
    tp, inner = _strip(tp)
    meta = [*meta, *inner]
    origin = typing.get_origin(tp)
    if origin in (Union, types.UnionType):  # Optional[X], X | Y, a discriminated union
        members = [a for a in typing.get_args(tp) if a is not type(None)]
        out = []
        for a in members:
            label = f"{path}[{a.__name__}]" if isinstance(a, type) and len(members) > 1 else path
            out += _problems(a, label, meta, owner, item, seen)
        return out
    if origin is Literal or tp is bool:
        return []
    if tp in (int, float):
        if _has(meta, BOUNDS):
            return []
        if owner in ANY_FINITE_REAL:
            return [] if tp is int or _finite(meta) else [f"{path}: allowlisted but accepts NaN"]
        return [f"{path}: {tp.__name__} without a bound (Field(ge=/gt=/le=/lt=))"]
    if tp is str:
        if not item or _nonempty_text(meta):
            return []
        return [f"{path}: str items without min_length>=1, a pattern or a Literal"]
    if origin in (list, tuple, set, frozenset):
        args = [a for a in typing.get_args(tp) if a is not Ellipsis]
        if not args:
            return [f"{path}: {origin.__name__} without an item type"]
        return [p for a in args for p in _problems(a, f"{path}[]", [], owner, True, seen)]
    if origin is dict:
        _key, value = typing.get_args(tp)
        return _problems(value, f"{path}{{}}", [], owner, True, seen)
    if isinstance(tp, type) and issubclass(tp, BaseModel):
        return _model_problems(tp, path, seen)
    return [f"{path}: type {tp!r} the walk does not know; teach it (or bound it)"]


def _model_problems(model: type[BaseModel], path: str, seen: set) -> list[str]:
    if model in seen:  # each model once (it is reached from several sections)
        return []
    seen.add(model)
    out = []
    for name, field in model.model_fields.items():
        out += _problems(
            field.annotation,
            f"{path}.{name}",
            list(field.metadata),
            f"{model.__name__}.{name}",
            False,
            seen,
        )
    return out


def _walk_all() -> tuple[list[str], set]:
    seen: set = set()
    problems = [
        p for name in SECTIONS for p in _problems(section_schema(name), name, [], "", False, seen)
    ]
    problems += _model_problems(CalibrateConfig, "calibrate", seen)
    problems += _model_problems(GateConfig, "gate", seen)
    problems += _model_problems(TracesConfig, "traces", seen)
    problems += _model_problems(SynthConfig, "synth", seen)
    return problems, seen


def test_every_number_and_list_of_every_section_has_a_domain():
    problems, seen = _walk_all()
    assert problems == [], "\n".join(problems)
    # the walk reached every concrete config model of ragrig (bases are read through theirs)
    models, todo = set(), [Section]
    while todo:
        subs = todo.pop().__subclasses__()
        todo += subs
        models |= {m for m in subs if m.__module__.startswith("ragrig.") and not m.__subclasses__()}
    assert models and models <= seen, sorted(m.__name__ for m in models - seen)


def test_the_walk_flags_unbounded_numbers_and_lists():
    from pydantic import Field

    class Inner(Section):
        ok: float = Field(1.0, gt=0)
        loose: float = 1.0

    class Probe(Section):
        k: list[int] = [1]
        q: list[Annotated[float, Field(gt=0, lt=1)]] = [0.5]
        seps: list[str] = ["x"]
        names: list[Annotated[str, Field(min_length=1)]] = ["x"]
        weights: dict[str, float] = {}
        maybe: int | None = None
        inner: Inner | None = None
        flag: bool = True

    problems = _model_problems(Probe, "probe", set())
    assert problems == [
        "probe.k[]: int without a bound (Field(ge=/gt=/le=/lt=))",
        "probe.seps[]: str items without min_length>=1, a pattern or a Literal",
        "probe.weights{}: float without a bound (Field(ge=/gt=/le=/lt=))",
        "probe.maybe: int without a bound (Field(ge=/gt=/le=/lt=))",
        "probe.inner.loose: float without a bound (Field(ge=/gt=/le=/lt=))",
    ]


def test_allowlisted_fields_exist():
    _, seen = _walk_all()
    fields = {f"{m.__name__}.{f}" for m in seen for f in m.model_fields}
    assert set(ANY_FINITE_REAL) <= fields


SPARSE = {"method": "bm25s"}
NUMERIC = {"name": "s", "column": "c", "kind": "numeric"}
ANSWER_MODEL = {"features": ["coverage_1"], "coef": [1.0], "intercept": 0.0}


@pytest.mark.parametrize(
    ("section", "raw", "field"),
    [
        ("report", {"k_values": [0, 10]}, "report.k_values.0"),
        ("report", {"k_values": [-10, 10]}, "report.k_values.0"),
        ("report", {"k_values": []}, "report.k_values"),
        ("report", {"latency_quantiles": [1.5]}, "report.latency_quantiles.0"),
        ("report", {"latency_quantiles": [0.5, 0.0]}, "report.latency_quantiles.1"),
        ("report", {"latency_quantiles": [1.0]}, "report.latency_quantiles.0"),
        ("chunk", {"method": "recursive", "separators": [""]}, "chunk.recursive.separators.0"),
        ("chunk", {"method": "recursive", "separators": ["\n", ""]}, "recursive.separators.1"),
        ("runtime", {"seed": -1}, "runtime.seed"),
        ("runtime", {"seed": 2**32}, "runtime.seed"),
        ("index", {"dense": {"method": "ivf", "train_seed": -3}, "sparse": SPARSE}, "train_seed"),
        (
            "index",
            {"dense": {"method": "flat"}, "sparse": {"method": "rank_bm25", "epsilon": -0.1}},
            "index.sparse.rank_bm25.epsilon",
        ),
        ("train_verifier", {"seed": -1}, "train_verifier.seed"),
        ("train_rerank", {"seed": -1}, "train_rerank.seed"),
        ("train_embed", {"seed": -1}, "train_embed.seed"),
        ("judge", {"method": "overlap", "llm": {"backend": "llama_cpp", "seed": -1}}, "llm"),
        ("dataset", {"name": "x", "root": "r", "documents": [""]}, "dataset.documents.0"),
        ("dataset", {"name": "x", "root": "r", "claims": {"files": [""]}}, "claims.files.0"),
        ("parse", {"method": "docling", "exclude": [""]}, "parse.docling.exclude.0"),
        ("report", {"slices": [{**NUMERIC, "bins": [float("nan")]}]}, "slices.0.bins.0"),
        ("report", {"slices": [{**NUMERIC, "bins": [1], "labels": ["a", ""]}]}, "labels.1"),
        (
            "report",
            {"scorecard": {"weights": {"faithfulness": 1, "relevance": -0.5, "correctness": 0.5}}},
            "report.scorecard.weights.relevance",
        ),
        (
            "judge",
            {"method": "overlap", "answer_model": {**ANSWER_MODEL, "features": [""]}},
            "answer_model.features.0",
        ),
        (
            "judge",
            {"method": "overlap", "answer_model": {**ANSWER_MODEL, "intercept": float("inf")}},
            "answer_model.intercept",
        ),
    ],
)
def test_values_outside_their_domain_are_refused_naming_the_field(section, raw, field):
    with pytest.raises(ConfigError) as err:
        validate_section(section, raw)
    message = str(err.value)
    assert message.startswith(f"invalid config section {section!r}: {section}")
    assert field in message and "\n" not in message, message


def test_calibrate_lists_refuse_blank_names():
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match=r"judges\.0"):
        CalibrateConfig(judges=[""])
    with pytest.raises(ValidationError, match=r"fit_answer_model\.0"):
        CalibrateConfig(fit_answer_model=[""])
    with pytest.raises(ValidationError, match="seed"):
        CalibrateConfig(split={"seed": -1})


@pytest.mark.parametrize(
    ("overrides", "field"),
    [
        (
            ["report.k_values=[0,10]"],
            "report.k_values.0: Input should be greater than or equal to 1",
        ),
        (["report.k_values=[-10,10]"], "report.k_values.0: Input should be greater than or equal"),
        (
            ["report.latency_quantiles=[1.5]"],
            "report.latency_quantiles.0: Input should be less than 1",
        ),
        (
            ["chunk=recursive", "chunk.separators=['']"],
            "chunk.recursive.separators.0: String should",
        ),
    ],
)
def test_params_write_refuses_a_value_outside_its_domain(tmp_path, capsys, overrides, field):
    from ragrig.cli import app as cli

    out = tmp_path / "params.yaml"
    code = cli.main(["params", "write", *overrides, "--conf", str(CONF), "--output", str(out)])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 1 and not out.exists()
    assert len(err) == 1 and err[0].startswith("ragrig: error: invalid config section"), err
    assert field in err[0], err


@pytest.mark.parametrize(
    ("section", "raw", "field"),
    [
        (
            "generate",
            {
                "method": "openai_http",
                "base_url": "http://127.0.0.1:1/v1",
                "model": "m",
                "timeout_s": float("inf"),
            },
            "generate.openai_http.timeout_s",
        ),
        (
            "generate",
            {"method": "extractive", "min_overlap": float("nan")},
            "generate.extractive.min_overlap",
        ),
        (
            "judge",
            {"method": "overlap", "support_threshold": float("nan")},
            "judge.overlap.support_threshold",
        ),
    ],
)
def test_infinity_and_nan_pass_no_bound(section, raw, field):
    from ragrig.core.config import validate_section as check
    from ragrig.core.errors import ConfigError

    with pytest.raises(ConfigError, match=f"{field}: Input should be a finite number"):
        check(section, raw)
