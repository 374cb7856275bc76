"""Writes this directory's sample files (written for this project, in the real release formats):

* personachat/train_self_original.txt: ParlAI's PersonaChat layout (numbered lines, persona lines,
  partner utterance TAB reply TAB TAB candidates); one line lacks its number, as corrupted copies do;
* topicalchat/train.json: Topical-Chat's conversations JSON (keyed by conversation id); one
  conversation has no `content`;
* responses.csv: responses of dialogue systems to histories (history_id, response, system); some
  break one response-filter rule each (too short, only questions, only courtesy), one names an
  unknown history;
* deco_train_sample.json: DECO's released JSON layout (history with </UTT> slots, response, source,
  system, GUID, ratings, tuples_single, tuples_pair, for_dev); one sample has an unknown relation;
* conture_sample.json: ACCENT's ConTurE subset layout (rated turns, no tuples).

The DailyDialog histories are those of ../dailydialog/dialogues_text.txt.
Run `python data/sample/deco/make_sample.py` after editing the lists below.
"""

import csv
import json
from pathlib import Path

HERE = Path(__file__).resolve().parent

PERSONACHAT = [
    (["i have two cats .", "i work at a bakery .", "i like hiking on weekends ."],
     [("hello , how is your day going ?", "pretty busy , i baked bread since five this morning ."),
      ("wow , early start . do you like baking ?", "i love it , the smell of fresh bread makes me happy ."),
      ("i can only make toast . what else do you do ?", "on weekends i go hiking with my two cats in a backpack ."),
      ("cats in a backpack ? that is funny .", "they enjoy the view , but they sleep most of the way .")]),
    (["i am a nurse .", "i play the violin .", "my favorite season is winter ."],
     [("__SILENCE__", "hi there ! i just finished a night shift at the hospital ."),
      ("you must be tired . are you a doctor ?", "no , i am a nurse , so i need some sleep now ."),
      ("sleep well . do you have hobbies ?", "i play the violin to relax after long shifts ."),
      ("that sounds calming . i play guitar .", "we should play together sometime , winter is a good time for music .")]),
    (["i am a student .", "i have a dog named max ."],
     [("hey , what are you up to ?", "studying for my chemistry exam tomorrow ."),
      ("good luck ! is it hard ?", "very hard , i failed the last one so i study every night ."),
      ("take a break and walk your dog .", "max would love that , i will take him out after this chapter .")]),
]

TOPICALCHAT = {
    "t_sample_1": ["Did you know that the moon is slowly moving away from the earth?",
                   "I did not! How fast is it moving?",
                   "About four centimeters a year, so we will not notice it in our lifetime.",
                   "That is a relief. I like looking at the full moon when I walk home.",
                   "Me too, it is bright enough to walk without a flashlight."],
    "t_sample_2": ["Do you watch basketball?", "Yes, I watch every game of my home team.",
                   "Players run about four kilometers in a game, so they train very hard.",
                   "No wonder they eat so much, I read that some eat six meals a day.",
                   "I would get tired just from eating that much."],
}

# (history_id, response, system); ids are DIALOGUE_ID@TURN as the sources stage lists them
RESPONSES = [
    ("dailydialog-000001@3", "I will walk him before work and after dinner , so he gets enough exercise .", "PLATO-2"),
    ("dailydialog-000001@3", "Dogs love cats so I will buy a cat for the dog to walk with .", "DialoGPT"),
    ("dailydialog-000001@4", "Thank you . Have a nice day .", "DialoGPT"),
    ("dailydialog-000002@2", "Is it far ? Can I walk there ?", "DiSCoL"),
    ("dailydialog-000002@2", "Okay , thanks .", "PLATO-2"),
    ("personachat-train_self_original-0@3", "i bake bread all day , so in the evening i am too tired to cook dinner .",
     "PLATO-2"),
    ("personachat-train_self_original-1@4", "i was so sleepy that i played the violin in my dream .", "DiSCoL"),
    ("personachat-train_self_original-2@2", "i studied all night , so i will sleep after the exam .", "DialoGPT"),
    ("topicalchat-train-t_sample_1@3", "The moon moves away because the earth is getting heavier every year .",
     "DiSCoL"),
    ("topicalchat-train-t_sample_2@3", "They burn a lot of energy running , so they need to eat more food .",
     "PLATO-2"),
    ("dailydialog-999999@1", "This history does not exist in the corpus at all .", "PLATO-2"),
]

UTT = "</UTT>"


def history(*utterances: str) -> str:
    slots = [""] * (4 - len(utterances)) + list(utterances)
    return "".join(s + UTT for s in slots)


