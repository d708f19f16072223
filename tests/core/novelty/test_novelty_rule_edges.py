"""Behaviour of the novelty rule (imprint_core/novelty/rule.py) that the rest
of the suite left unchecked, found by mutation testing (`make mutate`,
reports/mutation.md): each test here fails for a wrong implementation of the
rule that the other tests let through. Configs are built explicitly, so the
tests hold whatever the shipped defaults are.

Nothing here sleeps: time is a VirtualClock.
"""
from __future__ import annotations

from imprint_core.events import call_verdicts
import dataclasses
import random
import re

import pytest
from hypothesis import given, settings as hsettings, strategies as st

from imprint_core import (FunctionTool, LoopConfig, NoveltyConfig, NoveltyTracker, StopReason, ToolSpec, Turn, call,
                          normalize)
from imprint_core.novelty.rule import MAX_SHINGLE_WORDS

from helpers import doc, endless, make_run, read_tool, settings

QUERIES = ["laptop battery life", "longest battery laptop", "which notebook lasts longest",
           "battery endurance review", "ultrabook runtime test", "laptop hours unplugged", "best battery notebook",
           "battery test results laptops"]
HITS = ["The Aero 14 lasted eighteen hours in the looping video test at half brightness.",
        "The Brisk 13 managed fourteen hours of mixed office work before it shut down.",
        "The Cirrus 15 ran for eleven hours with the screen at full brightness all day."]


# The shipped rule, spelled out: the tests below must not move when a default does.
RULE = NoveltyConfig(normalization="default", shingle_words=5, containment_threshold=0.8, min_new_shingles=3,
                     min_new_share=0.0, fingerprint_unit="paragraph", near_duplicate="off",
                     shingle_capacity=262_144, paragraph_capacity=65_536)


def echoing(args: dict) -> str:
    """The same hits every time, under a header that repeats the query."""
    return f'Search results for "{args["q"]}":\n\n' + "\n\n".join(HITS)


# ---- loop.py: the call's arguments reach the rule -----------------------------------------------
def test_the_loop_judges_a_result_without_the_words_its_query_echoes():
    """Every round the same hits under a header naming a different query
    (words, not numbers the normalization would mask): no progress after the
    first round. Judged without the call's arguments, each new header would be
    new evidence and the loop would run on until the queries came round again."""
    patience = 3
    run = make_run(endless(lambda i: Turn(tool_calls=[call("search", q=QUERIES[i % len(QUERIES)])])),
                   [read_tool(responder=echoing)], st=settings(research_no_progress_rounds=patience),
                   config=LoopConfig(novelty=RULE))
    result = run.run()
    assert result.stop_reason is StopReason.NO_PROGRESS and result.rounds == 1 + patience
    assert [e.progress for e in run.events("round_end")] == [True] + [False] * patience


# ---- rule.py: echoes are left out result by result -------------------------------------------------
@hsettings(max_examples=40, deadline=None)
@given(st.randoms(use_true_random=False), st.integers(1, 3))
def test_each_results_echo_is_left_out_whatever_the_other_results_echo(rnd, quiet):
    """A round of results that echo their own queries and results whose
    queries they do not contain, in any order: after the first round only the
    queries change, so no later round is progress. (Whether one result echoed
    its query must not decide whether another's echo is left out.)"""
    t = NoveltyTracker(RULE)
    verdicts = []
    for r in range(4):
        results = [("ok", echoing({"q": QUERIES[(2 * r + i) % len(QUERIES)]}), None,
                    {"q": QUERIES[(2 * r + i) % len(QUERIES)]}) for i in range(2)]
        results += [("ok", doc(f"quiet {i}"), None, {"q": f"{QUERIES[(r + i) % len(QUERIES)]} unmentioned"})
                    for i in range(quiet)]
        rnd.shuffle(results)
        verdicts.append(t.observe_round(results).progress)
    assert verdicts == [True, False, False, False]


