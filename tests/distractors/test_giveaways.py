"""What the choices alone give away (tasks/distractors/giveaways.py), and AF's ending-only adversary."""

import numpy as np
import pandas as pd
import pytest

from tasks.distractors import giveaways as gv


@pytest.mark.parametrize("text, negated", [
    ("The speaker did not go home.", True), ("The speaker didn't go home.", True),
    ("Nobody came to the party.", True), ("The speaker never called.", True), ("She cannot swim.", True),
    ("The speaker went home.", False), ("The notice was on the door.", False),  # "not" inside a word
    ("Nothing was left.", True), ("The knot was tight.", False),
])
def test_a_negation_is_one_of_englishs_negators(text, negated):
    assert gv.negated(text) is negated


def test_a_rewrite_shares_half_its_words_or_differs_by_a_negation():
    answer = "The speaker and her father stockpile food for the storm."
    assert gv.rewrites("The speaker and her father give away food for the storm.", answer)  # Jaccard >= 0.5
    assert gv.rewrites("The speaker and her father do not stockpile food for the storm.", answer)
    assert not gv.rewrites("The listener is relieved to hear the news.", answer)


def test_a_near_copy_set_has_two_distractors_rewriting_a_correct_answer():
    a, b = "Anna says yes and accepts the ring.", "Anna and her lover get married."
    copies = [a, b, "Anna says no and refuses the ring.", "Anna and her lover do not get married."]
    assert gv.near_copy_set(copies, {0, 1})
    one = [a, b, "Anna says no and refuses the ring.", "The storm knocks out the power in town."]
    assert not gv.near_copy_set(one, {0, 1})
    assert not gv.near_copy_set([a, b], {0, 1})  # every choice correct: no distractor, no near-copy


def test_a_negated_copy_adds_or_drops_a_negation_to_a_near_copy_of_a_correct_answer():
    answer = "The speaker wants to rent the flat near the station."
    assert gv.negated_copy("The speaker does not want to rent the flat near the station.", answer)
    assert gv.negated_copy(answer, "The speaker does not want to rent the flat near the station.")  # dropped
    assert gv.negated_copy("The speaker never wants to rent the flat near the park.", answer)  # Jaccard >= 0.5
    assert not gv.negated_copy("The speaker refuses to rent the flat near the station.", answer)  # no negator
    assert not gv.negated_copy("The speaker was not interested in any flat.", answer)  # a new predicate
    a, b = "Anna says yes and accepts the ring.", "Anna and her lover get married."
    assert gv.negated_copy_set([a, b, "Anna and her lover do not get married.", "Anna loses the ring."], {0, 1})
    assert not gv.negated_copy_set([a, b, "Anna says maybe and returns the ring."], {0, 1})
    assert not gv.negated_copy_set([a, "Anna does not say yes."], {0, 1})  # every choice correct


def test_the_centre_of_a_set_is_the_choice_nearest_the_others():
    v = np.asarray([[1.0, 0.0], [0.95, 0.3], [0.95, -0.3]])  # row 0 lies between rows 1 and 2
    assert gv.centre_is_correct(v, {0}) and not gv.centre_is_correct(v, {1, 2})


def _vector(seed: int = 0, dim: int = 12):
    rng, cache = np.random.default_rng(seed), {}

    def vector(text: str) -> np.ndarray:  # random features: nothing but the negation to learn from
        if text not in cache:
            cache[text] = rng.normal(size=dim)
        return cache[text]
    return vector


def test_the_ending_only_probe_finds_a_negation_giveaway_and_not_noise():
    """Distractors that are all negations give the correct answers away without the dialogue; distractors
    that are not do not."""
    rng = np.random.default_rng(1)
    word = lambda: "w" + "".join(rng.choice(list("abcdefgh"), 5))  # noqa: E731
    told = [[f"The {word()} went home.", f"The {word()} did not stay.", f"The {word()} did not call."]
            for _ in range(120)]
    fair = [[f"The {word()} went home.", f"The {word()} stayed.", f"The {word()} called."] for _ in range(120)]
    correct = [{0}] * 120
    train, test = list(range(60)), list(range(60, 120))
    assert gv.ending_only_accuracy(train, test, told, correct, _vector()).mean() == 1.0
    assert gv.ending_only_accuracy(train, test, fair, correct, _vector()).mean() < 0.6  # chance 1/3


