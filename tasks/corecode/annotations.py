"""docs/method.md 3.4: import the knowledge annotations and check each against the ontology and its dialogue.
Each rule states one check and returns a (reason_code, reason) or None; a record failing any is
rejected with the first failure.

The annotations come from a release (JSON Lines, `read_corecode_annotations`) and / or from Label
Studio's JSON export of the `knowledge` labeling step (tasks/corecode/labeling.py): there every span an
annotator labelled over the dialogue is one knowledge item, its label "domain: slot", its dimension,
role, instance, value and two conflict phrases given by per-region controls (results that share the
span's region `id`). `label_studio_items` turns each span into a record of the release reader's shape,
which then goes through the same rules, keeping who annotated it (`tasks.labeling.ANNOTATION_COLUMNS`;
`task_id`: the row its task was made from, the dialogue) and where in the export it was read
(source_file = the export, source_record = its task, source_locator = task, annotation and region).
Skipped or empty annotations are not knowledge items: they go to `rejected_annotations.parquet`, not to
the stage's rejected rows. Where two annotators labelled one dialogue, their span agreement goes into
the notes (`agreement`)."""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from itertools import combinations

import numpy as np
import pandas as pd

from csk.errors import InputError
from csk.params import InputPath
from csk.runtime import StageOutput, to_parquet_bytes
from data_contracts.corecode import DOMAIN_SYNONYMS, DOMAIN_ZH, ONTOLOGY, SETS
from readers.corecode import read_corecode_annotations
from readers.base import load_json
from tasks.labeling import ANNOTATION_COLUMNS, export_rows, is_export, light_kappa, observed_agreement

Rule = Callable[[dict], "tuple[str, str] | None"]
SPEAKER_LETTER = re.compile(r"(?<![A-Za-z])[AB](?![A-Za-z])")
XY_LETTER = re.compile(r"(?<![A-Za-z])[xy](?![A-Za-z])")


def words(text: str) -> list[str]:
    import logging

    import jieba

    jieba.setLogLevel(logging.WARNING)
    return [w for w in jieba.cut(text, HMM=False) if w.strip()]


def words_edited(original: str, edited: str) -> int:
    """Words changed between two phrases (jieba words; a replaced run counts its longer side)."""
    a, b = words(original), words(edited)
    ops = difflib.SequenceMatcher(a=a, b=b, autojunk=False).get_opcodes()
    return sum(max(i2 - i1, j2 - j1) for op, i1, i2, j1, j2 in ops if op != "equal")


def known_set(r: dict):
    if r["set"] not in SETS:
        return "unknown_set", f"set {r['set']!r} is neither EASY nor HARD"


def known_dimension(r: dict):
    if r["dimension"] not in ONTOLOGY:
        return "unknown_dimension", f"dimension {r['dimension']!r} is not one of {', '.join(ONTOLOGY)}"


def domain_of_dimension(r: dict):
    domains = ONTOLOGY[r["dimension"]]
    if r["domain"] in domains:
        return None
    elsewhere = [dim for dim, ds in ONTOLOGY.items() if r["domain"] in ds]
    if elsewhere:
        return "wrong_domain", (f"domain {r['domain']!r} belongs to the {' / '.join(elsewhere)} dimension, not "
                                f"{r['dimension']!r}")
    return "unknown_domain", f"domain {r['domain']!r} is not in the ontology ({r['dimension']}: {', '.join(domains)})"


def slot_of_domain(r: dict):
    slots = ONTOLOGY[r["dimension"]][r["domain"]]
    if r["slot"] in slots:
        return None
    elsewhere = [f"{dim}/{d}" for dim, ds in ONTOLOGY.items() for d, ss in ds.items() if r["slot"] in ss]
    if elsewhere:
        return "wrong_slot", f"slot {r['slot']!r} belongs to {', '.join(elsewhere)}, not {r['dimension']}/{r['domain']}"
    return "unknown_slot", f"slot {r['slot']!r} is not in the ontology ({r['domain']}: {', '.join(slots)})"


