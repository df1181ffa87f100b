"""Config schema of the parse stage (validated from its params.yaml section)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from ragrig.core.config import NonEmptyStr, Section


class ParseBeir(Section):
    method: Literal["beir"] = "beir"
    title_separator: str = ". "
    empty_text: Literal["error", "skip", "keep"] = Field(
        "skip",
        description="a document with blank title and text: refuse the corpus, leave it out "
        "(its judgments still count in the gold) or keep it with empty content",
    )
    max_record_bytes: int = Field(
        64 * 2**20,
        gt=0,
        description="a longer line (one record) of the corpus, queries, qrels or claim files "
        "refuses the dataset naming file and line; reading holds at most this much of a line",
    )
    max_inflated_bytes: int = Field(
        16 * 2**30,
        gt=0,
        description="a .gz file that inflates past this refuses the dataset (a gzip bomb)",
    )


class ParseDocling(Section):
    """A folder of documents converted by docling with no model (see conf/parse/docling.yaml)."""

    method: Literal["docling"] = "docling"
    unit: Literal["section", "file"] = Field(
        "section", description="one documents row per section of a file, or per file"
    )
    workers: int = Field(2, gt=0, description="conversion processes, one file at a time each")
    timeout_s: float = Field(
        120.0, gt=0, description="a file's conversion is killed (timed_out) after this long"
    )
    max_bytes: int = Field(
        100_000_000, gt=0, description="larger files are skipped (status skipped, oversized)"
    )
    max_failure_share: float = Field(
        0.1, ge=0, le=1, description="the stage fails when (failed + timed_out) / files exceeds it"
    )
    exclude: list[NonEmptyStr] = Field(
        default_factory=list,
        description="glob patterns on the path relative to its folder: skipped (excluded)",
    )
    follow_outside_links: bool = Field(
        False,
        description="parse a symbolic link whose target lies outside its documents folder "
        "(false: skipped and counted, link_outside)",
    )


ParseConfig = Annotated[ParseBeir | ParseDocling, Field(discriminator="method")]
