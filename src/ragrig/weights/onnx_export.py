"""The torch encoders ragrig ships or packages, exported once per machine to ONNX, so that a
process that only reads them (`ragrig traces`, `quantize: onnx` judges) runs them through
onnxruntime and never imports torch (~300 MB resident, ~15 s of imports on 2 cores).

Two kinds of file, each a graph of the same weights in fp32:

* a cross-encoder (the shipped verifier, or a trained verifier folder): inputs `input_ids`,
  `attention_mask`, `token_type_ids`, output `logits` (batch, labels);
* a sentence-transformers encoder of the mean-pooled shape (the packaged MiniLM): output
  `last_hidden_state` (batch, tokens, dim), pooled by ragrig.embed.onnx as sentence-transformers
  pools it.

On the same inputs their outputs agree with torch's fp32 to about 1e-6
(tests/unit/test_onnx_export.py). `int8=True` also writes a dynamically quantised copy
(onnxruntime.quantization, int8 weights per output channel): faster, not the same numbers
(docs/benchmarks.md §21).

Files are kept under `RAGRIG_ONNX_CACHE`, else `$XDG_CACHE_HOME/ragrig/onnx`, else
`~/.cache/ragrig/onnx`, named by the weights' sha256 and the torch version that exported them, and
written whole (a temporary file renamed): a killed export leaves nothing another process reads.
`ragrig prepare` (run by `make setup`) exports the shipped verifier and the packaged MiniLM; a
process that finds no file exports it then, which needs torch and the `onnx` package once."""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path
from typing import Any

from ragrig.core.errors import ConfigError
from ragrig.core.io import file_sha256

CACHE_ENV = "RAGRIG_ONNX_CACHE"
# opset 17: LayerNormalization is one operator, which onnxruntime runs as one kernel
OPSET = 17
CROSS_INPUTS = ("input_ids", "attention_mask", "token_type_ids")


def cache_root() -> Path:
    root = os.environ.get(CACHE_ENV) or (
        Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "ragrig" / "onnx"
    )
    return Path(root)


def _torch_version() -> str:
    import importlib.metadata

    try:
        return importlib.metadata.version("torch").split("+")[0]
    except importlib.metadata.PackageNotFoundError:
        return "none"


def cached_path(name: str, digest: str, int8: bool = False) -> Path:
    """Where the export of weights with sha256 `digest` lives (it may not exist yet)."""
    suffix = ".int8.onnx" if int8 else ".onnx"
    return cache_root() / f"{name}-{digest[:16]}-torch{_torch_version()}{suffix}"


def _valid(path: Path) -> bool:
    """A finished export: written whole by rename, so existing and non-empty is enough; an
    unreadable file is caught by the session's load (ragrig.weights.onnx_runtime.load_session)."""
    return path.is_file() and path.stat().st_size > 0


@contextlib.contextmanager
def _writing_to(path: Path) -> Any:
    """A temporary file beside `path`, renamed onto it on success, removed on any failure."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.close(fd)
    try:
        yield Path(tmp)
        os.chmod(tmp, 0o644)  # a cache other users' processes read
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def _export(module: Any, example: dict[str, Any], outputs: list[str], path: Path) -> None:
    """torch.onnx's TorchScript exporter on `module`, batch and token axes dynamic."""
    import warnings

    import torch

    try:
        import onnx  # noqa: F401  (the exporter needs it; say so in one line)
    except ImportError:
        raise ConfigError(
            "exporting to ONNX needs the `onnx` package: pip install -c constraints.txt onnx "
            "(make setup installs it), or set quantize to none"
        ) from None
    names = list(example)
    axes: dict[str, dict[int, str]] = {k: {0: "batch", 1: "tokens"} for k in names}
    for o in outputs:
        axes[o] = {0: "batch"} if o == "logits" else {0: "batch", 1: "tokens"}
    with _writing_to(path) as tmp, warnings.catch_warnings(), torch.inference_mode():
        warnings.simplefilter("ignore")  # the exporter's deprecation and tracer notes
        torch.onnx.export(
            module,
            tuple(example[k] for k in names),
            str(tmp),
            input_names=names,
            output_names=outputs,
            dynamic_axes=axes,
            opset_version=OPSET,
            dynamo=False,
        )


