"""One fast test per rule added for a generator's candidates and for contrary predicates: the grounded
contrary rules (predicate negation, contrary verb, emotion swap), the words English has, the agreement rules'
exceptions, bare negations, echoes of correct answers, the pools a generator's candidates fill, AF's tiers."""

from __future__ import annotations

import numpy as np
import pandas as pd

from tasks.distractors import grounded

WORDS = {"time": [], "attribute": []}


def _rewrites(answer: str, rule: str, words=WORDS, per_rule: int = 2) -> list[str]:
    return [t for _, t in grounded.rewrites(answer, words, set(), per_rule=per_rule, rules=[rule])]


def test_a_predicate_is_negated_inside_it_with_do_support_or_after_its_auxiliary():
    assert _rewrites("The speaker likes the place.", "predicate_negation") == ["The speaker does not like the place."]
    assert _rewrites("The listener went home early.", "predicate_negation") == ["The listener did not go home early."]
    assert _rewrites("The speaker will inspect the garden.", "predicate_negation") == \
        ["The speaker will not inspect the garden."]
    assert _rewrites("The speaker is interested in her studies.", "predicate_negation") == \
        ["The speaker is not interested in her studies."]
    # coordinated verbs take the base form under do-support
    assert _rewrites("The speaker visits the shelter and chooses a dog.", "predicate_negation") == \
        ["The speaker does not visit the shelter and choose a dog."]
    assert _rewrites("The speaker does not have enough money.", "predicate_negation") == []  # negative already
    assert _rewrites("Anna and her lover get married.", "predicate_negation") == []  # "get not married"


def test_an_event_goes_under_a_verb_that_denies_it_in_its_own_form():
    made = _rewrites("The listener goes to the supermarket.", "contrary_verb", per_rule=3)
    assert sorted(made) == ["The listener fails to go to the supermarket.",
                            "The listener forgets to go to the supermarket.",
                            "The listener refuses to go to the supermarket."]
    assert set(_rewrites("The speaker paid the bill.", "contrary_verb", per_rule=3)) == \
        {"The speaker refused to pay the bill.", "The speaker failed to pay the bill.",
         "The speaker forgot to pay the bill."}
    assert "The listener will fail to smile." in _rewrites("The listener will smile.", "contrary_verb", per_rule=3)
    assert "The speaker must have failed to practise playing songs." in \
        _rewrites("The speaker must have practised playing songs.", "contrary_verb", per_rule=3)
    for no in ("The speaker wants a dog.", "The speaker failed the test.", "The speaker was given a gift.",
               "The speaker tries to let the listener wash the dishes."):  # a state, a not-doing, a passive, a catenative
        assert _rewrites(no, "contrary_verb", per_rule=3) == [], no


def test_a_feeling_is_swapped_for_one_of_the_other_polarity_the_dialogues_first():
    made = _rewrites("The listener feels worried.", "emotion_swap",
                     {"time": [], "attribute": ["wonderful", "delighted", "small"]})
    # the dialogue's own adjective of feeling first ("wonderful" describes a thing: "wants the speaker to be
    # ridiculous" was read as broken)
    assert made[0] == "The listener feels delighted." and "The listener feels wonderful." not in made
    from tasks.distractors.grounded import valence

    for text in made:
        word = text.split()[3].rstrip(".")
        assert valence()[word] > 0
    both = _rewrites("The listener feels encouraged and excited.", "emotion_swap")
    assert both and all(valence()[t.split()[3]] < 0 and valence()[t.split()[5].rstrip(".")] < 0 for t in both)
    assert all(not w.endswith("ing") for t in both for w in t.rstrip(".").split()[3:])  # "bored", never "boring"
    assert _rewrites("The speaker is happy but worried.", "emotion_swap") == []  # both polarities: no one opposite
    assert _rewrites("The speaker buys a car.", "emotion_swap") == []
    # a feeling is a person's, its own word, with no preposition or clause of its own to keep agreeing
    assert _rewrites("The listener feels worried about the house.", "emotion_swap")  # "about" goes with every feeling
    for text in ("The working conditions are good.", "The speaker feels self-satisfied.",
                 "The listener is grateful for the warning.", "The listener feels hopeful that she can join.",
                 "The speaker discusses what was more painful.",  # a wh-word or "it" feels nothing
                 "The speaker is discussing how difficult it is to raise kids."):
        assert _rewrites(text, "emotion_swap") == [], text


