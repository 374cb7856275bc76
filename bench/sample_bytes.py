"""The data.parquet sha256 of every stage of the four pipelines on the bundled samples.

A kernel refactor must not change what a stage writes: record the bytes before (`--out FILE`),
then compare after (`--compare FILE`; exit 1 naming each stage whose bytes moved). Keys may
change (the key scheme is the kernel's); bytes may not. Float stages are compared on the same
machine: the record carries its CPU and precision decision. Trees checked out at different paths
compare too: provenance rows name each file read by its portable name (`source_file`, relative to its
setting), never by a machine's folder.

    python bench/sample_bytes.py --out bench/results/sample_bytes_<cpu>.json
    python bench/sample_bytes.py --compare bench/results/sample_bytes_<cpu>.json
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PIPELINES = ("cicero", "corequisite", "corecode", "deco")


def run(store: Path, pipelines=PIPELINES) -> dict:
    env = {**os.environ, "PREFECT_HOME": os.environ.get("PREFECT_HOME", str(ROOT / ".prefect")), "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
           "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "DO_NOT_TRACK": "1"}
    out = {}
    for p in pipelines:
        proc = subprocess.run([str(Path(sys.executable).parent / "csk"), "run", p, "--config", str(ROOT / "pipelines.toml"),
                               "--store", str(store)], cwd=ROOT, env=env, capture_output=True, text=True)
        if proc.returncode != 0:
            raise SystemExit(f"csk run {p} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
        latest = json.loads((store / p / "_runs" / "latest.json").read_text())
        for s in latest["stages"]:
            m = json.loads((Path(s["path"]) / "manifest.json").read_text())
            out[f"{p}/{s['stage']}"] = m["data_sha256"]
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path)
    ap.add_argument("--compare", type=Path)
    ap.add_argument("--pipelines", nargs="*", default=list(PIPELINES))
    args = ap.parse_args()
    sys.path.insert(0, str(ROOT))
    from csk.compute import host
    from csk.precision import decision

    with tempfile.TemporaryDirectory() as tmp:
        got = run(Path(tmp) / "store", args.pipelines)
    machine = {**host(), "precision": decision("cpu")["precision"]}
    print(f"machine: {machine['cpu']} ({machine['cores']} cores), precision decision {machine['precision']}")
    if args.out:
        args.out.write_text(json.dumps({"machine": machine, "data_sha256": got}, indent=2, sort_keys=True) + "\n")
        print(f"{len(got)} stages recorded in {args.out}")
    if args.compare:
        before = json.loads(args.compare.read_text())
        if before["machine"].get("cpu") != machine["cpu"] or before["machine"].get("precision") != machine["precision"]:
            print(f"note: recorded on {before['machine'].get('cpu')} ({before['machine'].get('precision')}); "
                  "float stages may differ in the last bits across machines")
        # only the pipelines run this time (`--pipelines`); a stage of theirs that is gone still counts
        old = {k: v for k, v in before["data_sha256"].items() if k.split("/")[0] in args.pipelines}
        moved = sorted(k for k in set(old) | set(got) if old.get(k) != got.get(k))
        for k in moved:
            print(f"DIFFERS {k}: {str(old.get(k))[:12]} -> {str(got.get(k))[:12]}")
        print(f"{len(got)} stages, {len(moved)} with other bytes")
        if moved:
            raise SystemExit(1)
    if not args.out and not args.compare:
        print(json.dumps(got, indent=2, sort_keys=True))


if __name__ == "__main__":
    main()
