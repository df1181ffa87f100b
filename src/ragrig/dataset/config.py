"""Config schema of the dataset stage (validated from its params.yaml section)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from ragrig.core.config import NonEmptyStr, Section, Seed
from ragrig.core.urls import no_credentials


class Checksum(Section):
    algo: Literal["md5", "sha256"] = "sha256"
    value: str


DownloadURL = no_credentials(
    "dataset.download.url",
    "the download takes no credentials: give a public URL, or put the files under "
    "dataset.root yourself",
)


class Download(Section):
    url: DownloadURL
    checksum: Checksum
    archive_root: str | None = Field(
        None, description="folder inside the archive that holds corpus/queries/qrels"
    )
    deadline_s: float = Field(
        3600.0, gt=0, description="the whole download must finish within this many seconds"
    )
    read_timeout_s: float = Field(
        60.0, gt=0, description="longest wait for the connection or the next bytes"
    )


class ClaimsFiles(Section):
    """SciFact's original claim files, giving per-query label and rationale attributes."""

    files: list[NonEmptyStr] = Field(
        default_factory=list, description="paths relative to dataset root"
    )
    train: str | None = Field(
        None,
        description="training claims of the verifier (SciFact schema, relative to dataset root); "
        "never a file of the evaluated split",
    )
    sentences: str | None = Field(
        None,
        description="the abstracts' sentence lists the training rationales index (SciFact's HF "
        "export zip, or JSONL of {doc_id, sentences})",
    )


class RobustnessBuild(Section):
    """How `ragrig data ensure` builds the robustness sets when root does not exist
    (ragrig.tools.robustness: the same sources, n and seed give the same folder)."""

    source: NonEmptyStr = Field(description="the SciFact BEIR folder the sets come from")
    mtrag_tasks: NonEmptyStr = Field(description="MTRAG's tasks file: out-of-scope questions")
    per_set: int = Field(20, ge=2, le=300, description="sampled claims (and questions) per set")
    seed: Seed = 13


class DatasetConfig(Section):
    name: str
    root: str = Field(description="BEIR layout folder: corpus.jsonl[.gz], queries.jsonl, qrels/")
    split: str = "test"
    download: Download | None = None
    robustness: RobustnessBuild | None = None
    claims: ClaimsFiles | None = None
    # a document dataset (parse=docling): the folders of documents (relative paths resolve
    # against the project, like root) and the folder of its golden queries.jsonl and qrels.tsv
    documents: list[NonEmptyStr] = Field(
        default_factory=list, description="folders of documents; empty: root is the one folder"
    )
    golden: str | None = Field(
        None,
        description="folder with queries.jsonl and qrels.tsv (query-id, path, section, "
        "relevance) judging the documents' files and sections",
    )