def test_a_feeling_said_alone_is_of_the_other_polarity_without_its_complement():
    from tasks.distractors.grounded import participle, valence

    made = _rewrites("The listener is happy to know the reason for the delay.", "feeling_alone")
    assert made and all(t.startswith("The listener is ") and len(t.split()) == 4 for t in made), made
    for text in made:
        word = text.split()[3].rstrip(".")
        assert valence()[word] < 0 and participle(word), word  # "is annoyed"; never "is energetic"
    # the adjectives after those the swap takes: the two are no near-copies of each other
    swapped = _rewrites("The listener is very excited about the trip.", "emotion_swap")
    alone = _rewrites("The listener is very excited about the trip.", "feeling_alone")
    assert alone and {t.split()[4] for t in swapped}.isdisjoint({t.split()[4].rstrip(".") for t in alone})
    # only the first feeling of a clause that opens with its subject and linking verb
    assert _rewrites("The speaker thinks the listener is happy.", "feeling_alone") == []
    assert _rewrites("The speaker buys a car.", "feeling_alone") == []
    assert _rewrites("The working conditions are good.", "feeling_alone") == []


def test_a_predicate_is_rewritten_only_where_the_answer_opens_with_its_subject():
    """A misparse (a verb read as a noun, a question inside the answer) has no predicate to rewrite whole; a
    contrary verb takes no progressive."""
    for text in ("The listener hurries to the station to catch the train.",
                 "The listener enquired since when does the speaker like fishing."):
        assert _rewrites(text, "contrary_verb") == [] and _rewrites(text, "predicate_negation") == [], text
    assert _rewrites("The speaker is organising a party.", "contrary_verb") == []
    assert "The speaker refused to go to the bank." in _rewrites("The speaker went to the bank.", "contrary_verb") or \
        "The speaker forgot to go to the bank." in _rewrites("The speaker went to the bank.", "contrary_verb")


def test_no_predicate_of_a_broken_or_already_negated_answer_is_rewritten():
    """A rewrite of broken English is broken English, and a second negation in one sentence reads as a puzzle;
    the grammar's own exceptions stay rewritable."""
    for text in ("The listener suggests leaving the worries and spent time with his family.",  # two tenses
                 "The speaker goes home and took a nap.",
                 "The speaker mentions the listener join her for the trainings.",  # no bare verb after "mention"
                 "The listener found that the amount is not equivalent to the bill.",  # a negation already
                 "The speaker suggests the listener to not go outside.",
                 "The listener felt happy and relax about the bill."):  # a bare verb joined to a finite one
        assert _rewrites(text, "predicate_negation") == [] and _rewrites(text, "contrary_verb") == [], text
    assert _rewrites("The listener felt happy and relax about the bill.", "emotion_swap") == []
    # "but" joins a statement of its own: the negation leaves it finite
    assert _rewrites("A has a few options in mind but is unsure which to choose.", "predicate_negation") == [
        "A does not have a few options in mind but is unsure which to choose."]
    assert _rewrites("The speaker goes home and takes a nap.", "predicate_negation") == [
        "The speaker does not go home and take a nap."]
    for text in ("The speaker lets the listener go home.", "The listener suggested the speaker talk to his teacher.",
                 "The speaker is quite busy, but wanted to hear out the listener.",  # a state now, an event then
                 "The speaker finished his work and is now relaxing.", "The speaker visits the shelter and chooses a dog."):
        assert _rewrites(text, "predicate_negation"), text


def test_only_a_person_refuses_or_forgets_anything_may_fail():
    assert _rewrites("The registration started late.", "contrary_verb") == ["The registration failed to start late."]
    made = _rewrites("Tom pays the bill.", "contrary_verb")
    assert made and all(t.split()[1] in ("fails", "refuses", "forgets") for t in made)
    assert any(t.split()[1] in ("refuses", "forgets") for t in made + _rewrites("Tom pays the bills.", "contrary_verb"))