# ---- rule.py: what a verdict says in the trace ---------------------------------------------------
def failing(message: str) -> FunctionTool:
    def fn(args, ctx):
        raise RuntimeError(message.format(**args))
    return FunctionTool(ToolSpec("search", "find", kind="read"), fn)


def test_a_repeated_tool_error_is_marked_in_the_trace():
    """The trace's tool_result says which error it was (a signature that
    ignores volatile tokens) and whether the run had seen it before."""
    tool = failing("upstream timeout at 2026-10-28T10:15:0{n}Z for {q}")
    plan = [Turn(tool_calls=[call("search", q="alpha", n=1)]), Turn(tool_calls=[call("search", q="alpha", n=2)]),
            Turn(tool_calls=[call("search", q="other words entirely", n=3)]), "done"]
    run = make_run(plan, [tool], st=settings(research_no_progress_rounds=10), config=LoopConfig(novelty=RULE))
    run.run()
    verdicts = call_verdicts(run.log.events)
    novelty = [verdicts.get(e.call_id) for e in run.events("tool_result")]
    assert all(n is not None and n["new_paragraphs"] == 0 for n in novelty)
    first, again, other = novelty
    assert isinstance(first["error_signature"], str) and first["error_signature"]
    assert again["error_signature"] == first["error_signature"] != other["error_signature"]
    assert [n["repeated_error"] for n in novelty] == [False, True, False]
    assert all("near_duplicate" not in n for n in novelty)


def test_a_successful_read_carries_no_error_fields_in_the_trace():
    run = make_run([Turn(tool_calls=[call("search", q="a")]), "done"], [read_tool()], config=LoopConfig(novelty=RULE))
    run.run()
    (res,) = run.events("tool_result")
    assert res.novelty is None   # the verdict is the round's, on round_end
    assert set(call_verdicts(run.log.events)[res.call_id]) == {"paragraphs", "new_paragraphs", "new_shingles"}


def test_a_near_duplicate_is_marked_in_the_trace():
    screen = ("Checkout page. Your cart holds three items: the Aero 14 laptop, a USB-C charger and a sleeve. "
              "Subtotal 1,249 dollars. Shipping is free. Press Place order to continue or Back to edit the cart.")
    ocr = screen.replace("three", "thrce").replace("Subtotal", "Subtota1").replace("Shipping", "Shiping") \
        .replace("continue", "contlnue").replace("cart.", "cart,")
    texts = {"a": screen, "b": ocr}
    cfg = LoopConfig(novelty=dataclasses.replace(RULE, near_duplicate="jaccard", near_duplicate_threshold=0.6))
    run = make_run([Turn(tool_calls=[call("search", q="a")]), Turn(tool_calls=[call("search", q="b")]), "done"],
                   [read_tool(responder=lambda args: texts[args["q"]])], config=cfg,
                   st=settings(research_no_progress_rounds=10))
    run.run()
    verdicts = call_verdicts(run.log.events)
    first, second = (verdicts[e.call_id] for e in run.events("tool_result"))
    assert "near_duplicate" not in first
    assert second["near_duplicate"] is True and second["new_paragraphs"] == 0
    assert "error_signature" not in second and "repeated_error" not in second


# ---- rule.py: the parameters a config accepts ------------------------------------------------------
INTEGER_FIELDS = {"shingle_words": (1, MAX_SHINGLE_WORDS), "min_new_shingles": (1, None),
                  "shingle_capacity": (2, None), "paragraph_capacity": (2, None)}
SHARE_FIELDS = {"containment_threshold": False, "min_new_share": True, "near_duplicate_threshold": False}
CHOICE_FIELDS = {"normalization": ("none", "basic", "default"), "fingerprint_unit": ("paragraph", "line"),
                 "near_duplicate": ("off", "jaccard", "containment")}


def words(error: str) -> set[str]:
    return set(re.findall(r"\w+", error))


def refused(**kw) -> str | None:
    """The error a config with these values raises, or None when it is accepted."""
    try:
        NoveltyConfig(**kw)
    except ValueError as e:
        return str(e)
    return None


