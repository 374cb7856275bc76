import pandas as pd

from tasks.cicero.length_filter import length_filter, length_rule

P = dict(min_utterances=5, max_utterances=15, min_avg_words=6.0, max_total_words=275)


def _dialogue(id_, words_per_utt):
    return {"id": id_, "turns": [{"speaker": "AB"[i % 2], "text": " ".join(["w"] * n)}
                                 for i, n in enumerate(words_per_utt)]}


def test_each_threshold():
    assert length_rule(5, 30, **P) is None  # exactly the bounds pass
    assert length_rule(15, 275, **P) is None
    assert "fewer than 5 utterances" in length_rule(4, 40, **P)
    assert "more than 15 utterances" in length_rule(16, 160, **P)
    assert "words per utterance" in length_rule(5, 29, **P)
    assert "more than 275 words" in length_rule(10, 276, **P)


def test_speaker_tag_is_not_a_word():
    # 5 utterances of 6 words: average exactly 6.0 passes (the released minimum).
    df = pd.DataFrame([_dialogue("d-1", [6] * 5), _dialogue("d-2", [6, 6, 6, 6, 5])])
    out = length_filter(df, **P)
    assert out.data["id"].tolist() == ["d-1"]
    assert out.rejected["id"].tolist() == ["d-2"] and "5.80" in out.rejected["reason"].iloc[0]


def test_real_cicero_dialogues_pass(real):
    from readers import read_cicero_release

    rows = read_cicero_release(real / "cicero" / "cicero_v2_val_sample.jsonl").rows
    df = pd.DataFrame([{"id": f"c-{i}", "turns": r["turns"]} for i, r in enumerate(rows)])
    out = length_filter(df, **P)
    assert out.rejected.empty, out.rejected["reason"].tolist()[:3]
