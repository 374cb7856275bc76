"""Fluency checks of lexical rewrites (tasks/distractors/fluency.py): one test per check, the
"problems the rewrite introduced" rule, and the counterfactual stage's rejected rows and report."""

from __future__ import annotations

import pandas as pd
import pytest

from tasks.distractors import fluency


def problem(original: str, rewrite: str):
    return fluency.check(original, rewrite, fluency.parse([original, rewrite]))


def test_fixed_expressions_are_left_alone():
    assert problem("Call me as soon as possible.", "Call me as soon as impossible.")[0] == "fixed_phrase"
    assert problem("Of course she agreed.", "Of course she refused.") is None  # the phrase itself untouched
    assert problem("It costs at least ten dollars.", "It costs at most ten dollars.") is None  # one for another
    assert "right away" in problem("She wants to go right away.", "She wants to go wrong away.")[1]
    # a phrase that starts with a verb is fixed in every form of the verb (lemminflect's), none listed by hand
    assert problem("They fell in love in Paris.", "They fell in hate in Paris.")[0] == "fixed_phrase"
    assert problem("He looks forward to the trip.", "He looks backward to the trip.")[0] == "fixed_phrase"
    assert fluency.fixed_phrases("She gave up and kept in touch.") == {"give up": 1, "keep in touch": 1}


@pytest.mark.parametrize("original, rewrite", [
    ("There is only one bus left tonight.", "There is only four bus left tonight."),   # numeral and noun
    ("The speaker bought one ticket.", "The speaker bought four ticket."),
    ("The boy is tired after school.", "The boys is tired after school."),              # subject and verb
])
def test_number_agreement_after_a_rewrite(original, rewrite):
    assert problem(original, rewrite)[0] == "number_agreement"


@pytest.mark.parametrize("original, rewrite", [
    ("The speaker has two brothers.", "The speaker has four brothers."),
    ("The men are waiting outside.", "The women are waiting outside."),
    ("It took three hours to get there.", "It took six hours to get there."),
    ("The speaker and his wife are leaving.", "The listener and her wife are leaving."),
])
def test_agreeing_rewrites_pass(original, rewrite):
    assert problem(original, rewrite) is None


def test_articles_are_chosen_by_sound_and_checked_in_people_s_answers():
    """A rewrite chooses its article again by the new word's sound (so no rewrite check is needed: it fired
    on none of 2,956 rewrites of the real sample and went); a person's answer is still checked."""
    from tasks.distractors.lexical import antonym_rewrites

    assert "It was an expensive room." in [t for _, t in antonym_rewrites("It was a cheap room.")]
    assert fluency.article_problems("She lives in a old flat.") == ["'a old': takes 'an'"]
    assert not fluency.article_problems("It was a useless talk.")  # "a useless": a consonant sound
    assert problem("He waited for a minute.", "He waited for an hour.") is None


def test_two_people_never_collapse_into_one():
    assert problem("The speaker agrees with the listener's decision.",
                   "The speaker agrees with the speaker's decision.")[0] == "role_collapse"
    assert problem("The speaker agrees with the listener's decision.",
                   "The listener agrees with the speaker's decision.") is None  # both still there
    assert problem("The speaker thanks the listener.", "The speaker does not thank the listener.") is None


def test_only_problems_the_rewrite_introduced_count():
    # the answer already says "a apple"; its rewrite keeps that error and introduces none
    assert problem("He ate a apple quickly.", "He ate a apple slowly.") is None


