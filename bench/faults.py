"""Fault injection at every stage, seeded and repeatable: does a pipeline survive it?

For each pipeline, one uninterrupted reference run; then, per stage, these faults, each in a
store of its own (seeded with copies of the reference's artifacts of the stages before the one
under test, so every trial recomputes from that stage on):

  kill       SIGKILL to the whole `csk run` process group at a random moment after the stage
             starts (uniform over 1.2x the stage's reference compute time), N trials per stage
  exception  an exception raised inside the stage after it computed, before anything is written
  write      writing the artifact fails part-way with ENOSPC (a full disk)
  missing    the stage's artifact directory deleted from a finished store
  corrupt    one byte flipped in one of the stage's artifact files (seeded choice of file, offset)
  worker     (--runner dask) a Dask worker SIGKILLed while a sharded stage runs, N trials

A fault is survived when: the error the user saw names the stage and the cause (a run that was
killed says nothing, a damaged file must be named by `csk verify` and by `csk run --verify`);
a rerun (after `csk verify --repair` for a damaged file) finishes with the reference's key and
data bytes at every stage; no temporary directory of the dead run is left; `csk verify` passes.
Rows lost: rows (kept + rejected) of the reference that the rerun's artifacts do not have.

    python bench/faults.py [--pipeline deco] [--trials 3] [--seed 0] [--faults kill,exception,...]
                           [--stages a,b] [--config pipelines.toml] [--work DIR] [--scale N]

Needs a Prefect API: PREFECT_API_URL, else the bench starts `prefect server start` for its runs.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from csk.compute import cpu_model, sha256_file  # noqa: E402

FAULTS = ("kill", "exception", "write", "missing", "corrupt", "worker")
RUN_TIMEOUT = 900


@dataclass
class Trial:
    pipeline: str
    stage: str
    fault: str
    detail: str = ""
    survived: bool = False
    rows_lost: int = 0
    problems: list[str] = field(default_factory=list)
    seconds: float = 0.0


def snapshot(store: Path, pipeline: str) -> dict[str, dict]:
    """Per stage of the latest run: key, row counts, sha256 of the data and rejected files."""
    record = json.loads((store / pipeline / "_runs" / "latest.json").read_text())
    out = {}
    for s in record["stages"]:
        d = store / pipeline / s["stage"] / s["key"]
        m = json.loads((d / "manifest.json").read_text())
        out[s["stage"]] = {
            "key": s["key"], "rows": m["rows"], "seconds": m.get("seconds", 0.0),
            "data": sha256_file(d / "data.parquet"),
            "rejected": sha256_file(d / "rejected.parquet") if (d / "rejected.parquet").exists() else None}
    return out


def compare(ref: dict, got: dict) -> tuple[list[str], int]:
    problems, lost = [], 0
    for stage, r in ref.items():
        g = got.get(stage)
        if g is None:
            problems.append(f"{stage}: missing from the rerun")
            lost += r["rows"]["out"] + r["rows"]["rejected"]
            continue
        lost += max(0, r["rows"]["out"] - g["rows"]["out"]) + max(0, r["rows"]["rejected"] - g["rows"]["rejected"])
        for what in ("key", "data", "rejected"):
            if r[what] != g[what]:
                problems.append(f"{stage}: {what} differs from the uninterrupted run")
    return problems, lost


def lineage_events(store: Path) -> list[dict]:
    path = store / "_lineage" / "events.jsonl"
    out = []
    if path.exists():
        for line in path.read_text(errors="replace").splitlines():
            try:
                out.append(json.loads(line))
            except ValueError:
                pass  # a line cut by the kill
    return out


def started(store: Path, pipeline: str, stage: str) -> bool:
    return any(e.get("eventType") == "START" and e.get("job", {}).get("name") == f"{pipeline}.{stage}"
               for e in lineage_events(store))


def running_stage(store: Path) -> str:
    """The stage a killed run was in: the last START without an end."""
    open_ = {}
    for e in lineage_events(store):
        name = e.get("job", {}).get("name", "?").split(".", 1)[-1]
        if e.get("eventType") == "START":
            open_[name] = True
        else:
            open_.pop(name, None)
    return ", ".join(open_) or "between stages"


def children(pid: int) -> list[int]:
    import psutil

    try:
        return [c.pid for c in psutil.Process(pid).children(recursive=True)]
    except psutil.NoSuchProcess:
        return []


class Bench:
    def __init__(self, pipeline: str, config: Path, work: Path, env: dict, seed: int, extra: list[str]):
        self.pipeline, self.config, self.work, self.env, self.extra = pipeline, config, work, env, extra
        self.rng = random.Random(seed)
        self.ref_store = work / "reference"
        self.ref: dict[str, dict] = {}
        self.n = 0

    # -- processes
    def start(self, store: Path, *args: str, fault: dict | None = None, runner: list[str] = ()) -> subprocess.Popen:
        cmd = [sys.executable, "-m", "bench.fault_child", json.dumps(fault or {}), *args, "--store", str(store),
               "--config", str(self.config), *self.extra, *runner]
        return subprocess.Popen(cmd, cwd=ROOT, env=self.env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                text=True, start_new_session=True)

    def csk(self, store: Path, *args: str, fault: dict | None = None, runner: list[str] = ()) -> tuple[int, str]:
        p = self.start(store, *args, fault=fault, runner=runner)
        out, _ = p.communicate(timeout=RUN_TIMEOUT)
        return p.returncode, out

    def verify(self, store: Path, *args: str) -> tuple[int, str]:
        cmd = [sys.executable, "-m", "bench.fault_child", "{}", "verify", self.pipeline, "--store", str(store), *args]
        p = subprocess.run(cmd, cwd=ROOT, env=self.env, capture_output=True, text=True, timeout=RUN_TIMEOUT)
        return p.returncode, p.stdout + p.stderr

    # -- stores
    def reference(self) -> float:
        t0 = time.perf_counter()
        rc, out = self.csk(self.ref_store, "run", self.pipeline)
        if rc != 0:
            raise SystemExit(f"the reference run of {self.pipeline} failed:\n{out[-3000:]}")
        self.ref = snapshot(self.ref_store, self.pipeline)
        return time.perf_counter() - t0

    def store_before(self, stage: str) -> Path:
        """A new store holding the reference's artifacts of the stages run before `stage`."""
        self.n += 1
        store = self.work / f"trial-{self.n:03d}"
        order = list(self.ref)
        for s in order[:order.index(stage)]:
            src = self.ref_store / self.pipeline / s / self.ref[s]["key"]
            shutil.copytree(src, store / self.pipeline / s / src.name)
        store.mkdir(parents=True, exist_ok=True)
        return store

    def finished_store(self) -> Path:
        self.n += 1
        store = self.work / f"trial-{self.n:03d}"
        shutil.copytree(self.ref_store, store, ignore=shutil.ignore_patterns(".tmp", ".locks"))
        return store

    # -- the check every trial ends with
    def rerun_and_check(self, trial: Trial, store: Path) -> None:
        rc, out = self.csk(store, "run", self.pipeline)
        if rc != 0:
            trial.problems.append(f"the rerun failed: {out.strip().splitlines()[-1:]}")
            trial.rows_lost = sum(r["rows"]["out"] + r["rows"]["rejected"] for r in self.ref.values())
            return
        problems, trial.rows_lost = compare(self.ref, snapshot(store, self.pipeline))
        trial.problems += problems
        tmp = store / ".tmp"
        left = [d.name for d in tmp.iterdir()] if tmp.exists() else []
        if left:
            trial.problems.append(f"temporary directories left after the rerun: {left}")
        rc, out = self.verify(store)
        if rc != 0:
            trial.problems.append(f"csk verify after the rerun: {out.strip().splitlines()[:3]}")

    def expect_named(self, trial: Trial, out: str, *needles: str) -> None:
        missing = [n for n in needles if n not in out]
        if missing:
            trial.problems.append(f"the error does not name {missing}: {out.strip().splitlines()[-2:]}")

    # -- faults
    def kill(self, stage: str, runner: list[str] = (), worker: bool = False) -> Trial:
        trial = Trial(self.pipeline, stage, "worker" if worker else "kill")
        store = self.store_before(stage)
        p = self.start(store, "run", self.pipeline, runner=runner)
        deadline = time.monotonic() + RUN_TIMEOUT
        while not started(store, self.pipeline, stage) and p.poll() is None and time.monotonic() < deadline:
            time.sleep(0.02)
        if worker:
            # prefect-dask starts the LocalCluster at the first shard: wait for its workers, then kill one
            # while they import and run the shards (a few seconds on 2 cores)
            victims: list[int] = []
            while not victims and p.poll() is None and time.monotonic() < deadline:
                victims = [w for w in children(p.pid) if _is_dask_worker(w)]
                time.sleep(0.05)
            delay = self.rng.uniform(0.0, 1.0)
            time.sleep(delay)
            if victims and p.poll() is None:
                os.kill(self.rng.choice(sorted(victims)), signal.SIGKILL)
                trial.detail = f"a worker killed {delay:.2f}s after the cluster started, in {stage}"
            else:
                trial.detail = "no worker alive to kill (the stage had finished)"
            out, _ = p.communicate(timeout=RUN_TIMEOUT)
            if p.returncode != 0:
                self.expect_named(trial, out, f"stage '{stage}'")
                trial.detail += f"; the run failed: {(out.strip().splitlines() or [''])[-1][:200]}"
            else:
                trial.detail += "; the run finished"
        else:
            # inside the stage's work: it takes about its reference compute time (a stage of a second or
            # more is killed within its first 80%, a shorter one anywhere up to just after it ends)
            secs = self.ref[stage]["seconds"]
            delay = self.rng.uniform(0.05 * secs, 0.8 * secs) if secs >= 1.0 else self.rng.uniform(0.0, 1.2 * secs + 0.2)
            time.sleep(delay)
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
                trial.detail = f"killed {delay:.2f}s after start, in {running_stage(store)}"
            else:
                trial.detail = "the run ended before the kill"
        self.rerun_and_check(trial, store)
        return trial

    def injected(self, stage: str, kind: str) -> Trial:
        trial = Trial(self.pipeline, stage, kind)
        store = self.store_before(stage)
        rc, out = self.csk(store, "run", self.pipeline, fault={"kind": kind, "stage": stage})
        if rc == 0:
            trial.problems.append("the run with the fault succeeded")
        cause = "injected fault" if kind == "exception" else "No space left on device"
        self.expect_named(trial, out, f"stage '{stage}'", cause)
        if (store / self.pipeline / stage).exists() and any((store / self.pipeline / stage).iterdir()):
            trial.problems.append("an artifact of the failed stage was left in the store")
        trial.detail = out.strip().splitlines()[-1][:160] if out.strip() else ""
        self.rerun_and_check(trial, store)
        return trial

    def missing(self, stage: str) -> Trial:
        trial = Trial(self.pipeline, stage, "missing")
        store = self.finished_store()
        shutil.rmtree(store / self.pipeline / stage / self.ref[stage]["key"])
        trial.detail = "artifact directory deleted"
        self.rerun_and_check(trial, store)
        return trial

    def corrupt(self, stage: str) -> Trial:
        trial = Trial(self.pipeline, stage, "corrupt")
        store = self.finished_store()
        d = store / self.pipeline / stage / self.ref[stage]["key"]
        files = sorted(f for f in d.rglob("*") if f.is_file())
        f = self.rng.choice(files)
        data = bytearray(f.read_bytes())
        offset = self.rng.randrange(len(data))
        data[offset] ^= 1 << self.rng.randrange(8)
        f.write_bytes(bytes(data))
        trial.detail = f"flipped a bit of {f.relative_to(d)} at byte {offset} of {len(data)}"
        rc, out = self.verify(store)
        if rc == 0:
            trial.problems.append("csk verify did not catch it")
        self.expect_named(trial, out, str(f))
        rc, out = self.csk(store, "run", self.pipeline, "--verify")
        if rc == 0:
            trial.problems.append("csk run --verify did not catch it")
        self.expect_named(trial, out, f.name, stage)
        rc, out = self.verify(store, "--repair")
        if "_quarantine" not in out:
            trial.problems.append("csk verify --repair moved nothing")
        self.rerun_and_check(trial, store)
        return trial