def phrases_in_dialogue(r: dict):
    turns = r["turns"]
    for j, p in enumerate(r["phrases"]):
        if not 0 <= p["utterance"] < len(turns):
            return "phrase_not_in_dialogue", f"phrase {j} names utterance {p['utterance']}; the dialogue has {len(turns)}"
        text = turns[p["utterance"]]["text"]
        if text[p["start"]:p["end"]] != p["text"]:
            where = text.find(p["text"])
            hint = f" (it is at {where})" if where >= 0 else " (it is nowhere in that utterance)"
            return "phrase_not_in_dialogue", (f"phrase {j} {p['text']!r} is not at characters {p['start']}-{p['end']} "
                                              f"of utterance {p['utterance']}{hint}")


def conflicts_differ(r: dict):
    original = r["phrases"][r["conflict_of"]]["text"]
    for k in (1, 2):
        if r[f"conflict_phrase_{k}"].strip() == original.strip():
            return "conflict_equals_original", f"conflict phrase {k} equals the phrase it should contradict ({original!r})"


def minimal_edit(r: dict, max_words: int = 2):
    original = r["phrases"][r["conflict_of"]]["text"]
    n = words_edited(original, r["conflict_phrase_1"])
    if n > max_words:
        return "conflict_edit_too_large", (f"conflict phrase 1 edits {n} words of {original!r} "
                                           f"(a minimal edit changes one or two)")


def subject_letters(r: dict):
    text = r["instance"] + " " + r["value"]
    if r["set"] == "HARD" and SPEAKER_LETTER.search(text):
        return "speaker_letter_in_hard", "a HARD-set item names speakers A / B; the HARD set writes x (subject) and y"
    if r["set"] == "EASY" and XY_LETTER.search(text):
        return "xy_in_easy", "an EASY-set item writes x / y; the EASY set names the speakers A / B"


RULES: tuple[Rule, ...] = (known_set, known_dimension, domain_of_dimension, slot_of_domain, phrases_in_dialogue,
                           conflicts_differ, minimal_edit, subject_letters)


# ---------------------------------------------------------------- Label Studio: the `knowledge` step's export
# The controls of the step's interface (tasks/corecode/labeling.py builds it from these): the span labels,
# the per-region controls tied to a span by its region id, and the set (one per annotation).
SPAN_CONTROL, SET_CONTROL = "knowledge", "set"
REGION_TEXTS = ("instance", "value", "conflict_phrase_1", "conflict_phrase_2")  # per-region TextAreas
REGION_CHOICES = ("dimension", "role")  # per-region Choices
DIMENSION_LABELS = {"entity": "实体 entity", "event": "事件 event", "social interaction": "社会互动 social interaction"}
ROLE_LABELS = {"instance": "实例 instance", "value": "值 value"}
SET_LABELS = {"EASY": "EASY：主语写 A / B", "HARD": "HARD：主语写 x，宾语写 y"}
SLOT_PLACE = {slot: (dim, domain) for dim, ds in ONTOLOGY.items() for domain, ss in ds.items() for slot in ss}


def span_label(domain: str, slot: str) -> str:
    """What a span's label saves ("domain: slot": the Label's alias)."""
    return f"{domain}: {slot}"


def span_label_text(dimension: str, domain: str, slot: str) -> str:
    """What the annotator reads on the label: the Chinese names, then the saved "domain: slot"."""
    return f"{DOMAIN_ZH[(dimension, domain)]}：{ONTOLOGY[dimension][domain][slot]} ({span_label(domain, slot)})"


def parse_span_label(label: str) -> tuple[str, str] | None:
    """(domain, slot) of a span's label, saved as its alias ("cause: event cause") or its shown text
    ("原因：事件原因 (cause: event cause)"); None when it is neither. The ontology is the rules' check."""
    m = re.search(r"\(([^()]*:[^()]*)\)\s*$", label)
    domain, sep, slot = (m.group(1) if m else label).partition(":")
    if not sep or not domain.strip() or not slot.strip():
        return None
    return DOMAIN_SYNONYMS.get(domain.strip(), domain.strip()), slot.strip()


def _choice(chosen: str, shown: dict[str, str]) -> str:
    """A Choices value as saved (its alias) or as shown."""
    return next((k for k, v in shown.items() if chosen in (k, v)), chosen)


