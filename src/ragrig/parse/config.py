"""Config schema of the parse stage (validated from its params.yaml section)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from ragrig.config import Section


class ParseBeir(Section):
    method: Literal["beir"] = "beir"
    title_separator: str = ". "


ParseConfig = Annotated[ParseBeir, Field(discriminator="method")]
