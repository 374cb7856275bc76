"""The `server` generator: distractor candidates from a language model the user serves behind the OpenAI
chat-completions protocol (vLLM, llama.cpp's server, Ollama, `transformers serve`; docs/distractors.md).

Each item is one request: its dialogue, target, question and correct answers in a prompt of its question's
type (one frame, `FRAME`, with a part per type, `TASKS`; or a user's TOML file of templates), asking for
answers that are wrong for this dialogue yet about its people and events, of the question's type and length.
Where the file publishes distractors, the prompt first shows `examples` other items of the same question type
(never the item's own, never one of its dialogue) with their correct answers and their published wrong ones,
so the model sees the form and style the file's distractors have (`examples_for`).

Every request is kept by its content (prompt, examples included, model, sampling settings, seed) in the store's
`_cache/requests/`, written as its response arrives: a rerun sends nothing, a run killed midway resumes with the
requests it lacks. Only a final response is kept: one cut by `max_tokens` (finish_reason "length"), an empty one
or one nothing could be read from is used for this run and asked again on the next. Retries, backoff and
timeouts are the `openai` client's (429, 5xx, connection errors, honouring Retry-After); an answer no retry
mends (401, 403, 404, another 4xx, a 200 that is no chat completion) stops the run at once with one line, the
requests not yet sent cancelled. The API key is read from the environment variable the settings name and is
written nowhere: its value is masked (`***`) in every message, row and record this module makes, the server's
own text included (a 401 page may echo it).

A response is read into candidates (`read`: a JSON list, whole or cut by the token limit, inside a code fence or
not; else numbered lines, bullets or one a line), its chatter ("Here are ...:", "Let me know ...") left out; a
response that is empty, an HTML page, a refusal, chatter only or no list, a part of it cut off, a candidate
beyond the `candidates` asked for, a copy of a correct answer or a candidate in another language is a rejected
row with its reason. The model the server says answered is recorded with each response; a kept response
another model answered than this run's is asked again, so that one model writes the pool.
"""

from __future__ import annotations

import ast
import hashlib
import json
import logging
import os
import re
import threading
import tomllib
from collections import Counter
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
from csk.errors import ConfigError, CskError
from csk.params import InputPath, Params
from csk.progress import progress
from tasks.distractors.answers import chinese_ids

log = logging.getLogger("csk")

# One frame for every question type; the part that says what to write is the type's (the relation the question
# names, `counterfactuals.question_type`), `default` for the rest (a question of another kind, a file without
# questions). Fields: {examples} (other items with their published wrong answers, or nothing), {dialogue},
# {target}, {question}, {answers} (the correct ones, one a line), {n}, {relation}, {words} (the correct answers'
# typical length).
FRAME = ("{examples}Here is a dialogue.\n\n{dialogue}\n\nTarget utterance: {target}\nQuestion: {question}\n"
         "Correct answers:\n{answers}\n\n{task} Do not repeat, paraphrase or negate a correct answer. Reply with a "
         "JSON list of {n} strings and nothing else.")
TASKS = {
    "default": ("Write {n} answers to the question that are WRONG for this dialogue but could fool a careless "
                "reader: each about the same people and the events of this dialogue, answering the same question "
                "({relation}), about {words} words long, plain English, one sentence."),
    "cause": ("Write {n} WRONG causes of the target: events that happened before it, about the same people and "
              "things of this dialogue, that the dialogue shows did not lead to the target. About {words} words "
              "each, one sentence in the style of the correct answers."),
    "prerequisite": ("Write {n} WRONG prerequisites of the target: conditions before it, about the same people and "
                     "things of this dialogue, that the target does not depend on. About {words} words each, one "
                     "sentence in the style of the correct answers."),
    "motivation": ("Write {n} WRONG motivations of the speaker of the target: wants or intentions the speaker could "
                   "have in this dialogue but that do not explain the target. About {words} words each, one sentence "
                   "in the style of the correct answers."),
    "subsequent event": ("Write {n} WRONG subsequent events: things that could happen after the target to the same "
                         "people and things of this dialogue but that the dialogue makes unlikely. About {words} words "
                         "each, one sentence in the style of the correct answers."),
    "reaction": ("Write {n} WRONG emotional reactions of the listener to the target: feelings the listener of this "
                 "dialogue could have but that do not fit the target. About {words} words each, one sentence in the "
                 "style of the correct answers."),
}
PROMPTS = {name: FRAME.replace("{task}", task) for name, task in TASKS.items()}
# The examples' block. An example shows no dialogue: a dialogue is most of a prompt's tokens, and the examples
# are there for the form, length and style of the file's wrong answers, which the target and question carry.
EXAMPLES_HEAD = ("Examples from other dialogues of the same collection: each question with its correct answers "
                 "and the wrong answers its authors wrote.\n\n")
EXAMPLE = "Target utterance: {target}\nQuestion: {question}\nCorrect answers:\n{answers}\nWrong answers: {wrong}\n\n"
EXAMPLES_TAIL = "Now the item to write wrong answers for.\n\n"

NUMBERED = re.compile(r"^\s*(?:[-*\u2022]|\(?\d{1,2}[.)\]:]|\[\d{1,2}\]|[a-z][.)])\s+", re.I)
CJK = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]")
HTML = re.compile(r"<!doctype\s+html|<html[\s>]|<head[\s>]|<body[\s>]|<title[\s>]", re.I)