def test_no_word_inside_a_compound_or_a_fixed_quantifier_is_rewritten():
    from tasks.distractors import fluency

    for old, new in (("A wants to become a full time teacher.", "A wants to become a empty time teacher."),
                     ("The speaker is a high school student.", "The speaker is a low school student."),
                     ("The speaker had not gotten a single day off.", "The speaker had not gotten a married day off."),
                     ("B has a pet and looks after it.", "B has a pet and looks before it.")):  # a phrasal verb
        assert fluency.check(old, new, fluency.parse([old, new])) is not None, new
    old, new = "The speaker buys a cheap car.", "The speaker buys an expensive car."
    assert fluency.check(old, new, fluency.parse([old, new])) is None


def test_no_feeling_turned_round_beside_its_partner_no_name_broken_no_particle_dropped():
    from tasks.distractors import fluency

    def reason(old, new):
        found = fluency.check(old, new, fluency.parse([old, new]))
        return found and found[0]

    # two adjectives of one valence joined by "and" say one thing: one turned round contradicts the other
    assert reason("The listener felt happy and satisfied with the price.",
                  "The listener felt sad and satisfied with the price.") == "coordination"
    assert reason("The speaker was excited and happy to see her.", "The speaker was bored and happy to see her.") \
        == "coordination"
    assert reason("The listener felt happy but tired after the trip.",  # a contrast
                  "The listener felt sad but tired after the trip.") is None
    assert reason("The speaker found a cheap and good hotel.",  # no one valence
                  "The speaker found an expensive and good hotel.") is None
    # a noun after a proper noun is part of the name, in whatever case the writer left it
    assert reason("The speaker is amazed that the listener went to niagara falls.",
                  "The speaker is amazed that the listener went to niagara rises.") == "name_part"
    assert reason("The speaker visited Niagara Falls last summer.", "The speaker visited Niagara Rises last summer.") \
        == "name_part"
    # "behind", like "up" and "back", makes a phrasal verb with the verb before it
    assert reason("The speaker studies hard so as not to fall behind in class.",
                  "The speaker studies hard so as not to rise behind in class.") == "complement"


def test_a_light_verb_keeps_its_phrase():
    from tasks.distractors.lexical import antonym_rewrites

    assert antonym_rewrites("The speaker offers to take the listener home.") == []
    assert antonym_rewrites("The speaker makes a good impression.") == [] or \
        all("make" in t.lower() for _, t in antonym_rewrites("The speaker makes a good impression."))


def test_english_has_derived_compound_and_everyday_words_but_no_typos():
    from tasks.distractors.fluency import is_word, misspellings, parse

    for word in ("pub", "halal", "snuck", "playlist", "neverending", "demotivation", "unavailability"):
        assert is_word(word), word
    for typo in ("univeristy", "officals", "adviced", "thes", "availibility"):
        assert not is_word(typo), typo
    text = "The listener is afraid they won't like the book."
    assert misspellings(parse([text])[text]) == []  # "wo" of "won't" is no word of its own


def test_agreement_knows_zero_hyphenated_numbers_compound_modifiers_and_a_past_like_its_present():
    from tasks.distractors.fluency import agreement_problems, parse

    fine = ["The speaker had zero interest in it.", "The listener took the metro to the eighty-second street.",
            "The listener scored poorly even with his two year preparation.", "The dress fit her daughter perfectly.",
            "The speaker snuck in."]
    for text in fine:
        assert agreement_problems(parse([text])[text]) == [], text
    slip = "The speaker made four trip to the city."
    assert agreement_problems(parse([slip])[slip])


def test_a_bare_negation_changes_only_the_polarity():
    from tasks.distractors.giveaways import bare_negation

    assert bare_negation("The speaker does not go home.", "The speaker goes home.")
    assert bare_negation("It is not true that the speaker goes home.", "The speaker goes home.")
    assert bare_negation("The speaker likes broth.", "The speaker does not like broth.")
    assert not bare_negation("The speaker does not like soup.", "The speaker likes broth.")
    assert not bare_negation("The speaker goes home.", "The speaker goes home.")