def test_the_probe_over_halvings_pairs_the_sets_on_the_same_halves_of_the_dialogues():
    """Every set is fitted and tested on the same halves (a dialogue's items on one side), so the
    difference between two sets is paired; the halves depend on the seed and the groups' order only."""
    rng = np.random.default_rng(1)
    word = lambda: "w" + "".join(rng.choice(list("abcdefgh"), 5))  # noqa: E731
    told = [[f"The {word()} went home.", f"The {word()} did not stay.", f"The {word()} did not call."]
            for _ in range(120)]
    fair = [[f"The {word()} went home.", f"The {word()} stayed.", f"The {word()} called."] for _ in range(120)]
    groups = [f"d{i // 3}" for i in range(120)]  # three items a dialogue
    sets = {"told": (told, [{0}] * 120), "fair": (fair, [{0}] * 120)}
    acc = gv.ending_only_halvings(groups, sets, _vector(), 4, seed=0)
    assert list(acc) == ["told", "fair"] and len(acc["told"]) == len(acc["fair"]) == 4
    assert (acc["told"] == 1.0).all() and (acc["told"] - acc["fair"]).min() > 0.3
    renamed = gv.ending_only_halvings([g.replace("d", "dialogue-") for g in groups], sets, _vector(), 4, seed=0)
    assert (renamed["fair"] == acc["fair"]).all()
    assert not (gv.ending_only_halvings(groups, sets, _vector(), 4, seed=1)["fair"] == acc["fair"]).all()
    # a half with no wrong choice to learn from is left out of every set
    every_correct = {"told": (told, [{0, 1, 2}] * 120), "fair": (fair, [{0}] * 120)}
    assert all(len(v) == 0 for v in gv.ending_only_halvings(groups, every_correct, _vector(), 2).values())


def test_af_swaps_out_distractors_the_choices_alone_give_away():
    """The context discriminator learns nothing (random features); every item starts with negations for
    distractors (the first preferred candidates) and has plain ones in its pool. Without the ending-only
    adversary no round beats chance and the negations stay; with it they are swapped out."""
    from tasks.distractors.adversarial import AFRules, af_loop
    from tasks.distractors.discriminators import LinearProbe
    from tasks.distractors.placement import named

    rng = np.random.default_rng(2)
    word = lambda: "w" + "".join(rng.choice(list("abcdefgh"), 6))  # noqa: E731
    n = 80
    items = pd.DataFrame({"id": [f"i{k:02d}" for k in range(n)], "group_id": [f"g{k}" for k in range(n)],
                          "context": [word() for _ in range(n)], "gold": [f"The {word()} went home." for _ in range(n)]})
    pools, placement = {}, {}
    for i in items["id"]:
        # two negations that are no near-copies of each other (the start takes no such pair)
        negations = [(f"{i}/n0", f"The {word()} did not go home."), (f"{i}/n1", f"The {word()} did not stay with {word()} {word()}.")]
        plain = [(f"{i}/p{j}", f"The {word()} {word()} {word()}.") for j in range(6)]  # no near-copies of each other
        pools[i] = negations + plain
        # both written for the dialogue (AF never trades a written distractor for another dialogue's answer);
        # the negations preferred, so every item starts with them
        placement |= {c: named("negation") for c, _ in negations} | {c: named("dialogue") for c, _ in plain}
    vector = _vector(3)
    def run(ending):
        return af_loop(items, pools, lambda seed: LinearProbe(vector, seed=seed),
                       AFRules(n_distractors=2, max_iterations=10, min_held_out=2, seed=0), placement_of=placement,
                       ending_only=ending)

    negated_share = lambda state: np.mean([gv.negated(t) for st in state.values() for c in st["distractors"]  # noqa: E731
                                           for t in [dict(sum(pools.values(), []))[c]]])
    state, history = run(None)
    assert negated_share(state) == 1.0 and sum(h["swaps"] for h in history) == 0
    state, history = run(lambda seed: gv.EndingOnlyProbe(vector, seed=seed))
    assert history[0]["ending_only_p_vs_chance"] < 0.01 and history[0]["swaps"] > 0
    assert negated_share(state) < 0.4  # a swap needs a candidate above the gold too: not every item has one


def test_the_rewrite_cap_counts_any_candidate_the_near_copy_rule_reads_as_a_rewrite():
    """A candidate of this dialogue or another that rewrites a correct answer (word Jaccard >= 0.5) counts
    against max_rewrites like a lexical rewrite: the start takes no second one while others are at hand."""
    from tasks.distractors.adversarial import AFRules, af_loop

    gold = "The speaker buys a new red car for the trip."
    items = pd.DataFrame({"id": ["i0", "i1"], "group_id": ["g0", "g1"], "context": ["c0", "c1"], "gold": [gold] * 2})
    pool = [("{i}/a", "The speaker sells a new red car for the trip."),       # lexical rewrite
            ("{i}/b", "The speaker buys a new blue car for the trip."),       # dialogue answer, a near-copy
            ("{i}/c", "The listener worries about the cost of the journey.")]  # dialogue answer
    pools = {i: [(c.format(i=i), t) for c, t in pool] for i in items["id"]}
    gen = {f"{i}/{x}": g for i in items["id"] for x, g in zip("abc", ("lexical", "dialogue", "dialogue"))}
    state, _ = af_loop(items, pools, lambda seed: None, AFRules(n_distractors=2, max_iterations=0, max_rewrites=1), generator_of=gen, placement_of={c: 0 for c in gen}, other_correct={"i0": [], "i1": []})
    for i in items["id"]:
        assert f"{i}/c" in state[i]["initial"] and len(state[i]["initial"]) == 2