def test_counterfactual_stage_rejects_disfluent_rewrites_with_reasons():
    from tasks.distractors.counterfactuals import counterfactuals

    instances = pd.DataFrame({
        "id": ["i1", "i2"], "group_id": ["d1", "d2"], "question": ["q", "q"],
        "passage": [["A: We leave at noon .", "B: Fine ."], ["A: How many tickets ?", "B: One ."]],
        "gold": ["They want to leave as soon as possible.", "There is only one ticket left."],
        "choices": [[], []], "correct": [[], []]})
    out = counterfactuals(instances, generators=["lexical"], max_per_answer=50)
    kept = set(out.data["candidate"])
    assert "They want to leave as soon as impossible." not in kept
    assert not any(c.startswith("There is only four ticket") for c in kept)
    rej = out.rejected[out.rejected["reason_code"].str.startswith("fluency_")]
    assert len(rej) and set(rej["instance_id"]) <= {"i1", "i2"} and rej["reason"].str.len().min() > 0
    assert {"gold", "candidate", "rule"} <= set(rej.columns)
    report = pd.DataFrame(out.notes["fluency"])
    assert set(report["check"]) == set(fluency.CHECKS) and (report["share"] <= 1).all()
    lost = report.groupby("rule")["rejected"].sum()
    assert lost.get("quantity", 0) >= 1 and lost.sum() >= len(rej)  # a chain counts for each rule in it
    assert out.notes["fluency_rejected"] == len(rej) and out.notes["fluency_checked"] >= len(rej) + len(out.data)


def test_a_rewrite_of_a_broken_answer_is_left_out():
    """Rewriting every correct answer brings in the release's own slips: their rewrites read as broken."""
    assert problem("The boys is tired after school.", "The boys is not tired after school.")[0] == "broken_answer"
    assert problem("She filled the necessory form.", "She did not fill the necessory form.")[0] == "broken_answer"
    # a name of the dialogue is no typo
    assert fluency.check("Jenny met xara.", "Jenny left xara.", fluency.parse(["Jenny met xara.", "Jenny left xara."]),
                         frozenset({"xara"})) is None


def test_a_word_replaced_by_another_part_of_speech_is_caught():
    assert problem("The speaker wanted to provide all the help they can.",
                   "The speaker wanted to provide all the hinder they can.")[0] == "part_of_speech"
    assert problem("The speaker is happy.", "The speaker is sad.") is None


def test_misspelt_words_are_found_names_and_short_forms_are_not():
    docs = fluency.parse(["The listener filled the necessory form.", "Jenny showed mr. anderson the menu, ok?"])
    assert fluency.misspellings(docs["The listener filled the necessory form."]) == ["necessory"]
    assert fluency.misspellings(docs["Jenny showed mr. anderson the menu, ok?"], frozenset({"anderson"})) == []


def test_a_name_of_the_dialogue_in_lower_case_is_caught_a_name_that_is_also_a_word_is_not():
    import pandas as pd

    from tasks.distractors.counterfactuals import dialogue_names

    view = pd.DataFrame({"id": ["i"], "passage": [["A: James missed the bus again .",
                                                   "B: Bill will drive James , then .", "A: Well , fine ."]]})
    names = dialogue_names(view)["i"]
    assert {"james", "bill", "well"} <= names and not {"bus", "a", "b"} & names  # speaker tags are no names
    docs = fluency.parse(["The speaker wants to catch james.", "The speaker will pay the bill.",
                          "The speaker wants to catch James."])
    assert fluency.names_in_lower_case(docs["The speaker wants to catch james."], names) == ["james"]
    assert fluency.names_in_lower_case(docs["The speaker will pay the bill."], names) == []
    assert fluency.names_in_lower_case(docs["The speaker wants to catch James."], names) == []
    more = fluency.parse(["The doctor took an x-ray and james was fine."])  # a letter of "X-ray" is no name
    assert fluency.names_in_lower_case(more["The doctor took an x-ray and james was fine."],
                                       names | {"x", "and"}) == ["james"]


