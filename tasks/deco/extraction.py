"""ACCENT's event-relation extraction as text to text (docs/method.md 4.5): one prompt per relation, the
input `prompt + history (each slot followed by </UTT>) + response`, the target
`event1: {head}; event2: {tail}` or `None`. The same functions build the extraction tasks, the
extractor's training pairs (`csk deco train-extractor`) and read its outputs back."""

from __future__ import annotations

from typing import Iterable

import pandas as pd

from csk import compute
from csk.runtime import StageOutput
from data_contracts.deco import TARGET  # noqa: F401  (the target format is the contract's)
from readers.deco import RELATIONS, join_history, relation

# ACCENT's released code (eventualization/few_shot_evt.py), in its relation order.
WHERE = {
    "xNeed": "event2 needs to be true for event1 to take place",
    "xAttr": "event2 shows how PersonX is viewed as after event1",
    "xReact": "event2 shows how PersonX reacts to event1",
    "xEffect": "event2 shows the effect of event1 on PersonX",
    "xWant": "event2 shows what PersonX wants after event1 happens",
    "xIntent": "event2 shows PersonX's intent for event1",
    "oEffect": "event2 shows the effect of event1 on PersonY",
    "oReact": "event2 shows how PersonY reacts to event1",
    "oWant": "event2 shows what PersonY wants after event1 happens",
    "isAfter": "event1 happens after event2",
    "HasSubEvent": "event1 includes event2",
    "HinderedBy": "event1 fails to happen because event2",
}
assert tuple(WHERE) == RELATIONS
NONE = "None"


def prompt(relation: str) -> str:
    return f"Extract event1 and event2 from the text where {WHERE[relation]}. Utterance: "


def model_input(relation: str, history: list[str], response: str) -> str:
    """What the extractor reads: ACCENT passes the whole released history string, slots as they are."""
    return prompt(relation) + join_history(list(history)) + response


def target(head: str, tail: str) -> str:
    return f"event1: {head.strip()}; event2: {tail.strip()}"


class OutputError(ValueError):
    """An extractor output that is neither `None` nor `event1: {head}; event2: {tail}`."""

    def __init__(self, code: str, message: str):
        super().__init__(message)
        self.code = code


def parse_output(text: str) -> tuple[str, str] | None:
    """(head, tail) of an extractor output, None for `None`; anything else raises OutputError
    naming the rule it breaks (ACCENT drops such outputs; here they are rejected with the reason)."""
    text = text.strip()
    if text == NONE:
        return None
    if "event1:" not in text:
        raise OutputError("missing_event1", f"no 'event1:' in {text!r}")
    if "event2:" not in text:
        raise OutputError("missing_event2", f"no 'event2:' in {text!r}")
    m = TARGET.fullmatch(text)
    if not m:
        raise OutputError("malformed", f"not 'event1: HEAD; event2: TAIL': {text!r}")
    head, tail = m.group("head").strip(), m.group("tail").strip()
    if not head or not tail:
        raise OutputError("empty_event", f"an empty event in {text!r}")
    return head, tail


def gold_tuples(row) -> list[tuple[str, str, str, str]]:
    """(head, relation, tail, setting) of a sample's human tuples; `pair` tuples take event1 from the
    previous utterance and event2 from the response, `single` both from the response."""
    return ([(h, relation(r), t, "single") for h, r, t in row["tuples_single"]]
            + [(h, relation(r), t, "pair") for h, r, t in row["tuples_pair"]])


def none_negatives(samples: pd.DataFrame, *, single: int, pair: int, seed: int) -> dict[str, list[tuple[str, str]]]:
    """relation -> [(sample id, setting)]: ACCENT's "None" examples, `single` + `pair` per relation,
    drawn (seeded) among annotated samples without any tuple of that relation, so `None` is true."""
    mask = [bool(len(a) or len(b)) for a, b in zip(samples["tuples_single"], samples["tuples_pair"])]
    annotated = samples.loc[pd.Series(mask, index=samples.index, dtype=bool)]
    has = {sid: {relation(t[1]) for t in list(a) + list(b)}
           for sid, a, b in zip(annotated["id"], annotated["tuples_single"], annotated["tuples_pair"])}
    out = {}
    for rel in RELATIONS:
        pool = sorted(sid for sid, rels in has.items() if rel not in rels)
        take = compute.rng(seed, "deco-none", rel).permutation(len(pool))[:single + pair]
        out[rel] = [(pool[i], "single" if k < single else "pair") for k, i in enumerate(take)]
    return out


