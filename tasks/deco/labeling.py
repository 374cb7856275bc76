"""DECO's human steps as Label Studio projects (docs/method.md 4.4, ACCENT section 4).

* `ratings`: three raters read each sampled response (ConTurE's turns left out) after its history (the turns with their speakers, the
  response marked) and rate its event commonsense and its overall commonsense, 1-5 (the `sample` rows; read
  back by `sample.ratings`: the raters' ratings become the sample's `event_cs_raw` / `general_cs_raw`, their
  means `event_cs` / `general_cs`, as the release carries them);
* `tuple_validation`: three validators accept or reject each event-relation tuple (head, relation, tail),
  shown with the history and response it was read from and the relation in words (the `extract` stage's
  `validation_sheet.jsonl`: every tuple, whatever the validators said; read back by `extract.validations`,
  where a tuple is kept when a majority of its validators accept it).
"""

from __future__ import annotations

import re

import pandas as pd

from csk.label_studio import LabelingStep
from readers.deco import relation as spelt
from tasks.deco.extract import ACCEPT, REJECT, extract
from tasks.deco.extraction import WHERE
from tasks.deco.sample import sample
from tasks.labeling import DIALOGUE, box, dialogue_html

SPEAKERS = ("A", "B")  # DECO's histories name no speakers: the turns alternate, the response is B's

RATING_CONFIG = f"""<View>
  <Header value="Read the conversation. The response to rate is its last turn, marked."/>
{DIALOGUE}
{box("Response", "response")}
  <Header value="Event commonsense: do the events in the response make sense with the events of the conversation (their causes, effects, intents, reactions and order in time)? 1 = not at all, 5 = fully" size="5"/>
  <Rating name="event_cs" toName="dialogue" maxRating="5" icon="star" size="medium" required="true"/>
  <Header value="Overall commonsense: does the response as a whole make commonsense sense in the conversation? 1 = not at all, 5 = fully" size="5"/>
  <Rating name="general_cs" toName="dialogue" maxRating="5" icon="star" size="medium" required="true"/>
</View>"""

TUPLE_CONFIG = f"""<View>
  <Header value="Read the conversation. The response is its last turn, marked."/>
{DIALOGUE}
  <View style="background:#eef4ff;padding:6px;margin:6px 0;border-left:4px solid #3a6fd8">
    <Header value="Event-relation tuple: event1 — relation — event2" size="6"/>
    <Text name="tuple" value="$tuple"/>
    <Header value="What the relation says" size="6"/>
    <Text name="meaning" value="$meaning"/>
    <Text name="where" value="$where"/>
  </View>
  <Header value="Accept the tuple if both events are said or clearly implied where stated and the relation holds between them in this conversation; reject it otherwise." size="5"/>
  <Choices name="verdict" toName="dialogue" choice="single-radio" showInline="true" required="true">
    <Choice value="accept"/>
    <Choice value="reject"/>
  </Choices>
</View>"""

WHERE_FROM = {"single": "Both events are taken from the response.",
              "pair": "event1 is taken from the conversation before the response, event2 from the response."}
WHERE_MODEL = "Read by the event-relation extractor from the conversation and the response."


def conversation(history, response: str) -> str:
    """The history's turns (its empty padding slots left out) and the response, each with its speaker, the
    response marked."""
    turns = [str(u).strip() for u in history if str(u).strip()] + [str(response).strip()]
    speakers = [SPEAKERS[(len(turns) - 1 - k) % 2 == 0] for k in range(len(turns))]
    return dialogue_html(turns, highlight=len(turns) - 1, speakers=speakers)


def meaning(head: str, rel: str, tail: str) -> str:
    """The relation in words, with the tuple's events in place of event1 / event2 (ACCENT's prompt text)."""
    events = {"1": f"“{head}”", "2": f"“{tail}”"}
    return f"{rel}: " + re.sub(r"event([12])", lambda m: events[m.group(1)], WHERE[spelt(rel)])


def deco_samples(samples: pd.DataFrame) -> pd.DataFrame:
    """The samples DECO's raters rate: ConTurE's turns (another dataset, rated by its own people; the
    agreement stage keeps them apart) are not among them."""
    return samples[samples["corpus"] != "ConTurE"]


def _rating_task(row: dict) -> dict:
    return {"dialogue_html": conversation(list(row["history"]), row["response"]), "response": row["response"],
            "split": row["split"], "system": row["system"] if isinstance(row["system"], str) else ""}


def _tuple_task(row: dict) -> dict:
    head, rel, tail = str(row["head"]), str(row["relation"]), str(row["tail"])
    setting = row.get("setting")
    return {"dialogue_html": conversation(list(row["history"]), row["response"]),
            "tuple": f"{head} — {rel} — {tail}", "meaning": meaning(head, rel, tail),
            "where": WHERE_FROM.get(setting, WHERE_MODEL) if isinstance(setting, str) else WHERE_MODEL,
            "head": head, "relation": rel, "tail": tail, "sample_id": str(row["sample_id"])}


STEPS = (
    LabelingStep("ratings", stage=sample, config=RATING_CONFIG, data=_rating_task, imports=(sample, "ratings"),
                 annotators=3, rows=deco_samples,
                 instructions="Read the conversation, then rate its marked last turn (the response) twice, 1 to 5. "
                              "Event commonsense: do the events the response mentions fit the conversation's "
                              "events (why people do things, what follows, how they react, what happens "
                              "before or after)? Overall commonsense: does the response make sense as a whole? "
                              "Three people rate every response; the score is their mean."),
    LabelingStep("tuple_validation", stage=extract, config=TUPLE_CONFIG, data=_tuple_task,
                 imports=(extract, "validations"), annotators=3, source="validation_sheet.jsonl",
                 instructions=f"Each task shows a conversation and an event-relation tuple read from it: event1 — "
                              f"relation — event2, with what the relation says in words (PersonX is who does "
                              f"event1, PersonY someone else). Choose {ACCEPT} if both events are in the "
                              f"conversation where the task says and the relation holds between them; {REJECT} "
                              f"otherwise. Three people judge every tuple; it is kept when most of them accept it."),
)
