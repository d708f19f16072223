"""Per-round novelty computed once per run and config: `progress.py` (which
(run, config) pairs are missing, planned into items, and the corpora loaded),
`work.py` (an item's runs judged, inline, on local processes or Dask),
`cache.py` (progress kept in memory and on disk) and `stops.py` (the split by
task, `PARTS`, rule choices and `rule_stops`, `rules_stops`: what compare and tune share)."""
from .cache import Progress, ProgressCache, clear_memory_cache, default_cache_dir
from .progress import ComputeStats, Corpus, ProgressTable, TuneRun, compute_progress, load_corpora, stop_rounds
from .stops import PARTS, RuleChoice, Split, rule_stops, rules_stops

__all__ = ["Progress", "ProgressCache", "clear_memory_cache", "default_cache_dir",
           "ComputeStats", "Corpus", "ProgressTable", "TuneRun", "compute_progress", "load_corpora", "stop_rounds",
           "PARTS", "RuleChoice", "Split", "rule_stops", "rules_stops"]
