"""``python -m archlab``: the same command as ``archlab``."""

import sys

from archlab.cli.main import main

sys.exit(main())