def _view() -> pd.DataFrame:
    return pd.DataFrame({"id": ["a", "b", "c"], "group_id": ["D1", "D1", "D2"], "question": ["cause"] * 3,
                         "passage": [["A: hi", "B: hello"]] * 3, "n_distractors": [2, 2, 2],
                         "gold": ["The speaker goes home.", "The speaker buys milk.", "The listener sings a song."]})


def test_a_generators_candidate_copying_another_dialogues_answer_is_rejected_an_echo_kept_behind():
    from tasks.distractors.counterfactuals import Echoes

    echoes = Echoes(_view())
    assert echoes.of("a", "The listener sings a song.")[0] == "another_dialogue"
    assert echoes.of("a", "The speaker buys milk.")[0] == "echo"  # this dialogue, another question
    assert echoes.of("a", "The speaker does not go home.")[0] == "echo"  # a bare negation of its own answer
    assert echoes.of("a", "The speaker stays at the office.") is None


def test_the_offline_generators_fill_only_the_items_their_own_generator_left_short():
    from tasks.distractors.counterfactuals import Said, fill_pools

    view = _view()
    asked: dict[str, list[str]] = {}

    def generator(name, made):
        def make(v):
            asked[name] = list(v["id"])
            return {i: [(name, t) for t in made.get(i, [])] for i in v["id"]}
        return make

    make = {"file": generator("file", {"a": ["A1.", "A2.", "A3.", "A4."], "b": ["B1."]}),
            "lexical": generator("lexical", {i: [f"{i} rewrite {k}." for k in range(6)] for i in "abc"}),
            "server": generator("server", {i: [f"{i} served."] for i in "abc"})}
    pools, added = fill_pools(view, ["file", "lexical", "server"], make, min_pool=16, fluency=False, said=Said(),
                              own_margin=2)
    assert [g for g, _, _ in pools["a"]] == ["file"] * 4  # its slots (2) + the margin (2): no offline candidate
    assert {g for g, _, _ in pools["b"]} == {"file", "lexical", "server"}
    assert asked["server"] == ["b", "c"]  # a later generator writing for the item is asked for the short ones only


def test_af_starts_with_the_generators_candidates_and_never_trades_one_for_an_offline_one():
    from tasks.distractors.adversarial import AFRules, af_loop
    from tasks.distractors.placement import preference

    class Prefers:  # a discriminator that scores the offline candidates above the gold and everything else below
        def __init__(self, seed):
            pass

        def fit(self, contexts, choices, gold):
            return self

        def score(self, contexts, sets):
            return [np.array([0.0] + [1.0 if "offline" in t else -1.0 for t in s[1:]]) for s in sets]

    n = 20
    items = pd.DataFrame({"id": [f"i{k}" for k in range(n)], "group_id": [f"g{k}" for k in range(n)],
                          "context": ["c"] * n, "gold": [f"gold {k}" for k in range(n)]})
    pools, gen = {}, {}
    for i in items["id"]:
        mine = [(f"{i}/s{j}", f"{i} served {j}") for j in range(2)]
        other = [(f"{i}/o{j}", f"{i} offline {j}") for j in range(4)]
        pools[i] = mine + other
        gen |= {c: "server" for c, _ in mine} | {c: "dialogue" for c, _ in other}
    state, history = af_loop(items, pools, Prefers, AFRules(n_distractors=2, max_iterations=5, chance_alpha=1),
                             generator_of=gen, placement_of={c: preference(g, None) for c, g in gen.items()})
    assert all(sorted(st["distractors"]) == sorted(c for c in gen if c.startswith(i + "/s"))
               for i, st in state.items())
    assert sum(h["swaps"] for h in history) == 0


