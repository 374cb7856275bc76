"""The `server` generator: distractor candidates from a language model the user serves behind the OpenAI
chat-completions protocol (vLLM, llama.cpp's server, Ollama, `transformers serve`; docs/distractors.md).

Each item is one request: its dialogue, target, question and correct answers in a prompt of its question's
type (`PROMPTS`, or a user's TOML file of templates), asking for answers that are wrong for this dialogue yet
about its people and events, of the question's type and length. Every request is kept by its content
(prompt, model, sampling settings, seed) in the store's `_cache/requests/`, written as its response arrives:
a rerun sends nothing, a run killed midway resumes with the requests it lacks. Retries, backoff and timeouts
are the `openai` client's (429, 5xx, connection errors, honouring Retry-After); the API key is read from the
environment variable the settings name and never written anywhere.

A response is parsed into candidates (a JSON list, numbered lines or bullets); a malformed or empty
response, a refusal, a copy of a correct answer or a candidate in another language is a rejected row with
its reason.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import tomllib
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path

import pandas as pd
from csk.errors import ConfigError, CskError
from csk.params import InputPath, Params
from csk.progress import progress

# One template per question type (the relation the question names, `counterfactuals.question_type`), and
# `default` for the rest (a question of another kind, a file without questions). Fields: {dialogue},
# {target}, {question}, {answers} (the correct ones, one a line), {n}, {relation}, {words} (the correct
# answers' typical length).
PROMPTS = {
    "default": (
        "Here is a dialogue.\n\n{dialogue}\n\nTarget utterance: {target}\nQuestion: {question}\n"
        "Correct answers:\n{answers}\n\n"
        "Write {n} answers to the question that are WRONG for this dialogue but could fool a careless reader: "
        "each about the same people and the events of this dialogue, answering the same question ({relation}), "
        "about {words} words long, plain English, one sentence. Do not repeat or paraphrase a correct answer "
        "and do not merely negate one. Reply with a JSON list of {n} strings and nothing else."),
    "cause": (
        "Here is a dialogue.\n\n{dialogue}\n\nTarget utterance: {target}\nQuestion: {question}\n"
        "Correct answers:\n{answers}\n\n"
        "Write {n} WRONG causes of the target: events that happened before it, about the same people and "
        "things of this dialogue, that the dialogue shows did not lead to the target. About {words} words each, "
        "one sentence in the style of the correct answers. Do not repeat, paraphrase or negate a correct "
        "answer. Reply with a JSON list of {n} strings and nothing else."),
    "prerequisite": (
        "Here is a dialogue.\n\n{dialogue}\n\nTarget utterance: {target}\nQuestion: {question}\n"
        "Correct answers:\n{answers}\n\n"
        "Write {n} WRONG prerequisites of the target: conditions before it, about the same people and things "
        "of this dialogue, that the target does not depend on. About {words} words each, one sentence in the "
        "style of the correct answers. Do not repeat, paraphrase or negate a correct answer. Reply with a JSON "
        "list of {n} strings and nothing else."),
    "motivation": (
        "Here is a dialogue.\n\n{dialogue}\n\nTarget utterance: {target}\nQuestion: {question}\n"
        "Correct answers:\n{answers}\n\n"
        "Write {n} WRONG motivations of the speaker of the target: wants or intentions the speaker could have "
        "in this dialogue but that do not explain the target. About {words} words each, one sentence in the "
        "style of the correct answers. Do not repeat, paraphrase or negate a correct answer. Reply with a JSON "
        "list of {n} strings and nothing else."),
    "subsequent event": (
        "Here is a dialogue.\n\n{dialogue}\n\nTarget utterance: {target}\nQuestion: {question}\n"
        "Correct answers:\n{answers}\n\n"
        "Write {n} WRONG subsequent events: things that could happen after the target to the same people and "
        "things of this dialogue but that the dialogue makes unlikely. About {words} words each, one sentence "
        "in the style of the correct answers. Do not repeat, paraphrase or negate a correct answer. Reply with "
        "a JSON list of {n} strings and nothing else."),
    "reaction": (
        "Here is a dialogue.\n\n{dialogue}\n\nTarget utterance: {target}\nQuestion: {question}\n"
        "Correct answers:\n{answers}\n\n"
        "Write {n} WRONG emotional reactions of the listener to the target: feelings the listener of this "
        "dialogue could have but that do not fit the target. About {words} words each, one sentence in the "
        "style of the correct answers. Do not repeat, paraphrase or negate a correct answer. Reply with a JSON "
        "list of {n} strings and nothing else."),
}

REFUSAL = re.compile(r"^\s*(i'?m sorry|i am sorry|i cannot|i can'?t|as an ai\b|i apologi[sz]e|i won'?t)", re.I)
NUMBERED = re.compile(r"^\s*(?:[-*\u2022]|\(?\d{1,2}[.)\]:]|[a-z][.)])\s+", re.I)
CJK = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]")


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
    """candidates asked for per item"""
    max_tokens: int = 400
    concurrency: int = 4
    """requests in flight at once"""
    timeout: float = 120.0
    """seconds one request may take"""
    retries: int = 4
    """retries of a failed request (429, 5xx, connection errors), with the client's exponential backoff"""
    templates: InputPath = None
    """a TOML file of prompt templates (keys: default, cause, prerequisite, motivation, subsequent event,
    reaction) replacing the bundled ones it names"""


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
           relation: str) -> str:
    words = round(sum(len(a.split()) for a in answers) / max(len(answers), 1))
    return template.format(dialogue="\n".join(dialogue), target=target, question=question,
                           answers="\n".join(f"- {a}" for a in answers), n=n, relation=relation or "the same kind",
                           words=words)


