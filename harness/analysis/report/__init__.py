"""`imprint report`: `page.py` (the page: templates/report.html and its
Markdown twin) over `sections.py` (what each section shows), `inputs.py`
(which runs), `compare.py` (the rules compared on the report's own runs),
`tables.py`, `plots.py` and `timelines.py` (the per-round panels)."""
from .compare import comparison_of
from .page import write_report
from .sections import GateVerdict, Section, build_sections

__all__ = ["comparison_of", "write_report", "GateVerdict", "Section", "build_sections"]
