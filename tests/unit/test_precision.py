"""precision: auto resolves to bf16 only on a CPU with native bf16 matrix units, else fp32."""

from __future__ import annotations

import pytest

from ragrig.core.config import validate_section
from ragrig.weights import precision as prec

AMX = frozenset({"avx2", "avx512f", "avx512_bf16", "amx_bf16", "amx_tile"})
AVX2 = frozenset({"avx2", "fma", "sse4_2"})  # an AMD EPYC of the kind seen: no AVX-512 at all

CPUINFO = """processor\t: 0
vendor_id\t: AuthenticAMD
model name\t: AMD EPYC 7B13
flags\t\t: fpu vme avx avx2 fma sse4_2
processor\t: 1
model name\t: AMD EPYC 7B13
flags\t\t: fpu vme avx avx2 fma sse4_2 avx512_bf16
"""


@pytest.mark.parametrize(
    ("requested", "flags", "fp32", "expected"),
    [
        ("auto", AMX, "fp32", "bf16"),
        ("auto", frozenset({"avx512_bf16"}), "fp32", "bf16"),  # AVX-512 BF16 without AMX
        ("auto", AVX2, "fp32", "fp32"),
        ("auto", frozenset(), "fp32", "fp32"),  # no /proc/cpuinfo: not Linux
        ("auto", AVX2, "none", "none"),  # the verifier's name for fp32
        ("auto", AMX, "none", "bf16"),
        ("bf16", AVX2, "fp32", "bf16"),  # an explicit choice wins
        ("fp32", AMX, "fp32", "fp32"),
        ("int8", AMX, "fp32", "int8"),
    ],
)
def test_resolution(requested, flags, fp32, expected):
    assert prec.resolve_precision(requested, fp32=fp32, flags=flags) == expected


@pytest.mark.parametrize(
    ("env", "flags", "expected"),
    [
        ({"ONEDNN_MAX_CPU_ISA": "AVX2"}, AMX, "fp32"),  # the AVX2-only path on an AMX machine
        ({"ONEDNN_MAX_CPU_ISA": "avx512_core_vnni"}, AMX, "fp32"),  # no bf16 dot products yet
        ({"ONEDNN_MAX_CPU_ISA": "AVX512_CORE_BF16"}, AMX, "bf16"),  # avx512_bf16 still usable
        ({"ONEDNN_MAX_CPU_ISA": "AVX512_CORE_BF16"}, frozenset({"amx_bf16"}), "fp32"),
        ({"ONEDNN_MAX_CPU_ISA": "AVX512_CORE_AMX"}, frozenset({"amx_bf16"}), "bf16"),
        ({"DNNL_MAX_CPU_ISA": "AVX2"}, AMX, "fp32"),  # oneDNN's older name
        ({"ONEDNN_MAX_CPU_ISA": "ALL"}, AMX, "bf16"),  # no cap
        ({"ONEDNN_MAX_CPU_ISA": "AVX3000"}, AMX, "bf16"),  # names no level: no cap
        ({"ONEDNN_MAX_CPU_ISA": "AVX2"}, AVX2, "fp32"),
    ],
)
def test_auto_honours_a_onednn_isa_cap(monkeypatch, env, flags, expected):
    monkeypatch.delenv("ONEDNN_MAX_CPU_ISA", raising=False)
    monkeypatch.delenv("DNNL_MAX_CPU_ISA", raising=False)
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    assert prec.resolve_precision("auto", flags=flags) == expected
    assert prec.resolve_precision("bf16", flags=flags) == "bf16"  # an explicit choice still wins


def test_a_capped_run_says_so_in_its_record_and_tags(monkeypatch):
    from ragrig.tracking.contents import precision_tags

    monkeypatch.setattr(prec, "cpu_info", lambda: ("Xeon", AMX))
    monkeypatch.delenv("DNNL_MAX_CPU_ISA", raising=False)
    monkeypatch.setenv("ONEDNN_MAX_CPU_ISA", "avx2")
    record = prec.precision_record("auto", prec.resolve_precision("auto"))
    assert record == {
        "requested": "auto",
        "resolved": "fp32",
        "cpu": "Xeon",
        "cpu_bf16_flags": ["amx_bf16", "avx512_bf16"],
        "onednn_max_cpu_isa": "AVX2",
    }
    assert precision_tags({"embed": record}) == {
        "precision.embed": "fp32 (auto)",
        "cpu": "Xeon",
        "cpu.bf16_flags": "amx_bf16,avx512_bf16",
        "cpu.onednn_max_isa": "AVX2",
    }


def test_cpuinfo_is_read_from_the_first_processor():
    assert prec.parse_cpuinfo(CPUINFO) == ("AMD EPYC 7B13", frozenset(AVX2 | {"fpu", "vme", "avx"}))
    assert prec.parse_cpuinfo("") == ("", frozenset())


@pytest.mark.parametrize(("flags", "expected"), [(AMX, "bf16"), (AVX2, "fp32")])
def test_the_embedder_built_from_config_runs_what_auto_resolves_to(monkeypatch, flags, expected):
    from ragrig.embed import make_embedder

    monkeypatch.setattr(prec, "cpu_info", lambda: ("mocked CPU", flags))
    cfg = validate_section("embed", {"method": "sentence_transformers"})
    assert cfg.precision == "auto"  # the default
    embedder = make_embedder(cfg)
    assert embedder.precision == expected
    assert embedder.fingerprint()["precision"] == expected  # vectors never reused across
    record = prec.precision_record(cfg.precision, embedder.precision)
    assert record == {
        "requested": "auto",
        "resolved": expected,
        "cpu": "mocked CPU",
        "cpu_bf16_flags": ["amx_bf16", "avx512_bf16"] if expected == "bf16" else [],
    }


def test_every_torch_model_defaults_to_auto():
    assert validate_section("embed", {"method": "sentence_transformers"}).precision == "auto"
    assert validate_section("judge", {"method": "verifier"}).quantize == "auto"
    gguf = validate_section("generate", {"method": "torch_gguf"})
    assert gguf.prefill_precision == "auto"


def test_precision_tags_for_the_mlflow_run():
    from ragrig.tracking.contents import precision_tags

    bf16 = {"requested": "auto", "resolved": "bf16", "cpu": "Xeon", "cpu_bf16_flags": ["amx_bf16"]}
    fp32 = {"requested": "fp32", "resolved": "fp32", "cpu": "Xeon", "cpu_bf16_flags": ["amx_bf16"]}
    assert precision_tags({"embed": bf16, "generate": None, "judge": fp32}) == {
        "precision.embed": "bf16 (auto)",
        "precision.judge": "fp32",
        "cpu": "Xeon",
        "cpu.bf16_flags": "amx_bf16",
    }
    assert precision_tags({"embed": None}) == {}
