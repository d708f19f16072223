"""What the gate's stop rule does with each regression run (`imprint regress`).

The rule is the one `imprint check` judges with: the patience, novelty config
and user-turn handling of the gate config's `[premature_stops]`. A run is
replayed and judged by the gate's own code (`frames.replay_frames`,
`gate.judged_runs`), so `imprint regress list` says what `imprint check`
says, run by run.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from ...realruns.labels import Labels, RunLabel, Verdict
from ...realruns.noveltyconfigs import changed, describe
from ...realruns.regressionstore import key_of, stored_runs
from ...realruns.roundlogs import RoundLog
from ..frames.load import replay_frames
from .conditions import JudgedRun, judged_runs, novelty_config
from .config import GateConfig


def rule_of(cfg: GateConfig) -> str:
    """The gate's stop rule in words, with the normalization always named."""
    nov = novelty_config(cfg)
    ps = cfg.premature_stops
    return f"patience {ps['patience']}, {describe(nov, ['normalization', *changed(nov)])}, user turns {ps['user_turns']}"


def judge_logs(logs: Sequence[RoundLog], labels: Labels, cfg: GateConfig) -> dict[str, JudgedRun]:
    """The labelled ones of `logs`, replayed and judged as the gate does, by label key."""
    ps = cfg.premature_stops
    frames = replay_frames(logs, patience=ps["patience"], novelty=novelty_config(cfg), user_turns=ps["user_turns"])
    return {jr.label.name: jr for jr in judged_runs(frames, labels, ps["loop_slack"])}


def verdict(jr: JudgedRun, cfg: GateConfig) -> Verdict:
    return Verdict(jr.stop, jr.holds, rule_of(cfg))


@dataclass
class Row:
    """One regression: its label, its stored round log (None: missing) and what the rule does with it now."""
    label: RunLabel
    path: str | None
    now: JudgedRun | None

    @property
    def name(self) -> str:
        return self.label.name.split("/", 1)[-1]

    @property
    def changed(self) -> bool:
        """The verdict is not the one recorded when the regression was added."""
        then = self.label.when_added
        return self.now is not None and then is not None and then.holds != self.now.holds

    def to_dict(self, cfg: GateConfig) -> dict[str, Any]:
        lab, now, then = self.label, self.now, self.label.when_added
        loops = [{"start": a, "end": b, "period": p} for (a, b), p in zip(lab.loops, lab.periods or [None] * len(lab.loops))]
        return {
            "name": self.name, "key": lab.name, "file": self.path, "note": lab.note, "source": lab.source,
            "added": lab.added or None,
            "label": {"should_not_stop_before": lab.should_not_stop_before, "loops": loops},
            "now": None if now is None else {
                "stop_round": now.stop, "premature": now.judgement.premature, "loops": now.judgement.loops,
                "loops_caught": now.judgement.loops_caught, "holds": now.holds, "problems": now.problems(),
                "rule": rule_of(cfg)},
            "when_added": None if then is None else then.to_dict(),
            "changed": self.changed, "missing": self.path is None}


def rows(store: Path, labels: Labels, cfg: GateConfig) -> tuple[list[Row], list[str]]:
    """A row per regression label, in the file's order, and warnings for
    stored round logs that no label names."""
    logs = stored_runs(store)
    judged = judge_logs(logs, labels, cfg)
    by_key = {key_of(store, Path(log.path).stem): log.path for log in logs}
    out = [Row(lab, by_key.get(key), judged.get(key)) for key, lab in labels.runs.items()]
    warnings = [f"{path}: stored, but no label in {', '.join(labels.files)} names it (an interrupted "
                "`regress add` leaves one: adding the run again replaces it); not judged"
                for key, path in by_key.items() if key not in labels.runs]
    return out, warnings
