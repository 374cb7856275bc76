"""The `server` generator's faults, each against the local test server (`FakeServer`, a real HTTP server on
127.0.0.1): a list cut by the token limit, an HTML page, chatter, a response kept only when final, the count
asked for, a 200 that is no chat completion and a refused key (one line, the run stopped at once, the key's
value nowhere), the model that answered, and the in-context examples of other items (issue 70, items 5, 6)."""

from __future__ import annotations

import io
import json
import logging

import pandas as pd
import pytest

from csk.errors import CskError
from tasks.distractors.served import examples_for, read, redact, refusal
from tests.distractors.test_served import FakeServer

KEY = "sk-live-0123456789abcdefSECRET"
HTML_502 = (b"<!DOCTYPE html>\n<html><head><title>502 Bad Gateway</title></head>\n<body><center><h1>502 Bad Gateway"
            b"</h1></center><hr><center>nginx</center></body></html>\n")


def _items(n: int = 6, question: str = "What is or could be the cause of target?") -> pd.DataFrame:
    """n items, two a dialogue, each with its own published distractors ("wrong k a", "wrong k b")."""
    return pd.DataFrame({
        "id": [f"i{k}" for k in range(n)], "group_id": [f"g{k // 2}" for k in range(n)],
        "context": [f"dialogue {k}" for k in range(n)], "question": [question] * n,
        "target": [f"Target {k} ." for k in range(n)],
        "gold": [f"The speaker bought bread number {k}." for k in range(n)],
        "passage": [[f"A: I bought bread {k} .", f"B: Target {k} ."] for k in range(n)],
        "choices": [[f"The speaker bought bread number {k}.", f"wrong {k} a", f"wrong {k} b"] for k in range(n)],
        "correct_answers": [[0]] * n, "n_distractors": [2] * n})


def _own(prompt: str) -> str:
    """The item's number, read from its own correct answers (the last in the prompt: examples come first)."""
    return prompt.rsplit("Correct answers:", 1)[1].split("bread number ")[1].split(".")[0]


def _run(tmp_path, url, items=None, **server):
    from csk.runtime import StageContext
    from csk.store import Store
    from tasks.distractors.counterfactuals import counterfactuals
    from tasks.distractors.served import ServerSpec

    ctx = StageContext(Store(tmp_path / "store"), "distractors", "counterfactuals", key="k" * 24)
    spec = ServerSpec(base_url=url, model="tiny-chat", **{"concurrency": 2, "retries": 0, **server})
    return counterfactuals(_items() if items is None else items, generators=["server"], server=spec, fluency=False,
                           ctx=ctx)


def _responses(out) -> pd.DataFrame:
    return pd.read_parquet(io.BytesIO(out.files["server_responses.parquet"]))


def _kept(tmp_path) -> int:
    return len(list((tmp_path / "store" / "_cache" / "requests").rglob("*.json")))


def test_a_response_is_read_for_what_it_holds():
    cut = read('["A went home.", "B sold the car.", "C sold the', "length")
    assert cut.candidates == ["A went home.", "B sold the car."] and cut.dropped == [("C sold the", "truncated")]
    assert cut.truncated and cut.problem is None
    # the finish reason says the model stopped, yet the list is open: cut all the same
    assert read('```json\n["A went home.", "B so').truncated
    chatty = read("Sure! Here are 2 wrong causes:\n1. A went home.\n2. B sold the car.\nLet me know if you need more.")
    assert chatty.candidates == ["A went home.", "B sold the car."]
    assert [r for _, r in chatty.dropped] == ["chatter", "chatter"]
    assert read("A went home.\nB sold the car.\nI hope this helps!").candidates == ["A went home.", "B sold the car."]
    assert read(HTML_502.decode()).problem == "html"
    assert read('{"distractors": ["A went home."]}').candidates == ["A went home."]
    assert read('{"note": "no answers"}').problem == "not_a_list"
    assert read("['A went home.', 'B left.']").candidates == ["A went home.", "B left."]  # a Python list
    assert read("Here are the wrong answers:").problem == "chatter"
    assert read("").problem == read("   ").problem == read(None).problem == "empty_response"
    assert read("A went home.\nB sold the car.\nC sold th", "length").dropped == [("C sold th", "truncated")]