# A refusal is the model declining the task: a first person (I, we) with a modal of inability or refusal
# (can't, cannot, won't, am unable to, am not able to, must decline to) governing a verb of doing what was asked.
# What the verb governs tells the refusal from a sentence of the dialogue's world: "help" / "assist" / "comply"
# refuse alone or with "with ..." / "you" ("I can't help with that"), never with a gerund or "but" ("I can't
# help feeling sad", "I can't help but laugh": an idiom for not refraining); a verb of making (write, provide,
# generate, do, ...) refuses only with the request for object ("I can't do that.", "I won't write misleading
# answers"), not with a thing of the world ("I can't make it to the party", "I won't do it again tomorrow"); and
# a verb of another meaning never refuses ("I cannot believe he left", "I can't wait"). Apart from those: "As an
# AI ...", declining in so many words, and (only at a response's start) an apology followed by "but".
_SUBJ = r"(?:i|we)\b(?:\s+(?:really|simply|just|unfortunately|therefore|respectfully))?"
_MODAL = (r"(?:can\s?not|can'?t|cannot|could\s?not|couldn'?t|won'?t|will\s+not|(?:am|'m|are|'re)\s+(?:unable|not\s+able)"
          r"\s+to|(?:am|'m|are|'re)\s+not\s+going\s+to|must\s+decline\s+to|(?:do\s+not|don'?t)\s+feel\s+comfortable)")
_ALONE = r"(?:help|assist|comply|oblige|proceed)(?=\s*(?:$|[.,;:!?]|with\b|you\b|on\s+this|here\b|there\b))"
_TASK_NOUN = r"(?:request|task|content|question|answers?|distractors?|options?|prompt|instructions?|responses?)"
_MAKE = (r"(?:provide|generate|write|create|produce|complete|answer|do|give|offer|make|come\s+up\s+with|share|fulfil|"
         r"fulfill|engage\s+in|participate\s+in|support|continue|writing|providing|generating|creating|helping)")
_MADE = rf"(?:(?:that|this|it)\s*(?:$|[.,;:!?])|(?:\S+\s+){{0,5}}?{_TASK_NOUN}\b)"
_PRE = (r"^\W*(?:[^.!?]{0,80}?\b(?:but|however|unfortunately)\W+)?(?:(?:(?:i'?m|i\s+am)\s+(?:so\s+|very\s+|"
        r"really\s+|truly\s+)?sorry|i\s+apologi[sz]e|sorry|apologies|unfortunately|however|regrettably)\W*)?"
        r"(?:but\s+)?(?:i'?m\s+afraid\s+(?:that\s+)?)?")
REFUSAL = re.compile(
    rf"{_PRE}(?:{_SUBJ}\s*{_MODAL}\s+(?:{_ALONE}|{_MAKE}\s+{_MADE})"
    r"|as\s+an?\s+(?:ai|artificial\s+intelligence|(?:large\s+)?language\s+model|llm|ai\s+assistant)\b"
    r"|i\s+(?:must|have\s+to|will|need\s+to)\s+(?:respectfully\s+|politely\s+)?decline\b"
    r"|(?:this|that|your|the)\s+request\s+(?:is|goes|violates|would)\b.{0,40}\b(?:against|inappropriate|policy|"
    r"guidelines|harmful)\b)", re.I)
APOLOGY_BUT = re.compile(r"^\W*(?:(?:i'?m|i\s+am)\s+(?:so\s+|very\s+|really\s+)?sorry|i\s+apologi[sz]e|sorry|"
                         r"apologies)\W+but\b", re.I)

# Chatter: a line of the model talking to the reader rather than a candidate. A lead-in ends with a colon;
# interjections and offers open the line ("Sure!", "Let me know if ...", "I hope this helps"); "Here are ..."
# is chatter when it speaks of the answers or leads in.
CHATTER = re.compile(
    r"^\W*(?:(?:sure|certainly|of\s+course|absolutely|okay|ok|alright|great|got\s+it)\s*[!,.:]"
    r"|here(?:'s|\s+is|\s+are)\b.*\b(?:answers?|options?|distractors?|candidates?|suggestions?|examples?|list|wrong|"
    r"incorrect|json|causes?|motivations?|reactions?|events?|prerequisites?)\b"
    r"|(?:below|above)\s+(?:is|are)\b|the\s+following\b|i\s+hope\b|hope\s+(?:this|these|that|it)\b|let\s+me\s+know\b"
    r"|feel\s+free\b|if\s+you\s+(?:need|want|would|'d|like|have)\b|please\s+(?:let|note|feel)\b|notes?\s*:"
    r"|these\s+(?:are|answers|options|distractors|wrong)\b|each\s+of\s+these\b|all\s+of\s+these\b"
    r"|i(?:'ve|\s+have)\s+(?:written|generated|created|provided|come\s+up|listed|made|tried|kept)\b"
    r"|as\s+requested\b|#{1,6}\s|\*\*[^*]+\*\*\s*:?\s*$)", re.I)
QUOTES = "\"\u201c\u201d`*"


class ServerSpec(Params):
    """An OpenAI-compatible server and how to ask it (`counterfactuals.server` in pipelines.toml)."""

    base_url: str = ""
    """the server's API root, e.g. http://127.0.0.1:8000/v1 (vLLM, transformers serve), :8080/v1 (llama.cpp),
    :11434/v1 (Ollama)"""
    model: str = ""
    """the model name the server knows it by"""
    api_key_env: str = ""
    """the NAME of the environment variable holding the API key (never the key); empty: none is sent"""
    temperature: float = 0.7
    candidates: int = 8
    """candidates asked for per item; a response's candidates beyond this many are rejected rows"""
    max_tokens: int = 400
    """the response's token limit; a response cut by it is read for what it holds and asked again next run"""
    concurrency: int = 4
    """requests in flight at once"""
    timeout: float = 120.0
    """seconds one request may take"""
    retries: int = 4
    """retries of a failed request (429, 5xx, connection errors), with the client's exponential backoff"""
    examples: int = 2
    """in-context examples per request: other items of the file with the same question type (never the item's
    own, never one of its dialogue), each with its correct answers and its published distractors, the nearest
    in words first; 0: none (also where the file publishes no distractors)"""
    templates: InputPath = None
    """a TOML file of prompt templates (keys: default, cause, prerequisite, motivation, subsequent event,
    reaction) replacing the bundled ones it names; {examples} places the examples (else they come first)"""


