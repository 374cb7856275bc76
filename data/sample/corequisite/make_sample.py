"""Writes this directory's sample files (written for this project, in the real formats):

* conceptnet-assertions-sample.csv: a ConceptNet 5.7 assertions dump slice (tab-separated
  assertion URI, relation URI, start URI, end URI, JSON info), with edges of other relations and
  languages and one malformed line, as a full dump has;
* answers.csv: crowd answers in the plain answers table (`task_id,worker_id,answer,does_not_make_sense`),
  three enabling and three disabling per UsedFor fact, some breaking the annotators' rules;
* expert_labels.csv: experts' labels (`id,label`: an answer id with truism / informative / irrelevant,
  or a fact id with invalid).

Run `python data/sample/corequisite/make_sample.py` after editing the lists below.
"""

import csv
import hashlib
import json
from pathlib import Path

HERE = Path(__file__).resolve().parent

# (head, tail, surface start, surface text, weight, enabling answers, disabling answers)
USED_FOR = [
    ("umbrella", "staying dry", "an umbrella", "[[an umbrella]] is for [[staying dry]]", 2.0,
     ["It is raining outside.", "The umbrella opens properly.", "You hold the umbrella above your head."],
     ["The wind is too strong.", "The umbrella has holes in the fabric.", "You left the umbrella at home."]),
    ("ladder", "reaching high places", "a ladder", "[[a ladder]] is used for [[reaching high places]]", 1.0,
     ["The ladder is tall enough.", "The ground is flat.", "Someone holds the base steady."],
     ["The ladder is broken.", "The ceiling is too high.", "The rungs are slippery with ice."]),
    ("oven", "baking bread", "an oven", "You can use [[an oven]] to [[bake bread]]", 1.0,
     ["The oven is plugged in.", "You have dough ready.", "The oven heats up to the right temperature."],
     ["The power is out.", "The heating element burned out.", "There is no flour in the house."]),
    ("bicycle", "commuting to work", "a bicycle", "[[a bicycle]] is used for [[commuting to work]]", 1.0,
     ["The tires are inflated.", "The office is a short ride away.", "There is a bike lane on the route."],
     ["The chain snapped.", "The office is a hundred miles away.", "A blizzard covers the roads."]),
    ("pen", "writing letters", "a pen", "[[a pen]] is used for [[writing letters]]", 3.0,
     ["The pen has ink.", "You have paper.", "You know how to write."],
     ["The ink has dried up.", "The paper is soaking wet.", "Your hand is in a cast."]),
    ("key", "opening doors", "a key", "[[a key]] is used for [[opening doors]]", 2.0,
     ["The key fits the lock.", "You are holding the key.", "The lock works."],
     ["The lock was changed.", "The key snapped in half.", "The door is bolted from inside."]),
    ("refrigerator", "keeping food cold", "a refrigerator", "[[a refrigerator]] is used for [[keeping food cold]]",
     2.0, ["The fridge is plugged in.", "The door is closed.", "The compressor runs."],
     ["The power has been cut.", "The door was left open all night.", "The compressor failed."]),
    ("hammer", "driving nails", "a hammer", "[[a hammer]] is used for [[driving nails]]", 2.0,
     ["You have nails.", "The hammer head is attached.", "You swing the hammer."],
     ["The handle broke off.", "The wall is solid steel.", "Your arm is injured."]),
    ("swimming pool", "swimming", "a swimming pool", "[[a swimming pool]] is used for [[swimming]]", 2.0,
     ["The pool is filled with water.", "The pool is open.", "You know how to swim."],
     ["The pool was drained.", "The pool is closed for repairs.", "A thunderstorm forces everyone out."]),
    ("telephone", "talking to friends", "a telephone", "[[a telephone]] is used for [[talking to friends]]", 1.0,
     ["The phone line works.", "Your friend answers.", "The battery is charged."],
     ["The battery is dead.", "There is no signal here.", "Your friend does not pick up."]),
    ("map", "finding your way", "a map", "[[a map]] is used for [[finding your way]]", 1.0,
     ["The map shows this area.", "You can read maps.", "There is enough light to read."],
     ["The map is of another city.", "The map is torn to pieces.", "It is pitch dark."]),
    ("car", "driving to the store", "a car", "You can use [[a car]] to [[drive to the store]]", 1.0,
     ["The tank has fuel.", "You have a driver's license.", "The engine starts."],
     ["The battery is flat.", "The road is flooded.", "Someone stole the car."]),
    ("towel", "drying off", "a towel", "[[a towel]] is used for [[drying off]]", 1.0,
     ["The towel is dry.", "You just got out of the shower.", "The towel is clean."],
     ["The towel is soaking wet.", "The towel fell in the mud.", "Someone took the last towel."]),
    ("scissors", "cutting paper", "scissors", "[[scissors]] are used for [[cutting paper]]", 2.0,
     ["The blades are sharp.", "You hold the paper steady.", "The hinge moves freely."],
     ["The blades are rusted shut.", "The paper is laminated metal.", "A child hid them."]),
    ("blanket", "keeping warm", "a blanket", "[[a blanket]] is for [[keeping warm]]", 1.0,
     ["The blanket is thick wool.", "You wrap yourself in the blanket.", "The room is only a little cold."],
     ["The blanket is soaked.", "It is freezing far below zero.", "The blanket is full of holes."]),
    ("library", "borrowing books", "a library", "[[a library]] is used for [[borrowing books]]", 2.0,
     ["The library is open today.", "You have a library card.", "The book is on the shelf."],
     ["The library closed down.", "Your card expired.", "Someone else borrowed the last copy."]),
    ("guitar", "playing music", "a guitar", "[[a guitar]] is used for [[playing music]]", 2.0,
     ["The strings are tuned.", "You know some chords.", "All six strings are there."],
     ["Every string snapped.", "The neck is cracked.", "You broke your fingers."]),
    ("stove", "cooking soup", "a stove", "[[a stove]] is used for [[cooking soup]]", 1.0,
     ["The gas is turned on.", "You have a pot.", "The burner lights."],
     ["The gas supply is shut off.", "The burner is clogged.", "There is nothing to put in the pot."]),
    ("backpack", "carrying books", "a backpack", "[[a backpack]] is used for [[carrying books]]", 1.0,
     ["The zipper works.", "The straps are intact.", "The books fit inside."],
     ["The bottom is ripped open.", "The straps tore off.", "The books are too big."]),
    ("alarm clock", "waking up on time", "an alarm clock", "[[an alarm clock]] is used for [[waking up on time]]",
     1.0, ["The alarm is set.", "The clock has power.", "The volume is loud enough."],
     ["The alarm was set for the wrong time.", "The batteries died.", "You sleep through any noise."]),
]
OTHER = [  # other relations and languages: counted, never sampled as UsedFor facts
    ("/r/Desires", "/c/en/person", "/c/en/good_health", "[[a person]] wants [[good health]]"),
    ("/r/Desires", "/c/en/cat", "/c/en/warm_place", "[[a cat]] wants [[a warm place]]"),
    ("/r/Causes", "/c/en/exercise", "/c/en/fatigue", "The effect of [[exercise]] is [[fatigue]]"),
    ("/r/Causes", "/c/en/rain", "/c/en/wet_ground", "The effect of [[rain]] is [[wet ground]]"),
    ("/r/IsA", "/c/en/hammer/n", "/c/en/tool", "[[a hammer]] is a kind of [[tool]]"),
    ("/r/UsedFor", "/c/fr/marteau", "/c/fr/clou", None),
    ("/r/UsedFor", "/c/en/bread", "/c/fr/sandwich", None),
    ("/r/UsedFor", "/c/zh/雨伞", "/c/zh/挡雨", None),
]
# answers breaking the annotators' rules, and skips: (fact head, polarity, text, does_not_make_sense)
EXTRA = [
    ("ladder", "disabling", "It has a cracked leg.", 0),
    ("oven", "disabling", "You don't have any dough.", 0),
    ("map", "enabling", "", 1),
]
EXPERT = [  # (fact head, polarity, answer index, label), and invalid facts
    ("pen", "enabling", 2, "truism"),
    ("umbrella", "enabling", 0, "informative"),
    ("guitar", "disabling", 2, "irrelevant"),
    ("backpack", "enabling", 2, "irrelevant"),
]
INVALID = ["scissors"]