def test_a_refusal_is_the_model_declining_not_a_sentence_that_starts_with_i_cannot():
    refusals = ["I'm sorry, but I can't help with that.", "I can't assist with that request.",
                "As an AI language model, I cannot write misleading answers.",
                "I apologize, but I cannot fulfill this request.", "Unfortunately, I'm unable to provide wrong answers.",
                "I won't write deceptive content.", "I\u2019m sorry, but I can\u2019t help with that.", "I must decline.",
                "Thanks for the dialogue, but I can't help with this task.", "I can't do that.",
                "I'm not able to complete this task.", "Sorry, I can't comply."]
    sentences = ["I cannot believe he left.", "I can't help feeling sad about it.", "I can't help but laugh.",
                 "I won't forget this day.", "I'm sorry for your loss.", "I can't wait to see her.",
                 "I can't make it to the party.", "I won't do it again.", "I can't help it.",
                 "I cannot stand his music.", "The speaker can't help with the move.", "We can't afford the rent."]
    assert [t for t in refusals if not refusal(t, response=True)] == []
    assert [t for t in sentences if refusal(t, response=True) or refusal(t)] == []
    assert read("I cannot believe he left.").candidates == ["I cannot believe he left."]


def test_a_cut_list_gives_its_whole_strings_and_is_asked_again_on_the_next_run(tmp_path):
    def answer(prompt):
        k = _own(prompt)
        return {"content": f'["The speaker sold the bakery {k}.", "The listener baked bread {k}.", "The speak',
                "finish_reason": "length"}

    server = FakeServer(answer)
    try:
        out = _run(tmp_path, server.url)
        assert (out.data.groupby("instance_id").size() == 2).all()  # the two whole strings of each
        cut = out.rejected[out.rejected["reason_code"] == "server_truncated"]
        assert len(cut) == 6 and set(cut["candidate"]) == {"The speak"}
        assert cut["reason"].str.contains("asked again on the next run").all()
        assert cut["reason"].str.contains("max_tokens").all()
        assert not _responses(out)["final"].any() and _kept(tmp_path) == 0
        _run(tmp_path, server.url)
        assert len(server.requests) == 12  # none was kept: all asked again
    finally:
        server.close()


def test_an_empty_or_html_or_chatty_response_is_a_rejected_row_and_only_a_final_one_is_kept(tmp_path):
    def answer(prompt):
        k = int(_own(prompt))
        return ["", HTML_502.decode(), "Sure! Here are the answers:\n1. The speaker sold bread %d.\n2. The listener "
                "left %d.\nLet me know if you need more." % (k, k)][k % 3]

    server = FakeServer(answer)
    try:
        out = _run(tmp_path, server.url)
        server_rows = out.rejected[out.rejected["reason_code"].str.startswith("server_")]
        codes = server_rows.groupby("instance_id")["reason_code"].agg(lambda s: sorted(set(s)))
        assert codes["i0"] == ["server_empty_response"] and codes["i1"] == ["server_html"]
        assert codes["i2"] == ["server_chatter"]
        chatter = out.rejected[out.rejected["reason_code"] == "server_chatter"]
        assert set(chatter["candidate"]) == {"Sure! Here are the answers:", "Let me know if you need more."}
        assert sorted(out.data[out.data["instance_id"] == "i2"]["candidate"]) == \
            ["The listener left 2.", "The speaker sold bread 2."]
        assert _kept(tmp_path) == 2  # the chatty ones: final; the empty and the HTML ones are asked again
        _run(tmp_path, server.url)
        assert len(server.requests) == 6 + 4
    finally:
        server.close()


def test_at_most_the_candidates_asked_for_are_kept_from_a_response(tmp_path):
    server = FakeServer(lambda p: json.dumps([f"The speaker sold car {j} of {_own(p)}." for j in range(12)]))
    try:
        out = _run(tmp_path, server.url, candidates=3)
        assert (out.data.groupby("instance_id").size() == 3).all()
        over = out.rejected[out.rejected["reason_code"] == "server_more_than_asked"]
        assert len(over) == 6 * 9 and over["reason"].str.contains("beyond the 3 asked for").all()
        assert "Reply with a JSON list of 3 strings" in server.requests[0]["messages"][0]["content"]
    finally:
        server.close()