def templates(spec: ServerSpec) -> dict[str, str]:
    """The bundled templates, with those of the user's file in their place."""
    out = dict(PROMPTS)
    if spec.templates:
        try:
            given = tomllib.loads(Path(spec.templates).read_text(encoding="utf-8"))
        except (OSError, tomllib.TOMLDecodeError) as exc:
            raise ConfigError(f"counterfactuals.server.templates: {spec.templates}: {exc}") from None
        unknown = sorted(set(given) - set(PROMPTS))
        if unknown:
            raise ConfigError(f"counterfactuals.server.templates: unknown template(s) {', '.join(unknown)}; the "
                              f"keys are {', '.join(PROMPTS)}")
        out.update({k: str(v) for k, v in given.items()})
    return out


def prompt(template: str, *, dialogue: list[str], target: str, question: str, answers: list[str], n: int,
           relation: str, examples: list[dict] = ()) -> str:
    """The request's text. `examples`: [{"target", "question", "correct", "wrong"}], shown where the template
    says {examples} (a template without it: before the rest)."""
    words = round(sum(len(a.split()) for a in answers) / max(len(answers), 1))
    shown = "".join(EXAMPLE.format(target=e["target"], question=e["question"],
                                   answers="\n".join(f"- {a}" for a in e["correct"]),
                                   wrong=json.dumps(list(e["wrong"]), ensure_ascii=False)) for e in examples)
    shown = EXAMPLES_HEAD + shown + EXAMPLES_TAIL if shown else ""
    if "{examples}" not in template:
        template = "{examples}" + template
    return template.format(examples=shown, dialogue="\n".join(dialogue), target=target, question=question,
                           answers="\n".join(f"- {a}" for a in answers), n=n, relation=relation or "the same kind",
                           words=words)


# What a kept response's bytes depend on, and where each is in its identity:
# * the request as sent, the whole body `client.chat.completions.create(**body)` posts (the model's name, the
#   messages: template, dialogue, examples, the number of candidates asked; temperature, max_tokens, seed):
#   `request_key`, a hash of exactly that body, so nothing the server reads is left out of it;
# * the model behind the name: what the server says answered is kept with each response, and a run whose
#   server answers with another model asks its kept requests again (`Served.ask`; only when this run sends
#   something: a fully kept run sends nothing and cannot ask);
# * what is kept of a response (`kept_of`): `RECORD`, in each record; a record of another format is asked again.
# Not in it: the server's address (base_url), nor the API key (a credential, not content). An address says
# where a request goes, not what answers it: a store travels between machines and a server moves (127.0.0.1
# here, a tunnel or another port there; Ollama's :11434 today, vLLM's :8000 tomorrow, the same weights under the
# same name). With the address in the key every rerun elsewhere would send again, and a sampling model would
# write other text, so a rebuild could not be reproduced from its own store. What an address could change, the
# model, is checked by the model the server names (above); the stage's key holds base_url (ServerSpec), so
# another server re-runs the stage, reading these kept responses.
RECORD = 1
"""the format of a kept record (what `kept_of` keeps of a response); a new format asks every request again"""


def request_key(body: dict) -> str:
    """A request's identity: the whole body sent (model, messages, sampling settings, seed), never the server's
    address (see above)."""
    return hashlib.sha256(json.dumps(body, sort_keys=True, ensure_ascii=False).encode()).hexdigest()


# ------------------------------------------------------------------ reading a response
@dataclass
class Reading:
    """What a response holds: its candidates in order; the parts that are no candidate with the reason
    (`dropped`: chatter, a candidate cut off, an element of a list that is no text); why it gave none
    (`problem`: empty_response, html, refusal, chatter, not_a_list, truncated, malformed_response, or None);
    and whether the token limit cut it."""

    candidates: list[str] = field(default_factory=list)
    dropped: list[tuple[str, str]] = field(default_factory=list)
    problem: str | None = None
    truncated: bool = False


def refusal(text: str, *, response: bool = False) -> bool:
    """Does `text` decline the task (see REFUSAL)? Looked for in its first two sentences; `response`: a whole
    response, which may also refuse by an apology followed by "but" ("I'm sorry, but ...")."""
    text = text.strip().replace("\u2019", "'")  # I’m: a typographic apostrophe
    head = " ".join(re.split(r"(?<=[.!?])\s+", text, maxsplit=2)[:2])[:400]
    if REFUSAL.match(head) or (response and APOLOGY_BUT.match(head)):
        return True
    # a refusal may open its second sentence ("Thank you for the dialogue. I can't help with that.")
    second = re.split(r"(?<=[.!?])\s+", head, maxsplit=1)
    return response and len(second) == 2 and bool(REFUSAL.match(second[1]))


def _clean(item: str) -> str:
    item = item.strip().rstrip(",").strip()
    return item.strip(QUOTES).strip()


