"""A rule choice from every road: `--params` files and scenarios are type
checked as `--param` is (issue 45 item 6); a scenario's rule mistakes name
the scenario's file and line, and its rule file is found from the
scenario's folder (45.18, 44.4); `compare` reads the README's
`any[rules=record,gemini-cli]` (45.19); rules cannot change the arguments
other rules see (45.7)."""
from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from harness.analysis.frames.load import load_frames
from harness.cli import main
from harness.cli.ruleargs import rules_of
from harness.scenarios import load_scenario
from harness.scenarios.runner import run_scenario
from imprint_core.errors import UserInputError
from imprint_core.stoprules import CallView, RoundView, build

from reportdata import fact, round_log

SCENARIO = """\
name: mine
question: What changed?
settings:
  chat.research_stop_rule: {rule}
loop:
  stop_rule_params:
    {param}
provider:
  kind: stub
  script:
    - repeat: 9
      calls: [{{tool: search, args: {{query: same}}}}]
  final:
    - answer: done
tools:
  - name: search
    parameters: {{type: object, properties: {{query: {{type: string}}}}}}
    results:
      - text: "Feed item 1: a new page."
      - text: "Feed item 2: another page."
      - text: "Feed item 3: a third page."
      - text: "Feed item 4: a fourth page."
      - text: "Feed item 5: a fifth page."
      - text: "Feed item 6: a sixth page."
      - text: "Feed item 7: a seventh page."
      - text: "Feed item 8: an eighth page."
      - text: "Feed item 9: a ninth page."
"""

TWICE = '''\
class Twice:
    """Stops at the second call of the same tool with the same arguments in a row."""
    def __init__(self, n): self.n, self.last, self.count = n, None, 0
    def observe(self, round):
        for c in round.calls:
            self.count = self.count + 1 if c.action == self.last else 1
            self.last = c.action
        return "repeated" if self.count >= self.n else None
    def reset(self): self.last, self.count = None, 0

def make(n: int = 2):
    return Twice(n)
'''


def scenario(tmp_path: Path, rule: str = "gemini-cli", param: str = "threshold: 3", folder: str = "scn") -> Path:
    f = tmp_path / folder / "mine.yaml"
    f.parent.mkdir(parents=True, exist_ok=True)
    f.write_text(SCENARIO.format(rule=rule, param=param))
    return f


def line_of(f: Path, text: str) -> int:
    return next(i for i, line in enumerate(f.read_text().splitlines(), start=1) if text in line)


@pytest.mark.parametrize("bad", ["2.5", ".nan", ".inf", "'three'", "true"])
def test_a_refused_stop_rule_param_names_the_scenario_file_and_line(tmp_path, bad):
    f = scenario(tmp_path, param=f"threshold: {bad}")
    with pytest.raises(UserInputError) as info:
        load_scenario(f)
    err = info.value
    assert (err.file, err.line) == (str(f), line_of(f, "threshold:"))
    assert err.key == "loop.stop_rule_params.threshold" and "--rule" not in err.describe()
    f = scenario(tmp_path, param="treshold: 3")
    with pytest.raises(UserInputError) as info:
        load_scenario(f)
    assert (info.value.file, info.value.line) == (str(f), line_of(f, "treshold:"))
    assert "threshold" in info.value.expected


def test_a_bad_stop_rule_in_a_scenario_names_the_scenario_file_and_line(tmp_path):
    for rule in ("gemini", "rules/missing.py:make"):
        f = scenario(tmp_path, rule=rule)
        with pytest.raises(UserInputError) as info:
            load_scenario(f)
        err = info.value
        assert (err.file, err.line) == (str(f), line_of(f, "chat.research_stop_rule"))
        assert err.key == "settings.chat.research_stop_rule" and "--rule" not in err.describe()
    f = scenario(tmp_path, rule="gemini-cli", param="threshold: 1")     # the factory's own bound
    with pytest.raises(UserInputError) as info:
        load_scenario(f)
    assert (info.value.file, info.value.line) == (str(f), line_of(f, "threshold:"))


def test_a_rule_file_named_relative_in_a_scenario_is_found_from_the_scenario_s_folder(tmp_path, monkeypatch):
    f = scenario(tmp_path, rule="rules/twice.py:make", param="n: 3", folder="deep/scn")
    (f.parent / "rules").mkdir()
    (f.parent / "rules" / "twice.py").write_text(TWICE)
    for cwd in (tmp_path, f.parent, tmp_path / "deep"):
        monkeypatch.chdir(cwd)
        run = run_scenario(load_scenario(f.relative_to(cwd) if cwd != tmp_path else f))
        assert run.result.rounds == 3 and run.result.detail.endswith("repeated"), cwd


@pytest.mark.parametrize("bad", ["2.5", "nan", "inf"])
def test_a_toml_params_file_is_type_checked_like_the_command_line(tmp_path, capsys, bad):
    log = tmp_path / "run.jsonl"
    round_log(log, [[{"result": fact(n), "args": {"q": "same"}}] for n in range(1, 8)])
    params = tmp_path / "params.toml"
    params.write_text(f"threshold = {bad}\n")
    assert main(["replay", "--rule", "gemini-cli", "--params", str(params), str(log)]) == 2
    err = capsys.readouterr().err
    assert str(params) in err and "threshold" in err and "an integer" in err
    assert main(["replay", "--rule", "gemini-cli", "--param", f"threshold={bad}", str(log)]) == 2
    assert "an integer" in capsys.readouterr().err


