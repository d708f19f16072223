"""`python -m harness.realruns.importers PATH... --out DIR [--format NAME]`."""
import sys

from .cli import main_import

sys.exit(main_import())