def request_key(body: dict) -> str:
    """A request's identity: its content (messages, model, sampling settings, seed), never the server's address."""
    return hashlib.sha256(json.dumps(body, sort_keys=True, ensure_ascii=False).encode()).hexdigest()


def parse(text: str | None) -> list[str] | str:
    """Candidates from a response: a JSON list (inside a code fence or not), else one per numbered line or
    bullet, else one per non-empty line. A string instead of a list: why nothing could be read."""
    if text is None or not text.strip():
        return "empty_response"
    body = text.strip()
    fence = re.search(r"```(?:json)?\s*(.*?)```", body, re.S)
    if fence:
        body = fence.group(1).strip()
    if REFUSAL.match(body):
        return "refusal"
    start, end = body.find("["), body.rfind("]")
    if start != -1 and end > start:
        try:
            value = json.loads(body[start:end + 1])
        except json.JSONDecodeError:
            value = None
        if isinstance(value, list):
            items = [str(v).strip() for v in value if isinstance(v, (str, int, float)) and str(v).strip()]
            return items or "empty_response"
    lines = [line for line in body.splitlines() if line.strip()]
    listed = [NUMBERED.sub("", line).strip() for line in lines if NUMBERED.match(line)]
    items = listed or [line.strip() for line in lines]
    items = [t.strip().strip('"').strip("\u201c\u201d").strip() for t in items]
    items = [t for t in items if t and not t.endswith(":")]
    return items or "malformed_response"


def why_not(candidate: str, answers: list[str], chinese: bool) -> str | None:
    """A reason a parsed candidate cannot be offered, or None."""
    norm = lambda t: re.sub(r"[\W_]+", " ", t.lower()).strip()  # noqa: E731
    if REFUSAL.match(candidate):
        return "refusal"
    if norm(candidate) in {norm(a) for a in answers}:
        return "copy_of_correct_answer"
    if bool(CJK.search(candidate)) != chinese:
        return "other_language"
    return None