@hsettings(max_examples=150, deadline=None)
@given(field=st.sampled_from(sorted(INTEGER_FIELDS)), value=st.integers(-5, 300))
def test_integer_parameters_accept_exactly_their_range(field, value):
    lo, hi = INTEGER_FIELDS[field]
    error = refused(**{field: value})
    assert (error is None) == (lo <= value and (hi is None or value <= hi)), (field, value, error)
    if error is not None:   # the error names the field, the value and the range
        assert field in words(error) and str(value) in error and str(lo) in error
        assert (str(hi) in error) if hi is not None else ("at least" in error)


@pytest.mark.parametrize("field", sorted(INTEGER_FIELDS))
def test_integer_parameters_edges(field):
    lo, hi = INTEGER_FIELDS[field]
    assert refused(**{field: lo}) is None and refused(**{field: lo - 1}) is not None
    if hi is not None:
        assert refused(**{field: hi}) is None and refused(**{field: hi + 1}) is not None
    for wrong in (True, False, float(lo), str(lo), None):   # a bool is not an integer here
        error = refused(**{field: wrong})
        assert error is not None and field in words(error) and "integer" in error and repr(wrong) in error


@hsettings(max_examples=150, deadline=None)
@given(field=st.sampled_from(sorted(SHARE_FIELDS)),
       value=st.one_of(st.floats(-0.5, 1.5), st.sampled_from([0, 1, 0.0, 1.0, 2, -1])))
def test_share_parameters_accept_exactly_their_interval(field, value):
    zero = SHARE_FIELDS[field]
    error = refused(**{field: value})
    assert (error is None) == ((0 <= value <= 1) if zero else (0 < value <= 1)), (field, value, error)
    if error is not None:
        assert field in words(error) and str(value) in error and ("[0, 1]" if zero else "(0, 1]") in error


@pytest.mark.parametrize("field", sorted(SHARE_FIELDS))
def test_share_parameters_refuse_what_is_not_a_number(field):
    for wrong in (float("nan"), True, False, "0.5", None):
        error = refused(**{field: wrong})
        assert error is not None and field in words(error) and "number" in error and repr(wrong) in error


@pytest.mark.parametrize("field", sorted(CHOICE_FIELDS))
def test_choice_parameters_accept_their_names_and_refuse_others(field):
    for ok in CHOICE_FIELDS[field]:
        assert refused(**{field: ok}) is None
    for wrong in ("", "Paragraph", "OFF", 1, None):
        error = refused(**{field: wrong})
        assert error is not None and field in words(error) and repr(wrong) in error
        # every allowed value is named, one by one
        assert all(f" {ok}," in error or f" {ok};" in error for ok in CHOICE_FIELDS[field])


# ---- rule.py: judging one by one then committing is observing the round --------------------------
def one_by_one(t: NoveltyTracker, results):
    return t.commit_round([t.judge(*r) for r in results])


def summary(rn) -> tuple:
    return (rn.progress, rn.new_paragraphs, rn.new_shingles, rn.shingles, rn.largest_new,
            [(v.status, v.to_dict()) for v in rn.verdicts])


ERRORS = ["HTTP 503 from upstream", "connection reset by peer", "quota exceeded for this key"]


def random_round(rng: random.Random, seen: list[str]) -> list[tuple]:
    results = []
    for _ in range(rng.randint(1, 4)):
        x = rng.random()
        if x < 0.2:
            results.append(("error", rng.choice(ERRORS), None))
            continue
        if seen and x < 0.45:
            text = rng.choice(seen)
        elif x < 0.6:
            text = rng.choice(["", "  ", "[]"])
        else:
            text = doc(rng.randrange(12), rng.choice([4, 9, 12, 40]))
        q = rng.choice(QUERIES)
        if rng.random() < 0.4:   # a header echoing the query, or the query inside the text
            text = echoing({"q": q}) if rng.random() < 0.5 else f"{text} {q} {doc(rng.randrange(3), 5)}"
        seen.append(text)
        results.append(("ok", text, None, {"q": q}) if rng.random() < 0.7 else ("ok", text, None))
    return results