def test_negation_of_have_as_the_main_verb_and_any_after_a_removed_negation():
    from tasks.distractors.lexical import negation_rewrites

    assert negation_rewrites("Julie has confidence in her plan.")[0][1] == "Julie does not have confidence in her plan."
    assert negation_rewrites("The speaker has finished the work.")[0][1] == "The speaker has not finished the work."
    assert negation_rewrites("She had not received any news.")[0][1] == "She had received some news."
    # an irregular participle after "had" is the perfect, not "have" the main verb (a reader found "did not have put")
    assert negation_rewrites("The listener had put the candles on the cake.")[0][1] == \
        "The listener had not put the candles on the cake."
    assert negation_rewrites("The speaker had lunch with her.")[0][1] == "The speaker did not have lunch with her."
    # an infinitive is left alone ("to do not have her lunch" was read as broken)
    assert negation_rewrites("She went home to have her lunch.") == []
    assert problem("He never again called her.", "He always again called her.")[0] == "fixed_phrase"


@pytest.mark.parametrize("answer, check, word", [
    ("The speakr likes the diner.", "misspelt", "speakr"),              # a typo
    ("The speaker enjoy the diner.", "number_agreement", "speaker ... enjoy"),  # a writer's slip of agreement
    ("The speaker had a awful meal at the diner.", "construction", "'a awful'"),   # an article by sound
    ("The speaker given the listener a menu.", "construction", "'given'"),         # a participle alone
])
def test_human_written_candidates_that_are_broken_english_are_rejected(answer, check, word):
    from tasks.distractors.counterfactuals import counterfactuals

    passage = ["A: Shall we eat out ?", "B: Yes , at the diner ."]
    instances = pd.DataFrame({
        "id": ["i1", "i2"], "group_id": ["d1", "d1"],
        "question": ["What is the cause of target?", "What is the cause of target?"],
        "target": ["Shall we eat out ?", "Yes , at the diner ."], "passage": [passage, passage],
        "gold": ["The speaker is hungry.", answer],
        "choices": [[], []], "correct_answers": [[], []]})
    out = counterfactuals(instances, generators=["dialogue"], min_pool=4)
    assert set(out.data["instance_id"]) <= {"i2"}  # neither the answer nor its contrary rewrites are offered to i1
    rej = out.rejected[(out.rejected["reason_code"] == f"fluency_{check}") & (out.rejected["candidate"] == answer)]
    assert len(rej) == 1 and word in rej["reason"].iloc[0]


@pytest.mark.parametrize("text, broken", [
    ("The speaker show the pictures to the listener.", True),   # a writer's slip draw C's readers marked
    ("The man who lives next door play the piano.", True),
    ("The speaker shows the pictures to the listener.", False),
    ("The speaker and the listener go to the park.", False),    # coordinated: plural
    ("The listener suggested that the speaker go home.", False),  # a subjunctive after "suggest"
    ("The police arrive at the scene.", False),                 # a collective noun
    ("The speaker might go home.", False),                      # after a modal
    ("The speaker would shows the photographs.", True),         # a modal before an inflected verb (draw E)
    ("The speaker did not went home.", True),
    ("The speaker did not go home.", False),
])
def test_a_singular_subject_with_a_plural_verb(text, broken):
    assert bool(fluency.agreement_problems(fluency.parse([text])[text])) is broken