def dialogue_text(turns) -> str:
    """The dialogue as the `knowledge` task shows it: one "A: ..." line per turn (span offsets count in it)."""
    return "\n".join(f"{t['speaker']}: {t['text']}" for t in turns)


def turn_bounds(turns) -> list[tuple[int, int]]:
    """(start, end) of each turn's text in `dialogue_text(turns)` (after its "A: ")."""
    out, at = [], 0
    for t in turns:
        start = at + len(str(t["speaker"])) + 2
        out.append((start, start + len(str(t["text"]))))
        at = start + len(str(t["text"])) + 1
    return out


def _utf16_to_index(text: str, unit: int) -> int | None:
    """A JavaScript string offset (UTF-16 units, as the browser counts) as a Python one."""
    units = 0
    for i, ch in enumerate(text):
        if units == unit:
            return i
        units += 2 if ord(ch) > 0xFFFF else 1
    return len(text) if units == unit else None


def locate_span(text: str, bounds: list[tuple[int, int]], start, end, said: str | None):
    """(utterance, start, end) in that utterance's text of a span over the dialogue text, or a failure
    (reason_code, reason). Offsets the browser counted in UTF-16 units are converted; white space at
    either end of the selection is trimmed (a double click takes the line break along)."""
    if not isinstance(start, int) or not isinstance(end, int) or isinstance(start, bool) or not 0 <= start < end:
        return "span_not_in_dialogue", f"the span has no character offsets ({start!r}-{end!r})"
    if said is not None and text[start:end] != said:
        s16, e16 = _utf16_to_index(text, start), _utf16_to_index(text, end)
        if s16 is None or e16 is None or text[s16:e16] != said:
            return "span_not_in_dialogue", (f"the span {said!r} is not at characters {start}-{end} of the dialogue "
                                            f"its task showed")
        start, end = s16, e16
    if end > len(text):
        return "span_not_in_dialogue", f"the span ends at {end}, past the dialogue's {len(text)} characters"
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    if start == end:
        return "span_not_in_dialogue", "the span holds only white space"
    for k, (a, b) in enumerate(bounds):
        if a <= start and end <= b:
            return k, start - a, end - a
    return "span_not_in_one_turn", (f"the span {text[start:end]!r} is not inside one turn's text (it crosses a "
                                    "line or takes in a speaker's \"A: \")")


def _region_values(result: list) -> tuple[list[dict], dict, dict, dict]:
    """(spans, per-region values by region id, those without an id by (start, end), task-level values).
    A per-region result repeats its span's `id` (and its start / end): the grouping readers.label_studio's
    values_of gives up, so it is made here from the raw result."""
    spans, by_id, by_offsets, task = [], {}, {}, {}
    for r in result:
        if not isinstance(r, dict):
            continue
        name, kind, value = r.get("from_name"), str(r.get("type", "")).lower(), r.get("value") or {}
        if name == SPAN_CONTROL and kind.endswith("labels"):
            spans.append(r)
            continue
        if name in REGION_TEXTS:
            texts = value.get("text", [])
            got = " ".join(str(t).strip() for t in ([texts] if isinstance(texts, str) else texts) if str(t).strip())
        elif name in REGION_CHOICES or name == SET_CONTROL:
            got = [str(c) for c in value.get("choices", [])]
        else:
            continue
        if name == SET_CONTROL:
            task[name] = got
            continue
        if r.get("id") is not None:
            by_id.setdefault(r["id"], {})[name] = got
        elif "start" in value and "end" in value:  # made through the API without region ids: tied by offsets
            by_offsets.setdefault((value["start"], value["end"]), {})[name] = got
    return spans, by_id, by_offsets, task


@dataclass
class LabelStudioItems:
    """What `label_studio_items` read: knowledge items (records of the release reader's shape), items
    rejected before the rules, annotations that gave no item, and every span placed in its dialogue
    (for the agreement)."""

    items: list[dict] = field(default_factory=list)
    rejected: list[dict] = field(default_factory=list)
    annotations_rejected: list[dict] = field(default_factory=list)
    spans: list[dict] = field(default_factory=list)
    annotations: int = 0


