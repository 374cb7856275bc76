"""docs/method.md 3.5-3.6: CORECODE's six tasks built from the checked annotations, in the release's layout
(`{easy,hard}/{generation,multiple_choice,span_extraction}/{split}/Task_Name.jsonl`, each line `id`,
`dialogue` as "A: ..." lines, `question`, options "(a)", "(b)", ..., `answer`: ["(a)", text] for a
multiple-choice item, a string otherwise; nothing else), and the robustness perturbations of the
multiple-choice tasks.

Each task is its own stage; a builder states only how one annotation becomes items. Questions,
option labels and slot names are the release's, byte for byte (its README documents each task's
format; its causal-inference files were checked line by line)."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pandas as pd

from csk import compute
from csk.runtime import StageOutput
from data_contracts.corecode import DOMAIN_ZH, ONTOLOGY

# The release's instructions. Generation questions open with one of two preambles: the knowledge-
# generation example's, and the causal-inference files'. The clipped subsequent-event question says
# "the dialogue so far" (对话上文) and "can be inferred" (推测出), the other two "can be seen" (看出).
CAUSAL_PREAMBLE = "请不要重述问题或解释原因，而是尽可能简短地回答下面的问题："
GENERATION_PREAMBLE = "请根据对话内容，直接回答下面问题的答案，不要重述问题或解释原因："
QUESTIONS = {
    "knowledge_filling": "请根据对话内容，从a、b、c选项中选择对话中的[MASK]处应填入的选项。",
    # the README's one example is an event's subsequent event: 事件“…”的后续事件是什么？ The release shows
    # no entity or social-interaction form: those keep the event form's shape without the word 事件
    "knowledge_generation": {"event": GENERATION_PREAMBLE + "事件“{instance}”的{slot}是什么？",
                             "other": GENERATION_PREAMBLE + "“{instance}”的{slot}是什么？"},
    "conflict_phrase_detection": "请从对话中抽取出在常识上与对话上下文不符的文本。注意不要重述问题或解释原因，直接写出答案即可。",
    # the README's two forms differ in the colon after 短语1/短语2 (": " in one, "：" in the other): kept as released
    "domain_identification": "请根据对话内容，从a、b、c等候选领域中选择下面两个短语之间的关系所属的领域。\n短语1: {instance}  短语2: {value}",
    "slot_identification": "请根据对话内容，从a、b、c等选项中选择下面两个短语之间的关系。\n短语1：{instance}  短语2：{value}",
    "cause": CAUSAL_PREAMBLE + "根据对话内容可以看出，导致事件“{instance}”的原因是什么？",
    "subsequent": CAUSAL_PREAMBLE + "根据对话内容可以看出，事件“{instance}”导致的后续事件是什么？",
    "clipped_subsequent": CAUSAL_PREAMBLE + "根据对话上文可以推测出，事件“{instance}”导致的后续事件是什么？",
}
# Event causal inference reads two slots only: "the 'cause: event cause' slot and the 'consequence:
# subsequent event' slot" (the paper); emotion, time and location causes and consequences are not events.
CAUSAL_SLOTS = {("cause", "event cause"): "cause", ("consequence", "subsequent event"): "subsequent"}
# task (and variant) -> the release's folder and file name
RELEASE_FILES = {
    "knowledge_filling": ("multiple_choice", "Commonsense_Knowledge_Filling"),
    "knowledge_generation": ("generation", "Commonsense_Knowledge_Generation"),
    "conflict_phrase_detection": ("span_extraction", "Commonsense_Conflict_Phrase_Detection"),
    "domain_identification": ("multiple_choice", "Domain_Identification"),
    "slot_identification": ("multiple_choice", "Slot_Identification"),
    ("event_causal_inference", "cause"): ("generation", "Event_Causal_Inference--Event_Cause_Inference"),
    ("event_causal_inference", "subsequent"): ("generation", "Event_Causal_Inference--Subsequent_Event_Inference"),
    ("event_causal_inference", "clipped_subsequent"):
        ("generation", "Event_Causal_Inference--Clipped_Subsequent_Event_Inference"),
}
LETTERS = "abcdefghijklmnopqrstuvwxyz"
MASK = "[MASK]"


class Skip(Exception):
    """An annotation the task applies to but cannot be built from (rejected with this reason)."""

    def __init__(self, code: str, reason: str):
        super().__init__(reason)
        self.code, self.reason = code, reason


def letter_labels(n: int) -> list[str]:
    return [f"({LETTERS[i]})" for i in range(n)]


def number_labels(n: int) -> list[str]:
    return [f"({i + 1})" for i in range(n)]


def dialogue_lines(turns, replace: tuple[int, int, int, str] | None = None) -> list[str]:
    """ "A: text" lines; `replace` = (utterance, start, end, new text) puts a phrase in place of another."""
    lines = []
    for i, t in enumerate(turns):
        text = t["text"]
        if replace is not None and replace[0] == i:
            text = text[:replace[1]] + replace[3] + text[replace[2]:]
        lines.append(f"{t['speaker']}: {text}")
    return lines


def clipped_lines(turns, utterance: int, start: int) -> list[str]:
    """The dialogue up to (not including) character `start` of `utterance`: the release cuts inside
    the utterance, at the phrase that shows the subsequent event, keeping what precedes it as is,
    the speaker's "A: " too when the phrase opens the utterance (checked on the release)."""
    return dialogue_lines(turns[:utterance]) + [f"{turns[utterance]['speaker']}: {turns[utterance]['text'][:start]}"]


