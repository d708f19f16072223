"""`python -m harness.cli` is `imprint`."""
import sys

from . import main

sys.exit(main())