def _cicero(real, name):
    import json

    return [json.loads(line) for line in (real / "cicero" / name).read_text(encoding="utf-8").splitlines() if line]


@pytest.mark.parametrize("name", ["cicero_v2_val_sample.jsonl", "cicero_v2_val_mutual.jsonl"])
def test_every_real_cicero_question_has_a_type_and_the_rules_fire_rarely_on_published_sets(real, name):
    """On the released CICERO v2 files: every question names one relation (its type); the near-copy rule
    fires on few published sets (8 of 300, 7 of 161), a negation on 25-32% of published distractors
    against 5-10% of correct answers (the release's own giveaway, which the ending-only probe reads)."""
    from tasks.distractors.counterfactuals import question_type

    recs = _cicero(real, name)
    assert {question_type(r["Question"]) for r in recs} <= {"cause", "motivation", "subsequent event", "reaction",
                                                              "prerequisite"}
    near = sum(gv.near_copy_set(r["Choices"], set(r["Correct Answers"])) for r in recs)
    assert near == {"cicero_v2_val_sample.jsonl": 8, "cicero_v2_val_mutual.jsonl": 7}[name]
    wrong = [c for r in recs for k, c in enumerate(r["Choices"]) if k not in r["Correct Answers"]]
    right = [c for r in recs for k, c in enumerate(r["Choices"]) if k in r["Correct Answers"]]
    assert 0.25 <= np.mean([gv.negated(c) for c in wrong]) <= 0.32
    assert 0.05 <= np.mean([gv.negated(c) for c in right]) <= 0.10


def test_on_the_real_v2_sample_this_dialogues_answers_offered_are_of_the_item_question_type(real):
    from tasks.distractors.counterfactuals import QUESTION_TIME, dialogue_pools, question_type

    recs = _cicero(real, "cicero_v2_val_sample.jsonl")
    view = pd.DataFrame({"id": [f"r{k}" for k in range(len(recs))], "group_id": [r["ID"] for r in recs],
                         "question": [r["Question"] for r in recs], "target": [r["Target"] for r in recs],
                         "passage": [r["Dialogue"] for r in recs],
                         "gold": [r["Choices"][r["Correct Answers"][0]] for r in recs],
                         "choices": [r["Choices"] for r in recs], "correct_answers": [r["Correct Answers"] for r in recs]})
    left_out: dict[str, int] = {}
    pools = dialogue_pools(view, time=QUESTION_TIME, left_out=left_out)
    kind = dict(zip(view["id"], map(question_type, view["question"])))
    offered = [(iid, rule.rsplit(":", 1)[-1]) for iid, pool in pools.items() for rule, _ in pool]
    assert offered and all(kind[a] == kind[b] for a, b in offered)
    assert sum(left_out.values()) > len(offered)  # most of a dialogue's answers are to another type


def test_the_contract_refuses_a_candidate_of_another_question_type():
    import pandera.errors as pe

    from data_contracts.distractors import Counterfactuals

    row = {"id": "i/cf000", "instance_id": "i", "gold": "The speaker is hungry.", "candidate": "The listener feels glad.",
           "generator": "dialogue", "rule": "dialogue:j", "rationale": "x", "item_question_type": "cause",
           "written_for": "j", "placement": "dialogue"}
    Counterfactuals.validate(pd.DataFrame([{**row, "question_type": "cause"}]))
    Counterfactuals.validate(pd.DataFrame([{**row, "question_type": None}]))  # unknown: nothing says it differs
    with pytest.raises(pe.SchemaError, match="candidate_answers_the_item_question_type"):
        Counterfactuals.validate(pd.DataFrame([{**row, "question_type": "reaction"}]))
    # the placements the contract knows are AF's declared order, every one of them
    from tasks.distractors.placement import PREFERENCE

    allowed = Counterfactuals.to_schema().columns["placement"].checks[0].statistics["allowed_values"]
    assert sorted(allowed) == sorted(n for n, _, _ in PREFERENCE)