def edge_uri(rel: str, start: str, end: str) -> str:
    return f"/a/[{rel}/,{start}/,{end}/]"


def fact_id(uri: str) -> str:  # the lexicalize stage's id of the fact made from an edge
    return "fact-" + hashlib.sha1(uri.encode()).hexdigest()[:10]


def main() -> None:
    lines, answers, labels = [], [["task_id", "worker_id", "answer", "does_not_make_sense"]], [["id", "label"]]
    facts = {}
    for k, (head, tail, s_start, surface, weight, en, dis) in enumerate(USED_FOR):
        start, end = "/c/en/" + head.replace(" ", "_"), "/c/en/" + tail.replace(" ", "_")
        uri = edge_uri("/r/UsedFor", start, end)
        info = {"dataset": "/d/conceptnet/4/en", "license": "cc:by/4.0",
                "sources": [{"contributor": f"/s/contributor/omcs/user{k}", "process": "/s/process/sample"}],
                "surfaceEnd": tail, "surfaceStart": s_start, "surfaceText": surface, "weight": weight}
        lines.append("\t".join([uri, "/r/UsedFor", start, end, json.dumps(info)]))
        facts[head] = fact_id(uri)
        for polarity, texts in (("enabling", en), ("disabling", dis)):
            for w, text in enumerate(texts):
                answers.append([f"{facts[head]}/{polarity}", f"W{(k * 7 + w) % 11:03d}", text, "0"])
        if k % 5 == 2:
            lines.append("this line is not an assertion")
        if k < len(OTHER):
            rel, start, end, surface = OTHER[k]
            info = {"dataset": "/d/conceptnet/4/en", "license": "cc:by/4.0", "weight": 1.0}
            if surface:
                info["surfaceText"] = surface
            lines.append("\t".join([edge_uri(rel, start, end), rel, start, end, json.dumps(info, ensure_ascii=False)]))
    for head, polarity, text, skip in EXTRA:
        answers.append([f"{facts[head]}/{polarity}", "W099", text, str(skip)])
    for head, polarity, idx, label in EXPERT:
        labels.append([f"{facts[head]}/{polarity}/{idx}", label])
    labels += [[facts[h], "invalid"] for h in INVALID]
    (HERE / "conceptnet-assertions-sample.csv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    for name, rows in (("answers.csv", answers), ("expert_labels.csv", labels)):
        with open(HERE / name, "w", newline="", encoding="utf-8") as f:
            csv.writer(f, lineterminator="\n").writerows(rows)


if __name__ == "__main__":
    main()
