"""One fast test per rule of `tasks.distractors.statements`: what a person says of themselves, as a statement for
the subject an answer names, and its contrary where the clause was negated; and the statements said contrary
by the grounded rules in the dialogue's pool."""

from __future__ import annotations

import json

import pandas as pd

from tasks.distractors.statements import statements


def _said(passage: list[str], target: str, answer: str) -> list[tuple[str, str | None]]:
    return [(s, c) for _, s, c in statements(passage, target, [answer])]


DIALOGUE = ["A: where were you last night ?",
            "B: i stayed at the office until ten .",
            "A: i waited for you at the station for an hour .",
            "B: i 'm so sorry about the delay .",
            "B: i do n't like the new manager .",
            "A: i will call you tomorrow ."]


def test_the_target_speakers_clauses_become_statements_for_the_speaker():
    made = _said(DIALOGUE, DIALOGUE[3], "The speaker feels guilty about the delay.")
    assert ("The speaker stays at the office until ten.", None) not in made  # "stayed": a past clause stays past
    assert ("The speaker stayed at the office until ten.", None) in made
    assert ("The speaker is sorry about the delay.", None) in made  # "so" grades it: left out
    # the other person's clauses are statements for the other person (the roles flipped), never for this subject
    assert ("The listener waited for the speaker at the station for an hour.", None) in made
    assert ("The listener will call the speaker tomorrow.", None) in made
    assert not any(s.startswith("The speaker") and ("waited" in s or "call" in s) for s, _ in made)
    # spelt as the answers spell the roles; the other person's "my" needs a pronoun an answer gives them
    assert ("the listener will call the speaker tomorrow.", None) in _said(DIALOGUE, DIALOGUE[3], "the speaker is sorry.")
    assert not any("keys" in s for s, _ in _said(["A: i lost my keys .", "B: i 'm sorry ."], "i 'm sorry .",
                                                 "The speaker feels bad for her."))


def test_a_negated_clause_gives_its_contrary_without_the_negation_and_its_do_support():
    made = _said(DIALOGUE, DIALOGUE[3], "The speaker feels guilty about the delay.")
    assert ("The speaker does not like the new manager.", "The speaker likes the new manager.") in made
    past = _said(DIALOGUE, DIALOGUE[3], "The speaker was late for the meeting.")
    assert ("The speaker did not like the new manager.", "The speaker liked the new manager.") in past
    # "cannot" is one word; its contrary drops the negation
    assert _said(["A: hello .", "B: i ca n't swim in the sea ."], "i ca n't swim in the sea .",
                 "The speaker is afraid of water.") == [("The speaker cannot swim in the sea.",
                                                        "The speaker can swim in the sea.")]


def test_you_is_the_other_person_and_the_verb_agrees_with_the_new_subject():
    made = _said(DIALOGUE, DIALOGUE[3], "The listener forgives the speaker.")
    assert ("The listener will call the speaker tomorrow.", None) in made
    assert ("The listener waits for the speaker at the station for an hour.", None) not in made
    assert ("The listener waited for the speaker at the station for an hour.", None) in made
    assert _said(["A: hi .", "B: i have your keys ."], "i have your keys .", "The speaker found the keys.") == \
        [("The speaker had the listener's keys.", None)]
    # a verb whose subject was "you" agrees with the other person too
    assert _said(["A: hi .", "B: i had no idea you were a painter ."], "i had no idea you were a painter .",
                 "The speaker is surprised.") == [("The speaker had no idea the listener was a painter.", None)]
    assert _said(["A: hi .", "B: i owe you for everything you 've done ."], "i owe you for everything you 've done .",
                 "The speaker is grateful.") == [("The speaker owes the listener for everything the listener has done.",
                                                  None)]
    assert _said(["A: hi .", "B: i am busy in the kitchen you know ."], "i am busy in the kitchen you know .",
                 "The speaker cannot help.") == []  # "you know": an aside


