"""Counterfactual candidate pools (SEEDS 1.6a): alternatives to every gold answer.

Generators:
* `lexical` (offline default): the rule-based rewrites of `tasks.distractors.lexical`;
* `t5`: any seq2seq model directory (the paper: T5 fine-tuned on SNLI contradiction pairs and
  TimeTravel counterfactual pairs, see `csk train-generator`), batched, beam search or
  sampling with several returns per answer, bf16 on CUDA;
* `file`: candidates made by any other generator (an LLM, another paper's model), as JSON
  Lines `{"id": instance id, "candidates": [...]}`; the ids are those of the instance table.
Each row records its generator, the rule or model, and the gold answer it rewrites.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Literal

import pandas as pd

from csk import compute, conceptnet
from csk.errors import ConfigError, InputError
from csk.models import model_hash, resolve_model
from csk.params import InputPath, ModelDir
from csk.runtime import StageContext, StageOutput
from readers.base import iter_json_lines
from tasks.distractors.lexical import names_in, rewrite_all

PREFIX = "counterfactual: "  # the task prefix the generator is trained with


def load_seq2seq(path: Path, device: str):
    from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(path), local_files_only=True)
    model = AutoModelForSeq2SeqLM.from_pretrained(str(path), local_files_only=True).to(device).eval()
    return tok, model


def t5_generate(texts: list[str], path: Path, *, num_return: int = 8, num_beams: int = 8, do_sample: bool = False,
                top_p: float = 0.95, max_new_tokens: int = 48, batch_size: int = 16, seed: int = 0) -> list[list[str]]:
    import torch
    from tqdm.auto import tqdm

    device = compute.device()
    tok, model = load_seq2seq(path, device)
    autocast = torch.autocast("cuda", dtype=torch.bfloat16) if device == "cuda" else torch.autocast("cpu", enabled=False)
    out: list[list[str]] = []
    torch.manual_seed(seed)
    for start in tqdm(range(0, len(texts), batch_size), desc="t5 counterfactuals", disable=len(texts) < 4 * batch_size):
        batch = [PREFIX + t for t in texts[start:start + batch_size]]
        enc = tok(batch, return_tensors="pt", padding=True, truncation=True, max_length=128).to(device)
        kwargs = dict(max_new_tokens=max_new_tokens, num_return_sequences=num_return)
        if do_sample:
            kwargs.update(do_sample=True, top_p=top_p)
        else:
            kwargs.update(num_beams=max(num_beams, num_return))
        with torch.inference_mode(), autocast:
            gen = model.generate(**enc, **kwargs)
        decoded = tok.batch_decode(gen, skip_special_tokens=True)
        for i in range(len(batch)):
            out.append([d.strip() for d in decoded[i * num_return:(i + 1) * num_return]])
    return out


def read_candidate_file(path: str, known: set[str]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for n, obj in iter_json_lines(path):
        if not isinstance(obj, dict) or not isinstance(obj.get("candidates"), list) or "id" not in obj:
            raise InputError(str(path), f"line {n}", 'expected {"id": ..., "candidates": [...]}')
        if str(obj["id"]) not in known:
            raise InputError(str(path), f"line {n}", f"unknown instance id {obj['id']!r} (ids are the instance "
                             "table's, e.g. in the annotations artifact)")
        out.setdefault(str(obj["id"]), []).extend(str(c).strip() for c in obj["candidates"] if str(c).strip())
    return out


def counterfactuals(instances: pd.DataFrame, *, generator: Literal["lexical", "t5", "file"] = "lexical",
                    model: ModelDir = None, conceptnet_db: InputPath = None, max_per_answer: int = 24,
                    num_return: int = 8, num_beams: int = 8, do_sample: bool = False, batch_size: int = 16,
                    candidates: InputPath = None, seed: int = 0, ctx: StageContext | None = None) -> StageOutput:
    """A pool of alternatives to every instance's gold answer (distractors.Instances in).

    Args:
        generator: lexical (rule-based offline default), t5 (a seq2seq directory in model) or file
            (candidates from any other generator)
        model: seq2seq model directory for generator t5 (see csk train-generator)
        conceptnet_db: conceptnet-lite SQLite database adding antonyms to the lexical rules
        max_per_answer: lexical pools are subsampled (seeded) above this size
        num_return: t5 outputs per answer
        num_beams: t5 beam width
        do_sample: t5 nucleus sampling instead of beam search
        batch_size: t5 answers per batch
        candidates: JSON Lines {"id": instance id, "candidates": [...]} for generator file
        seed: seed of subsampling and sampling
    """
    view = instances
    rows = []
    if generator == "lexical":
        lookup = None
        if conceptnet_db:
            conceptnet.connect(conceptnet_db)
            lookup = conceptnet.antonyms
        for inst in view.itertuples():
            names = names_in(list(inst.passage) + [inst.gold])
            pool = rewrite_all(inst.gold, names, lookup)
            # A deterministic, seeded subsample keeps pools bounded when chains explode.
            if len(pool) > max_per_answer:
                rng = compute.rng(seed, "counterfactual-subsample", inst.id)
                pool = [pool[i] for i in sorted(rng.choice(len(pool), max_per_answer, replace=False))]
            for k, (rule, text) in enumerate(pool):
                rows.append({"instance_id": inst.id, "gold": inst.gold, "candidate": text, "generator": "lexical",
                             "rule": rule, "k": k})
        notes = {"generator": "lexical rewrites (antonym lexicon" + (", ConceptNet" if lookup else "") +
                 ", negation, quantity, role swap, entity swap; chains of up to three rules)"}
    elif generator == "t5":
        path = resolve_model(model, "counterfactual generator", "counterfactuals.model")
        sha = model_hash(path)
        if ctx is not None:
            ctx.record_model("counterfactual-generator", str(path), sha, kind="seq2seq")
        golds = view["gold"].tolist()
        outs = t5_generate(golds, path, num_return=num_return, num_beams=num_beams, do_sample=do_sample,
                           batch_size=batch_size, seed=seed)
        for inst, gens in zip(view.itertuples(), outs):
            seen = {inst.gold.strip().lower()}
            k = 0
            for text in gens:
                if text and text.lower() not in seen:
                    seen.add(text.lower())
                    rows.append({"instance_id": inst.id, "gold": inst.gold, "candidate": text, "generator": "t5",
                                 "rule": f"{Path(path).name}@{sha[:12]}", "k": k})
                    k += 1
        notes = {"generator": "t5", "model": str(path), "decoding": "sampling" if do_sample else "beam"}
    elif generator == "file":
        if not candidates:
            raise ConfigError('counterfactuals.generator = "file" needs counterfactuals.candidates = a JSON Lines file')
        given = read_candidate_file(candidates, set(view["id"]))
        for inst in view.itertuples():
            seen = {inst.gold.strip().lower()}
            k = 0
            for text in given.get(inst.id, []):
                if text.lower() not in seen:
                    seen.add(text.lower())
                    rows.append({"instance_id": inst.id, "gold": inst.gold, "candidate": text, "generator": "file",
                                 "rule": Path(candidates).name, "k": k})
                    k += 1
        notes = {"generator": "file", "candidates": str(candidates)}
    else:
        raise ConfigError(f"counterfactuals.generator must be 'lexical', 't5' or 'file', got {generator!r}")
    data = pd.DataFrame(rows, columns=["instance_id", "gold", "candidate", "generator", "rule", "k"])
    data.insert(0, "id", [f"{r.instance_id}/cf{r.k:03d}" for r in data.itertuples()])
    data = data.drop(columns="k")
    per = data.groupby("instance_id").size().reindex(view["id"], fill_value=0)
    notes.update({"instances": len(view), "instances_without_candidates": int((per == 0).sum()),
                  "mean_pool": float(per.mean()) if len(per) else 0.0})
    empty = per[per == 0].index.tolist()
    rejected = pd.DataFrame({"id": empty, "reason_code": "no_candidate", "reason": f"the {generator} generator produced no alternative to this answer"}) \
        if empty else None
    return StageOutput(data=data, rejected=rejected, rows_in=len(view), notes=notes,
                       tables={"pools": [{"measure": k, "value": json.dumps(v) if isinstance(v, str) else v}
                                         for k, v in notes.items()]})