def training_pairs(samples: pd.DataFrame, negatives: dict[str, list[tuple[str, str]]]) -> list[dict]:
    """The extractor's training examples: one per human tuple, one `None` per negative, in ACCENT's
    order (relation by relation)."""
    by_id = samples.set_index("id", drop=False)
    rows = []
    for rel in RELATIONS:
        for _, s in samples.iterrows():
            for head, r, tail, setting in gold_tuples(s):
                if r == rel:
                    rows.append({"sample_id": s["id"], "relation": rel, "setting": setting,
                                 "source": model_input(rel, s["history"], s["response"]), "target": target(head, tail)})
        for sid, setting in negatives.get(rel, []):
            s = by_id.loc[sid]
            rows.append({"sample_id": sid, "relation": rel, "setting": setting,
                         "source": model_input(rel, s["history"], s["response"]), "target": NONE})
    return rows


def tasks_of(samples: pd.DataFrame, negatives: dict[str, list[tuple[str, str]]]) -> Iterable[dict]:
    """One extraction task per sample and relation, with the sample's gold targets for it."""
    negative = {(sid, rel): setting for rel, pairs in negatives.items() for sid, setting in pairs}
    for _, s in samples.iterrows():
        gold = gold_tuples(s)
        for rel in RELATIONS:
            mine = [(target(h, t), setting) for h, r, t, setting in gold if r == rel]
            yield {"id": f"{s['id']}:{rel}", "sample_id": s["id"], "relation": rel,
                   "input": model_input(rel, s["history"], s["response"]),
                   "gold_targets": [t for t, _ in mine], "gold_settings": [st for _, st in mine],
                   "annotated": bool(gold), "negative": negative.get((s["id"], rel)),
                   "split": s["split"], "dev": bool(s["dev"])}


# The stage that writes the extractor's inputs: prompts only, kept out of tasks/deco/extract.py (which runs
# the seq2seq model) so its key holds no thread count.
def extraction_tasks(samples: pd.DataFrame, *, none_single: int = 3, none_pair: int = 2,
                     train_on_dev: bool = True, seed: int = 0) -> StageOutput:
    """One extractor input per sample and relation, with the human targets where there are tuples;
    the extractor's training pairs as `extractor_train.jsonl` (and `extractor_dev.jsonl`).

    Args:
        none_single: "None" examples per relation in the single setting (ACCENT: 3)
        none_pair: "None" examples per relation in the pair setting (ACCENT: 2)
        train_on_dev: the dev samples' tuples are trained on too (ACCENT's released script trains on
            the whole released train file); false: they go to extractor_dev.jsonl only
        seed: seed of the "None" examples
    """
    train = samples[samples["split"] == "train"]
    fit = train if train_on_dev else train[~train["dev"].astype(bool)]
    negatives = none_negatives(fit, single=none_single, pair=none_pair, seed=seed)
    data = pd.DataFrame(list(tasks_of(samples, negatives)),
                        columns=["id", "sample_id", "relation", "input", "gold_targets", "gold_settings", "annotated",
                                 "negative", "split", "dev"])
    pairs = training_pairs(fit, negatives)
    dev = training_pairs(train[train["dev"].astype(bool)], {}) if not train_on_dev else []
    per_relation = {rel: sum(1 for p in pairs if p["relation"] == rel and p["target"] != NONE) for rel in RELATIONS}
    return StageOutput(
        data=data, rows_in=len(samples),
        files={"extractor_train.jsonl": compute.jsonl_bytes(pairs), **({"extractor_dev.jsonl": compute.jsonl_bytes(dev)} if dev else {})},
        notes={"relations": list(RELATIONS), "training_pairs": len(pairs),
               "none_examples": sum(1 for p in pairs if p["target"] == NONE),
               "tuples_per_relation": per_relation,
               "annotated_samples": int(samples["tuples_single"].map(len).add(samples["tuples_pair"].map(len)).gt(0).sum())})