def _quantize(src: Path, dst: Path) -> None:
    import logging

    from onnxruntime.quantization import QuantType, quantize_dynamic

    quiet = logging.getLogger().level
    logging.getLogger().setLevel(logging.ERROR)  # its advice to pre-process first
    try:
        with _writing_to(dst) as tmp:
            quantize_dynamic(str(src), str(tmp), weight_type=QuantType.QInt8, per_channel=True)
    finally:
        logging.getLogger().setLevel(quiet)


def _logits_module(model: Any) -> Any:
    """A sequence classifier as a module of three tensors -> logits (what the graph holds)."""
    import torch

    class Logits(torch.nn.Module):
        def __init__(self, m: Any):
            super().__init__()
            self.m = m

        def forward(self, input_ids: Any, attention_mask: Any, token_type_ids: Any) -> Any:
            return self.m(
                input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids
            ).logits

    return Logits(model)


def _hidden_module(model: Any) -> Any:
    """An encoder as a module of two tensors -> its token embeddings."""
    import torch

    class Hidden(torch.nn.Module):
        def __init__(self, m: Any):
            super().__init__()
            self.m = m

        def forward(self, input_ids: Any, attention_mask: Any) -> Any:
            return self.m(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state

    return Hidden(model)


def _eager(model: Any) -> Any:
    """Eager attention: the SDPA path traces its mask logic as constants of the example."""
    model.config._attn_implementation = "eager"
    return model.eval()


def _hf_tokenizer(folder: Path) -> Any:
    from transformers import AutoTokenizer
    from transformers import logging as hf_logging

    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    return AutoTokenizer.from_pretrained(str(folder))


def _with_int8(path: Path, made: bool, int8: bool) -> tuple[Path, bool]:
    """`path`, or its int8 copy (written now when missing) when `int8`."""
    if not int8:
        return path, made
    qpath = path.with_name(path.name[: -len(".onnx")] + ".int8.onnx")
    if not _valid(qpath):
        _quantize(path, qpath)
        made = True
    return qpath, made


def cross_encoder_onnx(
    name: str, digest: str, load: Any, tokenizer_folder: Path, int8: bool = False
) -> tuple[Path, bool]:
    """(the ONNX file of a cross-encoder, whether this call exported it). `load()` gives the
    torch sequence classifier and `tokenizer_folder` the tokenizer of its example input (both
    read only when the file is missing); `digest` names its weights."""
    path = cached_path(name, digest)
    made = not _valid(path)
    if made:
        model = _eager(load())
        enc = _hf_tokenizer(tokenizer_folder)(
            ["a short claim", "a second, longer claim of the example"],
            ["evidence text", "more evidence"],
            padding=True,
            return_tensors="pt",
        )
        _export(_logits_module(model), {k: enc[k] for k in CROSS_INPUTS}, ["logits"], path)
    return _with_int8(path, made, int8)


def encoder_onnx(folder: Path, int8: bool = False) -> tuple[Path, bool]:
    """(the ONNX file of the transformer in sentence-transformers folder `folder` (its own
    weights at its root), whether this call exported it)."""
    weights = next(iter(sorted(Path(folder).glob("*.safetensors"))), None)
    if weights is None:
        raise ConfigError(f"{folder}: no safetensors weights to export to ONNX")
    path = cached_path("encoder", file_sha256(weights))
    made = not _valid(path)
    if made:
        from transformers import AutoModel

        model = _eager(AutoModel.from_pretrained(str(folder)))
        enc = _hf_tokenizer(folder)(
            ["a text", "a second, longer text of the example"], padding=True, return_tensors="pt"
        )
        example = {k: enc[k] for k in ("input_ids", "attention_mask")}
        _export(_hidden_module(model), example, ["last_hidden_state"], path)
    return _with_int8(path, made, int8)
