"""Writes `tasks/data/embed_calibration.json`: the fixed calibration sample on which the sentence
embedder's precision ladder (`tasks.embed_precision`) checks that a cheaper precision leaves the
decisions that depend on the vectors unchanged. Its texts are this directory's sample corpora
(written for this project, in the real formats): every English dialogue of the DailyDialog, MuTual,
DREAM and CICERO samples, and every (choice, correct answer) pair of the CICERO sample. It ships
inside the `tasks` package, so an installed csk calibrates on the same texts as a checkout.

Run `python data/sample/make_embed_calibration.py` after editing the samples.
"""

import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
sys.path.insert(0, str(ROOT))

from readers import read_cicero_release, read_dailydialog, read_dream, read_mutual  # noqa: E402


def main() -> None:
    dialogues: dict[tuple, None] = {}
    for rows in (read_dailydialog(HERE / "dailydialog" / "dialogues_text.txt", lenient=True).rows,
                 read_mutual(HERE / "mutual", lenient=True).rows,
                 read_dream(HERE / "dream" / "dev.json", lenient=True).rows):
        for r in rows:
            dialogues[tuple(str(t["text"]) for t in r["turns"])] = None
    pairs: dict[tuple, None] = {}
    for r in read_cicero_release(HERE / "cicero" / "annotations_v1.jsonl", lenient=True).rows:
        dialogues[tuple(str(t["text"]) for t in r["turns"])] = None
        correct = [r["choices"][i] for i in r["correct_answers"]]
        for k, choice in enumerate(r["choices"]):
            if k not in r["correct_answers"]:
                pairs[(choice, correct[0])] = None
    out = {"about": __doc__.split("\n\n")[0].replace("\n", " "),
           "dialogues": [list(d) for d in dialogues if len(d) >= 2], "pairs": [list(p) for p in pairs]}
    path = ROOT / "tasks" / "data" / "embed_calibration.json"
    path.write_text(json.dumps(out, ensure_ascii=False, indent=1) + "\n")
    print(f"{path}: {len(out['dialogues'])} dialogues, {len(out['pairs'])} pairs")


if __name__ == "__main__":
    main()