def _element(value) -> str | None:
    """A list element's text: a string or number, or the one text of an object ({"answer": "..."})."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, (str, int, float)):
        return str(value).strip()
    if isinstance(value, dict):
        texts = [v for k, v in value.items() if isinstance(v, str) and v.strip()]
        named = [value[k] for k in ("text", "answer", "distractor", "candidate", "option") if isinstance(value.get(k), str)]
        return (named or texts or [None])[0] if (named or len(texts) == 1) else None
    return None


def _json_list(body: str) -> tuple[list | None, str | None, bool, bool]:
    """The first JSON list of texts in `body`: (its elements, the element cut off or None, whether it was cut,
    whether the response is one JSON value and no list). A list is also found inside an object
    ({"distractors": [...]}) or written as a Python list (['...', '...']); a list the text ends inside is
    read up to its last whole element."""
    decoder = json.JSONDecoder()
    texts = lambda v: isinstance(v, list) and (not v or any(isinstance(x, (str, dict)) for x in v))  # noqa: E731
    for m in list(re.finditer(r"[\[{]", body))[:20]:
        try:
            value, _ = decoder.raw_decode(body, m.start())
        except json.JSONDecodeError:
            continue
        if isinstance(value, dict):
            value = next((v for v in value.values() if texts(v)), value)
        if texts(value):
            return value, None, False, False
        if m.start() == 0 and isinstance(value, dict):  # the response is one JSON object, and holds no list
            return None, None, False, True
    whole = re.search(r"\[.*\]", body, re.S)
    if whole:
        try:
            value = ast.literal_eval(whole.group())
        except (ValueError, SyntaxError, MemoryError, RecursionError):
            value = None
        if texts(value):
            return value, None, False, False
    # a list cut short: its whole elements, then what is left of the last
    start = re.search(r"\[\s*(?=[\"{])", body)
    if start is None:
        return None, None, False, False
    items, i = [], start.end()
    while True:
        while i < len(body) and body[i] in " \t\r\n":
            i += 1
        if i >= len(body):
            return items, None, True, False
        try:
            value, i = decoder.raw_decode(body, i)
        except json.JSONDecodeError:
            rest = body[i:]
            if "]" in rest:  # not cut: broken inside (an unescaped quote); read as lines instead
                return None, None, False, False
            return items, _clean(rest.split("```")[0]) or None, True, False
        items.append(value)
        while i < len(body) and body[i] in " \t\r\n":
            i += 1
        if i < len(body) and body[i] == ",":
            i += 1
        elif i < len(body):  # "]" after all, or something else: no list the decoder reads
            return None, None, False, False


def read(text: str | None, finish_reason: str | None = None) -> Reading:
    """A response's candidates: a JSON list (inside a code fence or not; cut by the token limit, its whole
    elements), else one per numbered line or bullet, else one per line, chatter left out."""
    cut = finish_reason == "length"
    if text is None or not text.strip():
        return Reading(problem="empty_response", truncated=cut)
    body = text.strip()
    if HTML.search(body[:4000]):
        return Reading(problem="html", truncated=cut)
    if refusal(body, response=True):
        return Reading(problem="refusal", truncated=cut)
    fence = re.search(r"```[\w-]*[ \t]*\n?(.*?)(?:```|\Z)", body, re.S)
    if fence and fence.group(1).strip():
        body = fence.group(1).strip()
    values, fragment, list_cut, other_json = _json_list(body)
    if other_json:
        return Reading(problem="not_a_list", truncated=cut)
    if values is not None:
        out = Reading(truncated=cut or list_cut)
        for v in values:
            item = _element(v)
            if item is None:
                out.dropped.append((json.dumps(v, ensure_ascii=False)[:200], "not_a_string"))
            elif item:
                out.candidates.append(item)
        if fragment:
            out.dropped.append((fragment, "truncated"))
        if not out.candidates:
            out.problem = "truncated" if list_cut else "malformed_response" if values else "empty_response"
        return out
    out = Reading(truncated=cut)
    lines = [line.strip() for line in body.splitlines() if line.strip() and line.strip() not in ("[", "]", "```")]
    if len(lines) == 1 and re.fullmatch(r'\[\s*".*"\s*\]', lines[0], re.S):  # a list JSON cannot read: a quote unescaped
        lines = re.split(r'"\s*,\s*"', lines[0][1:-1].strip())
    if cut and lines:  # the token limit stopped the model inside its last line
        out.dropped.append((_clean(NUMBERED.sub("", lines.pop())), "truncated"))
    listed = [line for line in lines if NUMBERED.match(line)]
    for line in lines:
        bare = NUMBERED.sub("", line) if NUMBERED.match(line) else line
        item = _clean(bare)
        if not item:
            continue
        if (listed and not NUMBERED.match(line)) or CHATTER.match(bare) or CHATTER.match(item) or item.endswith(":"):
            out.dropped.append((item, "chatter"))
        else:
            out.candidates.append(item)
    if not out.candidates:
        out.problem = "truncated" if cut and out.dropped and all(r == "truncated" for _, r in out.dropped) else \
            "chatter" if any(r == "chatter" for _, r in out.dropped) else "malformed_response"
    return out


def parse(text: str | None) -> list[str] | str:
    """Candidates from a response (`read`), or why it gave none (a reason code)."""
    got = read(text)
    return got.candidates if got.candidates else got.problem or "malformed_response"


def final(record: dict) -> bool:
    """May a response be kept for the next run? Not one the token limit cut, nor one that gave nothing
    (empty, unreadable): asked again, it may do better (with a larger max_tokens, on a mended server). A
    refusal is the model's answer: kept."""
    got = read(record.get("text"), record.get("finish_reason"))
    return not got.truncated and (bool(got.candidates) or got.problem == "refusal")


def why_not(candidate: str, answers: list[str], chinese: bool) -> str | None:
    """A reason a parsed candidate cannot be offered, or None."""
    norm = lambda t: re.sub(r"[\W_]+", " ", t.lower()).strip()  # noqa: E731
    if refusal(candidate):
        return "refusal"
    if norm(candidate) in {norm(a) for a in answers}:
        return "copy_of_correct_answer"
    if bool(CJK.search(candidate)) != chinese:
        return "other_language"
    return None