@hsettings(max_examples=60, deadline=None)
@given(st.integers(0, 2**32 - 1), st.sampled_from(["off", "jaccard"]),
       st.sampled_from([(262_144, 65_536), (24, 65_536), (8, 2)]))
def test_judging_one_by_one_then_committing_equals_observing_the_round(seed, near, caps):
    """The loop judges each result as it arrives and commits the round after
    (judge, commit_round); that must remember exactly what observe_round does:
    every result's shingles, echoes and paragraph hashes, every error."""
    rng = random.Random(seed)
    cfg = dataclasses.replace(RULE, near_duplicate=near, near_duplicate_threshold=0.6, shingle_capacity=caps[0],
                              paragraph_capacity=caps[1])
    whole, single = NoveltyTracker(cfg), NoveltyTracker(cfg)
    seen: list[str] = []
    for _ in range(rng.randint(2, 8)):
        results = random_round(rng, seen)
        assert summary(one_by_one(single, results)) == summary(whole.observe_round(results))
        assert single.stored == whole.stored


def test_every_error_of_a_round_is_remembered():
    for commit in (one_by_one, NoveltyTracker.observe_round):
        t = NoveltyTracker(RULE)
        first = commit(t, [("error", e, None) for e in ERRORS] + [("ok", doc("a"), None)])
        assert [v.repeated_error for v in first.verdicts[:3]] == [False] * 3 and first.progress
        again = commit(t, [("error", e, None) for e in reversed(ERRORS)])
        assert [v.repeated_error for v in again.verdicts] == [True] * 3
        assert len({v.error_signature for v in again.verdicts}) == 3


def test_reads_after_an_error_in_the_round_are_remembered():
    for commit in (one_by_one, NoveltyTracker.observe_round):
        t = NoveltyTracker(RULE)
        first = commit(t, [("error", ERRORS[0], None), ("ok", doc("a"), None), ("ok", doc("b"), None)])
        assert first.progress and first.new_paragraphs == 2 and first.new_shingles > 0
        again = commit(t, [("ok", doc("b"), None), ("ok", doc("a"), None)])
        assert not again.progress and (again.new_paragraphs, again.new_shingles) == (0, 0)


def test_a_verdict_keeps_its_results_status():
    t = NoveltyTracker(RULE)
    rn = t.observe_round([("error", ERRORS[0], None), ("ok", doc("a"), None), ("ok", "", None),
                          ("timeout", "partial text", None)])
    assert [v.status for v in rn.verdicts] == ["error", "ok", "empty", "timeout"]
    # only an ok read is evidence, whatever text came with another status
    assert [v.paragraphs for v in rn.verdicts] == [0, 1, 0, 0] and rn.new_paragraphs == 1
    other = t.observe_round([("timeout", doc("cut short"), None), ("partial", doc("half"), None, {"q": "half"})])
    assert not other.progress and (other.new_paragraphs, other.new_shingles, other.shingles) == (0, 0, 0)
    assert [v.status for v in one_by_one(t, [("error", ERRORS[1], None)]).verdicts] == ["error"]


def test_the_paragraph_hashes_of_every_result_outlive_the_shingle_store():
    """A small shingle store forgets; the paragraph hashes of each result of
    a round (not only its last) still tell that the text was seen."""
    cfg = dataclasses.replace(RULE, shingle_capacity=16, paragraph_capacity=65_536)
    for commit in (one_by_one, NoveltyTracker.observe_round):
        t = NoveltyTracker(cfg)
        assert commit(t, [("ok", doc("a"), None), ("ok", doc("b"), None)]).progress
        for i in range(6):   # flush the shingle store
            commit(t, [("ok", doc(f"filler {i}"), None)])
        for text in (doc("a"), doc("b")):
            r = commit(t, [("ok", text, None)])
            assert not r.progress and r.new_paragraphs == 0


