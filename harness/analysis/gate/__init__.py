"""The release gate: `conditions.py` (the three conditions, `judge_frames`,
`judged_runs`, `junit_xml`), `config.py` (`gate.toml` read and checked),
`regressions.py` (what the gate's stop rule does with each regression) and
`overruns.py` (token charges past their reservation, judged and reported)."""
from .config import GateConfig, load_config, parse_config
from .overruns import token_overrun_details, token_overrun_row, token_overruns
from .conditions import JudgedRun, judge_frames, judged_runs, junit_xml, novelty_config, run_gate
from .regressions import judge_logs, rule_of, verdict

__all__ = ["GateConfig", "load_config", "parse_config",
           "token_overrun_details", "token_overrun_row", "token_overruns",
           "JudgedRun", "judge_frames", "judged_runs", "junit_xml", "novelty_config", "run_gate",
           "judge_logs", "rule_of", "verdict"]
