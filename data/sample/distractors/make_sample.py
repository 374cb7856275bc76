"""Write the bundled multiple-choice samples of `csk distractors rebuild` (records written for this
project, in each preset's format):

* Commonsense_Knowledge_Filling.jsonl: CORECODE's knowledge filling items, as `csk run corecode`
  builds them from the bundled CORECODE sample (every split and set in one file, ids from 0);
* PaCo_mcqa.jsonl: P-MCQA instances as `csk run corequisite` writes them (every split, the first 160);
* swag.csv and hellaswag.jsonl: everyday-activity items in SWAG's CSV and HellaSwag's JSON Lines layouts.

    python data/sample/distractors/make_sample.py   (from the repository root; runs two flows)
"""

from __future__ import annotations

import csv
import json
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]

# (activity, context sentence, start of the ending, gold ending, three wrong endings)
ACTIVITIES = [
    ("Cooking", "A woman cracks two eggs into a bowl.", "She", "whisks them with a fork until they are smooth.",
     ["throws the bowl out of the window.", "paints the eggs blue and hangs them up.", "reads the bowl a story."]),
    ("Cooking", "A man pours batter into a hot pan.", "He", "waits for bubbles and flips the pancake.",
     ["puts the pan in the freezer to cook.", "drinks the batter from the pan.", "sweeps the floor with the pancake."]),
    ("Gardening", "A gardener kneels beside a row of tomato plants.", "She", "ties each stem to a wooden stake.",
     ["climbs the tomato plants to the roof.", "feeds the stakes to a goat.", "swims across the row of plants."]),
    ("Gardening", "A boy fills a watering can at the tap.", "He", "carries it over and waters the flowers.",
     ["pours the water into his shoes.", "throws the can over the fence.", "drinks the tap dry in one sip."]),
    ("Sports", "A player dribbles the ball toward the basket.", "He", "jumps and lays the ball into the hoop.",
     ["sits down and eats the ball.", "kicks the basket off the wall.", "folds the court like a towel."]),
    ("Sports", "A swimmer stands on the starting block.", "She", "dives in when the whistle blows.",
     ["walks home before the race starts.", "drinks the pool through a straw.", "plants a tree on the block."]),
    ("Cleaning", "A man sprays cleaner on a dusty window.", "He", "wipes the glass with a cloth until it shines.",
     ["throws the window into the trash.", "paints the dust onto the wall.", "eats the cloth for lunch."]),
    ("Cleaning", "A girl gathers the dirty dishes from the table.", "She", "stacks them in the sink and runs hot water.",
     ["buries the dishes in the garden.", "juggles the plates on the roof.", "mails the dishes to her aunt."]),
    ("Music", "A guitarist tunes the strings of his guitar.", "He", "strums a chord and starts to play a song.",
     ["cuts the strings and plays the box.", "uses the guitar as a paddle in a lake.", "feeds the guitar to a dog."]),
    ("Music", "A pianist sits down at the piano.", "She", "opens the lid and places her hands on the keys.",
     ["lies under the piano and sleeps.", "carries the piano up a tree.", "sprays the keys with a hose."]),
    ("Car care", "A man opens the hood of his car.", "He", "checks the oil level with the dipstick.",
     ["climbs inside the engine to sleep.", "fills the engine with sand.", "paints the hood with jam."]),
    ("Car care", "A woman pulls into a gas station.", "She", "fills the tank and pays at the counter.",
     ["drives into the store.", "pours the fuel on the roof.", "buys the gas station."]),
    ("Pets", "A boy holds a leash by the front door.", "He", "clips it to the dog's collar and goes for a walk.",
     ["ties the leash to the ceiling fan.", "eats the leash for breakfast.", "throws the door into the yard."]),
    ("Pets", "A woman opens a bag of cat food.", "She", "fills the bowl and the cat runs over.",
     ["eats the food and the cat leaves.", "pours the food into the bathtub.", "mails the bag to the cat."]),
    ("Hair", "A barber drapes a cape over a customer.", "He", "combs the hair and trims the ends with scissors.",
     ["shaves the chair instead of the man.", "cuts the cape into confetti.", "glues the hair back on."]),
    ("Hair", "A girl brushes her long hair in front of a mirror.", "She", "braids it and ties the end with a band.",
     ["brushes the mirror instead.", "cuts the brush in half.", "ties her hair to the door."]),
    ("Baking", "A baker kneads a ball of dough on the counter.", "He", "shapes it into a loaf and puts it in the oven.",
     ["throws the dough at the ceiling.", "wears the dough as a hat.", "plants the dough in a pot."]),
    ("Baking", "A woman takes a tray of cookies out of the oven.", "She", "sets them on a rack to cool.",
     ["puts them back in the fridge to bake.", "throws the tray out the window.", "feeds the tray to the oven."]),
    ("Painting", "An artist squeezes paint onto a palette.", "She", "dips her brush and paints the sky.",
     ["eats the paint with a spoon.", "paints the palette onto the cat.", "throws the brush into the sea."]),
    ("Painting", "A man tapes the edges of a wall.", "He", "rolls a coat of white paint across it.",
     ["tapes himself to the wall.", "tears the wall down with the tape.", "paints the tape on the floor."]),
]