def test_a_query_echoed_in_one_round_is_known_evidence_in_the_next():
    """The words a call's query echoed are not judged, but remembered: the
    same text fetched by another query, which does not echo them, is not new."""
    text = "Field notes: the heat pump kept the cellar dry through the whole winter season."
    for commit in (one_by_one, NoveltyTracker.observe_round):
        t = NoveltyTracker(RULE)
        assert commit(t, [("ok", text, None, {"q": "heat pump"})]).progress
        r = commit(t, [("ok", text, None, {"q": "cellar records"})])
        assert not r.progress and r.new_shingles == 0



def test_an_echo_only_units_new_line_is_judged_beside_a_template_line_left_out():
    """Every shingle of the unit touches its query; its first line is the
    template's (another query gave it), so it is judged on its second line
    alone, echo replaced: five new shingles, progress. Excluding the template
    line by its index in the unit as read would exclude the evidence line."""
    for commit in (one_by_one, NoveltyTracker.observe_round):
        t = NoveltyTracker(RULE)
        first = [("ok", "Search results for madrid:\nMadrid has many museums.", None, {"q": "madrid"})]
        assert commit(t, first).progress
        r = commit(t, [("ok", "Search results for toledo:\nThe old city of Toledo sits on a hill.", None,
                        {"q": "toledo"})])
        # the kept line "the old city of <q> sits on a hill" is judged: its 5 shingles are new
        assert r.progress and r.new_shingles == 5 and r.verdicts[0].new_paragraphs == 1


def test_lines_judged_apart_are_known_when_an_echo_only_unit_holds_them_together():
    """Lines of more than TEMPLATE_CHARS besides the echo are never the
    template's, so each is judged as evidence, echo replaced; the same lines
    read again as one paragraph are judged line by line, joined by line
    breaks alone: all their shingles are known, not progress."""
    lines = ["Madrid " + " ".join(w * 25 for w in words) for words in
             (("museum", "gallery", "palace"), ("street", "market", "square"), ("station", "airport", "bridge"))]
    for commit in (one_by_one, NoveltyTracker.observe_round):
        t = NoveltyTracker(RULE)
        assert commit(t, [("ok", "\n\n".join(lines), None, {"q": "madrid"})]).progress
        r = commit(t, [("ok", "\n".join(lines), None, {"q": "madrid"})])
        # one shingle per four-word line, each seen: anything written between the lines would be new
        assert not r.progress and r.new_shingles == 0 and r.shingles == 3

def test_a_round_counts_only_the_shingles_the_store_does_not_hold():
    """new_shingles is what the round adds: a window where a few words
    changed adds only the shingles that touch them, and with more required
    than that the round is not progress."""
    base = doc("base", 12).split()
    changed = " ".join(base[:6] + ["zzchanged"] + base[7:])
    cfg = dataclasses.replace(RULE, min_new_shingles=6, containment_threshold=1.0)
    for commit in (one_by_one, NoveltyTracker.observe_round):
        t = NoveltyTracker(cfg)
        commit(t, [("ok", " ".join(base), None)])
        r = commit(t, [("ok", changed, None)])
        assert r.new_paragraphs == 1 and r.new_shingles == 5 and r.shingles == 8 and not r.progress


@pytest.mark.parametrize("text", ["...", "-- ; --", "\u200b"])
def test_a_read_the_normalization_leaves_nothing_of_is_judged_as_nothing(text):
    """Under a profile that drops punctuation, a read of punctuation alone
    has no words: judged one by one or with its round it is no evidence."""
    cfg = dataclasses.replace(RULE, normalization="all", near_duplicate="jaccard")
    t = NoveltyTracker(cfg)
    v, shingles, paragraphs = t.judge("ok", text, None, {"q": "dots"})
    assert (v.status, v.paragraphs, v.new_paragraphs) == ("ok", 0, 0) and not shingles
    rn = t.commit_round([(v, shingles, paragraphs), t.judge("ok", doc("a"), None)])
    assert rn.progress and rn.new_paragraphs == 1
    assert not t.observe_round([("ok", text, None)]).progress