# ------------------------------------------------------------------ the key, never shown
def redact(text, secret: str):
    """`text` with the key's value masked (`***`); so is any word holding 6 characters of it running, or a run
    of asterisks (a server echoing part of a key: "sk-abc1****xyz9"). Strings only; anything else comes back as
    it is. A key of fewer than 4 characters is no secret to mask (it would mask every such word)."""
    if not secret or len(secret) < 4 or not isinstance(text, str):
        return text
    text = text.replace(secret, "***")
    grams = {secret[i:i + 6] for i in range(len(secret) - 5)}

    def word(m: re.Match) -> str:
        w = m.group()
        return "***" if "***" in w or any(w[i:i + 6] in grams for i in range(len(w) - 5)) else w

    return re.sub(r"[^\s\"'<>(),;]{6,}", word, text)


def describe(text: str, content_type: str = "") -> str:
    """What a server's body says, on one line: an HTML page by its title, a JSON error by its message, else its
    first 200 characters."""
    text = (text or "").strip()
    if not text:
        return "an empty body"
    if HTML.search(text[:4000]) or "html" in content_type:
        title = re.search(r"<title[^>]*>(.*?)</title>", text, re.S | re.I) or re.search(r"<h1[^>]*>(.*?)</h1>", text,
                                                                                       re.S | re.I)
        return "an HTML page" + (f" titled {' '.join(title.group(1).split())[:120]!r}" if title else "")
    try:
        data = json.loads(text)
    except ValueError:
        data = None
    if isinstance(data, dict):
        err = data.get("error", data)
        msg = err.get("message") or err.get("detail") or err.get("msg") if isinstance(err, dict) else err
        if msg:
            return " ".join(str(msg).split())[:200]
    one = " ".join(text.split())
    return repr(one[:200] + ("..." if len(one) > 200 else ""))


class _Fault(Exception):
    """A request's failure no retry mends, with the line the user reads (without the count of finished requests)."""


