"""Config schema of the parse stage (validated from its params.yaml section)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from ragrig.config import Section


class ParseBeir(Section):
    method: Literal["beir"] = "beir"
    title_separator: str = ". "
    empty_text: Literal["error", "skip", "keep"] = Field(
        "skip",
        description="a document with blank title and text: refuse the corpus, leave it out "
        "(its judgments still count in the gold) or keep it with empty content",
    )


ParseConfig = Annotated[ParseBeir, Field(discriminator="method")]
