"""Stages of the distractor engine on too few rows pass their input through, saying why (their manifest
notes and the console), and never fail the run: a first batch of answers is always small."""

from __future__ import annotations

import logging

import pandas as pd
import pytest

from tests.distractors.test_distractors import EMBED, _af_data, _items


def _subset(inst: pd.DataFrame, cands: pd.DataFrame, dialogues: int):
    keep = inst[inst["dialogue_id"].isin(sorted(set(inst["dialogue_id"]))[:dialogues])]
    return keep, cands[cands["instance_id"].isin(keep["id"])]


@pytest.mark.parametrize("dialogues", [1, 2, 4])
def test_af_on_fewer_dialogues_than_folds_keeps_the_initial_draw_and_says_why(dialogues, caplog):
    from tasks.distractors.adversarial import adversarial_filter

    inst, cands = _subset(*_af_data(), dialogues)
    with caplog.at_level(logging.WARNING, logger="csk"):
        # the default discriminator: passing through must not even load its model
        out = adversarial_filter(_items(inst), cands, seed=0, embed=EMBED, model="/nonexistent/model")
    why = out.notes["passed_through"]
    assert f"{dialogues} dialogue(s) have candidates, fewer than the 5 folds" in why and why in caplog.text
    assert len(out.data) == len(inst) and out.rejected is None
    assert (out.data["distractors"].map(len) == 4).all() and (out.data["swaps"] == 0).all()
    assert out.notes["iterations"] == 0 and out.notes["history"] == []
    again = adversarial_filter(_items(inst), cands, seed=0, embed=EMBED, model="/nonexistent/model")
    assert again.data.equals(out.data)  # the initial draw is seeded


def test_af_with_as_many_dialogues_as_folds_runs_its_rounds():
    from tasks.distractors.adversarial import adversarial_filter

    inst, cands = _subset(*_af_data(), 5)
    out = adversarial_filter(_items(inst), cands, seed=0, embed=EMBED, discriminator="linear-probe", max_iterations=5)
    assert "passed_through" not in out.notes and out.notes["iterations"] > 0


def test_aflite_on_two_instances_passes_them_through_and_says_why(caplog):
    from tasks.distractors.aflite import aflite

    inst, cands = _af_data()
    inst = inst.head(2)
    mcq = pd.DataFrame([{"id": r.id, "group_id": r.dialogue_id, "gold": r.answer,
                         "distractors": cands[cands["instance_id"] == r.id]["candidate"].head(3).tolist()}
                        for r in inst.itertuples()])
    with caplog.at_level(logging.WARNING, logger="csk"):
        out = aflite(mcq, _items(inst), embed=EMBED)
    assert out.data.equals(mcq) and "passed its 2 instance(s) through" in out.notes["passed_through"]
    assert out.notes["passed_through"] in caplog.text


def test_the_judge_on_answers_with_one_published_choice_says_it_cannot_train_and_the_stage_completes():
    """A first batch of Label Studio answers has one published choice per instance (the answer): no judge can
    learn from that; the stage writes its paraphrase checks and says why the judge was not measured."""
    from tasks.distractors.quality import distractor_quality
    from tasks.embed import EmbedSpec

    inst = pd.DataFrame([{"id": f"i{k}", "group_id": f"d{k}", "context": f"What made it happen? <sep> talk {k}",
                          "choices": [f"The speaker planned the trip {k}."], "correct_answers": [0],
                          "split": "train" if k < 2 else "test"} for k in range(3)])
    mcq = pd.DataFrame([{"id": f"i{k}", "choices": [f"The speaker planned the trip {k}.", "The speaker never planned it.",
                                                  "Nobody went anywhere."], "correct_answers": [0]} for k in range(3)])
    out = distractor_quality(mcq, inst, pd.DataFrame({"id": [], "candidate": []}), embed=EmbedSpec(**EMBED),
                             similarity_embedder=EmbedSpec(**EMBED), quality="fast")
    assert "too few instances to train a judge" in out.notes["not_measured"]
    assert out.data.set_index("id").loc["instances", "value"] == 3
