"""bench/blind_reading.py in the readers' brief layout: a sheet of questions, a key without released text,
letters scored per set kind and traced to what made each distractor."""

import json
import random
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _file(path: Path, recs: list[dict]) -> str:
    path.write_text("".join(json.dumps(r) + "\n" for r in recs), encoding="utf-8")
    return str(path)


def test_a_brief_reading_round_trips_and_traces_its_letters(tmp_path):
    sys.path.insert(0, str(ROOT / "bench"))
    import blind_reading as br

    pub, reb = [], []
    for k in range(130):
        d = [f"A: Shall we meet at the park {k} ?", "B: Yes , at noon ."]
        q = "What subsequent event happens or could happen following the target?"
        right = [f"They meet at park {k} at noon.", f"A and B go to park {k}."]
        pub.append({"ID": f"dlg-{k}", "Dialogue": d, "Target": d[0][3:], "Question": q,
                    "Choices": right + [f"They never meet at park {k} at noon.", f"A and B do not go to park {k}."],
                    "Correct Answers": [0, 1]})
        reb.append(dict(pub[-1], Choices=right + [f"The dog {k} barks.", f"They fly to the moon {k}."]))
    p, r = _file(tmp_path / "pub.jsonl", pub), _file(tmp_path / "reb.jsonl", reb)
    br.make(p, r, str(tmp_path / "d1"), seed=3, brief=True)
    key = json.loads((tmp_path / "d1" / "key.json").read_text())
    sets = [st for e in key for st in e["sets"].values()]
    assert len(sets) == 120 and sorted(st["question"] for st in sets) == [f"Q{q:03d}" for q in range(1, 121)]
    assert sum(st["near_copy_set"] for st in sets if st["which"] == "published") == 60  # "never", "do not"
    assert not any(st["near_copy_set"] for st in sets if st["which"] == "rebuilt")
    sheet = (tmp_path / "d1" / "sheet.md").read_text()
    assert sheet.count("## Q") == 120 and "Correct" not in sheet
    rng = random.Random(0)
    for n in (1, 2):  # a reader who calls every rebuilt distractor out of place, the published ones good
        labels = {st["question"]: [("O" if st["which"] == "rebuilt" else "W") if d else "C" for d in st["distractor"]]
                  for st in sets}
        labels["Q001"] = [rng.choice("CWOUA") for _ in labels["Q001"]] if n == 2 else labels["Q001"]
        (tmp_path / f"r{n}.json").write_text(json.dumps(labels))
    br.strip(str(tmp_path / "d1" / "key.json"), str(tmp_path / "stripped.json"))
    stripped = (tmp_path / "stripped.json").read_text()
    assert "park" not in stripped and "match_sha256" in stripped  # no released text in a committed key
    figures = br.score_brief(str(tmp_path / "stripped.json"), [str(tmp_path / "r1.json"), str(tmp_path / "r2.json")])
    assert figures["published_all"]["near_copy_sets"] == 60 and figures["rebuilt_all"]["near_copy_sets"] == 0
    assert figures["rebuilt_all"]["O"] >= 95 and figures["published_all"]["W"] >= 95
    assert figures["kappa"]["O"] > 0.9
    # a later draw leaves out the items of an earlier one, from its stripped key alone
    (tmp_path / "old").mkdir()
    (tmp_path / "old" / "key.json").write_text(stripped)
    br.make(p, r, str(tmp_path / "d2"), seed=4, brief=True, exclude=[str(tmp_path / "old")])
    again = json.loads((tmp_path / "d2" / "key.json").read_text())
    assert not {e["id"] for e in again} & {e["id"] for e in key}
    # the last items of a file: --remaining draws every one the earlier draws left, under 60 only when asked
    import pytest

    (tmp_path / "old2").mkdir()
    (tmp_path / "old2" / "key.json").write_text(json.dumps(again))
    with pytest.raises(SystemExit):
        br.make(p, r, str(tmp_path / "d3"), n=10, seed=5, brief=True, exclude=[str(tmp_path / "old"), str(tmp_path / "old2")])
    br.make(p, r, str(tmp_path / "d3"), seed=5, brief=True, exclude=[str(tmp_path / "old"), str(tmp_path / "old2")],
            remaining=True)
    last = json.loads((tmp_path / "d3" / "key.json").read_text())
    assert len(last) == 130 - 120 and not {e["id"] for e in last} & ({e["id"] for e in key} | {e["id"] for e in again})
