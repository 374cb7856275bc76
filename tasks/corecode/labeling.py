"""CORECODE's human step as a Label Studio project (docs/method.md 3.4): annotators read a screened dialogue and
mark its commonsense knowledge items.

* `knowledge`: one task per screened dialogue (the `screening` rows), shown as plain text, one "A: ..."
  line per turn (span offsets are characters of that text). The annotator selects the phrase a
  knowledge item rests on and labels it with its "domain: slot" (36 labels, grouped by dimension and
  coloured by domain, Chinese names first); with the span selected, per-region controls give its
  dimension (entity / event / social interaction), the phrase's role (the item's instance or its
  value), the instance, the value and the two commonsense-conflict phrases that replace the phrase
  (1: a minimal edit of one or two words; 2: a maximal edit). Once per dialogue: the set (EASY writes
  the speakers A / B, HARD writes x for the subject and y for the object).

Read back by `annotations.label_studio`: every span is one knowledge item, checked by the same rules
as the release's (tasks/corecode/annotations.py); two annotators per dialogue give the span agreement.
"""

from __future__ import annotations

from html import escape

from csk.label_studio import LabelingStep
from data_contracts.corecode import DOMAIN_ZH, ONTOLOGY
from tasks.corecode.annotations import (
    DIMENSION_LABELS,
    REGION_TEXTS,
    ROLE_LABELS,
    SET_CONTROL,
    SET_LABELS,
    SPAN_CONTROL,
    annotations,
    dialogue_text,
    span_label,
    span_label_text,
)
from tasks.corecode.screening import screening

# one background per domain (the span's highlight), light enough to read Chinese text through
COLOURS = {("entity", "attribute"): "#ffb86b", ("entity", "comparison"): "#f7e463", ("entity", "space"): "#9be58c",
           ("event", "prerequisite"): "#7fdcf0", ("event", "cause"): "#8fb4ff", ("event", "consequence"): "#b9a6ff",
           ("event", "time"): "#f5a3f0", ("event", "space"): "#5fd3b0",
           ("social interaction", "social norms"): "#ff9c9c"}
DIMENSION_ZH = {"entity": "实体", "event": "事件", "social interaction": "社会互动"}
HEADERS = {"dimension": "维度 dimension", "role": "短语的角色 the phrase is the item's", "instance": "实例 instance",
           "value": "值 value", "conflict_phrase_1": "冲突短语1 conflict phrase 1 (minimal edit)",
           "conflict_phrase_2": "冲突短语2 conflict phrase 2 (maximal edit)"}
PLACEHOLDERS = {"instance": "这条知识关于什么（如：外面下雨）",
                "value": "槽位的取值（如：B提醒A出门带伞）",
                "conflict_phrase_1": "替换所选短语：只改一两个词，使其违背常识",
                "conflict_phrase_2": "替换所选短语：大幅改写，使其违背常识"}


def _attr(value: str) -> str:
    return escape(value, quote=True)


def _labels() -> str:
    groups = []
    for dim, domains in ONTOLOGY.items():
        rows = [f'      <Label value="{_attr(span_label_text(dim, d, s))}" alias="{_attr(span_label(d, s))}" '
                f'background="{COLOURS[(dim, d)]}" hint="{_attr(f"{dim} / {DOMAIN_ZH[(dim, d)]} {d} / {zh} {s}")}"/>'
                for d, slots in domains.items() for s, zh in slots.items()]
        groups.append(f'    <View>\n      <Header value="{_attr(f"{DIMENSION_ZH[dim]} {dim}")}" size="6"/>\n'
                      + "\n".join(rows) + "\n    </View>")
    return "\n".join(groups)


def _choices(name: str, shown: dict[str, str], per_region: bool) -> str:
    region = ' perRegion="true"' if per_region else ""
    items = "\n".join(f'      <Choice value="{_attr(v)}" alias="{_attr(k)}"/>' for k, v in shown.items())
    return (f'    <Choices name="{name}" toName="dialogue"{region} choice="single-radio" required="true" '
            f'showInline="true">\n{items}\n    </Choices>')


def _region_fields() -> str:
    """The selected span's item: each per-region control under its header (a filled box hides its placeholder)."""
    fields = [f'    <Header value="{_attr(HEADERS[name])}" size="6"/>\n{_choices(name, shown, per_region=True)}'
              for name, shown in (("dimension", DIMENSION_LABELS), ("role", ROLE_LABELS))]
    fields += [f'    <Header value="{_attr(HEADERS[name])}" size="6"/>\n'
               f'    <TextArea name="{name}" toName="dialogue" perRegion="true" required="true" editable="true" '
               f'maxSubmissions="1" rows="1" placeholder="{_attr(PLACEHOLDERS[name])}"/>' for name in REGION_TEXTS]
    return "\n".join(fields)


# The dialogue stays in view (sticky) while the annotator scrolls to the labels and the item's fields.
CONFIG = f"""<View>
  <Header value="读对话，选出每条常识知识所依据的短语并标上它的“领域：槽位”；选中短语后在下方填写这条知识" size="5"/>
  <View style="position:sticky;top:0;z-index:10;white-space:pre-wrap;font-size:16px;line-height:1.8;padding:8px;background:#fafafa;border-bottom:1px solid #ddd">
    <Text name="dialogue" value="$dialogue"/>
  </View>
  <Header value="领域：槽位 (domain: slot)" size="6"/>
  <Labels name="{SPAN_CONTROL}" toName="dialogue" choice="single">
{_labels()}
  </Labels>
  <Header value="本对话的写法 (set)" size="6"/>
{_choices(SET_CONTROL, SET_LABELS, per_region=False)}
  <View visibleWhen="region-selected" style="background:#f3f7ff;padding:6px;border-left:4px solid #8fb4ff">
    <Header value="选中短语的知识 (the selected phrase's knowledge item)" size="5"/>
{_region_fields()}
  </View>
</View>"""


def _task(row: dict) -> dict:
    return {"dialogue": dialogue_text(list(row["turns"])), "dialogue_id": str(row["id"])}


INSTRUCTIONS = (
    "每条常识知识：在对话中选出它所依据的短语（不含“A: ”，不跨行），标上“领域：槽位”；再选中该短语，选维度"
    "（实体 / 事件 / 社会互动）和短语的角色（实例 / 值），填写实例、值和两个冲突短语（1：只改一两个词；2：大幅改写），"
    "两者都须违背常识。每段对话选一次写法：EASY 用 A / B 指说话人，HARD 用 x 指主语、y 指宾语。\n"
    "For each knowledge item: select the dialogue phrase it rests on (inside one turn, without the \"A: \") and "
    "label it with its domain: slot; with the phrase selected, choose its dimension and role (instance / value) "
    "and write the instance, the value and two conflict phrases that replace the phrase and break commonsense "
    "(1: change one or two words; 2: rewrite it). Once per dialogue choose the set: EASY names the speakers A / B, "
    "HARD writes x for the subject and y for the object.")

STEPS = (
    LabelingStep("knowledge", stage=screening, config=CONFIG, data=_task, imports=(annotations, "label_studio"),
                 annotators=2, instructions=INSTRUCTIONS),
)
