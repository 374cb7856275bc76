"""SEEDS 3.4: import the knowledge annotations (made outside the pipeline) and check each against
the ontology and its dialogue. Each rule states one check and returns a (reason_code, reason) or None;
a record failing any is rejected with the first failure."""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Callable

import pandas as pd

from csk.params import InputPath
from csk.runtime import StageOutput
from data_contracts.corecode import DOMAIN_SYNONYMS, ONTOLOGY, SETS
from readers import read_corecode_annotations

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


def annotations(screening: pd.DataFrame, *, release: InputPath = None, lenient: bool = True,
                max_minimal_edit: int = 2) -> StageOutput:
    """Annotation records that pass every rule, with their dialogue; domains written as the paper's.

    Args:
        release: the annotations, JSON Lines, one knowledge item per line (see `read_corecode_annotations`)
        lenient: reject a malformed record with its reason and go on; false: stop at the first one
        max_minimal_edit: words conflict phrase 1 may change (the paper: one or two)
    """
    if not release:
        from csk.errors import ConfigError

        raise ConfigError("corecode.annotations: set `release` to the annotations file (JSON Lines)")
    read = read_corecode_annotations(release, lenient=lenient)
    dialogues = dict(zip(screening["id"], screening["turns"]))
    kept, rejected = [], [dict(r, dialogue_id=None, parent_id=None) for r in read.rejected]
    rules = [r if r is not minimal_edit else (lambda rec: minimal_edit(rec, max_minimal_edit)) for r in RULES]
    seen: set[str] = set()
    for rec in read.rows:
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
               "source_locator"]
    data = pd.DataFrame(kept, columns=columns)
    rej = None
    if rejected:  # the phrases as JSON text: rows rejected by the reader have none
        rej = pd.DataFrame(rejected).drop(columns=["turns"], errors="ignore")
        if "phrases" in rej.columns:
            rej["phrases"] = [json.dumps(p, ensure_ascii=False) if isinstance(p, list) else None for p in rej["phrases"]]
    notes = {"records": read.records, "kept": len(kept), "rejected": len(rejected),
             "per_set": data["set"].value_counts().sort_index().to_dict() if len(data) else {}}
    return StageOutput(data=data, rejected=rej, rows_in=read.records, notes=notes)
