"""The served model's request cache (issue 72, item 3): a kept response is named by the whole request body (model,
messages, temperature, max_tokens, seed) and the format of what is kept of it; each changed is a miss, an identical
request a hit, and the server's address is deliberately no part of it (tasks/distractors/served.py, at
`request_key`)."""

from __future__ import annotations

import ast
import hashlib
import inspect
import json
import textwrap

from tasks.distractors import served as served_module
from tasks.distractors.served import ServerSpec, Served, request_key
from tests.distractors.test_served import FakeServer, _answer, _run

BODY = {"model": "tiny-chat", "messages": [{"role": "user", "content": "Write two wrong answers."}],
        "temperature": 0.7, "max_tokens": 400, "seed": 1}


def _sent(server: FakeServer, cache, body: dict, url: str | None = None) -> int:
    """How many requests one run asking `body` sends (0: its response was kept)."""
    served = Served(ServerSpec(base_url=url or server.url, model=body["model"]), cache)
    served.ask({request_key(body): body})
    return served.sent


def test_each_part_of_a_requests_identity_changed_is_a_miss(tmp_path):
    """The model, the messages (a word, a message added), the temperature, max_tokens and the seed: each changed,
    the request is sent; the same request (its fields in another order too) is read from the cache, and so is
    one sent to another server (the address is where a request goes, not what it asks); a kept record of
    another format is asked again."""
    server = FakeServer(lambda prompt: json.dumps(["A went home.", "B sold the car."]))
    other = FakeServer(lambda prompt: json.dumps(["C cried."]))
    cache = tmp_path / "_cache"
    try:
        assert _sent(server, cache, BODY) == 1
        assert _sent(server, cache, dict(reversed(list(BODY.items())))) == 0  # identical: a hit
        changed = {
            "model": {**BODY, "model": "tiny-chat-2"},
            "message": {**BODY, "messages": [{"role": "user", "content": "Write three wrong answers."}]},
            "system message": {**BODY, "messages": [{"role": "system", "content": "Be brief."}, *BODY["messages"]]},
            "temperature": {**BODY, "temperature": 0.2},
            "max_tokens": {**BODY, "max_tokens": 401},
            "seed": {**BODY, "seed": 2},
        }
        for what, body in changed.items():
            assert _sent(server, cache, body) == 1, what
            assert _sent(server, cache, body) == 0, what  # and kept under its own key
        assert len({request_key(b) for b in [BODY, *changed.values()]}) == 1 + len(changed)
        assert _sent(other, cache, BODY) == 0 and not other.requests  # another address: the kept response
        kept = next((cache / "requests").rglob(f"{request_key(BODY)}.json"))
        assert json.loads(kept.read_text())["record"] == served_module.RECORD
        served_module.RECORD += 1  # another format of what is kept: asked again
        try:
            assert _sent(server, cache, BODY) == 1
        finally:
            served_module.RECORD -= 1
        record = json.loads(kept.read_text())
        del record["record"]  # a record written before the format was recorded: the first format
        kept.write_text(json.dumps(record))
        assert _sent(server, cache, BODY) == 0
    finally:
        server.close()
        other.close()


def test_every_server_setting_the_response_depends_on_reaches_the_request(tmp_path):
    """Through the generator: the settings a response depends on (model, temperature, max_tokens, the candidates
    asked for, the examples shown) each change every request; those it does not (the address, concurrency,
    timeout, retries) send nothing again."""
    server = FakeServer(_answer)
    other = FakeServer(_answer)
    try:
        assert _run(tmp_path, server.url).notes["server"]["sent_this_run"] == 6
        for setting in ({"temperature": 0.2}, {"max_tokens": 300}, {"candidates": 3}, {"examples": 0}):
            assert _run(tmp_path, server.url, **setting).notes["server"]["sent_this_run"] == 6, setting
        assert _run(tmp_path, other.url, concurrency=1, timeout=30.0, retries=1).notes["server"]["sent_this_run"] == 0
        assert not other.requests
    finally:
        server.close()
        other.close()


def test_what_is_kept_of_a_response_is_the_recorded_format():
    """`kept_of` decides what a kept record holds; its code is pinned to `RECORD`: an edit of it fails here until
    RECORD is raised (so that records of the old format are asked again) and this hash updated."""
    source = textwrap.dedent(inspect.getsource(served_module.kept_of))
    fn = ast.parse(source).body[0]
    code = "\n".join(ast.get_source_segment(source, s) for s in fn.body[1:])  # its code, not its docstring
    pinned = {1: "0a12df0151f22201"}
    assert hashlib.sha256(code.encode()).hexdigest()[:16] == pinned[served_module.RECORD], \
        "kept_of changed: raise served.RECORD and pin the new hash here"