def test_my_and_me_take_the_pronoun_the_answers_give_the_subject_else_the_clause_is_left_out():
    passage = ["A: what 's wrong ?", "B: i lost my purse at the market ."]
    assert _said(passage, passage[1], "The speaker is upset about her loss.") == \
        [("The speaker lost her purse at the market.", None)]
    assert _said(passage, passage[1], "The speaker is upset.") == []  # no pronoun given: no guess


def test_an_irregular_record_gives_no_statement_and_no_error():
    # no passage, no target, a target the passage lacks, one speaker only, untagged turns, a non-string turn
    assert statements([], None, ["The speaker is tired."]) == []
    assert statements(["A: i stayed at the office until ten ."], None, ["The speaker is tired."]) == []
    assert statements(["A: hello .", "B: i stayed at the office until ten ."], "not there", ["The speaker is ok."]) == []
    assert statements(["A: hello .", "A: i stayed at the office until ten ."], "hello .", ["The speaker is ok."]) == []
    assert statements(["hello .", "i stayed at the office until ten ."], "hello .", ["The speaker is ok."]) == []
    assert statements(["A: hello .", None, 3.0], "hello .", ["The speaker is ok."]) == []


def test_clauses_a_reader_cannot_resolve_or_that_hold_no_event_are_left_out():
    target = "i like it ."
    for utterance in ("i like it .", "am i late for the show ?", "i think we should go now .", "i hope not .",
                      "if i win , i will buy a car .", "i 'm lynn .", "i 'm gonna buy a car .",
                      "i have n't seen anyone yet .", "i have n't called him for two weeks .",
                      "i have n't called the bank for two weeks .", "i did n't know .", "i 'm sure .",
                      "i 've only been there once .", "i must go to the bank .", "i could help the new manager .",
                      "i 've always been .", "i really have done .", "i better ask you some questions first .",
                      "i 'd better ask you some questions first .",
                      # a bare singular noun after "be" is a name the lower-cased dialogue hides, or a word of address
                      "i 'm bell in room 908 .", "i 'm ready mom .", "i 'm sorry sir ."):
        assert _said(["A: hello .", f"B: {utterance}"], utterance, "The speaker is happy with the gift.") == [], \
            utterance
    assert _said(["A: hello .", f"B: {target}"], target, "Anna likes the gift.") == []  # a name: no "I" says it
    # both people: no one utterance's "I" is them
    assert _said(["A: hello .", "B: i bought a new car ."], "i bought a new car .",
                 "The speaker and the listener go for a drive.") == []
    # a determined noun after "be" is a statement; a time said as a noun is no word of address
    assert _said(["A: hello .", "B: i 'm a nurse at the hospital ."], "i 'm a nurse at the hospital .",
                 "The speaker is tired.") == [("The speaker is a nurse at the hospital.", None)]
    assert _said(["A: hello .", "B: i 'm tired today ."], "i 'm tired today .", "The speaker is sleepy.") == \
        [("The speaker is tired today.", None)]
    # a negated modal of ability drops its negation; an affirmed one is not said contrary ("fails to can")
    assert _said(["A: hello .", "B: i can swim in the sea ."], "i can swim in the sea .",
                 "The speaker is a good swimmer.") == []


def test_the_clause_an_opinion_frame_asserts_and_a_coordinated_clause_with_its_own_subject_are_statements():
    def said(utterance):
        return [s for s, _ in _said(["A: hello .", f"B: {utterance}"], utterance, "The speaker is tired.")]

    assert said("i think i left the keys at the office .") == ["The speaker left the keys at the office."]
    assert said("i think that i lost the ticket .") == ["The speaker lost the ticket."]
    assert said("i called the bank but i forgot the number .") == ["The speaker called the bank.",
                                                                   "The speaker forgot the number."]
    # a hope or a wish asserts nothing; a frame whose clause is about someone else gives nothing
    assert said("i hope i pass the exam .") == []
    assert said("i know you like the new manager .") == []
    # a clause after "if" or "when" is no assertion, nor is a frame after one
    assert said("if i win .") == [] and said("if i think i left the keys , i will go back .") == []


