"""`imprint tune`: `search.py` (scores, Pareto fronts, the recommendation rule,
cross-validation), `settings.py` (what is swept), `ceiling.py` (the
loop-recall ceiling a perfect novelty judgement would reach) and `report.py`
(the tuner's written outputs)."""
from .ceiling import loop_ceiling, oracle_progress
from .report import figures_text, recommendation, write_outputs
from .search import Rule, Scores, pareto_front, tune, tune_rule
from .settings import RuleSetting, Setting, settings_for

__all__ = ["loop_ceiling", "oracle_progress", "figures_text", "recommendation", "write_outputs",
           "Rule", "Scores", "pareto_front", "tune", "tune_rule", "RuleSetting", "Setting", "settings_for"]