# ------------------------------------------------------------------ the requests
class Served:
    """One server's requests, each kept in `cache_dir` by its content once its final response arrived."""

    def __init__(self, spec: ServerSpec, cache_dir: Path | None):
        if not spec.base_url or not spec.model:
            raise ConfigError('counterfactuals.generators has "server": set counterfactuals.server.base_url '
                              "(e.g. http://127.0.0.1:8000/v1) and counterfactuals.server.model")
        if spec.api_key_env and not os.environ.get(spec.api_key_env):
            raise ConfigError(f"counterfactuals.server.api_key_env names {spec.api_key_env!r}, which is not set in "
                              "the environment")
        self.spec = spec
        self.cache = Path(cache_dir) / "requests" if cache_dir is not None else None
        self.sent = 0
        self.answered_by: dict[str, int] = {}  # the model the server says answered: responses of this run's pool
        self._secret = os.environ.get(spec.api_key_env, "") if spec.api_key_env else ""

    def redact(self, text):
        return redact(text, self._secret)

    def _client(self):
        from openai import OpenAI

        return OpenAI(base_url=self.spec.base_url, api_key=self._secret or "none", timeout=self.spec.timeout,
                      max_retries=self.spec.retries)

    def _path(self, key: str) -> Path | None:
        return self.cache / key[:2] / f"{key}.json" if self.cache is not None else None

    def cached(self, key: str) -> dict | None:
        """The kept response to a request, if final (a record kept before responses were judged final may not be:
        judged again here)."""
        path = self._path(key)
        if path is None or not path.exists():
            return None
        try:
            record = json.loads(path.read_text(encoding="utf-8"))
        except ValueError:  # a torn write (a kill mid-write): asked again
            return None
        if not isinstance(record, dict) or record.get("record", 1) != RECORD:  # (records before RECORD: 1)
            return None
        return record if final(record) else None

    def _keep(self, key: str, record: dict) -> None:
        path = self._path(key)
        if path is None:
            return
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.{id(record)}.tmp")
        tmp.write_text(json.dumps(record, ensure_ascii=False), encoding="utf-8")
        os.replace(tmp, path)

    def _where(self) -> str:
        return f"the server {self.spec.base_url} (model {self.spec.model})"

    def _status(self, exc, key: str) -> str:
        """The line for an HTTP error the client gave up on: what the server said (masked), and what to do."""
        status = exc.status_code
        said = self.redact(describe(exc.response.text if exc.response is not None else "",
                                    exc.response.headers.get("content-type", "") if exc.response is not None else ""))
        if status in (401, 403):
            env = self.spec.api_key_env
            return (f"the server {self.spec.base_url} refused the API key (HTTP {status}: {said}): "
                    + (f"check the key the environment variable {env} holds (counterfactuals.server.api_key_env)"
                       if env else "it wants one: set counterfactuals.server.api_key_env to the NAME of an environment "
                                   "variable holding it"))
        if status == 404:
            return (f"the server {self.spec.base_url} has no model {self.spec.model!r} or no chat completions there "
                    f"(HTTP 404: {said}): check counterfactuals.server.model (the names {self.spec.base_url}/models "
                    "lists) and base_url (the API root, e.g. http://127.0.0.1:8000/v1)")
        if 400 <= status < 500 and status not in (408, 409, 429):
            return (f"{self._where()} rejected request {key[:16]} (HTTP {status}: {said}), which no retry mends: "
                    "check counterfactuals.server's settings (max_tokens against the model's context length, the "
                    "sampling settings the server accepts)")
        return f"{self._where()} failed after {self.spec.retries} retries: HTTP {status}: {said}"

    def _record(self, raw, key: str) -> dict:
        """The record of a 200 response: its text, finish_reason, the model that answered and its id. A body that
        is no chat completion (not JSON: an HTML page of a proxy, a web interface's address) is a `_Fault`."""
        body = raw.http_response.text
        ctype = raw.http_response.headers.get("content-type", "")
        try:
            data = json.loads(body)
        except ValueError:
            data = None
        if not isinstance(data, dict) or not isinstance(data.get("choices"), list):
            what = "no JSON" if data is None else "JSON that is no chat completion"
            if isinstance(data, dict) and data.get("error"):
                what = "an error"
            raise _Fault(f"the server {self.spec.base_url} answered request {key[:16]} with HTTP 200 and {what} "
                         f"({ctype or 'no content type'}: {self.redact(describe(body, ctype))}): is base_url the API "
                         "root of an OpenAI-compatible server (e.g. http://127.0.0.1:8000/v1; Ollama "
                         "http://127.0.0.1:11434/v1)?")
        return kept_of(data, self.redact)

    def _send(self, bodies: dict[str, dict], keys: list[str], done: int) -> dict[str, dict]:
        """Sends `keys`, `concurrency` at a time, keeping each final response as it arrives. A failure no retry
        mends, or one the retries did not, cancels the requests not yet sent and stops the run with one line
        naming the server, what it answered and how many requests finished (kept for the rerun)."""
        import openai

        client = self._client()
        out: dict[str, dict] = {}
        stop = threading.Event()  # set by the first failure: a worker takes no further request from the queue

        def one(key: str) -> tuple[str, dict | None]:
            if stop.is_set():
                return key, None
            body, fault = bodies[key], None
            try:
                raw = client.chat.completions.with_raw_response.create(**body)
            except openai.APIStatusError as exc:
                fault = self._status(exc, key)
            except (openai.APIConnectionError, openai.APITimeoutError) as exc:
                fault = f"{self._where()} failed after {self.spec.retries} retries: {type(exc).__name__}: " + \
                    self.redact(" ".join(str(exc).split())[:200])
            except (openai.OpenAIError, ValueError, TypeError) as exc:  # the client refused the request itself
                fault = (f"the request {key[:16]} to {self._where()} failed in the client: {type(exc).__name__}: "
                         + self.redact(" ".join(str(exc).split())[:300]))
            if fault is not None:  # raised here, outside the handler: the client's error (its text) is not chained
                stop.set()
                raise _Fault(fault)
            try:
                record = {"body": body, **self._record(raw, key)}
            except BaseException:
                stop.set()
                raise
            if final(record):
                self._keep(key, record)
            return key, record

        pool = ThreadPoolExecutor(max(1, self.spec.concurrency))
        try:
            with progress(len(keys), f"server {self.spec.model}", unit="requests") as bar:
                futures = [pool.submit(one, k) for k in keys]
                for f in as_completed(futures):
                    key, record = f.result()
                    if record is None:  # not sent: the run is stopping
                        continue
                    out[key] = record
                    self.sent += 1
                    bar.update(1)
        except _Fault as exc:
            # the requests not yet sent are cancelled; those in flight end (each within `timeout`) and are kept
            pool.shutdown(wait=True, cancel_futures=True)
            late = [f.result()[1] for f in futures if f.done() and not f.cancelled() and f.exception() is None
                    and f.result()[1] is not None and f.result()[0] not in out]
            self.sent += len(late)
            kept = done + sum(final(r) for r in [*out.values(), *late])
            message = f"{exc}; {kept} of {len(bodies)} requests finished and are kept: the same command resumes with " \
                      "the rest once that is mended"
        except BaseException:  # an interrupt, a bug: nothing more is sent
            stop.set()
            pool.shutdown(wait=False, cancel_futures=True)
            raise
        else:
            pool.shutdown()
            return out
        raise CskError(self.redact(message))

    def ask(self, bodies: dict[str, dict]) -> dict[str, dict]:
        """Every request's record ({"body", "text", "finish_reason", "model", "response_id"}), from the cache or
        the server. A kept response another model answered than the one answering this run's requests is asked
        again (one model writes the pool); where the server says another model answered than the one named, or
        the pool mixes models, a warning says so."""
        out = {k: r for k in bodies if (r := self.cached(k)) is not None}
        todo = [k for k in sorted(bodies) if k not in out]
        if todo:
            out.update(self._send(bodies, todo, len(out)))
            now = {out[k].get("model") for k in todo} - {None}
            stale = sorted(k for k, r in out.items() if k not in todo and r.get("model") and r["model"] not in now)
            if now and stale:
                log.warning("%s: %d kept responses were answered by %s, this run's by %s: asked again, so that one "
                            "model writes the pool", self._where(), len(stale),
                            ", ".join(sorted({out[k]["model"] for k in stale})), ", ".join(sorted(now)))
                out.update(self._send(bodies, stale, len(out) - len(stale)))
        self.answered_by = dict(Counter(r.get("model") or "unknown" for r in out.values()))
        if len(self.answered_by) > 1:
            log.warning("%s: the responses were answered by %d models (%s): the server answers this name with more "
                        "than one model", self._where(), len(self.answered_by),
                        ", ".join(f"{m} {n}" for m, n in sorted(self.answered_by.items())))
        other = sorted(m for m in self.answered_by if m != "unknown" and not same_model(self.spec.model, m))
        if other:
            log.warning("%s: the server says %s answered; recorded as the answering model in server_responses.parquet",
                        self._where(), ", ".join(other))
        return out


