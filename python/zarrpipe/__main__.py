"""`python -m zarrpipe ...`: the same command line as the `zarrpipe` console script."""

import sys

from zarrpipe.cli import main

sys.exit(main())
