"""Put this checkout's src/ first on sys.path, so a stage runs the code DVC hashed for it.

An editable install points at one working tree; DVC runs temporary and queued experiments from
copies of the repository, whose stages must import the copy's library, not the workspace's.
"""

from __future__ import annotations

import sys
from pathlib import Path

_SRC = str(Path(__file__).resolve().parents[1] / "src")
if sys.path[:1] != [_SRC]:
    sys.path.insert(0, _SRC)