def _is_dask_worker(pid: int) -> bool:
    import psutil

    try:
        cmd = " ".join(psutil.Process(pid).cmdline())
    except psutil.Error:
        return False
    return "spawn_main" in cmd or "forkserver" in cmd  # a LocalCluster worker (not the resource tracker)


def prefect_server(home: Path) -> tuple[subprocess.Popen, str]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {**os.environ, "PREFECT_HOME": str(home), "PREFECT_SERVER_ANALYTICS_ENABLED": "false"}
    home.mkdir(parents=True, exist_ok=True)
    log = open(home / "server.log", "wb")
    p = subprocess.Popen([sys.executable, "-m", "prefect", "server", "start", "--host", "127.0.0.1", "--port",
                          str(port)], env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://127.0.0.1:{port}/api"
    import urllib.request

    deadline = time.monotonic() + 240
    while time.monotonic() < deadline and p.poll() is None:
        try:
            urllib.request.urlopen(f"{url}/health", timeout=2)
            return p, url
        except OSError:
            time.sleep(0.5)
    p.kill()
    raise SystemExit(f"the Prefect server did not start (log: {home / 'server.log'})")


# ------------------------------------------------------------------ larger inputs (--scale)
# On the bundled sample most stages take well under a second: a kill lands in start-up, not in the
# stage's work. `--scale N` grows the inputs (the sample's records stay, so its annotations still
# match) until the heavy stages run for seconds.
def _sample_config_text(config: Path) -> str:
    return config.read_text().replace('"data/sample/', f'"{(ROOT / "data" / "sample").as_posix()}/')


def _set(text: str, table: str, key: str, value: str) -> str:
    """`key = value` in `[table]` of a TOML text (replacing the key's line, or added under the header)."""
    import re

    head = f"[{table}]"
    start = text.index(head)
    end = text.find("\n[", start + len(head))
    end = len(text) if end < 0 else end
    body = text[start:end]
    line = re.compile(rf"^{re.escape(key)}\s*=.*$", re.M)
    body = line.sub(f"{key} = {value}", body, count=1) if line.search(body) else \
        body.replace(head, f"{head}\n{key} = {value}", 1)
    return text[:start] + body + text[end:]


def scale_cicero(config: Path, work: Path, n: int, seed: int) -> Path:
    """The sample's sources plus n generated dialogues (bench/scale.py's generator, CICERO's source
    proportions), and the sample's annotations plus a generated CICERO v1 release over the generated
    DailyDialog dialogues (one instance per dialogue), so the distractor stages work on hundreds of
    instances. Returns the config naming them."""
    from bench import scale
    from tasks.cicero.targets import QUESTIONS

    sample = ROOT / "data" / "sample"
    corpus = scale.generate(n, seed)
    root = work / "scaled-input"
    gen = scale.write_corpus(root / "generated", corpus)
    dd = root / "dialogues_text.txt"
    dd.write_bytes((sample / "dailydialog" / "dialogues_text.txt").read_bytes() + gen["dailydialog"].read_bytes())
    shutil.copytree(sample / "mutual", root / "mutual")
    shutil.copytree(gen["mutual"] / "dev", root / "mutual" / "generated")
    dream = json.loads((sample / "dream" / "dev.json").read_text()) + \
        [[d, q, f"gen-{i}"] for i, (d, q, _) in enumerate(json.loads(gen["dream"].read_text()))]
    (root / "dream.json").write_text(json.dumps(dream), encoding="utf-8")
    rng = random.Random(seed)
    pool = [u for d in corpus["dailydialog"] for u in d]
    lines = [(sample / "cicero" / "annotations_v1.jsonl").read_text().rstrip("\n")]
    questions = list(QUESTIONS.values())
    for i, d in enumerate(corpus["dailydialog"]):
        gold = rng.randrange(5)
        choices = [rng.choice(pool) for _ in range(5)]
        lines.append(json.dumps({"ID": f"daily-dialogue-gen-{i:05d}",
                                 "Dialogue": [f"{'AB'[k % 2]}: {u}" for k, u in enumerate(d)],
                                 "Target": d[rng.randrange(len(d))], "Question": questions[i % len(questions)],
                                 "Choices": choices, "Human Written Answer": [gold], "Correct Answers": [gold]}))
    release = root / "annotations_v1.jsonl"
    release.write_text("\n".join(lines) + "\n", encoding="utf-8")
    text = _sample_config_text(config)
    text = _set(text, "cicero.sources", "dailydialog", json.dumps(str(dd)))
    text = _set(text, "cicero.sources", "mutual", json.dumps(str(root / "mutual")))
    text = _set(text, "cicero.sources", "dream", json.dumps(str(root / "dream.json")))
    text = _set(text, "cicero.annotations", "release", json.dumps(str(release)))
    text = _set(text, "cicero.annotations", "allow_unmatched", "true")  # a generated dialogue may fail a filter
    out = work / "pipelines-scaled.toml"
    out.write_text(text)
    return out


def scale_corequisite(config: Path, work: Path, n: int, seed: int, env: dict) -> Path:
    """The sample's ConceptNet dump plus n generated assertions (UsedFor and three other relations over
    the sample's English concepts, and as many Chinese lines the build reads and drops), a quota of n/4 edges per relation,
    and crowd answers for every exported task (three per question, drawn from the sample's answers),
    so the ConceptNet build, lexicalize and AF-Lite run for seconds."""
    import csv
    import io

    sample = ROOT / "data" / "sample" / "corequisite"
    rng = random.Random(seed)
    dump_lines = (sample / "conceptnet-assertions-sample.csv").read_text().splitlines()
    concepts = sorted({c for line in dump_lines for c in line.split("\t")[2:4] if c.startswith("/c/en/")})
    words = [c.split("/")[3] for c in concepts]
    out = list(dump_lines)
    for i in range(n):
        rel = ("UsedFor", "UsedFor", "Desires", "Causes", "AtLocation")[i % 5]
        h, t = f"{rng.choice(words)}_{i}", rng.choice(words)
        out.append(f"/a/[/r/{rel}/,/c/en/{h}/,/c/en/{t}/]\t/r/{rel}\t/c/en/{h}\t/c/en/{t}\t"
                   + json.dumps({"dataset": "/d/conceptnet/4/en", "weight": 1.0,
                                 "surfaceText": f"[[{h.replace('_', ' ')}]] is for [[{t.replace('_', ' ')}]]"}))
        out.append(f"/a/[/r/RelatedTo/,/c/de/w{i}/,/c/fr/m{i}/]\t/r/RelatedTo\t/c/de/w{i}\t/c/fr/m{i}\t{{}}")
    root = work / "scaled-input"
    root.mkdir(parents=True, exist_ok=True)
    dump = root / "conceptnet-assertions.csv"
    dump.write_text("\n".join(out) + "\n", encoding="utf-8")
    text = _sample_config_text(config)
    text = _set(text, "corequisite.conceptnet", "dump", json.dumps(str(dump)))
    quota = max(1000, n // 4)
    text = _set(text, "corequisite.edges", "n_per_relation", f"{{ UsedFor = {quota}, Desires = {quota}, Causes = {quota} }}")
    text = _set(text, "corequisite.answer_rules", "expert_labels", '""')  # labels name the sample's answers
    staged = work / "pipelines-scaled.toml"
    staged.write_text(text)
    # the exported tasks of this dump, then three answers per question
    store = work / "scale-tasks"
    cmd = [sys.executable, "-m", "bench.fault_child", "{}", "run", "corequisite", "--config", str(staged),
           "--store", str(store), "--until", "annotation_tasks"]
    p = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=RUN_TIMEOUT)
    if p.returncode != 0:
        raise SystemExit(f"exporting the scaled corequisite tasks failed:\n{p.stdout[-2000:]}{p.stderr[-2000:]}")
    import pandas as pd

    (task_dir,) = (store / "corequisite" / "annotation_tasks").iterdir()
    tasks = pd.read_parquet(task_dir / "data.parquet")
    answers = list(csv.DictReader(io.StringIO((sample / "answers.csv").read_text())))
    by_polarity = {pol: [a["answer"] for a in answers if a["task_id"].endswith(pol)] for pol in ("enabling", "disabling")}
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["task_id", "worker_id", "answer", "does_not_make_sense"])
    for t in tasks.itertuples():
        for _k in range(3):
            w.writerow([t.id, f"W{rng.randrange(1000):03d}", rng.choice(by_polarity[t.polarity]), 0])
    answers_csv = root / "answers.csv"
    answers_csv.write_text(buf.getvalue(), encoding="utf-8")
    text = _set(text, "corequisite.annotations", "answers", json.dumps(str(answers_csv)))
    staged.write_text(text)
    return staged


