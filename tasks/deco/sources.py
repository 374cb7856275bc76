"""docs/method.md 4.1: DECO's samples, a history of at most 4 consecutive utterances and a response to it.

Histories are windows over DailyDialog, PersonaChat and Topical-Chat dialogues in their release
layouts; responses come from dialogue systems or people outside the pipeline and are imported from
a table (`history_id`, `response`, `system`); the next utterance of a window is the human response.
Released samples (DECO JSON, ACCENT's ConTurE subset) come in as they are, tuples and ratings kept.
"""

from __future__ import annotations


import pandas as pd

from csk.compute import jsonl_bytes
from csk.errors import ConfigError, InputError
from csk.params import InputFile, InputPath
from csk.runtime import StageOutput
from readers.dailydialog import read_dailydialog
from readers.deco import read_conture, read_deco
from readers.personachat import read_personachat
from readers.topicalchat import read_topicalchat
from readers.base import ReadResult, csv_rows, iter_json_lines, require_file
from readers.deco import UTT, WINDOW, join_history
from tasks.sources import MAX_REJECTED_SHARE, Share, stop_unless_readable, unreadable

DIALOGUE_READERS = {"dailydialog": (read_dailydialog, "DailyDialog"), "personachat": (read_personachat, "PersonaChat"),
                    "topicalchat": (read_topicalchat, "TopicalChat")}
HUMAN = "Human"
COLUMNS = ("id", "history", "response", "corpus", "system", "guid", "history_id", "event_cs_raw", "event_cs",
           "general_cs_raw", "general_cs", "overall_impression", "tuples_single", "tuples_pair", "for_dev", "split",
           "source_file", "source_record", "source_locator", "evidence")


def windows(dialogue: dict, window: int = WINDOW) -> list[dict]:
    """Every history a response can follow: the up to `window` utterances before each turn after the
    first, padded in front with empty slots to `window` as DECO pads them."""
    texts = [t["text"] for t in dialogue["turns"]]
    out = []
    for end in range(1, len(texts)):
        slots = texts[max(0, end - window):end]
        out.append({"history_id": f"{dialogue['id']}@{end}", "history": [""] * (window - len(slots)) + slots,
                    "next": texts[end], "turn": end})
    return out


def _evidence(d: dict, text: str) -> dict:
    return {"text": text, "source_file": d["source_file"], "source_record": int(d["source_record"]),
            "source_locator": d["source_locator"]}


def _responses(path: str) -> list[tuple[int, str, dict]]:
    """(record number, locator, row) of a responses table: CSV with a header, or JSON Lines."""
    p = require_file(path)
    if p.suffix.lower() in (".jsonl", ".json"):
        return [(n, f"line {n}", obj) for n, obj in iter_json_lines(p)]
    header, records = csv_rows(p)
    if not {"history_id", "response", "system"} <= set(header):
        raise InputError(str(p), "line 1", f"a responses table needs the columns history_id, response, system; "
                         f"got {header}")
    # a malformed row travels as a record without fields: the caller rejects it (lenient) or stops on it
    return [(n, f"line {n}", row if row is not None else {"_problem": problem}) for n, row, problem in records]