@pytest.mark.parametrize("status", [200, 502])
def test_an_html_page_for_a_response_stops_the_run_at_once_with_one_line(tmp_path, status):
    server = FakeServer(lambda p: "[]", raw=lambda n: (status, "text/html", HTML_502), delay=0.2)
    try:
        with pytest.raises(CskError) as err:
            _run(tmp_path, server.url, items=_items(12))
    finally:
        server.close()
    line = str(err.value)
    assert "\n" not in line and server.url in line and "an HTML page titled '502 Bad Gateway'" in line
    assert ("HTTP 200 and no JSON" in line) if status == 200 else ("failed after 0 retries: HTTP 502" in line)
    assert "0 of 12 requests finished" in line
    assert err.value.__context__ is None and err.value.__cause__ is None  # no traceback of the client's behind it
    assert len(server.requests) <= 2  # those in flight (concurrency 2); the rest never sent


def test_a_200_that_is_no_chat_completion_is_one_line_naming_the_server(tmp_path):
    server = FakeServer(lambda p: "[]", raw=lambda n: (200, "application/json", b'{"status": "ok"}'), delay=0.2)
    try:
        with pytest.raises(CskError, match=r"answered request [0-9a-f]{16} with HTTP 200 and JSON that is no chat "
                                           r"completion \(application/json: '\{\"status\": \"ok\"\}'\): is base_url"):
            _run(tmp_path, server.url, items=_items(12))
    finally:
        server.close()
    assert len(server.requests) <= 2


def test_a_refused_key_is_one_line_naming_its_variable_and_its_value_is_written_nowhere(tmp_path, monkeypatch, capsys,
                                                                                        caplog):
    from csk import lineage_events

    monkeypatch.setenv("CSK_TEST_API_KEY", KEY)
    echo = json.dumps({"error": {"message": f"Incorrect API key provided: {KEY}. Also {KEY[:10]}****{KEY[-4:]}",
                                 "type": "invalid_request_error"}}).encode()
    server = FakeServer(lambda p: "[]", raw=lambda n: (401, "application/json", echo), delay=0.2)
    caplog.set_level(logging.DEBUG)
    try:
        with pytest.raises(CskError) as err:
            _run(tmp_path, server.url, items=_items(12), api_key_env="CSK_TEST_API_KEY", retries=3)
    finally:
        server.close()
    line = str(err.value)
    assert "\n" not in line and "refused the API key (HTTP 401" in line and "CSK_TEST_API_KEY" in line
    assert "failed after" not in line  # a 401 is not retried
    assert len(server.requests) <= 2  # and the run stopped at once
    # the lineage event of the failed stage holds the message: written here as the runtime writes it
    lineage_events.fail(tmp_path / "store", "local", "distractors", "counterfactuals", err.value)
    assert (tmp_path / "store" / "_lineage" / "events.jsonl").exists()
    _nowhere(KEY, tmp_path, [line, repr(err.value), capsys.readouterr(), caplog.text])


def test_a_server_echoing_the_key_in_its_answers_has_it_masked_in_rows_and_records(tmp_path, monkeypatch):
    monkeypatch.setenv("CSK_TEST_API_KEY", KEY)
    server = FakeServer(lambda p: f"Your key is {KEY}:\n1. The speaker used key {KEY} {_own(p)}.\n"
                                  f"2. The listener left {_own(p)}.\nI hope {KEY} helps.")
    try:
        out = _run(tmp_path, server.url, api_key_env="CSK_TEST_API_KEY")
    finally:
        server.close()
    assert "***" in out.data["candidate"].str.cat() and "***" in out.rejected["candidate"].str.cat()
    _nowhere(KEY, tmp_path, [out.data.to_json(), out.rejected.to_json(), _responses(out).to_json(),
                             json.dumps(out.notes, default=str)])


def _nowhere(key: str, tmp_path, texts: list) -> None:
    """Neither the key nor a part of it in the texts, nor in any file under the store."""
    parts = [key, key[:12], key[-12:]]
    for text in texts:
        assert not any(p in str(text) for p in parts), str(text)[:300]
    for f in (tmp_path / "store").rglob("*"):
        if f.is_file():
            data = f.read_bytes()
            assert not any(p.encode() in data for p in parts), f


