"""Config schema of the dataset stage (validated from its params.yaml section)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from ragrig.config import Section


class Checksum(Section):
    algo: Literal["md5", "sha256"] = "sha256"
    value: str


class Download(Section):
    url: str
    checksum: Checksum
    archive_root: str | None = Field(
        None, description="folder inside the archive that holds corpus/queries/qrels"
    )


class ClaimsFiles(Section):
    """SciFact's original claim files, giving per-query label and rationale attributes."""

    files: list[str] = Field(default_factory=list, description="paths relative to dataset root")


class DatasetConfig(Section):
    name: str
    root: str = Field(description="BEIR layout folder: corpus.jsonl[.gz], queries.jsonl, qrels/")
    split: str = "test"
    download: Download | None = None
    claims: ClaimsFiles | None = None
