"""Stop rules: one interface for the loop and for replays of recorded runs.

`protocol.py` is the public shape (`RoundView`, `CallView`, `StopRule`,
`Rule`); `registry.py` finds rules by name, entry point or file and builds
them with checked parameters; `choice.py` is a rule chosen, one value
whichever road named it; `guard.py` is the boundary a user's rule runs
behind (what it raises is a user error naming the rule, run, round and
line); `builtin.py` holds the record's rule and the baselines it is
compared with. Start with protocol.py.
"""
from .protocol import ROUND_KINDS, CallView, RoundView, Rule, StopRule, as_rule, calls_of
from .registry import ENTRY_POINT_GROUP, RuleInfo, available, build, convert, parse_params, register, resolve, stop_rule
from .choice import DEFAULT_RULE, RECORD_SHORTHAND, RuleChoice, choose
# The built-in rules register on import. The package imports them, so the registry (which any
# import of a submodule reaches only through this package) never imports its own rules back.
from . import builtin, candidate  # noqa: E402,F401

__all__ = ["CallView", "DEFAULT_RULE", "ENTRY_POINT_GROUP", "RECORD_SHORTHAND", "ROUND_KINDS", "RoundView", "Rule",
           "RuleChoice", "RuleInfo", "StopRule", "as_rule", "choose", "available", "build", "calls_of", "convert", "parse_params", "register", "resolve", "stop_rule"]
