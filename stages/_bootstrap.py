"""Put this checkout's src/ first on sys.path, so a stage runs the code DVC hashed for it.

An editable install points at one working tree; DVC runs temporary and queued experiments from
copies of the repository, whose stages must import the copy's library, not the workspace's.

With RAGRIG_WARM_SOCKET set, the stage is handed to a warm server (ragrig.runtime.warm) that
runs it in a fork with the libraries already loaded; without a server it runs here.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

_SRC = str(Path(__file__).resolve().parents[1] / "src")
if sys.path[:1] != [_SRC]:
    sys.path.insert(0, _SRC)

if os.environ.get("RAGRIG_WARM_SOCKET") and not getattr(sys, "_ragrig_warm_fork", False):
    from ragrig.runtime.warm import handoff

    handoff(os.environ["RAGRIG_WARM_SOCKET"])  # returns only if no server takes the stage