def render_prompt(question: str, dialogue: list[str], labels: list[str], options: list[str]) -> str:
    """The paper's layout: question, dialogue, options, then the answer cue."""
    lines = [question, "对话：", *dialogue]
    if labels:
        lines.append("选项：" + " ".join(f"{lab} {opt}" for lab, opt in zip(labels, options)))
        lines.append("答案：正确的选项是")
    else:
        lines.append("答案：")
    return "\n".join(lines)


def item(a: dict, task: str, variant: str, dialogue: list[str], question: str, answer: str,
         options: list[str] | None = None, **extra) -> dict:
    options = options or []
    labels = letter_labels(len(options))
    label = labels[options.index(answer)] if options else None
    return {"id": f"{task}:{a['id']}:{variant}", "annotation_id": a["id"], "dialogue_id": a["dialogue_id"],
            "set": a["set"], "split": a["split"], "task": task, "variant": variant, "dialogue": dialogue,
            "question": question, "option_labels": labels, "options": options, "answer_label": label,
            "answer": answer, "prompt": render_prompt(question, dialogue, labels, options), **extra}


# ---------------------------------------------------------------- builders: annotation -> items
def filling_items(a: dict, seed: int) -> Iterator[dict]:
    """Knowledge filling: the phrase masked; options the phrase and its two conflict phrases (seeded order)."""
    p = a["phrases"][a["conflict_of"]]
    options = [p["text"], a["conflict_phrase_1"], a["conflict_phrase_2"]]
    if len(set(options)) < 3:
        raise Skip("options_not_distinct", "the phrase and its two conflict phrases are not three distinct options")
    options = [options[k] for k in compute.rng(seed, "knowledge_filling", a["id"]).permutation(3)]
    dialogue = dialogue_lines(a["turns"], (p["utterance"], p["start"], p["end"], MASK))
    yield item(a, "knowledge_filling", "mask", dialogue, QUESTIONS["knowledge_filling"], p["text"], options)


def generation_items(a: dict, seed: int) -> Iterator[dict]:
    """Knowledge generation: the value, from the dialogue and a question templated on instance and slot."""
    slot = ONTOLOGY[a["dimension"]][a["domain"]][a["slot"]]
    form = QUESTIONS["knowledge_generation"]["event" if a["dimension"] == "event" else "other"]
    q = form.format(instance=a["instance"], slot=slot)
    yield item(a, "knowledge_generation", a["dimension"], dialogue_lines(a["turns"]), q, a["value"])


def conflict_items(a: dict, seed: int) -> Iterator[dict]:
    """Conflict phrase detection: a conflict phrase in place of the phrase; the answer is that span,
    with its utterance and its character offset in the released dialogue line ("A: " included)."""
    p = a["phrases"][a["conflict_of"]]
    for k, variant in ((1, "minimal"), (2, "maximal")):
        phrase = a[f"conflict_phrase_{k}"]
        dialogue = dialogue_lines(a["turns"], (p["utterance"], p["start"], p["end"], phrase))
        offset = len(a["turns"][p["utterance"]]["speaker"]) + 2 + p["start"]
        yield item(a, "conflict_phrase_detection", variant, dialogue, QUESTIONS["conflict_phrase_detection"], phrase,
                   answer_utterance=p["utterance"], answer_start=offset)