def label_studio_items(path: str, screening: pd.DataFrame, lenient: bool = True) -> LabelStudioItems:
    """One knowledge item per labelled span of the `knowledge` step's export (see the module's doc)."""
    rows, bad = export_rows(path, set(screening["id"].astype(str)), lenient=lenient)
    tasks = load_json(path)
    turns_of = dict(zip(screening["id"].astype(str), screening["turns"]))
    out = LabelStudioItems(annotations_rejected=list(bad), annotations=len(rows) + len(bad))
    for r in rows:
        lineage = {k: r[k] for k in (*ANNOTATION_COLUMNS, "source_file", "source_record", "source_locator")}
        task = tasks[r["source_record"]]
        result = next(a.get("result") or [] for a in task["annotations"]
                      if str(a.get("id")) == str(r["annotation_id"]))
        turns = list(turns_of[r["row_id"]])
        text = dialogue_text(turns)
        if task["data"].get("dialogue") != text:
            out.annotations_rejected.append({**lineage, "id": r["id"], "row_id": r["row_id"],
                                             "reason_code": "dialogue_changed",
                                             "reason": f"the task showed another text than this run's dialogue "
                                                       f"{r['row_id']} (the project was made from another run)"})
            continue
        spans, by_id, by_offsets, task_values = _region_values(result)
        if not spans:
            out.annotations_rejected.append({**lineage, "id": r["id"], "row_id": r["row_id"],
                                             "reason_code": "no_knowledge_items",
                                             "reason": f"annotator {r['annotator']} labelled no phrase of "
                                                       f"dialogue {r['row_id']}"})
            continue
        bounds = turn_bounds(turns)
        chosen_set = task_values.get(SET_CONTROL) or []
        for n, sp in enumerate(spans):
            value = sp.get("value") or {}
            rid = sp.get("id")
            region = by_id.get(rid) if rid is not None and rid in by_id else by_offsets.get(
                (value.get("start"), value.get("end")), {})
            labels = list(value.get(str(sp.get("type", "")).lower(), value.get("labels", [])))
            parsed = parse_span_label(labels[0]) if len(labels) == 1 else None
            dims, roles = region.get("dimension") or [], region.get("role") or []
            rec = {"id": f"{r['row_id']}/a{r['annotation_id']}/k{n}", "dialogue_id": r["row_id"],
                   "task_id": r["row_id"],
                   "set": _choice(chosen_set[0], SET_LABELS) if chosen_set else "",
                   "dimension": _choice(dims[0], DIMENSION_LABELS) if dims else "",
                   "instance": region.get("instance", ""), "domain": parsed[0] if parsed else "",
                   "slot": parsed[1] if parsed else "", "value": region.get("value", ""), "phrases": None,
                   "conflict_of": 0, "conflict_phrase_1": region.get("conflict_phrase_1", ""),
                   "conflict_phrase_2": region.get("conflict_phrase_2", ""),
                   **lineage, "source_locator": f"{r['source_locator']}, region {rid if rid is not None else n}"}
            failure = None
            place = locate_span(text, bounds, value.get("start"), value.get("end"), value.get("text"))
            if not isinstance(place[0], int):
                failure = place
            elif parsed is None:
                failure = ("no_domain_slot", f"the span's labels {labels!r} are not one \"domain: slot\"")
            else:
                k, a, b = place
                rec["phrases"] = [{"role": _choice(roles[0], ROLE_LABELS) if roles else "", "utterance": k,
                                   "start": a, "end": b, "text": turns[k]["text"][a:b]}]
                dim_of = SLOT_PLACE.get(parsed[1], ("?", parsed[0]))[0]
                out.spans.append({"dialogue_id": r["row_id"], "annotator": r["annotator"], "utterance": k,
                                  "start": a, "end": b, "label": span_label(*parsed),
                                  "domain": f"{dim_of}/{parsed[0]}"})
                missing = [f for f in ("set", "dimension", "instance", "value", "conflict_phrase_1",
                                       "conflict_phrase_2") if not rec[f]] + ([] if roles else ["role"])
                if missing:
                    failure = ("incomplete_item", f"the item on {rec['phrases'][0]['text']!r} lacks "
                                                  f"{', '.join(missing)}")
                elif rec["phrases"][0]["role"] not in ROLE_LABELS:
                    failure = ("unknown_role", f"role {rec['phrases'][0]['role']!r} is neither instance nor value")
            if failure:
                out.rejected.append(dict(rec, parent_id=r["row_id"], reason_code=failure[0], reason=failure[1]))
            else:
                out.items.append(rec)
    return out


