"""What `imprint tune` sweeps: a `Setting` (a patience and a `NoveltyConfig`)
of the record's rule, or a `RuleSetting` (the parameters of any stop rule),
each with its key, its distance from the shipped setting (the recommendation
rule's last tie-break) and its columns in the tables.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Any, Sequence

from imprint_core.novelty import NoveltyConfig
from imprint_core.stoprules import RuleChoice, choose

from ...realruns.noveltyconfigs import SHIPPED, as_dict, changed, config_key, describe
from ...realruns.roundlogs import PATIENCE

SHIPPED_PATIENCE = PATIENCE.default


@dataclass(frozen=True)
class Setting:
    config: NoveltyConfig
    patience: int

    @cached_property
    def key(self) -> str:
        return config_key(self.config)

    @cached_property
    def shipped(self) -> bool:
        return self.patience == SHIPPED_PATIENCE and self.key == config_key(SHIPPED)

    @cached_property
    def changed(self) -> dict[str, Any]:
        return changed(self.config)

    def distance(self) -> tuple[int, int]:
        """How far from the shipped setting: novelty fields changed, then patience steps."""
        return len(self.changed), abs(self.patience - SHIPPED_PATIENCE)

    def label(self, fields: Sequence[str] | None = None) -> str:
        return f"patience {self.patience}, {describe(self.config, fields)}"

    def to_dict(self) -> dict[str, Any]:
        return {"patience": self.patience, "novelty": as_dict(self.config), "changed": self.changed,
                "shipped": self.shipped}

    @property
    def choice(self) -> RuleChoice:
        """The record's rule at this setting, as `imprint replay --patience P
        --novelty FIELD=VALUE ...` chooses it (the fields it changes)."""
        return choose("record", {"patience": self.patience, **self.changed})

    def columns(self) -> dict[str, Any]:
        """The setting's values as table columns (settings.csv)."""
        return {"patience": self.patience, **as_dict(self.config)}


@dataclass(frozen=True)
class RuleSetting:
    """A setting of any stop rule: its parameters (the swept ones; the rest at
    their defaults). `shipped` is the rule at its documented defaults."""
    rule: str
    params: tuple[tuple[str, Any], ...]
    defaults: tuple[tuple[str, Any], ...]

    @cached_property
    def key(self) -> str:
        return self.rule + "".join(f",{k}={v!r}" for k, v in self.params)

    @cached_property
    def changed(self) -> dict[str, Any]:
        d = dict(self.defaults)
        return {k: v for k, v in self.params if d.get(k) != v}

    @cached_property
    def shipped(self) -> bool:
        return not self.changed

    @property
    def patience(self) -> None:
        return None

    def distance(self) -> tuple[int, float]:
        """How far from the rule's defaults: parameters changed, then the size of numeric changes."""
        d = dict(self.defaults)
        steps = sum(abs(v - d[k]) for k, v in self.changed.items()
                    if isinstance(v, (int, float)) and isinstance(d.get(k), (int, float)))
        return len(self.changed), float(steps)

    def label(self, fields: Sequence[str] | None = None) -> str:
        shown = [(k, v) for k, v in self.params if fields is None or k in fields]
        return self.rule + (" " + ", ".join(f"{k}={v}" for k, v in shown) if shown else " (defaults)")

    def to_dict(self) -> dict[str, Any]:
        return {"rule": self.rule, "params": dict(self.params), "changed": self.changed, "shipped": self.shipped}

    @property
    def choice(self) -> RuleChoice:
        """The rule at this setting, as `--rule RULE --param NAME=VALUE ...` chooses it."""
        return choose(self.rule, dict(self.params))

    def columns(self) -> dict[str, Any]:
        return {"rule": self.rule, **dict(self.params)}


def settings_for(configs: Sequence[NoveltyConfig], patiences: Sequence[int]) -> list[Setting]:
    """Every config × patience (config slowest), plus the shipped setting when the grid lacks it."""
    out = [Setting(c, p) for c in configs for p in patiences]
    if not any(s.shipped for s in out):
        out.append(Setting(SHIPPED, SHIPPED_PATIENCE))
    return out