@pytest.mark.parametrize("text, broken", [
    ("The clerk given us the keys at noon.", "participle"),          # a participle as the only verb
    ("The clerk has given us the keys at noon.", None),
    ("The tourist had his wallet stolen on the bus.", None),         # what happened to the wallet
    ("Her knees become sore when she runs.", None),                  # "become": also the present tense
    ("The waiter was a worried about the bill.", "adjective with no noun"),
    ("The waiter was a local.", None),                               # "local" is also a noun
    ("They will meet some another time.", "two determiners"),
    ("They took the another bus.", "two determiners"),  # "another" holds its article: any determiner before it
    ("They will meet another time.", None),
    ("The guest asks that the waiter to bring water.", "to-infinitive"),
    ("The guest asks that the waiter bring water.", None),
    ("The teacher asked that why did she leave early.", "word order"),
    ("The teacher asked why she left early.", None),
    ("The clerk inquired the guest that whether he had a booking.", "verb of asking"),
    ("The clerk wondered that if the guest had a booking.", "verb of asking"),
    ("The clerk inquired whether the guest had a booking.", None),
    ("The clerk said that if the guest had a booking, he could stay.", None),  # "that" then a condition
    ("The driver denied to pay the fine.", "takes '-ing'"),
    ("The driver resorted to call the police.", "takes '-ing'"),
    ("The driver denied paying the fine.", None),
    ("The driver wanted to pay the fine.", None),
    ("The nurse told the patient to wait.", None),                   # an object before "to"
    ("Mrs. jones booked the hall.", "lower case"),
    ("They planned a june wedding.", "lower case"),
    ("Mrs. Jones booked the hall in June.", None),
    ("The listener thanks the listener for the gift.", "subject and the object"),
    ("The listener thanks the speaker for the gift.", None),
    ("The guide explained the tourists that the museum was shut.", "hearer after 'to'"),
    ("The guide explained the tourists the museum hours were short.", "hearer after 'to'"),
    ("The guide explained to the tourists that the museum was shut.", None),
    ("The guide said the museum was shut.", None),                      # the hearer left out, "that" too
    ("The guide described the man in the photo.", None),
    ("The guide is keen on the showing the tourists around.", "a verb with its object"),
    ("The guide enjoys the reading of poems.", None),
    ("The guide was tired. she went home.", "lower case"),
    ("The guide was tired. She went home.", None),
    ("The guide wanted to show as many tourists the old town.", "second 'as'"),
    ("The guide wanted to show as many tourists as possible the old town.", None),
    ("As many tourists know, the museum is shut on Mondays.", None),
])
def test_constructions_english_does_not_have(text, broken):
    found = fluency.construction_problems(fluency.parse([text])[text])
    assert (broken is None and not found) or (broken is not None and found and broken in found[0]), found


def test_a_rewrite_that_makes_a_broken_construction_is_caught_and_names_are_not_rewritten():
    from tasks.distractors.lexical import antonym_rewrites

    assert problem("The clerk has given us the keys.", "The clerk given us the keys.")[0] == "construction"
    assert problem("The driver refused to pay the fine.", "The driver denied to pay the fine.")[0] == "construction"
    assert all("Catch" not in t for _, t in antonym_rewrites("They booked a lesson with Miss Brown."))
    from tasks.distractors.lexical import negation_rewrites

    assert negation_rewrites("The clerk has not paid the bill yet.") == [("negation:remove",
                                                                       "The clerk has paid the bill already.")]
    assert any("Catch" in t for _, t in antonym_rewrites("Miss the bus and you walk."))  # the verb, first word


def test_the_antonym_lexicon_is_lemmas_and_every_form_is_lemminflect_s():
    """Declared as lemma pairs; a verb's forms are lemminflect's (no hand-inflected list), a participle
    chosen after "have" or "be", spelling variants read; no noun (a thing for its opposite thing)."""
    from lemminflect import getAllLemmas, getInflection

    from tasks.distractors.lexical import ANTONYM_LEMMAS, ANTONYMS, INFLECTED_TAGS, antonym_rewrites

    for pos in INFLECTED_TAGS:
        for pair in ANTONYM_LEMMAS[pos].replace("\n", " ").split(";"):
            for w in pair.split():
                assert w in getAllLemmas(w, upos=pos).get(pos, ()), (pos, w)  # a lemma, not a form
                for tag in INFLECTED_TAGS[pos]:  # every form is there, mapped to a form of the same tag
                    assert all(f in ANTONYMS for f in getInflection(w, tag)), (w, tag)
    assert ANTONYMS["cancelled"] == ANTONYMS["canceled"] == "confirmed"  # a spelling variant is read
    assert ANTONYMS["taught"] == "learned" and "NOUN" not in ANTONYM_LEMMAS and "friend" not in ANTONYMS
    assert "come" not in ANTONYMS  # one motion from two places: "to come eat" is "to go eat"
    said = lambda text: [t for _, t in antonym_rewrites(text)]  # noqa: E731
    assert "He has forgotten the key." in said("He has remembered the key.")  # the participle after "has"
    assert "He forgot the key." in said("He remembered the key.")  # the past tense alone
    assert "It is forbidden." in said("It is allowed.")  # the passive's participle