def run(pipeline: str, store: Path) -> None:
    subprocess.run([sys.executable, "-m", "csk.cli", "run", pipeline, "--store", str(store)], cwd=ROOT, check=True)


def released_files(store: Path, pipeline: str, stage: str, name: str) -> list[Path]:
    return sorted(p for p in (store / pipeline / stage).rglob(name))


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        store = Path(tmp) / "artifacts"
        run("corecode", store)
        rows = [json.loads(line) for f in released_files(store, "corecode", "knowledge_filling",
                                                         "Commonsense_Knowledge_Filling.jsonl")
                for line in f.read_text(encoding="utf-8").splitlines() if line.strip()]
        with open(HERE / "Commonsense_Knowledge_Filling.jsonl", "w", encoding="utf-8") as f:
            for n, r in enumerate(rows):
                f.write(json.dumps({**r, "id": n}, ensure_ascii=False) + "\n")
        run("corequisite", store)
        rows = [line for f in released_files(store, "corequisite", "p_mcqa", "PaCo_mcqa_*.jsonl")
                for line in f.read_text(encoding="utf-8").splitlines() if line.strip()]
        (HERE / "PaCo_mcqa.jsonl").write_text("\n".join(rows[:160]) + "\n", encoding="utf-8")
    with open(HERE / "swag.csv", "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(["video-id", "fold-ind", "startphrase", "sent1", "sent2", "gold-source",
                    "ending0", "ending1", "ending2", "ending3", "label"])
        for n, (activity, sent1, sent2, gold, wrong) in enumerate(ACTIVITIES):
            label = n % 4
            endings = wrong[:label] + [gold] + wrong[label:]
            w.writerow([f"sample_{activity.lower().replace(' ', '_')}_{n // 2}", 1000 + n, f"{sent1} {sent2}", sent1,
                        sent2, "gold", *endings, label])
    with open(HERE / "hellaswag.jsonl", "w", encoding="utf-8") as f:
        for n, (activity, sent1, sent2, gold, wrong) in enumerate(ACTIVITIES):
            label = (n + 1) % 4
            endings = [f"{e}" for e in wrong[:label] + [gold] + wrong[label:]]
            f.write(json.dumps({"ind": 2000 + n, "activity_label": activity, "ctx_a": sent1, "ctx_b": sent2.lower(),
                                "ctx": f"{sent1} {sent2.lower()}", "split": "val", "split_type": "indomain",
                                "endings": endings, "label": label,
                                "source_id": f"sample~{activity.lower().replace(' ', '_')}_{n // 2}"}) + "\n")


if __name__ == "__main__":
    main()
