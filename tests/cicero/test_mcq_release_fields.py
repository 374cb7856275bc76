"""The MCQ files of a rebuild give back every field but the choices as released (issue 70, item 7): the
release's Target where its utterance reads otherwise after the speaker letter ("A: : Well, ..." is the
utterance ": Well, ..."), and no `Human Written Answer` for a release (v2) that has none."""

from __future__ import annotations

import json

import pandas as pd

from tasks.cicero.annotation import release_instances
from tasks.cicero.mcq import mcq

QUESTION = "What subsequent event happens or could happen following the target?"
V2 = {"ID": "dream-9001", "Dialogue": ["A: : Well, I am going home now.", "B: ghbor: Fine. See you at the market.",
                                        "A: : Do not forget the apples."],
      "Target": "Well, I am going home now.", "Question": QUESTION,
      "Choices": ["The speaker walks home.", "The speaker flies to the moon.", "The speaker leaves the place.",
                  "The listener sells the house."], "Correct Answers": [0, 2]}
V1 = {"ID": "daily-dialogue-9002", "Dialogue": ["A: Shall we eat out tonight ?", "B: Yes , let us try the new place ."],
      "Target": "Yes , let us try the new place .", "Question": QUESTION,
      "Choices": ["They go to the new restaurant.", "They stay at home.", "They sell the car.",
                  "They paint the wall.", "They swim across the lake."],
      "Human Written Answer": [0], "Correct Answers": [0]}


def test_rebuilt_items_keep_the_released_target_dialogue_and_keys(tmp_path):
    path = tmp_path / "release.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in (V2, V1)), encoding="utf-8")
    ann = release_instances(release=str(path)).data
    tagged = ann.set_index("cicero_id").loc["dream-9001"]
    assert tagged["target"] == ": Well, I am going home now."  # the utterance after its speaker letter
    verified = pd.DataFrame({
        "id": ann["id"], "group_id": ann["dialogue_id"], "gold": ann["answer"],
        "distractors": [["The speaker sings loudly.", "The listener falls asleep."],
                        ["They buy a boat.", "They argue all night.", "They move abroad.", "They cook fish."]],
        "verified": True, "correct_distractors": [[], []]})
    out = mcq(verified, ann)
    records = [json.loads(x) for x in out.files["mcq/2.2_all_answers/all.jsonl"].decode("utf-8").splitlines()]
    for got, released in zip(records, (V2, V1)):
        assert list(got) == list(released)  # the release's keys, in its order: v2 has no Human Written Answer
        assert {k: v for k, v in got.items() if k != "Choices"} == {k: v for k, v in released.items() if k != "Choices"}
        assert all(got["Choices"][k] == released["Choices"][k] for k in released["Correct Answers"])
        assert got["Choices"] != released["Choices"]
    # the table keeps the gold's index for every item (the experiment files read it)
    assert out.data["human_written_answer"].map(list).tolist() == [[0], [0]]
