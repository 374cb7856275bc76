"""Property-based tests (hypothesis) of the rules whose every input matters: the length filter, target
counts, splits, rows in = out + rejected, and MCQ answers after shuffling and perturbation.
Derandomized: the same examples on every run, so a failure is reproducible."""

from __future__ import annotations

import pandas as pd
from hypothesis import given, settings
from hypothesis import strategies as st

from tasks.cicero.length_filter import length_filter
from tasks.cicero.targets import n_targets
from tasks.textrank import segment_bounds
from tasks.corecode.benchmark import letter_labels, perturb, render_prompt
from tasks.distractors.verification import shuffle_choices
from tasks.splits import group_splits

SETTINGS = settings(max_examples=150, deadline=None, derandomize=True)
WORD = st.text(alphabet="abcdefgh", min_size=1, max_size=6)
TURN = st.lists(WORD, min_size=0, max_size=30).map(lambda ws: " ".join(ws))


@st.composite
def dialogues(draw):
    n = draw(st.integers(1, 12))
    rows = []
    for i in range(n):
        texts = draw(st.lists(TURN, min_size=0, max_size=20))
        rows.append({"id": f"d{i}", "turns": [{"speaker": "AB"[k % 2], "text": t} for k, t in enumerate(texts)]})
    return pd.DataFrame(rows)


@SETTINGS
@given(dialogues(), st.integers(0, 8), st.integers(0, 20), st.floats(0, 12, allow_nan=False), st.integers(0, 400))
def test_length_filter_keeps_exactly_what_the_bounds_allow(df, min_u, max_u, min_avg, max_words):
    out = length_filter(df, min_utterances=min_u, max_utterances=max_u, min_avg_words=min_avg,
                        max_total_words=max_words)
    kept, rejected = set(out.data["id"]), set(out.rejected["id"])
    assert kept.isdisjoint(rejected) and kept | rejected == set(df["id"])  # rows in = out + rejected
    assert len(out.data) + len(out.rejected) == len(df)
    for row in df.itertuples():
        n = len(row.turns)
        words = sum(len(t["text"].split()) for t in row.turns)
        ok = min_u <= n <= max_u and words <= max_words and (n == 0 or words / n >= min_avg)
        assert (row.id in kept) == ok, (row.id, n, words)
    assert all(isinstance(r, str) and r for r in out.rejected["reason"])


@SETTINGS
@given(st.integers(1, 40), st.integers(0, 2**32 - 1))
def test_target_counts_follow_the_paper(n_utt, seed):
    import numpy as np

    k = n_targets(n_utt, np.random.default_rng(seed))
    lo, hi = (2, 3) if n_utt <= 6 else (3, 5) if n_utt <= 12 else (4, 7)
    assert lo <= k <= hi


@SETTINGS
@given(st.integers(1, 60), st.integers(1, 10))
def test_segments_cover_the_dialogue_once(n, segments):
    bounds = segment_bounds(n, segments)
    assert bounds[0][0] == 0 and bounds[-1][1] == n
    assert all(a < b for a, b in bounds) and all(b == c for (_, b), (c, _) in zip(bounds, bounds[1:]))


@st.composite
def grouped_rows(draw):
    sizes = draw(st.lists(st.integers(1, 6), min_size=1, max_size=40))
    rows = [{"id": f"r{g}-{k}", "group": f"g{g}"} for g, s in enumerate(sizes) for k in range(s)]
    weights = draw(st.lists(st.integers(0, 10), min_size=3, max_size=3).filter(lambda w: sum(w) > 0))
    fractions = {name: w / sum(weights) for name, w in zip(("train", "dev", "test"), weights)}
    return pd.DataFrame(rows), fractions


@SETTINGS
@given(grouped_rows(), st.integers(0, 1000))
def test_splits_never_overlap(case, seed):
    rows, fractions = case
    data, table = group_splits(rows, "group", fractions, seed)
    assert len(data) == len(rows) and data["split"].notna().all()
    assert data.groupby("group")["split"].nunique().max() == 1  # no group in two splits
    assert set(data["split"]) <= {s for s, f in fractions.items() if f > 0}
    assert sum(t["instances"] for t in table) == len(rows)


DISTINCT_TEXTS = st.lists(st.text(min_size=1, max_size=12), min_size=1, max_size=8, unique=True)


@SETTINGS
@given(DISTINCT_TEXTS, st.data(), st.integers(0, 2**31), st.text(max_size=8))
def test_mcq_answer_index_points_at_the_gold_after_shuffling(texts, data, seed, iid):
    gold, distractors = texts[0], texts[1:]
    correct = data.draw(st.lists(st.integers(0, max(0, len(distractors) - 1)), unique=True,
                                 max_size=len(distractors))) if distractors else []
    choices, gold_idx, correct_idx = shuffle_choices(seed, iid, gold, distractors, correct)
    assert sorted(choices) == sorted(texts) and choices[gold_idx] == gold
    assert {choices[i] for i in correct_idx} == {gold} | {distractors[j] for j in correct}
    assert shuffle_choices(seed, iid, gold, distractors, correct) == (choices, gold_idx, correct_idx)


@SETTINGS
@given(DISTINCT_TEXTS, st.data(), st.integers(0, 1000),
       st.sampled_from(["reindex", "shuffle", "reindex_shuffle"]))
def test_perturbed_answer_label_names_the_gold_text(options, data, seed, kind):
    answer = data.draw(st.sampled_from(options))
    labels = letter_labels(len(options))
    row = {"id": "item-1", "question": "q", "dialogue": ["A: x"], "options": options, "option_labels": labels,
           "answer": answer, "answer_label": labels[options.index(answer)],
           "prompt": render_prompt("q", ["A: x"], labels, options)}
    out = perturb(row, kind, seed)
    assert out["options"][out["option_labels"].index(out["answer_label"])] == answer
    assert sorted(out["options"]) == sorted(options)
    if kind != "reindex" and len(options) > 1:
        assert out["options"] != options  # a shuffle is never the identity
    assert f"{out['answer_label']} {answer}" in out["prompt"]