def kept_of(data: dict, redact=lambda text: text) -> dict:
    """What is kept of a chat completion (format `RECORD`: edit this, raise RECORD): its text, finish_reason,
    the model that answered and the response's id, the API key masked in each."""
    choice = data["choices"][0] if data["choices"] and isinstance(data["choices"][0], dict) else {}
    message = choice.get("message")
    content = message.get("content") if isinstance(message, dict) else None
    if isinstance(content, list):  # content parts: their texts
        content = "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return {"text": redact(content) if isinstance(content, str) else None,
            "finish_reason": choice.get("finish_reason"),
            "model": redact(str(data["model"])) if data.get("model") is not None else None,
            "response_id": redact(str(data["id"])) if data.get("id") is not None else None, "record": RECORD}


def same_model(asked: str, answered: str) -> bool:
    """Is `answered` the name the server gives the model asked for? Servers spell it their way: Ollama adds a
    tag (llama3.1 -> llama3.1:latest), `transformers serve` a revision (MODEL_DIR -> MODEL_DIR@main), a path
    may come back as its last part."""
    def norm(name: str) -> str:
        name = re.sub(r"@[^/@]*$", "", name.strip()).rstrip("/").lower()
        return name.removesuffix(":latest").rsplit("/", 1)[-1]

    return asked == answered or norm(asked) == norm(answered)


# ------------------------------------------------------------------ in-context examples
def published(choices, correct) -> tuple[list[str], list[str]] | None:
    """An item's published (correct answers, distractors): the choices among `correct` (indices) and the
    others; None where it publishes no distractor."""
    try:
        options = [str(c) for c in list(choices)]
        right = {int(i) for i in list(correct)}
    except (TypeError, ValueError):  # no choices published (None, NaN)
        return None
    good = [options[i] for i in sorted(right) if 0 <= i < len(options)]
    wrong = [c for j, c in enumerate(options) if j not in right and c.strip()]
    return (good, wrong) if good and wrong else None


def _terms(text: str) -> list[str]:
    """Words of a text for its likeness to another: lower-cased words, and character pairs of Chinese."""
    text = text.lower()
    words = re.findall(r"[^\W\d_\u3400-\u9fff\uf900-\ufaff]+", text)
    pairs = [run[i:i + 2] for run in re.findall(r"[\u3400-\u9fff\uf900-\ufaff]+", text)
             for i in range(max(len(run) - 1, 1))]
    return words + pairs


def examples_for(view: pd.DataFrame, library: pd.DataFrame, *, kind: dict[str, str | None],
                 answers: dict[str, list[str]], k: int, seed: int) -> dict[str, list[dict]]:
    """Each item's in-context examples: up to `k` items of `library` (the file) that publish distractors, ask a
    question of the same type (and are in the same language), are not the item (nor a copy of it: same target
    and correct answers) and are not of its dialogue (`group_id`): the nearest in words (tf-idf cosine of the
    target and correct answers), ties broken by a seeded hash of the example's content. Chosen by content only,
    so the same item gets the same examples whatever the order of the file. Each: {"id", "target", "question",
    "correct", "wrong"}."""
    if k <= 0 or "choices" not in library.columns or "correct_answers" not in library.columns:
        return {}
    from sklearn.feature_extraction.text import TfidfVectorizer

    def row_text(r) -> str:
        return " ".join([str(getattr(r, "target", "") or ""), *answers.get(r.id, [])])

    def same(r) -> str:  # an item's content: a copy of it under another id is the item too
        return json.dumps([str(getattr(r, "target", "") or "").strip().lower(),
                           sorted(a.strip().lower() for a in answers.get(r.id, []))])

    def bucket(r) -> tuple:
        return kind.get(r.id), str(getattr(r, "language", "") or "")

    lib = []
    for r in library.itertuples():
        pub = published(getattr(r, "choices", None), getattr(r, "correct_answers", None))
        if pub is not None:
            lib.append((r, pub))
    if not lib:
        return {}
    items = list(view.itertuples())
    texts = {r.id: row_text(r) for r in items} | {r.id: row_text(r) for r, _ in lib}
    try:
        vectors = TfidfVectorizer(analyzer=_terms, sublinear_tf=True).fit(sorted(set(texts.values())))
    except ValueError:  # no word in any text (targets and answers empty): the hash order alone
        vectors = None
    codes: dict[str, int] = {}  # groups and contents as integers: compared with a whole row at once
    code = lambda v: codes.setdefault(v, len(codes))  # noqa: E731
    out: dict[str, list[dict]] = {}
    for b in sorted({bucket(r) for r in items}, key=str):
        cands = sorted((x for x in lib if bucket(x[0]) == b),
                       key=lambda x: hashlib.sha256(f"{seed}:{same(x[0])}:{x[0].id}".encode()).hexdigest())
        asking = [r for r in items if bucket(r) == b]
        if not cands or not asking:
            continue
        # the hash order of the candidates breaks ties: earlier in it, ranked higher
        tie = np.arange(len(cands) - 1, -1, -1, dtype=np.int64)
        group = np.array([code("g" + str(getattr(r, "group_id", r.id))) for r, _ in cands], dtype=np.int64)
        content = np.array([code("c" + same(r)) for r, _ in cands], dtype=np.int64)
        lib_x = vectors.transform([texts[r.id] for r, _ in cands]) if vectors is not None else None
        for lo in range(0, len(asking), 256):
            chunk = asking[lo:lo + 256]
            sims = (vectors.transform([texts[r.id] for r in chunk]) @ lib_x.T).toarray() if vectors is not None \
                else np.zeros((len(chunk), len(cands)))
            # rounded, so that the last bits of a sum never reorder two examples; then one integer per example
            score = np.round(np.clip(sims, 0, 1) * 1e6).astype(np.int64) * len(cands) + tie
            # the item itself, its dialogue's items and copies of it: never shown
            mine_g = np.array([code("g" + str(getattr(r, "group_id", r.id))) for r in chunk], dtype=np.int64)
            mine_c = np.array([code("c" + same(r)) for r in chunk], dtype=np.int64)
            score[(group[None, :] == mine_g[:, None]) | (content[None, :] == mine_c[:, None])] = -1
            picks = []  # k small: the best, k times (cheaper than a partition of every row)
            for _ in range(min(k, len(cands))):
                best = score.argmax(axis=1)
                picks.append(np.where(score[np.arange(len(chunk)), best] >= 0, best, -1))
                score[np.arange(len(chunk)), best] = -2
            for row, r in zip(np.array(picks).T, chunk):
                shown = [cands[j] for j in row if j >= 0]
                if shown:
                    out[r.id] = [{"id": x.id, "target": str(getattr(x, "target", "") or ""),
                                  "question": str(getattr(x, "question", "") or ""), "correct": pub[0],
                                  "wrong": pub[1]} for x, pub in shown]
    return out