def domain_items(a: dict, seed: int) -> Iterator[dict]:
    """Domain identification: MCQ over the dimension's domains (entity and event; social interaction has one)."""
    if len(ONTOLOGY[a["dimension"]]) < 2:
        return
    options = [DOMAIN_ZH[(a["dimension"], d)] for d in ONTOLOGY[a["dimension"]]]
    q = QUESTIONS["domain_identification"].format(instance=a["instance"], value=a["value"])
    yield item(a, "domain_identification", a["dimension"], dialogue_lines(a["turns"]), q,
               DOMAIN_ZH[(a["dimension"], a["domain"])], options)


def slot_items(a: dict, seed: int) -> Iterator[dict]:
    """Slot identification: MCQ over every slot of the dimension (the full option list)."""
    slots = {s: zh for ds in ONTOLOGY[a["dimension"]].values() for s, zh in ds.items()}
    q = QUESTIONS["slot_identification"].format(instance=a["instance"], value=a["value"])
    yield item(a, "slot_identification", a["dimension"], dialogue_lines(a["turns"]), q, slots[a["slot"]],
               list(slots.values()))


def causal_items(a: dict, seed: int) -> Iterator[dict]:
    """Event causal inference: the cause of an event (slot "event cause"); its subsequent event (slot
    "subsequent event"); and that subsequent event with the dialogue clipped where the phrase that shows
    it begins."""
    kind = CAUSAL_SLOTS.get((a["domain"], a["slot"])) if a["dimension"] == "event" else None
    if kind is None:
        return
    lines = dialogue_lines(a["turns"])
    if kind == "cause":
        yield item(a, "event_causal_inference", "cause", lines, QUESTIONS["cause"].format(instance=a["instance"]),
                   a["value"])
        return
    yield item(a, "event_causal_inference", "subsequent", lines, QUESTIONS["subsequent"].format(instance=a["instance"]),
               a["value"])
    value = next((p for p in a["phrases"] if p["role"] == "value"), None)
    if value is None:
        raise Skip("no_value_phrase", "no phrase with role 'value' marks where the subsequent event shows: "
                                      "the clipped item cannot be cut")
    event = next((p for p in a["phrases"] if p["role"] == "instance"), None)
    if event is not None and (value["utterance"], value["start"]) < (event["utterance"], event["end"]):
        raise Skip("value_before_event", "the subsequent event's phrase comes before the event's: clipping there "
                                         "would cut the event out")
    clipped = clipped_lines(a["turns"], value["utterance"], value["start"])
    yield item(a, "event_causal_inference", "clipped_subsequent", clipped,
               QUESTIONS["clipped_subsequent"].format(instance=a["instance"]), a["value"])


def release_path(row: dict) -> str:
    """`easy/generation/dev/Event_Causal_Inference--Event_Cause_Inference.jsonl`: the release's folders."""
    folder, name = RELEASE_FILES.get((row["task"], row["variant"])) or RELEASE_FILES[row["task"]]
    return f"{row['set'].lower()}/{folder}/{row['split']}/{name}.jsonl"


def released(row: dict, n: int) -> dict:
    """One item as the release writes it: its keys only, in its order."""
    out = {"id": n, "dialogue": list(row["dialogue"]), "question": row["question"]}
    for label, option in zip(row["option_labels"], row["options"]):
        out[label] = option
    out["answer"] = row["answer"] if pd.isna(row["answer_label"]) else [row["answer_label"], row["answer"]]
    return out


def release_files(data: pd.DataFrame, prefix: str = "") -> dict[str, bytes]:
    """JSON Lines in the release's layout, `id` counting from 0 in each file, items in build order."""
    files: dict[str, list[dict]] = {}
    for r in data.to_dict(orient="records"):
        files.setdefault(prefix + release_path(r), []).append(r)
    return {path: compute.jsonl_bytes(released(r, n) for n, r in enumerate(rows)) for path, rows in sorted(files.items())}


def build(annotations: pd.DataFrame, splits: pd.DataFrame, builder: Callable, seed: int) -> StageOutput:
    """Run one builder over every annotation (with its split): items, the annotations it could not
    build from (rejected with the reason), and the released files."""
    split_of = dict(zip(splits["id"], splits["split"]))
    items, rejected, not_applicable = [], [], 0
    for a in annotations.to_dict(orient="records"):
        a["split"] = split_of[a["id"]]
        try:
            built = list(builder(a, seed))
        except Skip as skip:
            rejected.append({"id": a["id"], "parent_id": a["id"], "dialogue_id": a["dialogue_id"],
                             "reason_code": skip.code, "reason": skip.reason})
            continue
        not_applicable += not built
        items += built
    data = pd.DataFrame(items)
    if not len(data):
        data = pd.DataFrame(columns=["id", "annotation_id", "dialogue_id", "set", "split", "task", "variant", "dialogue",
                                     "question", "option_labels", "options", "answer_label", "answer", "prompt"])
    counts = data.groupby(["set", "split", "variant"]).size() if len(data) else pd.Series(dtype=int)
    table = [{"set": s, "split": sp, "variant": v, "items": int(n)} for (s, sp, v), n in counts.items()]
    notes = {"items": len(data), "annotations_not_applicable": int(not_applicable), "cannot_build": len(rejected)}
    return StageOutput(data=data, rejected=pd.DataFrame(rejected) if rejected else None, rows_in=len(annotations),
                       notes=notes, files=release_files(data), tables={"items": table})