def _overlap(x: dict, y: dict) -> int:
    return max(0, min(x["end"], y["end"]) - max(x["start"], y["start"])) if x["utterance"] == y["utterance"] else 0


def span_agreement(spans: list[dict]) -> dict:
    """Agreement of annotators who labelled the same dialogue. `span_agreement`: the share of one
    annotator's spans the other marked too (overlapping characters, the same "domain: slot"), averaged
    both ways, then over every pair of annotators of every dialogue. Spans overlapping across a pair
    are aligned one to one (most overlap first); `domain_light_kappa` is Light's kappa over the domains of
    the aligned spans (dimension/domain, from the label), `domain_observed_agreement` the share of
    aligned spans with the same domain."""
    frame = pd.DataFrame(spans, columns=["dialogue_id", "annotator", "utterance", "start", "end", "label", "domain"])
    shares, labels, pairs = [], [], 0
    compared = 0
    for did, g in frame.groupby("dialogue_id", sort=True):
        by = {a: x.to_dict(orient="records") for a, x in g.groupby("annotator", sort=True)}
        if len(by) < 2:
            continue
        compared += 1
        for a, b in combinations(sorted(by), 2):
            pairs += 1
            xs, ys = by[a], by[b]
            one = np.mean([any(_overlap(x, y) and x["label"] == y["label"] for y in ys) for x in xs])
            two = np.mean([any(_overlap(y, x) and x["label"] == y["label"] for x in xs) for y in ys])
            shares.append((float(one) + float(two)) / 2)
            candidates = sorted(((_overlap(x, y), i, j) for i, x in enumerate(xs) for j, y in enumerate(ys)
                                 if _overlap(x, y)), key=lambda c: (-c[0], c[1], c[2]))
            used_x, used_y = set(), set()
            for _, i, j in candidates:
                if i in used_x or j in used_y:
                    continue
                used_x.add(i)
                used_y.add(j)
                item = f"{did}|{a}|{b}|{i}"
                labels += [{"row_id": item, "annotator": a, "label": xs[i]["domain"]},
                           {"row_id": item, "annotator": b, "label": ys[j]["domain"]}]
    aligned = pd.DataFrame(labels, columns=["row_id", "annotator", "label"])
    return {"annotators": int(frame["annotator"].nunique()), "spans": len(frame), "dialogues_compared": compared,
            "annotator_pairs": pairs, "span_agreement": float(np.mean(shares)) if shares else None,
            "aligned_spans": len(aligned) // 2,
            "domain_light_kappa": light_kappa(aligned) if len(aligned) else None,
            "domain_observed_agreement": observed_agreement(aligned) if len(aligned) else None}


