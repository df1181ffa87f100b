"""`python -m ragrig` is the `ragrig` command."""

import sys

from ragrig.cli import main

sys.exit(main())