def test_a_present_time_word_keeps_the_present_and_names_are_spelt_as_the_answers_spell_them():
    passage = ["A: hello .", "B: i am hungry now .", "B: i speak french and spanish ."]
    made = _said(passage, passage[1], "The speaker wanted to eat Spanish food.")
    assert ("The speaker is hungry now.", None) in made  # "was hungry now" contradicts itself
    # a second predicate is a second statement: the first is kept
    assert _said(["A: hello .", "B: i stayed at home and watched a film ."], "i stayed at home and watched a film .",
                 "The speaker was bored.") == [("The speaker stayed at home.", None)]
    assert ("The speaker spoke French and Spanish.", None) in made


def test_statements_said_contrary_join_the_dialogue_pool_behind_the_answers_and_are_placed_as_contrary():
    from tasks.distractors import placement
    from tasks.distractors.counterfactuals import dialogue_pools
    from tasks.distractors.grounded import CONTRARY

    view = pd.DataFrame({"id": ["r1"], "group_id": ["d1"], "gold": ["The speaker feels guilty about the delay."],
                         "question": ["What is or could be the cause of target?"], "target": [DIALOGUE[3]],
                         "passage": [DIALOGUE], "choices": [None], "correct_answers": [None]})
    pool = dialogue_pools(view, contrary=CONTRARY)["r1"]
    rules = dict((text, rule) for rule, text in pool)
    assert rules["The speaker likes the new manager."] == "predicate_negation:not->+utterance:5"
    assert any(r.endswith("+utterance:2") and "office" in t for t, r in rules.items())
    for rule in rules.values():
        assert placement.contrary(rule) and placement.mark("dialogue", rule) == "contrary"
        # a negation is one kind wherever it comes from (an ending alone tells two); the other rules are kinds of
        # their own for this dialogue's texts
        assert placement.kind("dialogue", rule) == ("negation" if rule.startswith("predicate_negation")
                                                    else "dialogue:" + rule.split(":")[0])


def test_an_emotional_reaction_is_offered_only_statements_of_a_feeling():
    from tasks.distractors.counterfactuals import QUESTION_TIME, dialogue_pools
    from tasks.distractors.grounded import CONTRARY

    passage = ["A: i passed the driving test today .", "B: i am very happy for you .",
               "B: i stayed at the office until ten ."]
    view = pd.DataFrame({"id": ["r1"], "group_id": ["d1"], "gold": ["The listener is proud of the speaker."],
                         "question": ["What is the possible emotional reaction of the listener in response to target?"],
                         "target": [passage[0]], "passage": [passage], "choices": [None], "correct_answers": [None]})
    made = [t for r, t in dialogue_pools(view, time=QUESTION_TIME, contrary=CONTRARY)["r1"] if "+utterance:" in r]
    assert made and all("office" not in t for t in made), made
    assert any("happy" in t or "sad" in t or "unhappy" in t for t in made), made


def test_statements_on_the_real_v2_sample_open_with_the_answers_subject_and_read_as_sentences(real):
    """How often the rule finds a statement on real CICERO v2 items (recorded, not a timing): at least one for
    most items whose answers open with the speaker or the listener."""
    rows = [json.loads(line) for line in (real / "cicero" / "cicero_v2_val_sample.jsonl").open()]
    found, about = 0, 0
    for r in rows:
        answers = [r["Choices"][k] for k in r["Correct Answers"]]
        if not answers[0].lower().startswith(("the speaker", "the listener")):
            continue
        about += 1
        made = statements(r["Dialogue"], r["Target"], answers)
        found += bool(made)
        for _, said, contra in made:
            assert said.split()[0] == "The" and said.endswith(".") and "  " not in said, said
            assert " i " not in f" {said.lower()} " and " n't" not in said, said
            assert contra is None or " not " in said or " never " in said or "cannot" in said, (said, contra)
    assert about > 200 and found / about > 0.5, (found, about)