def sources(*, dailydialog: InputFile = None, personachat: InputFile = None, topicalchat: InputPath = None,
            responses: InputFile = None, human_responses: bool = True, window: int = WINDOW,
            release: InputFile = None, conture: InputFile = None, lenient: bool = True,
            max_rejected_share: Share = MAX_REJECTED_SHARE) -> StageOutput:
    """Candidate samples: (history, response, system), each with the record it came from.

    Args:
        dailydialog: DailyDialog dialogues_text.txt (the CICERO reader)
        personachat: a PersonaChat ParlAI file (train_self_original.txt, ...)
        topicalchat: a Topical-Chat conversations/*.json file or the conversations directory
        responses: responses to the histories, CSV or JSON Lines with history_id, response, system
            (history ids are DIALOGUE_ID@TURN, listed in this stage's histories.jsonl)
        human_responses: the utterance that followed each history in the dialogue is a candidate (system Human)
        window: most utterances in a history (DECO: 4)
        release: a released DECO JSON (deco_train.json, deco_test.json): samples as released
        conture: ACCENT's ConTurE subset (conture_subset.json): rated turns in the DECO layout
        lenient: reject a malformed record with its reason and go on; false: stop at the first one
        max_rejected_share: a source file more of whose records than this cannot be read (or that gives
            no row) stops the run, named: lenient reading is for irregular records, not for a wrong file
    """
    rows, rejected, used, records, problems = [], [], {}, 0, []
    histories: dict[str, dict] = {}
    dialogues: dict[str, dict] = {}
    paths = {"dailydialog": dailydialog, "personachat": personachat, "topicalchat": topicalchat}
    for name, (reader, corpus) in DIALOGUE_READERS.items():
        path = paths[name]
        if not path:
            continue
        result: ReadResult = reader(path, lenient=lenient)
        problems += filter(None, [unreadable(name, str(path), result, max_rejected_share)])
        rejected += result.rejected
        records += len(result.rejected)
        used[name] = {"path": str(path), "records": result.records, "dialogues": len(result.rows),
                      "rejected": len(result.rejected)}
        for d in result.rows:
            dialogues[d["id"]] = d
            for w in windows(d, window):
                histories[w["history_id"]] = {**w, "corpus": corpus, "dialogue": d["id"]}
        used[name]["histories"] = sum(1 for h in histories.values() if h["corpus"] == corpus)
    if human_responses:
        for hid, h in histories.items():
            d = dialogues[h["dialogue"]]
            records += 1
            rows.append(_sample(f"{hid}:{HUMAN}", h, h["next"], HUMAN, d["source_file"], d["source_record"],
                                f"{d['source_locator']}, turn {h['turn']}", d))
    if responses:
        seen = set()
        table = _responses(responses)
        got = ReadResult(records=len(table))
        used["responses"] = {"path": str(responses), "records": len(table)}
        for n, locator, obj in table:
            records += 1
            base = {"source_file": str(responses), "source_record": n, "source_locator": locator}
            obj = obj if isinstance(obj, dict) else {}
            hid, text, system = (str(obj.get(k) or "").strip() for k in ("history_id", "response", "system"))
            sid = f"{hid}:{system}"
            problem = (("malformed_record", obj["_problem"]) if "_problem" in obj
                       else ("malformed_record", "expected history_id, response and system") if not (hid and system)
                       else ("unknown_history", f"no history {hid!r}: ids are listed in histories.jsonl")
                       if hid not in histories
                       else ("empty_response", "the response is empty") if not text
                       else ("duplicate_id", f"a second response of {system!r} to {hid!r}") if sid in seen else None)
            if problem:
                if not lenient:
                    raise InputError(str(responses), locator, problem[1])
                rejected.append({"id": f"responses-{n}", "reason_code": problem[0], "reason": problem[1], **base})
                got.rejected.append(rejected[-1])
                continue
            seen.add(sid)
            got.rows.append(sid)
            h = histories[hid]
            rows.append(_sample(sid, h, text, system, str(responses), n, locator, dialogues[h["dialogue"]]))
        problems += filter(None, [unreadable("responses", str(responses), got, max_rejected_share)])
    for name, path, reader in (("release", release, read_deco), ("conture", conture, read_conture)):
        if not path:
            continue
        result = reader(path, lenient=lenient)
        problems += filter(None, [unreadable(name, str(path), result, max_rejected_share)])
        records += result.records
        rejected += result.rejected
        used[name] = {"path": str(path), "records": result.records, "samples": len(result.rows),
                      "rejected": len(result.rejected), "split": result.rows[0]["split"] if result.rows else None}
        rows += [{**r, "history_id": None, "evidence": []} for r in result.rows]
    if not used:
        raise ConfigError("no source configured: set dialogues (dailydialog, personachat, topicalchat) with "
                          "responses and/or human_responses, or a released DECO file (release) or ConTurE (conture)")
    # typed even where every value is missing (no ratings in built samples, no system in ConTurE)
    data = pd.DataFrame(rows, columns=list(COLUMNS)).astype(
        {"event_cs": float, "general_cs": float, "overall_impression": float, "system": "str", "split": "str",
         "guid": "str", "history_id": "str", "source_record": int})
    dup = data["id"].duplicated(keep="first")
    if dup.any():
        rejected += [{**r, "reason_code": "duplicate_id", "reason": f"sample id {r['id']!r} appears twice"}
                     for r in data[dup].to_dict("records")]
        data = data[~dup]
    files = {"histories.jsonl": jsonl_bytes(
        {"history_id": hid, "corpus": h["corpus"], "history": join_history(h["history"])}
        for hid, h in histories.items())} if histories else {}
    return StageOutput(data=data.reset_index(drop=True),
                       rejected=pd.DataFrame(rejected) if rejected else None, rows_in=records,
                       notes={"sources": used, "window": window, "separator": UTT,
                              **stop_unless_readable(problems, "deco.sources")}, files=files)


def _sample(sid: str, h: dict, response: str, system: str, file: str, record: int, locator: str, d: dict) -> dict:
    return {"id": sid, "history": h["history"], "response": response, "corpus": h["corpus"], "system": system,
            "guid": None, "history_id": h["history_id"], "event_cs_raw": None, "event_cs": None,
            "general_cs_raw": None, "general_cs": None, "overall_impression": None, "tuples_single": [],
            "tuples_pair": [], "for_dev": False, "split": None, "source_file": str(file), "source_record": int(record),
            "source_locator": locator,
            "evidence": [] if system == HUMAN else [_evidence(d, join_history(h["history"]))]}