def test_the_gate_s_rule_params_and_novelty_table_are_type_checked(tmp_path):
    log = tmp_path / "run.jsonl"
    round_log(log, [[{"result": fact(n), "args": {"q": "same"}}] for n in range(1, 8)])
    for bad in (2.5, math.nan, math.inf):
        with pytest.raises(UserInputError):
            load_frames([log], rule="gemini-cli", rule_params={"threshold": bad})
    from harness.analysis.gate.config import parse_config
    with pytest.raises(UserInputError) as info:
        parse_config("[premature_stops]\nnovelty = { min_new_shingles = 2.5 }\n", "gate.toml")
    assert info.value.file == "gate.toml" and "min_new_shingles" in info.value.key


def test_compare_reads_the_readme_s_any_rule_and_nested_lists(tmp_path, capsys):
    class Args:
        params, param = None, None
        rules = ["any[rules=record,gemini-cli]", "any[rules=[round-cap,gemini-cli],round-cap.max_rounds=3]"]
    got = rules_of(Args(), [])
    assert [(spec, params) for _, spec, params in got] == [
        ("any", {"rules": "record,gemini-cli"}),
        ("any", {"rules": "[round-cap,gemini-cli]", "round-cap.max_rounds": "3"})]
    assert [n for n, _ in build("any", got[0][2]).specs] == ["record", "gemini-cli"]
    logs = tmp_path / "runs"
    round_log(logs / "loop.jsonl", [[{"result": fact(1), "args": {"q": "a"}}]] * 7)
    labels = tmp_path / "labels-mine.yaml"
    labels.write_text("runs:\n  loop: {loops: [2, 7]}\n")
    code = main(["compare", "--corpus", str(logs), "--labels", str(labels), "--rule", "any[rules=record,gemini-cli]",
                 "--rule", "gemini-cli", "--holdout", "0", "--no-disk-cache", "--out", str(tmp_path / "out"), "--json"])
    assert code == 0
    stops = json.loads(capsys.readouterr().out)["runs"][0]["stops"]
    # the shipped rule, always (repeat-aware: the same call and result six times after the first: round 7)
    assert stops == {"repeat-aware": 7, "any[rules=record,gemini-cli]": 5, "gemini-cli": 5}


MUTATES = '''\
class Mutates:
    """Rewrites every call's query (or tries to), and never stops."""
    refused = 0
    def observe(self, round):
        for c in round.calls:
            try:
                c.args["q"] = "rewritten"
            except TypeError:
                Mutates.refused += 1
            try:
                c.args.setdefault("extra", []).append(1)
            except TypeError:
                Mutates.refused += 1
        return None
    def reset(self): pass

def make():
    return Mutates()
'''


def test_a_rule_that_edits_the_arguments_changes_no_other_rule_s_result(tmp_path, capsys):
    logs = tmp_path / "runs"
    # every round a new query: gemini-cli (threshold 5) never stops, unless its calls were all rewritten alike
    round_log(logs / "useful.jsonl", [[{"result": fact(n), "args": {"q": f"q{n}"}}] for n in range(1, 9)])
    labels = tmp_path / "labels-mine.yaml"
    labels.write_text("runs:\n  useful: {should_not_stop_before: 8}\n")
    rule = tmp_path / "mutates.py"
    rule.write_text(MUTATES)
    code = main(["compare", "--corpus", str(logs), "--labels", str(labels), "--rule", f"{rule}:make",
                 "--rule", "gemini-cli", "--holdout", "0", "--no-disk-cache", "--out", str(tmp_path / "out"), "--json"])
    assert code == 0
    assert json.loads(capsys.readouterr().out)["runs"][0]["stops"] == {"repeat-aware": None, f"{rule}:make": None,
                                                                       "gemini-cli": None}
    call = CallView("search", {"q": "a", "filters": [{"site": "x"}]}, "read", "ok", "text")
    for change in (lambda a: a.update(q="b"), lambda a: a["filters"].append(1), lambda a: a["filters"][0].pop("site"),
                   lambda a: a.__setitem__("q", "b"), lambda a: a.clear()):
        with pytest.raises(TypeError, match="read-only"):
            change(call.args)
    assert call.args == {"q": "a", "filters": [{"site": "x"}]} and isinstance(call.args, dict)
    assert call.action == 'search:{"q":"a","filters":[{"site":"x"}]}'
    assert RoundView.of(1, [call]).calls[0].args is call.args


def test_a_bad_rule_or_parameter_in_gate_toml_names_the_file_and_line():
    from harness.analysis.gate.config import parse_config
    text = '[premature_stops]\nrule = "gemini-cli"\n\n[premature_stops.rule_params]\nthreshold = nan\n'
    with pytest.raises(UserInputError) as info:
        parse_config(text, "gate.toml")
    err = info.value
    assert (err.file, err.line, err.key) == ("gate.toml", 5, "premature_stops.rule_params.threshold")
    with pytest.raises(UserInputError) as info:
        parse_config('[premature_stops]\nrule = "gemini"\n', "gate.toml")
    assert (info.value.file, info.value.line, info.value.key) == ("gate.toml", 2, "premature_stops.rule")
    assert parse_config('[premature_stops]\nrule = "gemini-cli"\nrule_params = { threshold = 3 }\n',
                        "gate.toml").premature_stops["rule_params"] == {"threshold": 3}
