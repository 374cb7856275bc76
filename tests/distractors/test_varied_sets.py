"""An item's distractors are varied and written for it (issue 71): the near-copy cap counts closeness to the
correct answers (not who wrote a candidate), one rewrite of each kind, no two distractors that near-copy
each other, and answers of other dialogues only where nothing written for the item or its dialogue is left."""

from __future__ import annotations

import pandas as pd

from tasks.distractors.adversarial import AFRules, af_loop, af_start, Holdings
from tasks.distractors.placement import LAST_WRITTEN, kind, mark, named, preference

GOLD = "The speaker buys a new red car for the long trip to the coast."


def _items(n: int = 1) -> pd.DataFrame:
    return pd.DataFrame({"id": [f"i{k}" for k in range(n)], "group_id": [f"g{k}" for k in range(n)],
                         "context": [f"c{k}" for k in range(n)], "gold": [GOLD] * n})


def _start(pool: list[tuple[str, str, str, str]], slots: int, **rules) -> list[str]:
    """The start of one item from (id, text, generator, rule) candidates, in the pool's order."""
    items = _items()
    pools = {"i0": [(c, t) for c, t, _, _ in pool]}
    gen = {c: g for c, _, g, _ in pool}
    place = {c: preference(g, r) for c, _, g, r in pool}
    kinds = {c: kind(g, r) for c, _, g, r in pool}
    ruled = AFRules(n_distractors=slots, max_iterations=0, **rules)
    caps = Holdings(items, pools, ruled, gen, {"i0": []}, kinds)
    return af_start(items, pools, ruled, place, caps)["i0"]["distractors"]


def test_kind_names_the_change_and_a_negation_is_one_kind():
    assert kind("grounded", "contrary_verb:goes->refuses to go") == "contrary_verb"
    assert kind("grounded", "predicate_negation:is->is not") == kind("lexical", "negation:add") == "negation"
    assert kind("lexical", "antonym:lexicon+negation:add") == "antonym"
    assert kind("dialogue", "dialogue:i3") == kind("retrieval", "retrieval:i9") == kind("server", "server:m:t:r") == ""
    # this dialogue's answer said contrary: a negation is the one negation an item holds, whoever's answer it
    # negates; refused or forgotten, another event is a kind of its own beside the correct answer's
    assert kind("dialogue", "predicate_negation:goes->does not go+dialogue:i3") == "negation"
    assert kind("dialogue", "contrary_verb:shows->forgets to show+dialogue:i3") == "dialogue:contrary_verb" != \
        kind("grounded", "contrary_verb:goes->refuses to go")


def test_a_word_swap_comes_after_the_contrary_predicates_and_before_other_dialogues():
    assert mark("grounded", "swap_object:companion->dog") == "swap"
    swap = preference("grounded", "swap_object:companion->dog")
    assert preference("grounded", "predicate_negation:is->is not") < swap == LAST_WRITTEN
    assert swap < preference("retrieval", "retrieval:i9") == named("retrieved")


def test_the_near_copy_cap_counts_closeness_not_the_writer():
    """Two rewrites of the gold that change its predicate as a whole (word Jaccard < 0.5) are no near-copies:
    both are taken, beside one near-copy; a second near-copy is not, while another candidate is at hand."""
    pool = [("a", "The speaker sells a new red car for the long trip to the coast.", "lexical", "antonym:buy->sell"),
            ("b", "The speaker refuses to drive anywhere and stays at home all summer.", "grounded",
             "contrary_verb:x->y"),
            ("c", "The speaker does not buy a new red car for the long trip to the coast.", "grounded",
             "predicate_negation:buys->does not buy"),
            ("d", "The listener worries about the cost of the journey.", "dialogue", "dialogue:i5")]
    got = _start(pool, 3)
    assert set(got) == {"a", "b", "d"} or set(got) == {"c", "b", "d"}
    # the writer alone never counts: with no near-copy in the pool, three rewrites fill three slots
    far = [("b", pool[1][1], "grounded", "contrary_verb:x->y"),
           ("e", "The speaker feels annoyed about the plans for the holiday.", "grounded", "emotion_swap:x->y"),
           ("f", "The listener sold the old van to a dealer in town.", "grounded", "role_flip:a<->b")]
    assert sorted(_start(far, 3)) == ["b", "e", "f"]


