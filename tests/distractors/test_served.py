"""The `server` generator against a real HTTP server on 127.0.0.1 speaking the OpenAI chat-completions
protocol (a small one written here: what it answers, and when it fails, is the test's to choose): parsing
of the response shapes, requests kept and never sent twice, a run stopped midway resumed with only the
missing requests, retries and the final one-line error, and the API key in no file of the store."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pandas as pd
import pytest

from csk.errors import CskError
from tasks.distractors.served import parse, why_not


class FakeServer:
    """POST /v1/chat/completions: the reply `answer(prompt)` gives (its text, or a dict of "content",
    "finish_reason" and "model"), or HTTP `fail(n)` for the n-th request, or what `raw(n)` gives for it
    ((status, content type, body bytes) or None), each after `delay` seconds."""

    def __init__(self, answer, fail=lambda n: None, raw=lambda n: None, delay: float = 0.0):
        self.requests, self.keys, self.lock = [], [], threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def send(self, status: int, ctype: str, data: bytes):
                self.send_response(status)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with outer.lock:
                    n = len(outer.requests)
                    outer.requests.append(body)
                    outer.keys.append(self.headers.get("Authorization"))
                time.sleep(delay)
                given = raw(n)
                if given:
                    return self.send(*given)
                status = fail(n)
                if status:
                    return self.send(status, "application/json", b'{"error": {"message": "failing on purpose"}}')
                said = answer(body["messages"][-1]["content"])
                said = said if isinstance(said, dict) else {"content": said}
                reply = {"id": f"r{n}", "object": "chat.completion", "created": 0,
                         "model": said.get("model", body["model"]),
                         "choices": [{"index": 0, "finish_reason": said.get("finish_reason", "stop"),
                                      "message": {"role": "assistant", "content": said["content"]}}]}
                self.send(200, "application/json", json.dumps(reply).encode())

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


def test_responses_are_read_in_every_shape_a_model_writes():
    assert parse('["A went home.", "B sold the car."]') == ["A went home.", "B sold the car."]
    assert parse('Sure!\n```json\n["A went home.", "B sold the car."]\n```') == ["A went home.", "B sold the car."]
    assert parse("1. A went home.\n2) B sold the car.\n3: C cried.") == ["A went home.", "B sold the car.", "C cried."]
    assert parse("Here are some:\n- A went home.\n* B sold the car.\n\u2022 C cried.") == \
        ["A went home.", "B sold the car.", "C cried."]
    assert parse('"A went home."\n"B sold the car."') == ["A went home.", "B sold the car."]
    assert parse("") == "empty_response" and parse(None) == "empty_response" and parse("[]") == "empty_response"
    assert parse("I'm sorry, but I can't help with that.") == "refusal"
    assert parse("Here are some:") == "chatter"  # a lead-in and nothing after it (was malformed_response)
    assert why_not("the speaker went home", ["The speaker went home."], False) == "copy_of_correct_answer"
    assert why_not("说话人回家了。", ["The speaker went home."], False) == "other_language"
    assert why_not("The speaker went home.", ["说话人回家了。"], True) == "other_language"
    assert why_not("The speaker sold the car.", ["The speaker went home."], False) is None


def _items(n: int = 6) -> pd.DataFrame:
    return pd.DataFrame({
        "id": [f"i{k}" for k in range(n)], "group_id": [f"g{k // 2}" for k in range(n)],
        "context": [f"dialogue {k}" for k in range(n)],
        "question": ["What is or could be the cause of target?"] * n, "target": [f"Target {k} ." for k in range(n)],
        "gold": [f"The speaker bought bread number {k}." for k in range(n)],
        "passage": [[f"A: I bought bread {k} .", f"B: Target {k} ."] for k in range(n)],
        "choices": [[f"The speaker bought bread number {k}.", "x"] for k in range(n)],
        "correct_answers": [[0]] * n, "n_distractors": [1] * n})


def _answer(prompt: str) -> str:
    # the item's own correct answer: the last in the prompt (other items', shown as examples, come first)
    k = prompt.rsplit("Correct answers:", 1)[1].split("bread number ")[1].split(".")[0]
    return json.dumps([f"The speaker sold the bakery {k}.", f"The listener baked bread {k} alone.",
                       f"The speaker bought bread number {k}.",  # a copy of the correct answer: rejected
                       "说话人回家了。"])  # another language: rejected


def _run(tmp_path, url, **server):
    from csk.runtime import StageContext
    from csk.store import Store
    from tasks.distractors.counterfactuals import counterfactuals
    from tasks.distractors.served import ServerSpec

    ctx = StageContext(Store(tmp_path / "store"), "distractors", "counterfactuals", key="k" * 24)
    spec = ServerSpec(base_url=url, model="tiny-chat", **{"concurrency": 2, **server})
    return counterfactuals(_items(), generators=["server"], server=spec, fluency=False, ctx=ctx)


def test_the_server_generator_keeps_every_request_and_never_sends_one_twice(tmp_path, monkeypatch):
    monkeypatch.setenv("CSK_TEST_API_KEY", "sk-secret-do-not-write")
    server = FakeServer(_answer)
    try:
        out = _run(tmp_path, server.url, api_key_env="CSK_TEST_API_KEY")
        assert len(server.requests) == 6 and set(server.keys) == {"Bearer sk-secret-do-not-write"}
        data = out.data
        assert set(data["generator"]) == {"server"} and (data.groupby("instance_id").size() == 2).all()
        assert data["rule"].str.startswith("server:tiny-chat:cause:").all()
        assert set(out.rejected["reason_code"]) == {"server_copy_of_correct_answer", "server_other_language"}
        responses = pd.read_parquet(__import__("io").BytesIO(out.files["server_responses.parquet"]))
        assert set(responses["template"]) == {"cause"} and len(responses) == 6
        assert out.notes["server"]["sent_this_run"] == 6
        again = _run(tmp_path, server.url, api_key_env="CSK_TEST_API_KEY")  # the same requests: none sent
        assert len(server.requests) == 6 and again.notes["server"]["sent_this_run"] == 0
        assert again.data.equals(data)
    finally:
        server.close()
    # the key is in no file the run wrote, nor in what it returned
    for f in (tmp_path / "store").rglob("*"):
        if f.is_file():
            assert b"sk-secret-do-not-write" not in f.read_bytes(), f
    assert "sk-secret" not in json.dumps(out.notes, default=str)
    with pytest.raises(Exception, match="CSK_NOT_SET"):
        _run(tmp_path, "http://127.0.0.1:9/v1", api_key_env="CSK_NOT_SET")


def test_a_failing_server_is_retried_then_one_line_and_the_rerun_sends_only_what_is_missing(tmp_path):
    flaky = FakeServer(_answer, fail=lambda n: 503 if n < 2 else None)  # two failures, then answers
    try:
        out = _run(tmp_path / "a", flaky.url, retries=3, concurrency=1)
        assert len(flaky.requests) == 8 and out.notes["server"]["sent_this_run"] == 6
    finally:
        flaky.close()
    # a server that dies after three answers: the run stops naming it and what finished; the rest follows
    dying = FakeServer(_answer, fail=lambda n: 500 if n >= 3 else None)
    try:
        with pytest.raises(CskError, match=r"the server http://127.0.0.1:\d+/v1 \(model tiny-chat\) failed after 0 "
                                           r"retries: .*3 of 6 requests finished and are kept"):
            _run(tmp_path / "b", dying.url, retries=0, concurrency=1)
    finally:
        dying.close()
    healthy = FakeServer(_answer)
    try:
        out = _run(tmp_path / "b", healthy.url, concurrency=1)
        assert len(healthy.requests) == 3 and out.notes["server"]["sent_this_run"] == 3
    finally:
        healthy.close()


@pytest.mark.slow  # `transformers serve` and two rebuilds of the bundled CICERO sample: about two minutes
def test_transformers_serve_writes_candidates_of_a_cicero_rebuild(prefect_harness, tmp_path, config_copy):
    """A real OpenAI-compatible server (`transformers serve` of the pinned transformers, a tiny random causal
    model with a chat template built from a config): its candidates reach the pool with their lineage; a run
    killed after some requests resumes sending only the missing ones (counted at the server); a rerun with the
    server stopped reuses everything."""
    import os
    import signal
    import subprocess
    import sys
    import time

    from prefect.settings import PREFECT_API_URL

    from bench.served import start_tiny_server
    from tests.conftest import ROOT, SAMPLE

    log = open(tmp_path / "serve.log", "w")
    serve, url, model = start_tiny_server(tmp_path, log)
    posts = lambda: (tmp_path / "serve.log").read_text().count("POST /v1/chat/completions")  # noqa: E731
    env = {**os.environ, "PREFECT_API_URL": PREFECT_API_URL.value(), "PYTHONPATH": str(ROOT)}
    source = SAMPLE / "cicero" / "annotations_v1.jsonl"
    items = sum(1 for line in open(source, encoding="utf-8") if line.strip())  # one request each
    store = tmp_path / "store"
    cmd = [sys.executable, "-m", "csk.cli", "distractors", "rebuild", "--input", str(source), "--preset", "cicero",
           "--config", str(config_copy), "--store", str(store),
           "--set", 'distractors.counterfactuals.generators=["server", "lexical", "dialogue", "retrieval"]',
           "--set", f"distractors.counterfactuals.server.base_url={url}",
           "--set", f"distractors.counterfactuals.server.model={model}",
           "--set", "distractors.counterfactuals.server.concurrency=1",
           "--set", "distractors.counterfactuals.server.max_tokens=24",
           "--set", "distractors.distractor_quality.quality=fast",
           "--set", "distractors.adversarial_filter.discriminator=linear-probe",
           "--set", "distractors.adversarial_filter.max_iterations=2"]
    try:
        # killed once a few requests are kept (the store's request files), then resumed
        run = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               start_new_session=True)
        kept = lambda: len(list((store / "_cache" / "requests").rglob("*.json")))  # noqa: E731
        deadline = time.time() + 300
        while kept() < 5 and run.poll() is None and time.time() < deadline:
            time.sleep(0.2)
        assert run.poll() is None, run.stdout.read().decode()[-3000:]  # still running: killed midway
        os.killpg(run.pid, signal.SIGKILL)
        run.wait()
        before, first = posts(), kept()
        assert 5 <= first < items, first
        done = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
        assert posts() - before == items - first  # only the missing requests were sent
    finally:
        os.killpg(serve.pid, signal.SIGTERM)
        serve.wait(timeout=30)
        log.close()
    stages = {s["stage"]: s for s in json.loads(subprocess.run(
        [sys.executable, "-m", "csk.cli", "artifacts", "distractors", "--store", str(store), "--json"], cwd=ROOT,
        env=env, capture_output=True, text=True).stdout)}
    pool = pd.read_parquet(Path(stages["counterfactuals"]["path"]) / "data.parquet")
    served = pool[pool["generator"] == "server"]
    assert len(served) and served["rule"].str.contains(":cause:|:motivation:|:subsequent event:|:prerequisite:|"
                                                       ":reaction:|:default:").all()
    steps = json.loads(subprocess.run([sys.executable, "-m", "csk.cli", "lineage", "distractors", "counterfactuals",
                                       "--row", served["id"].iloc[0], "--store", str(store), "--json"], cwd=ROOT,
                                      env=env, capture_output=True, text=True).stdout)
    assert steps[0]["origin"]["generator"] == "server" and "template" in steps[0]["origin"]["rationale"]
    responses = pd.read_parquet(Path(stages["counterfactuals"]["path"]) / "server_responses.parquet")
    assert len(responses) == items and responses["text"].notna().all()
    # the engine's promises hold with the server on: every item its published number of choices, the
    # published correct answers where they were, no distractor a near-copy of a correct answer
    rebuilt = pd.read_parquet(Path(stages["rebuilt_file"]["path"]) / "data.parquet")
    assert len(rebuilt) and (rebuilt["choices"].map(len) == rebuilt["published_choices"].map(len)).all()
    for r in rebuilt.itertuples():
        assert all(r.choices[k] == r.published_choices[k] for k in r.correct_answers)
    quality = pd.read_parquet(Path(stages["distractor_quality"]["path"]) / "data.parquet").set_index("measure")
    assert quality.loc["distractor_correct_cosine_max_embed", "value"] < 0.91
    af = json.load(open(Path(stages["adversarial_filter"]["path"]) / "manifest.json"))["notes"]
    assert any(line.startswith("Final distractors by generator:") for line in af["card"])
    # the server stopped: the same command reuses every stage
    again = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert again.returncode == 0 and "computed" not in again.stdout.split("artifacts")[-1], again.stdout[-2000:]


def test_a_served_models_candidates_meet_the_writers_checks_as_people_answers_do(tmp_path):
    """A server's candidate with a typo or a slip of agreement is a rejected row of the same checks as a
    person's answer (`fluency_misspelt`, `fluency_number_agreement`), under the server's name."""
    from csk.runtime import StageContext
    from csk.store import Store
    from tasks.distractors.counterfactuals import counterfactuals
    from tasks.distractors.served import ServerSpec

    def answer(prompt: str) -> str:
        return json.dumps(["The speaker sold the bakery.", "The speaker went to the univeristy.",
                           "The speaker made four trip to the bakery."])

    server = FakeServer(answer)
    try:
        ctx = StageContext(Store(tmp_path / "store"), "distractors", "counterfactuals", key="k" * 24)
        out = counterfactuals(_items(2), generators=["server"], server=ServerSpec(base_url=server.url, model="m"),
                              ctx=ctx)
    finally:
        server.close()
    assert set(out.data["candidate"]) == {"The speaker sold the bakery."}
    checked = out.rejected[out.rejected["reason_code"].str.startswith("fluency_")]
    assert set(checked["reason_code"]) == {"fluency_misspelt", "fluency_number_agreement"}
    assert set(checked["generator"]) == {"server"}
