"""DECO's human steps as Label Studio projects (docs/method.md 4.4, ACCENT section 4).

* `ratings`: three raters read each sampled response (ConTurE's turns left out) after its history (the turns with their speakers, the
  response marked) and rate its event commonsense and its overall commonsense, 1-5 (the `sample` rows; read
  back by `sample.ratings`: the raters' ratings become the sample's `event_cs_raw` / `general_cs_raw`, their
  means `event_cs` / `general_cs`, as the release carries them);
* `tuples`: people write the event-relation tuples (docs/method.md 4.4: "people also wrote event-relation
  tuples"): one task per sampled response and relation (12 per response) shows the history and response
  and the relation in words; the annotator writes event1 and event2 (PersonX is who does event1,
  PersonY someone else) and says where they come from (single: both from the response; pair: event1
  from the turn before it), or chooses none when the conversation has no such pair (read back by
  `sample.tuples`: the written tuples become the sample's `tuples_single` / `tuples_pair`, as the release
  carries them, and go on to the extractor's targets and to `tuple_validation`);
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
from tasks.deco.extraction import RELATIONS, WHERE
from tasks.deco.sample import sample
from tasks.labeling_views import DIALOGUE, SHOWN, box, dialogue_html

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

WRITING_CONFIG = f"""<View>
  <Header value="Read the conversation. The response is its last turn, marked."/>
{DIALOGUE}
{box("Response", "response")}
{box("Relation: event1 — relation — event2", "meaning", SHOWN)}
  <Header value="Write event1 and event2 so that the relation holds in this conversation, each a short sentence (PersonX does event1; PersonY is someone else), and say where they come from; choose none, the boxes empty, if the conversation has no such pair." size="5"/>
  <TextArea name="event1" toName="dialogue" rows="2" maxSubmissions="1" showSubmitButton="false" placeholder="event1, e.g. PersonX asks PersonY out"/>
  <TextArea name="event2" toName="dialogue" rows="2" maxSubmissions="1" showSubmitButton="false" placeholder="event2"/>
  <Header value="Where the events come from: single, both in the response; pair, event1 in the turn before it, event2 in the response" size="6"/>
  <Choices name="setting" toName="dialogue" choice="single-radio" showInline="true" required="true">
    <Choice value="single" hint="both events from the response"/>
    <Choice value="pair" hint="event1 from the turn before the response, event2 from the response"/>
    <Choice value="none" hint="the conversation has no such pair of events"/>
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


def writing_rows(samples: pd.DataFrame) -> pd.DataFrame:
    """One row per DECO sample and relation (`SAMPLE#RELATION`): a tuple is written for one relation at
    a time, as the extractor reads one."""
    rows = deco_samples(samples)
    return pd.DataFrame([{**r, "id": f"{r['id']}#{rel}", "sample_id": r["id"], "relation": rel}
                         for r in rows.to_dict("records") for rel in RELATIONS],
                        columns=[*rows.columns, "sample_id", "relation"])


def _writing_task(row: dict) -> dict:
    rel = str(row["relation"])
    return {"dialogue_html": conversation(list(row["history"]), row["response"]), "response": row["response"],
            "relation": rel, "meaning": f"{rel}: {WHERE[rel]}", "sample_id": str(row["sample_id"])}


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
    LabelingStep("tuples", stage=sample, config=WRITING_CONFIG, data=_writing_task, imports=(sample, "tuples"),
                 rows=writing_rows,
                 instructions="Read the conversation and its marked last turn (the response). Each task names one "
                              "relation between two events and says what it means. Write event1 and event2 as "
                              "short sentences about the people of the conversation (PersonX does event1, PersonY "
                              "is someone else) so that the relation holds, and choose single when both events "
                              "are in the response, pair when event1 is in the turn before it. Choose none, the "
                              "boxes left empty, when the conversation has no such pair of events."),
    LabelingStep("tuple_validation", stage=extract, config=TUPLE_CONFIG, data=_tuple_task,
                 imports=(extract, "validations"), annotators=3, source="validation_sheet.jsonl",
                 instructions=f"Each task shows a conversation and an event-relation tuple read from it: event1 — "
                              f"relation — event2, with what the relation says in words (PersonX is who does "
                              f"event1, PersonY someone else). Choose {ACCEPT} if both events are in the "
                              f"conversation where the task says and the relation holds between them; {REJECT} "
                              f"otherwise. Three people judge every tuple; it is kept when most of them accept it."),
)