def run(pipelines: list[str], faults: list[str], trials: int, seed: int, stages: list[str] | None,
        config: Path, work: Path, extra: list[str], log=print, api_url: str | None = None,
        pairs: list[tuple[str, str]] | None = None, scale: int = 0) -> list[Trial]:
    """Every trial, in order; `api_url`: a Prefect API to use (default: PREFECT_API_URL, else a server
    started for the bench); `pairs`: only these (fault, stage) trials."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false",
           "PREFECT_SERVER_ANALYTICS_ENABLED": "false", "PREFECT_HOME": str(work / "prefect-home"),
           "PYTHONPATH": str(ROOT)}
    server = None
    if api_url:
        env["PREFECT_API_URL"] = api_url
    if not env.get("PREFECT_API_URL"):
        server, env["PREFECT_API_URL"] = prefect_server(work / "prefect-server")
    results: list[Trial] = []
    try:
        for pipeline in pipelines:
            cfg = config
            if scale and pipeline in ("cicero", "corequisite"):
                (work / pipeline).mkdir(parents=True, exist_ok=True)
                cfg = (scale_cicero(config, work / pipeline, scale, seed) if pipeline == "cicero" else
                       scale_corequisite(config, work / pipeline, scale, seed, env))
                log(f"{pipeline}: inputs grown by {scale} generated records ({cfg})")
            b = Bench(pipeline, cfg, work / pipeline, env, seed, extra)
            seconds = b.reference()
            log(f"{pipeline}: reference run {seconds:.1f} s, stages {', '.join(b.ref)}")
            for stage in b.ref:
                if stages and stage not in stages:
                    continue
                plan = []
                for fault in faults:
                    if pairs is None or (fault, stage) in pairs:
                        plan += [fault] * (trials if fault in ("kill", "worker") else 1)
                for fault in plan:
                    t0 = time.perf_counter()
                    if fault == "kill":
                        t = b.kill(stage)
                    elif fault == "worker":
                        t = b.kill(stage, runner=["--runner", "dask", "--set", "runtime.shard_rows=8"], worker=True)
                    elif fault in ("exception", "write"):
                        t = b.injected(stage, fault)
                    elif fault == "missing":
                        t = b.missing(stage)
                    else:
                        t = b.corrupt(stage)
                    t.seconds = time.perf_counter() - t0
                    t.survived = not t.problems and t.rows_lost == 0
                    results.append(t)
                    log(f"  {pipeline}/{stage:<20} {fault:<9} {'survived' if t.survived else 'FAILED':<8} "
                        f"rows lost {t.rows_lost:<4} {t.seconds:5.1f}s  {t.detail}"
                        + "".join(f"\n      {p}" for p in t.problems))
    finally:
        if server is not None:
            os.killpg(server.pid, signal.SIGTERM)
            server.wait(timeout=30)
    return results


def summary(results: list[Trial]) -> str:
    survived = sum(t.survived for t in results)
    lost = sum(t.rows_lost for t in results)
    by = {}
    for t in results:
        a = by.setdefault(t.fault, [0, 0])
        a[0] += 1
        a[1] += t.survived
    kinds = ", ".join(f"{k} {s}/{n}" for k, (n, s) in by.items())
    return f"trials {len(results)}, faults survived {survived}/{len(results)} ({kinds}), rows lost {lost}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pipeline", action="append", help="repeatable; default: deco and corecode")
    ap.add_argument("--faults", default="kill,exception,write,missing,corrupt")
    ap.add_argument("--trials", type=int, default=3, help="kill (and worker) trials per stage")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--stages", default="", help="comma-separated; default: every stage")
    ap.add_argument("--config", type=Path, default=ROOT / "pipelines.toml")
    ap.add_argument("--work", type=Path, default=None, help="where the stores go (default: a temporary directory)")
    ap.add_argument("--set", action="append", default=[], dest="overrides")
    ap.add_argument("--scale", type=int, default=0, help="cicero, corequisite: grow the sample by this many generated "
                    "records, so kills land inside the heavy stages' work (default: the sample as it is)")
    args = ap.parse_args()
    faults = [f for f in args.faults.split(",") if f]
    unknown = sorted(set(faults) - set(FAULTS))
    if unknown:
        ap.error(f"unknown faults {unknown}; known: {', '.join(FAULTS)}")
    work = args.work or Path(tempfile.mkdtemp(prefix="csk-faults-"))
    extra = [x for o in args.overrides for x in ("--set", o)]
    print(f"CPU: {cpu_model()}, {os.cpu_count()} cores; seed {args.seed}; work in {work}")
    t0 = time.perf_counter()
    results = run(args.pipeline or ["deco", "corecode"], faults, args.trials, args.seed,
                  [s for s in args.stages.split(",") if s] or None, args.config.resolve(), work, extra,
                  scale=args.scale)
    print(summary(results) + f"; {time.perf_counter() - t0:.0f} s")
    if args.work is None:
        shutil.rmtree(work, ignore_errors=True)
    return 0 if all(t.survived for t in results) else 1


if __name__ == "__main__":
    raise SystemExit(main())