def test_the_rules_read_one_vocabulary_of_people():
    """Who counts as a person is declared once (tasks/vocabulary.py): the fluency check that two people
    never collapse into one, the grounded rules and CoreQuisite's answer quality read the same nouns."""
    from tasks import vocabulary
    from tasks.corequisite import answer_quality
    from tasks.distractors import fluency, grounded, grounding

    assert grounded.PEOPLE is vocabulary.PEOPLE is answer_quality.PEOPLE
    assert grounding.GENERIC_NOUNS is vocabulary.GENERIC_NOUNS and grounded.GENERAL is vocabulary.GENERAL_NOUNS
    from lemminflect import getInflection

    for noun in vocabulary.PERSON_NOUNS:  # every person noun and its plurals (lemminflect's), whole words only
        assert fluency.ROLE_NOUNS.fullmatch(noun) and all(fluency.ROLE_NOUNS.fullmatch(f)
                                                          for f in getInflection(noun, "NNS")), noun
    assert not fluency.ROLE_NOUNS.search("loudspeakers") and not fluency.ROLE_NOUNS.search("mankind")
    assert fluency.ROLE_NOUNS.findall("The doctor thanks the patient's children.") == ["doctor", "patient", "children"]


@pytest.mark.parametrize("original, rewrite, kept", [
    # a particle makes one verb of two words: its antonym alone is no phrasal verb
    ("The facilitators were caught up in traffic.", "The facilitators were missed up in traffic.", False),
    ("They will visit if they ever pass by.", "They will visit if they ever fail by.", False),
    # an object after a verb that takes none, a preposition the new verb does not take
    ("They have yet to leave the house.", "They have yet to stay the house.", False),
    ("The speaker asks where the listener stays at.", "The speaker asks where the listener leaves at.", False),
    # a gerund or a to-infinitive after a word that takes neither
    ("Emily begins preparing for her vacation.", "Emily ends preparing for her vacation.", False),
    ("The listener is excited to try fishing.", "The listener is bored to try fishing.", False),
    ("The speaker is happy with the result.", "The speaker is sad with the result.", False),
    # the same complements: kept ("hates" is read as "hat" by the parser: lemminflect's lemma is asked too)
    ("Amy wants to win the competition.", "Amy wants to lose the competition.", True),
    ("The speaker loves to cook.", "The speaker hates to cook.", True),
    ("The listener arrived early.", "The listener arrived late.", True),
    # a negative prefix takes the complements of the word it negates
    ("The speaker is able to come on time.", "The speaker is unable to come on time.", True),
    ("The speaker is satisfied with the result.", "The speaker is dissatisfied with the result.", True),
])
def test_a_word_swapped_one_for_one_must_take_the_old_word_s_complements(original, rewrite, kept):
    found = problem(original, rewrite)
    assert (found is None) == kept, found
    if not kept:
        assert found[0] == "complement"


def test_quantifiers_and_fixed_time_phrases_keep_their_english():
    from tasks.distractors.lexical import antonym_rewrites

    # "a few" is one quantifier: "many" takes no article ("a many options" was read as broken)
    assert ("antonym:lexicon", "The listener lists many options.") in antonym_rewrites("The listener lists a few options.")
    assert ("antonym:lexicon", "Many people came.") in antonym_rewrites("A few people came.")
    # "the same" has no antonym of the same construction ("the different evening")
    assert antonym_rewrites("They share the same sentiments.") == []
    assert problem("Mr. Brown calls the speaker soon after.", "Mr. Brown calls the speaker soon before.")[0] == \
        "fixed_phrase"


def test_a_verb_in_another_form_keeps_its_complements():
    # "does not visit ... and choose a dog": the coordinated verb's base form under "does not" is one word
    assert problem("The speaker visits the shelter and chooses a dog.",
                   "The speaker does not visit the shelter and choose a dog.") is None