# DECO release layout: (history, response, source, system, event ratings, general ratings, single, pair, for_dev)
DECO = [
    (history("i just moved to a new city .", "how do you like it so far ?", "it is big and loud , i miss my town .",
             "you will make friends soon ."),
     "i joined a hiking club so i can meet people on weekends .", "PersonaChat", "PLATO-2", [5, 4, 5], [5, 5, 4],
     [["PersonX joins a hiking club", "xIntent", "PersonX meets people"]],
     [["PersonX misses PersonX's town", "xWant", "PersonX wants to meet people"]], False),
    (history("Could you help me carry these boxes ? ", " Sure , where do they go ? "),
     " To the third floor . The elevator is broken so we have to take the stairs . ", "DailyDialog", "Human",
     [4, 4, 5], [4, 5, 5], [["the elevator is broken", "xEffect", "PersonX takes the stairs"]], [], False),
    (history("I failed my driving test again .", "Oh no , what happened ?", "I forgot to stop at the stop sign ."),
     "You passed the test so you can drive home now .", "DailyDialog", "DialoGPT", [1, 2, 1], [1, 1, 2],
     [], [["PersonX fails the driving test", "oReact", "PersonY feels happy"]], False),
    (history("Did you know octopuses have three hearts?", "No way, why three?",
             "Two pump blood to the gills and one to the body.", "That is amazing."),
     "Octopuses need a lot of blood because they swim fast when they hunt .", "TopicalChat", "DiSCoL",
     [4, 3, 4], [4, 4, 3], [["octopuses swim fast", "xNeed", "octopuses pump a lot of blood"]], [], False),
    (history("i love cooking pasta .", "what kind of pasta ?", "mostly with tomato sauce ."),
     "i burned the sauce yesterday , so i ordered pizza instead .", "PersonaChat", "PLATO-2", [5, 5, 4],
     [5, 4, 4], [["PersonX burns the sauce", "xEffect", "PersonX orders pizza"],
                 ["PersonX orders pizza", "isAfter", "PersonX burns the sauce"]], [], True),
    (history("The shop closes at six .", "Then we have to hurry ."),
     "We missed the bus , so the shop will be closed when we arrive .", "DailyDialog", "PLATO-2", [4, 4, 4],
     [4, 3, 4], [["PersonX misses the bus", "HinderedBy", "the shop is closed"]],
     [["PersonX hurries", "HasSubEvent", "PersonX runs to the bus"]], False),
    (history("my son won his soccer game today .", "congratulations ! you must be proud ."),
     "i am very proud , he scored two goals and his team celebrated .", "PersonaChat", "Human", [5, 5, 5],
     [5, 5, 5], [["PersonX scores two goals", "oReact", "others feel happy"],
                 ["PersonX scores two goals", "xAttr", "PersonX is skilled"]],
     [["PersonX's son wins the game", "xReact", "PersonX feels proud"]], True),
    (history("It is raining heavily outside .", "Do you have an umbrella ?"),
     "I left it at work , so I will get wet walking home .", "DailyDialog", "DiSCoL", [4, 5, 3], [4, 4, 4],
     [["PersonX leaves the umbrella at work", "xEffect", "PersonX gets wet"]],
     [["it rains heavily", "oWant", "PersonY wants to stay dry"]], False),
    (history("Have you read the new book about space?", "Not yet, is it good?"),
     "It is good , the author explains black holes with simple pictures .", "TopicalChat", "PLATO-2",
     [3, 4, 4], [4, 4, 4], [["PersonX reads the book", "oEffect", "PersonY learns about black holes"]], [], False),
    (history("i work nights at a factory .", "that sounds hard ."),
     "i sleep during the day and the sun wakes me up .", "PersonaChat", "DialoGPT", [3, 2, 3], [3, 3, 2],
     [["PersonX works at night", "Likes", "PersonX sleeps in the day"]], [], False),  # unknown relation: rejected
]

CONTURE = [
    (history("Hello", "hi, do you like music?", "Yes, I play the piano."), "i play guitar since i was ten years old.",
     [4, 4, 5], [4, 5, 4], 2),
    (history("I am hungry.", "what will you eat?", "Probably a sandwich."),
     "sandwiches are made of stone so they last forever.", [1, 1, 1], [1, 1, 2], 0),
    (history("My car broke down.", "oh no, what happened?", "The battery died."),
     "you can ask a neighbor to jump start it with cables.", [5, 5, 4], [5, 4, 5], 2),
    (history("I love winter.", "why?", "I like snow."), "snow is great because it is hot in the summer.",
     [2, 1, 2], [2, 2, 1], 0),
]


def main() -> None:
    lines = []
    for persona, turns in PERSONACHAT:
        n = 1
        for p in persona:
            lines.append(f"{n} your persona: {p}")
            n += 1
        for a, b in turns:
            lines.append(f"{n} {a}\t{b}\t\tsome candidate .|{b}")
            n += 1
    lines.insert(len(lines) - 1, "this line lost its number")
    (HERE / "personachat").mkdir(exist_ok=True)
    (HERE / "personachat" / "train_self_original.txt").write_text("\n".join(lines) + "\n")

    conv = {cid: {"article_url": "", "config": "A",
                  "content": [{"message": m, "agent": f"agent_{1 + i % 2}", "sentiment": "Neutral",
                               "knowledge_source": ["FS1"], "turn_rating": "Good"} for i, m in enumerate(msgs)],
                  "conversation_rating": {"agent_1": "Good", "agent_2": "Good"}} for cid, msgs in TOPICALCHAT.items()}
    conv["t_sample_broken"] = {"article_url": "", "config": "A"}
    (HERE / "topicalchat").mkdir(exist_ok=True)
    (HERE / "topicalchat" / "train.json").write_text(json.dumps(conv, indent=1) + "\n")

    with open(HERE / "responses.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["history_id", "response", "system"])
        w.writerows(RESPONSES)

    deco = []
    for guid, (h, r, source, system, ev, gen, single, pair, dev) in enumerate(DECO, start=1):
        deco.append({"history": h, "response": r, "source": source, "system": system, "GUID": guid,
                     "general_cs_raw": gen, "event_cs_raw": ev, "tuples_single": single, "tuples_pair": pair,
                     "general_cs": sum(gen) / 3, "event_cs": sum(ev) / 3, "for_dev": dev})
    (HERE / "deco_train_sample.json").write_text(json.dumps(deco, indent=1) + "\n")
    conture = [{"history": h, "response": r, "general_cs_raw": gen, "event_cs_raw": ev, "overall_impression": o,
                "GUID": guid, "general_cs": sum(gen) / 3, "event_cs": sum(ev) / 3}
               for guid, (h, r, ev, gen, o) in enumerate(CONTURE, start=1)]
    (HERE / "conture_sample.json").write_text(json.dumps(conture, indent=1) + "\n")


if __name__ == "__main__":
    main()