# ---- rule.py: near-duplicates ----------------------------------------------------------------------
SCREEN = ("Checkout page. Your cart holds three items: the Aero 14 laptop, a USB-C charger and a sleeve. "
          "Subtotal 1,249 dollars. Shipping is free. Press Place order to continue or Back to edit the cart.")
OCR = SCREEN.replace("three", "thrce").replace("Subtotal", "Subtota1").replace("Shipping", "Shiping") \
    .replace("continue", "contlnue").replace("cart.", "cart,")


def near(mode: str, threshold: float) -> NoveltyConfig:
    return dataclasses.replace(RULE, near_duplicate=mode, near_duplicate_threshold=threshold)


def test_each_measure_is_the_one_configured():
    """A result that an earlier, longer one holds whole: contained in it,
    but far from the same text. Containment calls it a near-copy; Jaccard does not."""
    longer = SCREEN + " " + doc("more", 60)
    for mode, expected in (("jaccard", False), ("containment", True)):
        t = NoveltyTracker(near(mode, 0.8))
        t.observe_round([("ok", longer, None)])
        (v,) = t.observe_round([("ok", SCREEN, None)]).verdicts
        assert v.near_duplicate is expected, mode


@pytest.mark.parametrize("mode", ["jaccard", "containment"])
def test_a_similarity_equal_to_the_threshold_is_a_near_duplicate(mode):
    t = NoveltyTracker(near(mode, 1.0))
    t.observe_round([("ok", SCREEN, None)])
    (v,) = t.observe_round([("ok", SCREEN, None)]).verdicts     # the same text: similarity exactly 1
    assert v.near_duplicate and v.new_paragraphs == 0


def test_the_sketch_is_of_the_normalized_words_joined_by_single_spaces():
    """neardup's definition: a result's text for its sketch is its normalized
    units' words joined by single spaces, whatever the units and spaces."""
    from imprint_core.novelty import neardup
    cfg = near("jaccard", 0.9)
    units = ["First  hit:\tthe Aero 14", "second hit, the Brisk 13", "third\nhit"]
    t = NoveltyTracker(cfg)
    _, shingles, _ = t.judge("ok", "\n\n".join(units), units)
    words = " ".join(normalize(u, cfg.normalization) for u in units).split()
    expected = neardup.sketch(" ".join(words).encode())
    assert shingles.sketch[1] == expected[1] and (shingles.sketch[0] == expected[0]).all()


def test_a_near_copy_in_a_round_adds_nothing_and_leaves_the_rest_judged():
    """In a round with a near-copy and a new result, the new one is judged as
    if alone: its shingles, and only they, are the round's; the near-copy's
    windows count no shingles."""
    other = doc("order placed", 40)
    alone = NoveltyTracker(near("jaccard", 0.6)).observe_round([("ok", other, None)])
    for results in ([("ok", OCR, None), ("ok", other, None)], [("ok", other, None), ("ok", OCR, None)]):
        t = NoveltyTracker(near("jaccard", 0.6))
        t.observe_round([("ok", SCREEN, None)])
        rn = t.observe_round(results)
        copy, new = sorted(rn.verdicts, key=lambda v: not v.near_duplicate)
        assert copy.near_duplicate and (copy.shingles, copy.new_paragraphs, copy.new_shingles) == (0, 0, 0)
        assert (new.shingles, new.new_paragraphs, new.new_shingles) == (alone.shingles, 1, alone.new_shingles)
        assert rn.progress and (rn.shingles, rn.new_shingles) == (alone.shingles, alone.new_shingles)
        assert not t.observe_round([("ok", other, None)]).progress


def test_a_round_without_results_counts_nothing():
    for commit in (one_by_one, NoveltyTracker.observe_round):
        rn = commit(NoveltyTracker(RULE), [])
        assert (rn.progress, rn.new_paragraphs, rn.new_shingles, rn.shingles, rn.largest_new, rn.verdicts) == \
            (False, 0, 0, 0, 0, [])