class Served:
    """One server's requests, each kept in `cache_dir` by its content once its response arrived."""

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

    def _client(self):
        from openai import OpenAI

        key = os.environ.get(self.spec.api_key_env, "") if self.spec.api_key_env else ""
        return OpenAI(base_url=self.spec.base_url, api_key=key or "none", timeout=self.spec.timeout,
                      max_retries=self.spec.retries)

    def _path(self, key: str) -> Path | None:
        return self.cache / key[:2] / f"{key}.json" if self.cache is not None else None

    def cached(self, key: str) -> dict | None:
        path = self._path(key)
        if path is None or not path.exists():
            return None
        try:
            return json.loads(path.read_text(encoding="utf-8"))
        except ValueError:  # a torn write (a kill mid-write): asked again
            return None

    def _keep(self, key: str, record: dict) -> None:
        path = self._path(key)
        if path is None:
            return
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(record, ensure_ascii=False), encoding="utf-8")
        os.replace(tmp, path)

    def ask(self, bodies: dict[str, dict]) -> dict[str, dict]:
        """Every request's record ({"body", "text", "finish_reason", "model"}), from the cache or the server,
        `concurrency` at a time, with progress; a request that fails after the client's retries stops the run
        with one line naming the server and how many requests finished (kept for the rerun)."""
        import openai

        out = {k: r for k in bodies if (r := self.cached(k)) is not None}
        todo = [k for k in sorted(bodies) if k not in out]
        if not todo:
            return out
        client = self._client()

        def one(key: str) -> tuple[str, dict]:
            body = bodies[key]
            reply = client.chat.completions.create(**body)
            choice = reply.choices[0] if reply.choices else None
            record = {"body": body, "text": choice.message.content if choice is not None else None,
                      "finish_reason": choice.finish_reason if choice is not None else None,
                      "model": reply.model, "response_id": reply.id}
            self._keep(key, record)
            return key, record

        done = len(out)
        with ThreadPoolExecutor(max(1, self.spec.concurrency)) as pool, \
                progress(len(todo), f"server {self.spec.model}", unit="requests") as bar:
            futures = [pool.submit(one, k) for k in todo]
            try:
                for f in as_completed(futures):
                    key, record = f.result()
                    out[key] = record
                    self.sent += 1
                    bar.update(1)
            except (openai.APIConnectionError, openai.APIStatusError, openai.APITimeoutError) as exc:
                for f in futures:
                    f.cancel()
                finished = done + self.sent
                raise CskError(f"the server {self.spec.base_url} (model {self.spec.model}) failed after "
                               f"{self.spec.retries} retries: {type(exc).__name__}: {str(exc)[:200]}; {finished} of "
                               f"{len(bodies)} requests finished and are kept: the same command resumes with the "
                               "rest") from None
        return out


def server_pools(view: pd.DataFrame, *, spec: ServerSpec, kind: dict[str, str | None], answers: dict[str, list[str]],
                 seed: int, cache_dir: Path | None, rejected: list[dict], responses: list[dict]) -> dict:
    """{instance id: [(rule, text)]} from the server; `rejected` gets the responses and candidates that could not
    be used, `responses` one row per request (for the artifact and lineage)."""
    from csk import compute

    served = Served(spec, cache_dir)
    book = templates(spec)
    bodies, of = {}, {}
    for r in view.itertuples():
        qtype = kind.get(r.id)
        name = qtype if qtype in book else "default"
        passage = getattr(r, "passage", None)
        dialogue = [str(t) for t in passage] if passage is not None and len(passage) else \
            [str(getattr(r, "context", ""))]
        text = prompt(book[name], dialogue=dialogue, target=str(getattr(r, "target", "") or ""),
                      question=str(getattr(r, "question", "") or ""), answers=answers[r.id], n=spec.candidates,
                      relation=qtype or "")
        body = {"model": spec.model, "messages": [{"role": "user", "content": text}],
                "temperature": spec.temperature, "max_tokens": spec.max_tokens,
                # the request's own seed: a function of the item's content, not of its place in the file
                "seed": int(compute.rng(seed, "server", hashlib.sha256(text.encode()).hexdigest()).integers(2**31 - 1))}
        key = request_key(body)
        bodies[key] = body
        of.setdefault(key, []).append((r.id, name, hashlib.sha256(book[name].encode()).hexdigest()[:12]))
    records = served.ask(bodies)
    chinese = {r.id: str(getattr(r, "language", "en")) == "zh" for r in view.itertuples()}
    pools: dict[str, list[tuple[str, str]]] = {i: [] for i in view["id"]}
    for key in sorted(of):
        record = records[key]
        items = parse(record.get("text"))
        for iid, name, template_sha in of[key]:
            responses.append({"request": key, "instance_id": iid, "template": name, "template_sha256": template_sha,
                              "model": record.get("model") or spec.model, "response_id": record.get("response_id"),
                              "finish_reason": record.get("finish_reason"), "text": record.get("text")})
            rule = f"server:{spec.model}:{name}:{key[:16]}"
            if isinstance(items, str):
                rejected.append({"id": f"{iid}/server:{key[:16]}", "instance_id": iid, "candidate": None,
                                 "reason_code": f"server_{items}", "rule": rule,
                                 "reason": f"the response to request {key[:16]} gave no candidate ({items})"})
                continue
            for j, cand in enumerate(items):
                bad = why_not(cand, answers[iid], chinese[iid])
                if bad:
                    rejected.append({"id": f"{iid}/server:{key[:16]}:{j}", "instance_id": iid, "candidate": cand,
                                     "reason_code": f"server_{bad}", "rule": rule,
                                     "reason": f"candidate {j} of the response to request {key[:16]}: {bad.replace('_', ' ')}"})
                else:
                    pools[iid].append((rule, cand))
    return pools, served.sent