# ------------------------------------------------------------------ the generator
def server_pools(view: pd.DataFrame, *, spec: ServerSpec, kind: dict[str, str | None], answers: dict[str, list[str]],
                 seed: int, cache_dir: Path | None, rejected: list[dict], responses: list[dict],
                 library: pd.DataFrame | None = None) -> tuple[dict, int]:
    """{instance id: [(rule, text)]} from the server, and how many requests were sent; `rejected` gets the
    responses and candidates that could not be used, `responses` one row per request (for the artifact and
    lineage: the template, the examples shown, the model asked and the one that answered, the response).
    `library`: the file the in-context examples are drawn from (default `view`; the whole file where `view` is
    the items still short)."""
    from csk import compute

    served = Served(spec, cache_dir)
    book = templates(spec)
    shots = examples_for(view, view if library is None else library, kind=kind, answers=answers, k=spec.examples,
                         seed=seed)
    bodies, of = {}, {}
    for r in view.itertuples():
        qtype = kind.get(r.id)
        name = qtype if qtype in book else "default"
        passage = getattr(r, "passage", None)
        dialogue = [str(t) for t in passage] if passage is not None and len(passage) else \
            [str(getattr(r, "context", ""))]
        text = prompt(book[name], dialogue=dialogue, target=str(getattr(r, "target", "") or ""),
                      question=str(getattr(r, "question", "") or ""), answers=answers[r.id], n=spec.candidates,
                      relation=qtype or "", examples=shots.get(r.id, []))
        body = {"model": spec.model, "messages": [{"role": "user", "content": text}],
                "temperature": spec.temperature, "max_tokens": spec.max_tokens,
                # the request's own seed: a function of the item's content, not of its place in the file
                "seed": int(compute.rng(seed, "server", hashlib.sha256(text.encode()).hexdigest()).integers(2**31 - 1))}
        key = request_key(body)
        bodies[key] = body
        of.setdefault(key, []).append((r.id, name, hashlib.sha256(book[name].encode()).hexdigest()[:12],
                                       [e["id"] for e in shots.get(r.id, [])]))
    records = served.ask(bodies)
    chinese = chinese_ids(view)
    pools: dict[str, list[tuple[str, str]]] = {i: [] for i in view["id"]}
    for key in sorted(of):
        record = records[key]
        text = served.redact(record.get("text"))  # a response kept before keys were masked in it
        got = read(text, record.get("finish_reason"))
        kept = final(record)
        again = "" if kept else "; not kept: asked again on the next run" + \
            (" (raise counterfactuals.server.max_tokens)" if got.truncated else "")
        for iid, name, template_sha, example_ids in of[key]:
            responses.append({"request": key, "instance_id": iid, "template": name, "template_sha256": template_sha,
                              "examples": example_ids, "model": record.get("model") or spec.model,
                              "asked_model": spec.model, "response_id": record.get("response_id"),
                              "finish_reason": record.get("finish_reason"), "final": kept, "text": text})
            rule = f"server:{spec.model}:{name}:{key[:16]}"
            where = {"instance_id": iid, "rule": rule}
            if got.problem:
                rejected.append(_rejected(served, f"{iid}/server:{key[:16]}", None, got.problem, where,
                                          f"the response to request {key[:16]} gave no candidate "
                                          f"({got.problem.replace('_', ' ')}){again}"))
                continue
            for j, (part, why) in enumerate(got.dropped):
                rejected.append(_rejected(served, f"{iid}/server:{key[:16]}:d{j}", part, why, where,
                                          f"part {j} of the response to request {key[:16]}: {why.replace('_', ' ')}"
                                          + (again if why == "truncated" else "")))
            taken = 0
            for j, cand in enumerate(got.candidates):
                bad = why_not(cand, answers[iid], iid in chinese)
                if bad is None and taken >= spec.candidates:
                    bad = "more_than_asked"
                if bad:
                    rejected.append(_rejected(
                        served, f"{iid}/server:{key[:16]}:{j}", cand, bad, where,
                        f"candidate {j} of the response to request {key[:16]}: "
                        + (f"beyond the {spec.candidates} asked for (counterfactuals.server.candidates)"
                           if bad == "more_than_asked" else bad.replace("_", " "))))
                else:
                    pools[iid].append((rule, cand))
                    taken += 1
    return pools, served.sent


def _rejected(served: Served, rid: str, candidate: str | None, code: str, where: dict, reason: str) -> dict:
    """A rejected row of the server's (reason_code server_<code>), the key masked in what the server wrote."""
    return {"id": rid, **where, "candidate": served.redact(candidate), "reason_code": f"server_{code}",
            "reason": served.redact(reason)}