def knowledge_filling(annotations: pd.DataFrame, splits: pd.DataFrame, *, seed: int = 0) -> StageOutput:
    """MCQ: the dialogue with [MASK] in place of the phrase; options the phrase and its two conflict phrases.

    Args:
        seed: seed of each item's option order
    """
    return build(annotations, splits, filling_items, seed)


def knowledge_generation(annotations: pd.DataFrame, splits: pd.DataFrame) -> StageOutput:
    """Generation: the knowledge value from the dialogue and a question templated on instance and slot."""
    return build(annotations, splits, generation_items, 0)


def conflict_phrase_detection(annotations: pd.DataFrame, splits: pd.DataFrame) -> StageOutput:
    """Span: find the conflict phrase put in place of the original (one item per conflict phrase)."""
    return build(annotations, splits, conflict_items, 0)


def domain_identification(annotations: pd.DataFrame, splits: pd.DataFrame) -> StageOutput:
    """MCQ over the dimension's domains (entity and event dimensions)."""
    return build(annotations, splits, domain_items, 0)


def slot_identification(annotations: pd.DataFrame, splits: pd.DataFrame) -> StageOutput:
    """MCQ over every slot of the dimension."""
    return build(annotations, splits, slot_items, 0)


def event_causal_inference(annotations: pd.DataFrame, splits: pd.DataFrame) -> StageOutput:
    """Generation: cause; subsequent event; subsequent event with the dialogue clipped before it shows."""
    return build(annotations, splits, causal_items, 0)


# ---------------------------------------------------------------- perturbations (docs/method.md 3.6)
def perturb(row: dict, kind: str, seed: int) -> dict:
    """One MCQ item with its options re-indexed (a, b, c -> 1, 2, 3), shuffled (a seeded order other
    than the original), or both; the answer label follows its text."""
    options = list(row["options"])
    if kind in ("shuffle", "reindex_shuffle") and len(options) > 1:
        gen = compute.rng(seed, "perturbations", row["id"])
        order = list(range(len(options)))
        while order == list(range(len(options))):
            order = gen.permutation(len(options)).tolist()
        options = [options[k] for k in order]
    labels = number_labels(len(options)) if kind in ("reindex", "reindex_shuffle") else letter_labels(len(options))
    label = labels[options.index(row["answer"])]
    out = dict(row, id=f"{row['id']}:{kind}", item_id=row["id"], perturbation=kind, option_labels=labels,
               options=options, answer_label=label)
    out["prompt"] = render_prompt(row["question"], list(row["dialogue"]), labels, options)
    return out


def perturbations(knowledge_filling: pd.DataFrame, domain_identification: pd.DataFrame,
                  slot_identification: pd.DataFrame, *, kinds: list[str] = ["reindex", "shuffle", "reindex_shuffle"],
                  seed: int = 0) -> StageOutput:
    """Every item of the multiple-choice tasks (the three with options) under each perturbation.

    Args:
        kinds: reindex (option labels a, b, c -> 1, 2, 3), shuffle (options in another seeded order),
            reindex_shuffle (both)
        seed: seed of the shuffles
    """
    mcq_tasks = (knowledge_filling, domain_identification, slot_identification)
    rows = [perturb(r, k, seed) for frame in mcq_tasks for r in frame.to_dict(orient="records") for k in kinds]
    data = pd.DataFrame(rows)
    files = {}
    for kind, g in (data.groupby("perturbation", sort=True) if len(data) else []):
        files.update(release_files(g.drop(columns=["item_id", "perturbation"]), f"{kind}/"))
    counts = data.groupby(["task", "perturbation"]).size() if len(data) else pd.Series(dtype=int)
    return StageOutput(data=data, rows_in=sum(len(f) for f in mcq_tasks), files=files,
                       notes={"items": len(data), "kinds": kinds},
                       tables={"perturbed": [{"task": t, "perturbation": k, "items": int(n)}
                                             for (t, k), n in counts.items()]})
