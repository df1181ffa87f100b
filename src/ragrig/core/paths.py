"""Where the project lives: the one place that knows DVC's temporary experiment copies."""

from __future__ import annotations

import os
from pathlib import Path

_EXP_TMP = f"{os.sep}.dvc{os.sep}tmp{os.sep}exps{os.sep}"


def project_root(cwd: Path) -> Path:
    """The main project folder, also from inside a DVC temporary experiment copy
    (`<project>/.dvc/tmp/exps/<tmp>/`), so that every run lands in the same store."""
    text = str(cwd.resolve())
    if _EXP_TMP in text:
        return Path(text.split(_EXP_TMP, 1)[0])
    return cwd.resolve()
