import sys

from ragrig.sweep.cli import main

sys.exit(main())