def test_one_rewrite_of_each_kind_and_no_two_near_copies_of_each_other():
    pool = [("n1", "The speaker never wanted to travel to the coast at all.", "grounded", "predicate_negation:x"),
            ("n2", "The speaker did not plan any trip with friends this year.", "lexical", "negation:add"),
            ("d1", "The listener lends the speaker some money for a bus ticket.", "dialogue", "dialogue:i4"),
            ("d2", "The listener lends the speaker some money for a train ticket.", "dialogue", "dialogue:i6"),
            ("r1", "The listener orders a large pizza for the whole office.", "retrieval", "retrieval:i9")]
    got = _start(pool, 2)
    assert sum(c in got for c in ("n1", "n2")) == 1  # two negations are one distractor said twice
    assert sum(c in got for c in ("d1", "d2")) == 1  # near-copies of each other
    # a third slot: a near-copy of a held distractor, written for this dialogue, before another dialogue's answer
    got = _start(pool, 3)
    assert sum(c in got for c in ("n1", "n2")) == 1 and {"d1", "d2"} <= set(got) and "r1" not in got
    assert "r1" in _start(pool, 4)  # then nothing written for the item is left that fits
    # lifted caps (0): an item short of candidates takes both
    assert sorted(_start(pool[:4], 4, max_rewrites=0)) == ["d1", "d2", "n1", "n2"]


def test_other_dialogues_answers_only_where_nothing_written_is_left():
    """At the start a second near-copy of a correct answer (the released sets' 99th percentile) comes before
    an answer written for another dialogue."""
    pool = [("a", "The speaker sells a new red car for the long trip to the coast.", "lexical", "antonym:buy->sell"),
            ("c", "The speaker does not buy a new red car for the long trip to the coast.", "grounded",
             "predicate_negation:buys->does not buy"),
            ("r", "The listener orders a large pizza for the whole office.", "retrieval", "retrieval:i9")]
    assert sorted(_start(pool, 2)) == ["a", "c"]


def test_swaps_never_trade_a_written_distractor_for_another_dialogues_answer():
    """A round whose adversary prefers an answer of another dialogue to a weak distractor written for the item
    or its dialogue makes no such swap, whether or not a written candidate is still unused."""
    import numpy as np

    from tasks.distractors.adversarial import af_swap

    items = _items()
    pool = [("w", "The speaker walks to the coast alone.", "grounded", "contrary_verb:x"),
            ("u", "The speaker feels annoyed about the trip.", "grounded", "emotion_swap:x"),
            ("r", "The listener orders a large pizza for the whole office.", "retrieval", "retrieval:i9")]
    pools = {"i0": [(c, t) for c, t, _, _ in pool]}
    gen = {c: g for c, _, g, _ in pool}
    place = {c: preference(g, r) for c, _, g, r in pool}
    rules = AFRules(n_distractors=1, max_iterations=0)
    caps = Holdings(items, pools, rules, gen, {"i0": []}, {c: kind(g, r) for c, _, g, r in pool})
    state = {"i0": {"distractors": ["w"], "unused": ["u", "r"], "swaps": 0, "held_out_rounds": [], "swap_rounds": [],
                    "k": 1}}
    # scores: gold, then distractors + unused in order (w, u, r): r above the gold, u below it
    judged = {"held": ["i0"], "choice_ids": [["w", "u", "r"]], "sizes": [1], "figures": {"pairwise_accuracy": 0.0},
              "voices": [[np.array([0.5, 0.1, 0.2, 0.9])]]}
    assert af_swap(judged, state, rules, caps, place, 0) == 0 and state["i0"]["distractors"] == ["w"]
    state["i0"]["unused"] = ["r"]  # nothing written left: a written distractor still never makes way for it
    judged["choice_ids"] = [["w", "r"]]
    judged["voices"] = [[np.array([0.5, 0.1, 0.9])]]
    assert af_swap(judged, state, rules, caps, place, 1) == 0 and state["i0"]["distractors"] == ["w"]
    # another dialogue's answer that fills a slot may make way for another one the adversary prefers
    pool.append(("r2", "The listener books a table for two at noon.", "retrieval", "retrieval:i7"))
    pools = {"i0": [(c, t) for c, t, _, _ in pool]}
    gen, place = {c: g for c, _, g, _ in pool}, {c: preference(g, r) for c, _, g, r in pool}
    caps = Holdings(items, pools, rules, gen, {"i0": []}, {c: kind(g, r) for c, _, g, r in pool})
    state["i0"].update(distractors=["r"], unused=["r2"])
    judged["choice_ids"] = [["r", "r2"]]
    assert af_swap(judged, state, rules, caps, place, 2) == 1 and state["i0"]["distractors"] == ["r2"]