def test_no_double_negative_and_no_antonym_the_sentence_already_says():
    from tasks.distractors.lexical import antonym_rewrites, negation_rewrites

    assert negation_rewrites("There was no electricity in the house.") == []
    assert all("bad and bad" not in t for _, t in antonym_rewrites("The listener asks what's good and bad about it."))


def test_a_thing_is_swapped_only_where_its_slot_selects_nothing_else_of_it():
    words = {"time": [], "attribute": [], "verb": [], "place": [], "object": [("piano", "NN"), ("grade", "NN")]}
    assert _rewrites("The speaker sells the old guitar.", "swap_object", words) == []  # a modifier chose the noun
    assert _rewrites("A shows consideration and care to B.", "swap_object", words) == []  # joined to another noun
    assert _rewrites("The speaker does the homework.", "swap_object", words) == []  # a light verb's object
    assert _rewrites("The speaker blames the mistake on the listener.", "swap_object", words) == []  # blame X on
    assert _rewrites("The speaker sells the guitar.", "swap_object", words)[0] == "The speaker sells the piano."
    assert _rewrites("The speaker wants a guitar at home.", "swap_object", words)[0] == \
        "The speaker wants a piano at home."  # where it happens goes with any thing
    # only the main event's own thing: not inside a clause, a passive, a particle verb, nor after a possessor
    for text in ("The listener helps the speaker improve his guitar.", "The speaker is given the guitar.",
                 "The speaker picks up the guitar.", "The speaker sells the listener's guitar."):
        assert _rewrites(text, "swap_object", words) == [], text
    # a bare singular is a mass noun: another thing would need an article ("brings piano")
    assert _rewrites("The speaker brings food to the party.", "swap_object", words) == []
    assert _rewrites("The speaker sells guitars.", "swap_object", words)[0] == "The speaker sells pianos."


def test_a_word_english_has_as_no_verb_is_no_predicate():
    # "questions" read as part of the subject, the name after it as the verb: no "fail to debbie"
    assert _rewrites("The speaker questions debbie about the reviews.", "contrary_verb") == []
    assert _rewrites("The speaker questions debbie about the reviews.", "predicate_negation") == []


def test_this_dialogues_answers_said_contrary_are_rows_of_their_own_placement_and_source():
    from tasks.distractors.counterfactuals import counterfactuals

    passage = ["A: I lost my keys .", "B: Look in your bag .", "A: Found them !", "B: Good , let us go ."]
    after = "What subsequent event happens following the target?"
    instances = pd.DataFrame({
        "id": ["s", "u"], "group_id": ["D", "D"], "question": [after, after],
        "target": ["Look in your bag .", "Found them !"], "passage": [passage] * 2,
        "gold": ["The speaker finds the keys in the bag.", "The speaker leaves the house with the listener."],
        "choices": [[], []], "correct_answers": [[], []]})
    out = counterfactuals(instances, generators=["dialogue"], min_pool=8).data
    said = out[(out["instance_id"] == "s") & (out["placement"] == "contrary")]
    assert len(said) and set(said["written_for"]) == {"u"} and said["rule"].str.endswith("+dialogue:u").all()
    assert said["rationale"].str.contains("the answer of u, this dialogue, about another target, rewritten").all()
    assert "The speaker refuses to leave the house with the listener." in set(said["candidate"]) or \
        "The speaker does not leave the house with the listener." in set(said["candidate"])
    # as written only from the earlier side (a subsequent event of a later turn also follows this one)
    assert not ((out["instance_id"] == "s") & (out["placement"] == "dialogue")).any()


def test_a_place_is_swapped_for_one_the_dialogue_names_after_the_same_preposition():
    words = {"time": [], "attribute": [], "verb": [], "object": [], "place": [("airport", "at"), ("salad", "in")]}
    assert _rewrites("The speaker waits at the office.", "swap_place", words) == ["The speaker waits at the airport."]
    assert _rewrites("The speaker stays at home.", "swap_place", words) == []  # a bare noun would take one bare
    passage = ["A: I will wait at the airport .", "B: Put it in the salad ."]
    found = grounded.dialogue_words(passage, None)["place"]
    assert ("airport", "at") in found and ("salad", "in") in found