def annotations(screening: pd.DataFrame, *, release: InputPath = None, label_studio: InputPath = None,
                lenient: bool = True, max_minimal_edit: int = 2) -> StageOutput:
    """Annotation records that pass every rule, with their dialogue; domains written as the paper's.

    Args:
        release: the annotations, JSON Lines, one knowledge item per line (see `read_corecode_annotations`)
        label_studio: Label Studio's JSON export of the `knowledge` labeling step (`csk label pull corecode
            knowledge`): each labelled span is one more knowledge item, with its annotator; read besides `release`
        lenient: reject a malformed record with its reason and go on; false: stop at the first one
        max_minimal_edit: words conflict phrase 1 may change (the paper: one or two)
    """
    if not release and not label_studio:
        from csk.errors import ConfigError

        raise ConfigError("corecode.annotations: set `release` to the annotations file (JSON Lines) or "
                          "`label_studio` to the knowledge step's Label Studio export")
    records, rejected, rows_in = [], [], 0
    if release:
        read = read_corecode_annotations(release, lenient=lenient)
        records += read.rows
        rejected += [dict(r, dialogue_id=None, parent_id=None) for r in read.rejected]
        rows_in += read.records
    ls = None
    if label_studio:
        if not is_export(label_studio):
            raise InputError(str(label_studio), None, "expected Label Studio's JSON export of the knowledge step "
                             "(csk label pull corecode knowledge --out FILE.json)")
        ls = label_studio_items(label_studio, screening, lenient=lenient)
        records += ls.items
        rejected += ls.rejected
        rows_in += len(ls.items) + len(ls.rejected)
    dialogues = dict(zip(screening["id"], screening["turns"]))
    kept = []
    rules = [r if r is not minimal_edit else (lambda rec: minimal_edit(rec, max_minimal_edit)) for r in RULES]
    seen: set[str] = set()
    for rec in records:
        rec = dict(rec, domain=DOMAIN_SYNONYMS.get(rec["domain"], rec["domain"]))
        if rec["id"] in seen:  # a repeated id would make lineage ambiguous: the first record wins
            rejected.append(dict(rec, parent_id=None, reason_code="duplicate_id",
                                 reason=f"id {rec['id']!r} was already used by an earlier record of this file"))
            continue
        seen.add(rec["id"])
        if rec["dialogue_id"] not in dialogues:
            rejected.append(dict(rec, parent_id=None, reason_code="dialogue_not_screened",
                                 reason=f"dialogue {rec['dialogue_id']!r} is not among the screened dialogues"))
            continue
        rec["turns"] = dialogues[rec["dialogue_id"]]
        failure = next((f for f in (rule(rec) for rule in rules) if f), None)
        if failure:
            rejected.append(dict(rec, parent_id=rec["dialogue_id"], reason_code=failure[0], reason=failure[1]))
        else:
            kept.append(rec)
    columns = ["id", "dialogue_id", "set", "dimension", "instance", "domain", "slot", "value", "phrases",
               "conflict_of", "conflict_phrase_1", "conflict_phrase_2", "turns", "source_file", "source_record",
               "source_locator", *(["task_id", *ANNOTATION_COLUMNS] if ls is not None else [])]
    data = _annotation_types(pd.DataFrame(kept, columns=columns))
    rej = None
    if rejected:  # the phrases as JSON text: rows rejected by the reader have none
        rej = _annotation_types(pd.DataFrame(rejected).drop(columns=["turns"], errors="ignore"))
        if "phrases" in rej.columns:
            rej["phrases"] = [json.dumps(p, ensure_ascii=False) if isinstance(p, list) else None for p in rej["phrases"]]
    notes = {"records": rows_in, "kept": len(kept), "rejected": len(rejected),
             "per_set": data["set"].value_counts().sort_index().to_dict() if len(data) else {}}
    files, tables = {}, {}
    if ls is not None:
        from_ls = data["annotation_id"].notna() if len(data) else pd.Series([], dtype=bool)
        notes["label_studio"] = {"export": str(label_studio), "annotations": ls.annotations,
                                 "rejected_annotations": len(ls.annotations_rejected),
                                 "items": len(ls.items) + len(ls.rejected), "kept": int(from_ls.sum()),
                                 "annotators": int(data.loc[from_ls, "annotator"].nunique()) if len(data) else 0}
        notes["agreement"] = span_agreement(ls.spans)
        tables["agreement"] = [{"measure": k, "value": v} for k, v in notes["agreement"].items()]
        if ls.annotations_rejected:
            files["rejected_annotations.parquet"] = to_parquet_bytes(_annotation_types(
                pd.DataFrame(ls.annotations_rejected).astype({"reason": str})))
    return StageOutput(data=data, rejected=rej, rows_in=rows_in, notes=notes, files=files, tables=tables)


def _annotation_types(df: pd.DataFrame) -> pd.DataFrame:
    """Label Studio's ids as nullable integers, its times as text and lead times as floats (rows from a
    release have none)."""
    for c in ("annotation_id", "ls_task_id"):
        if c in df.columns:
            df[c] = df[c].astype("Int64")
    for c in ("task_id", "annotator", "created_at", "updated_at"):
        if c in df.columns:
            df[c] = df[c].astype(object).where(df[c].notna(), None)
    if "lead_time" in df.columns:
        df["lead_time"] = df["lead_time"].astype(float)
    return df