def test_the_loop_runs_with_kinds():
    items = _items(2)
    pools = {i: [(f"{i}/a", "The speaker sells a new red car."), (f"{i}/b", "The listener goes home early.")]
             for i in items["id"]}
    state, history = af_loop(items, pools, lambda seed: None, AFRules(n_distractors=2, max_iterations=0),
                             kind_of={c: "antonym" for p in pools.values() for c, _ in p})
    assert all(len(st["distractors"]) == 2 for st in state.values()) and history == []


def test_a_negated_copy_of_a_correct_answer_waits_for_every_other_written_candidate():
    """A near-copy of the gold that negates it names the gold without the dialogue: the start takes a
    rewrite that changes the predicate, or this dialogue's answer, first; the negated copy only for a slot
    nothing else written for the item fills, and still before an answer of another dialogue."""
    pool = [("c", "The speaker does not buy a new red car for the long trip to the coast.", "grounded",
             "predicate_negation:buys->does not buy"),
            ("b", "The speaker refuses to drive anywhere and stays at home all summer.", "grounded",
             "contrary_verb:x->y"),
            ("d", "The listener worries about the cost of the journey.", "dialogue", "dialogue:i5"),
            ("r", "The listener orders a large pizza for the whole office.", "retrieval", "retrieval:i9")]
    assert sorted(_start(pool, 2)) == ["b", "d"]
    assert sorted(_start(pool, 3)) == ["b", "c", "d"]
    # one allowed per item: taken in the first pass like any other rewrite
    assert "c" in _start(pool[:2] + pool[3:], 2, max_negated_copies=1)


def test_a_round_never_swaps_in_a_negated_copy():
    import numpy as np

    from tasks.distractors.adversarial import af_swap

    items = _items()
    pool = [("w", "The speaker walks to the coast alone.", "grounded", "contrary_verb:x"),
            ("c", "The speaker does not buy a new red car for the long trip to the coast.", "grounded",
             "predicate_negation:buys->does not buy")]
    pools = {"i0": [(c, t) for c, t, _, _ in pool]}
    gen = {c: g for c, _, g, _ in pool}
    place = {c: preference(g, r) for c, _, g, r in pool}
    rules = AFRules(n_distractors=1, max_iterations=0)
    caps = Holdings(items, pools, rules, gen, {"i0": []}, {c: kind(g, r) for c, _, g, r in pool})
    state = {"i0": {"distractors": ["w"], "unused": ["c"], "swaps": 0, "held_out_rounds": [], "swap_rounds": [],
                    "k": 1}}
    judged = {"held": ["i0"], "choice_ids": [["w", "c"]], "sizes": [1], "figures": {"pairwise_accuracy": 0.0},
              "voices": [[np.array([0.5, 0.1, 0.9])]]}  # the adversary prefers the negated copy to the gold
    assert af_swap(judged, state, rules, caps, place, 0) == 0 and state["i0"]["distractors"] == ["w"]


def test_a_negative_cap_is_a_clear_error():
    import pytest

    from csk.errors import ConfigError
    from tasks.distractors.adversarial import adversarial_filter

    for name in ("max_rewrites", "max_negated_copies", "max_reuse"):
        with pytest.raises(ConfigError, match=f"{name} must be 0 or more"):
            adversarial_filter(_items(), pd.DataFrame(), **{name: -1})