def test_the_model_that_answered_is_recorded_and_one_model_writes_the_pool(tmp_path, caplog):
    def by(model):
        return lambda p: {"content": json.dumps([f"The speaker sold the bakery {_own(p)}."]), "model": model}

    other = FakeServer(by("tiny-chat-q4:latest"))
    try:
        out = _run(tmp_path, other.url, items=_items(4), examples=0)
    finally:
        other.close()
    responses = _responses(out)
    assert set(responses["model"]) == {"tiny-chat-q4:latest"} and set(responses["asked_model"]) == {"tiny-chat"}
    assert "the server says tiny-chat-q4:latest answered" in caplog.text
    # the server now answers the name with another model: the kept responses of the first are asked again
    caplog.clear()
    swapped = FakeServer(by("tiny-chat-q8"))
    try:
        out = _run(tmp_path, swapped.url, items=_items(6), examples=0)
    finally:
        swapped.close()
    assert len(swapped.requests) == 2 + 4 and set(_responses(out)["model"]) == {"tiny-chat-q8"}
    assert "4 kept responses were answered by tiny-chat-q4:latest, this run's by tiny-chat-q8: asked again" in \
        caplog.text


def test_each_prompt_shows_examples_of_other_dialogues_never_its_own(tmp_path):
    cause = _items(6)
    motive = _items(4, "What is or could be the motivation of target?").assign(
        id=lambda d: [f"m{k}" for k in range(4)], group_id=lambda d: [f"h{k}" for k in range(4)],
        target=lambda d: [f"Motive target {k} ." for k in range(4)],
        choices=lambda d: [[c[0], f"motive {k} a", f"motive {k} b"] for k, c in enumerate(d["choices"])])
    items = pd.concat([cause, motive], ignore_index=True)
    server = FakeServer(lambda p: json.dumps([f"The speaker sold the bakery {_own(p)}."]))
    try:
        out = _run(tmp_path, server.url, items=items, examples=2)
    finally:
        server.close()
    prompts = {r["messages"][0]["content"].rsplit("Target utterance: ", 1)[1].split(" .")[0]: r["messages"][0]["content"]
               for r in server.requests}
    assert len(prompts) == 10
    for k in range(6):
        text = prompts[f"Target {k}"]
        shown = {j for j in range(6) if f'"wrong {j} a", "wrong {j} b"' in text}
        assert len(shown) == 2 and not shown & {k, k ^ 1}, (k, shown)  # never its own, never its dialogue's
        assert "motive" not in text  # another question type
        assert text.index("Examples from other dialogues") < text.index("Here is a dialogue.")
    assert "wrong" not in prompts["Target 0"].split("Here is a dialogue.")[1]
    responses = _responses(out).set_index("instance_id")
    assert all(len(e) == 2 for e in responses["examples"])
    assert set(responses.loc["i0", "examples"]).isdisjoint({"i0", "i1"})
    assert set(responses.loc["m0", "examples"]) <= {"m1", "m2", "m3"}
    assert "motive 1 a" in prompts["Motive target 0"] or "motive 2 a" in prompts["Motive target 0"]


def test_examples_are_chosen_by_content_not_by_the_order_of_the_file():
    items = _items(10)
    items["target"] = [f"Target {k} about {'bread' if k % 2 else 'cars'} ." for k in range(10)]
    kind = {i: "cause" for i in items["id"]}
    answers = dict(zip(items["id"], [[g] for g in items["gold"]]))
    once = examples_for(items, items, kind=kind, answers=answers, k=3, seed=0)
    shuffled = items.sample(frac=1, random_state=7).reset_index(drop=True)
    again = examples_for(shuffled, shuffled, kind=kind, answers=answers, k=3, seed=0)
    assert {i: [e["id"] for e in v] for i, v in once.items()} == {i: [e["id"] for e in v] for i, v in again.items()}
    # the nearest in words first: an item about bread is shown items about bread
    assert all(int(e["id"][1:]) % 2 == 1 for e in once["i3"])
    assert examples_for(items, items, kind=kind, answers=answers, k=0, seed=0) == {}
    # a file without published distractors: no example
    assert examples_for(items, items.assign(choices=None), kind=kind, answers=answers, k=2, seed=0) == {}


def test_a_key_is_masked_whole_and_in_part():
    assert redact(f"bad key {KEY}, was {KEY[:9]}****{KEY[-4:]} ({KEY[3:15]})", KEY) == "bad key ***, was *** (***)"
    assert redact("The speaker went home.", KEY) == "The speaker went home." and redact(None, KEY) is None
