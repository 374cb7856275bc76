"""The server generator's throughput against a plain client: the same server, the same prompts, the same
concurrency, in one run.

    python bench/served.py [--base-url URL --model NAME] [--requests 64] [--concurrency 4] [--max-tokens 48]
        [--out bench/results/served.txt]
    python bench/served.py --faults [--requests 64] [--concurrency 4]

--faults: how soon a fault no retry mends stops the stage (a 401 whose body echoes the key, a 200 that is an
HTML page), against the tests' local server (tests/distractors/test_served.py, each answer after 0.1 s): the
requests sent of those queued, the seconds to the one-line error, and whether the key is in it.

Without --base-url it starts `transformers serve` (the pinned transformers) on a tiny random causal model
built from a config (tests/tiny_models.py): the server's own cost is then small, so the ratio shows the
stage's overhead (prompt building, the request cache, parsing) at its most visible. Each side sends the
same request bodies (unique prompts; the stage's cache starts empty): the stage through
`tasks.distractors.served.Served.ask`, the plain side through the `openai` client in a thread pool. The
ratio is plain seconds / stage seconds (1.0: no overhead); the sides alternate, best of --repeats.
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import machine_line, reporter  # noqa: E402


def start_tiny_server(work: Path, log=subprocess.DEVNULL) -> tuple[subprocess.Popen, str, str]:
    """`transformers serve` (the pinned transformers) of a tiny random causal model built from a config, on a
    free port of 127.0.0.1, once it accepts connections: (process, base_url, model). `log`: where its output
    goes (the slow test counts the requests it logs)."""
    from tests.tiny_models import causal_chat

    model = causal_chat(work / "tinychat")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([str(Path(sys.executable).parent / "transformers"), "serve", str(model), "--host",
                             "127.0.0.1", "--port", str(port), "--device", "cpu"], stdout=log,
                            stderr=subprocess.STDOUT if log is not subprocess.DEVNULL else subprocess.DEVNULL,
                            env={**os.environ, "HF_HUB_OFFLINE": "1"}, start_new_session=True)
    for _ in range(120):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            time.sleep(1)
    return proc, f"http://127.0.0.1:{port}/v1", str(model)


def faults(say, requests: int, concurrency: int) -> None:
    """The stage's stop on a fault no retry mends: requests sent of `requests` queued, seconds, the line."""
    import json

    import openai  # noqa: F401 - imported before the clock starts, as in a run
    from csk.errors import CskError
    from csk.progress import _in_prefect_task
    from tasks.distractors.served import Served, ServerSpec
    from tests.distractors.test_served import FakeServer

    _in_prefect_task()  # the progress bar's one-time import of prefect.context, outside the timing

    key = "sk-bench-0123456789SECRET"
    os.environ["CSK_BENCH_KEY"] = key
    echo = json.dumps({"error": {"message": f"Incorrect API key provided: {key}"}}).encode()
    html = b"<html><head><title>502 Bad Gateway</title></head><body>nginx</body></html>"
    for label, raw in [("401 echoing the key", (401, "application/json", echo)),
                       ("200 with an HTML page", (200, "text/html", html))]:
        server, cache = FakeServer(lambda p: "[]", raw=lambda n, raw=raw: raw, delay=0.1), tempfile.TemporaryDirectory()
        served = Served(ServerSpec(base_url=server.url, model="m", concurrency=concurrency, retries=4,
                                   api_key_env="CSK_BENCH_KEY"), Path(cache.name))
        bodies = {f"{k:064x}": {"model": "m", "messages": [{"role": "user", "content": f"q{k}"}], "max_tokens": 8}
                  for k in range(requests)}
        t0 = time.perf_counter()
        try:
            served.ask(bodies)
            line = "no error"
        except CskError as exc:
            line = str(exc)
        seconds = time.perf_counter() - t0
        server.close()
        cache.cleanup()
        say(f"{label}: {len(server.requests)} of {requests} requests sent, stopped in {seconds:.2f} s; key in the "
            f"message: {key[:8] in line}; {line[:160].replace(server.url, 'URL')}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--base-url", default="")
    ap.add_argument("--model", default="")
    ap.add_argument("--requests", type=int, default=64)
    ap.add_argument("--concurrency", type=int, default=4)
    ap.add_argument("--max-tokens", type=int, default=48)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--out", default="")
    ap.add_argument("--faults", action="store_true", help="time the stop on a fault instead (see the docstring)")
    args = ap.parse_args()
    if args.faults:
        say, lines = reporter()
        say(machine_line())
        faults(say, args.requests, args.concurrency)
        if args.out:
            Path(args.out).write_text("\n".join(lines) + "\n")
        return
    from openai import OpenAI

    from tasks.distractors.served import PROMPTS, Served, ServerSpec, prompt, request_key

    say, lines = reporter()
    say(machine_line())
    work = Path(tempfile.mkdtemp(prefix="csk-served-"))
    proc = None
    if not args.base_url:
        proc, args.base_url, args.model = start_tiny_server(work)
        say(f"server: transformers serve, a tiny random causal model ({args.base_url})")
    try:
        spec = ServerSpec(base_url=args.base_url, model=args.model, concurrency=args.concurrency,
                          max_tokens=args.max_tokens, temperature=0.0)
        client = OpenAI(base_url=args.base_url, api_key="none", max_retries=spec.retries, timeout=spec.timeout)

        def bodies(tag: str) -> dict[str, dict]:  # unique prompts per side and repeat: no server-side cache helps
            out = {}
            for k in range(args.requests):
                text = prompt(PROMPTS["default"], dialogue=[f"A: request {tag} {k} ."], target="t", question="q",
                              answers=["a"], n=3, relation="cause")
                body = {"model": args.model, "messages": [{"role": "user", "content": text}], "temperature": 0.0,
                        "max_tokens": args.max_tokens, "seed": k}
                out[request_key(body)] = body
            return out

        def plain(b: dict[str, dict]) -> float:
            t0 = time.perf_counter()
            with ThreadPoolExecutor(args.concurrency) as pool:
                list(pool.map(lambda body: client.chat.completions.create(**body).choices[0].message.content,
                              b.values()))
            return time.perf_counter() - t0

        def stage(b: dict[str, dict], run: int) -> float:
            served = Served(spec, work / f"cache{run}")
            t0 = time.perf_counter()
            got = served.ask(b)
            assert len(got) == len(b) and served.sent == len(b)
            return time.perf_counter() - t0

        plain(bodies("warm"))  # the server's first requests load the model
        results = {"stage": [], "plain": []}
        for r in range(args.repeats):
            results["plain"].append(plain(bodies(f"plain{r}")))
            results["stage"].append(stage(bodies(f"stage{r}"), r))
            say(f"repeat {r + 1}: plain client {results['plain'][-1]:.2f} s, stage {results['stage'][-1]:.2f} s "
                f"({args.requests} requests, concurrency {args.concurrency}, max_tokens {args.max_tokens})")
        best = {k: min(v) for k, v in results.items()}
        say(f"best of {args.repeats}: plain {best['plain']:.2f} s ({args.requests / best['plain']:.1f} requests/s), "
            f"stage {best['stage']:.2f} s ({args.requests / best['stage']:.1f} requests/s); ratio plain / stage "
            f"{best['plain'] / best['stage']:.3f}")
    finally:
        if proc is not None:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout=30)
    if args.out:
        Path(args.out).write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
