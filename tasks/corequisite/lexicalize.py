"""docs/method.md 2.2: each edge becomes a fact sentence. Every template of the edge's relation is filled
with the edge's concepts; a template with one [MASK] is first filled by the masked LM (its top
word); each candidate is scored and the best one is the fact. Every candidate stays in the
artifact with its score.

Scorers:
* `masked-lm`: pseudo-perplexity under a masked LM (Salazar et al. 2020: mask each token in turn,
  sum the log-probabilities of the true tokens; lower exp(-PLL / tokens) is better). All masked
  positions of all candidates go through the model in length-sorted batches.
* `spacy-grammar` (offline default, no model configured): count grammatical disagreements with spaCy
  en_core_web_sm (subject-verb number; a preposition's complement: "to" takes a base verb, "for" /
  "in" / "as" a noun or gerund); fewer is better, ties go to the earlier template. Mask slots are
  tried with each of `fillers`.

Concepts are written as ConceptNet's URIs have them (articles dropped, underscores as spaces), the
sentence capitalised, as in the released statements ("Townhouse are typically used to live in.").
"""

from __future__ import annotations

import hashlib
import logging
import math
import re

import numpy as np
import pandas as pd

from csk import compute
from csk.models import pretrained_kwargs
from csk.params import ModelDir, unused
from csk.runtime import StageContext, StageOutput

log = logging.getLogger("csk")

# The release's forms (docs/method.md 2.2; checked against the released statements by tests/corequisite/test_corequisite.py).
TEMPLATES = {
    "UsedFor": ["{S} is typically used [MASK] {O}.", "{S} are typically used [MASK] {O}.",
                "{S} can typically be used [MASK] {O}.", "You can typically use {s} [MASK] {O}."],
    "Desires": ["{S} typically desires {O}.", "{S} typically desire {O}.", "{S} typically does desire [MASK] {O}.",
                "{S} typically do desire [MASK] {O}.", "{S} typically has desire [MASK] {O}.",
                "{S} typically have desire [MASK] {O}."],
    "Causes": ["{S} typically causes {O}.", "{S} typically cause {O}."],
}
SINGULAR = {"is", "desires", "causes", "does", "has"}
PLURAL = {"are", "desire", "cause", "do", "have"}


def fact_id(edge_uri: str) -> str:
    """A fact's id: stable across runs and samples (the annotation tasks and answers carry it)."""
    return "fact-" + hashlib.sha1(edge_uri.encode()).hexdigest()[:10]


def fill(template: str, head: str, tail: str, subject_forms: dict[str, str]) -> str:
    subject = subject_forms.get(head, head)
    text = template.replace("{S}", subject).replace("{s}", subject).replace("{O}", tail)
    return text[:1].upper() + text[1:]


def verb_number(template: str) -> str | None:
    """'sg' / 'pl' for the template's finite verb after the subject; None where number does not show."""
    words = re.findall(r"[a-z]+", template.split("{S}", 1)[-1].lower())
    for w in words:
        if w in SINGULAR:
            return "sg"
        if w in PLURAL:
            return "pl"
        if w == "can":
            return None
    return None


# ------------------------------------------------------------------ offline scorer
class GrammarScorer:
    name = "spacy-grammar"

    def __init__(self):
        from tasks.english import PIPELINE, english

        self.nlp = english()
        self.pipeline = PIPELINE

    def subject_number(self, subject: str) -> str:
        doc = self.nlp(subject)
        heads = [t for t in doc if t.head == t] or list(doc)
        head = heads[0]
        if head.tag_ == "VBG" or head.pos_ == "VERB":
            return "sg"  # a gerund subject ("Eating lot") is singular
        if head.tag_ in ("NNS", "NNPS") or "Plur" in head.morph.get("Number"):
            return "pl"
        return "sg"

    def complement_ok(self, prep: str, tail: str) -> bool:
        # Is the object a base-form verb phrase? Tagged after "to", where the tagger has the context
        # (alone, "cut bread" reads as a past participle or a noun).
        base = self.nlp("to " + tail)[1].tag_ == "VB"
        if prep == "to":
            return base
        if prep in ("for", "in", "as"):
            return not base
        return True

    def violations(self, template: str, prep: str | None, head: str, tail: str) -> int:
        n = 0
        number = verb_number(template)
        if number is not None and number != self.subject_number(head):
            n += 1
        if prep is not None and not self.complement_ok(prep, tail):
            n += 1
        return n


# ------------------------------------------------------------------ masked-LM scorer
class MaskedLM:
    name = "masked-lm"

    def __init__(self, model_dir: str, batch_size: int = 64, device: str = "auto"):
        import torch
        from transformers import AutoModelForMaskedLM, AutoTokenizer

        self.device = compute.device(device)
        self.tok = AutoTokenizer.from_pretrained(model_dir, local_files_only=True)
        self.model = AutoModelForMaskedLM.from_pretrained(model_dir, **pretrained_kwargs(model_dir)).to(self.device).eval()
        self.batch_size = batch_size
        self.torch = torch

    def _logits(self, ids: list[list[int]]):
        torch = self.torch
        width = max(len(x) for x in ids)
        pad = self.tok.pad_token_id if self.tok.pad_token_id is not None else 0
        input_ids = torch.tensor([x + [pad] * (width - len(x)) for x in ids], device=self.device)
        mask = torch.tensor([[1] * len(x) + [0] * (width - len(x)) for x in ids], device=self.device)
        with torch.inference_mode():
            return self.model(input_ids=input_ids, attention_mask=mask).logits.float()

    def fill_masks(self, texts: list[str]) -> list[str | None]:
        """The masked LM's top word for the single [MASK] of each text (None when no word token ranks)."""
        mask_id = self.tok.mask_token_id
        encoded = [self.tok(t.replace("[MASK]", self.tok.mask_token))["input_ids"] for t in texts]
        out: list[str | None] = [None] * len(texts)
        order = sorted(range(len(texts)), key=lambda i: len(encoded[i]))
        special = set(self.tok.all_special_ids)
        for b in range(0, len(order), self.batch_size):
            idx = order[b:b + self.batch_size]
            logits = self._logits([encoded[i] for i in idx])
            for row, i in enumerate(idx):
                pos = encoded[i].index(mask_id)
                for tid in logits[row, pos].argsort(descending=True)[:50].tolist():
                    word = self.tok.decode([tid]).strip()
                    if tid not in special and word.isalpha():
                        out[i] = word
                        break
        return out

    def pseudo_log_likelihoods(self, texts: list[str]) -> list[tuple[float, int]]:
        """(sum of log p(token | rest), tokens scored) per text; all masked copies batched together."""
        mask_id = self.tok.mask_token_id
        special = set(self.tok.all_special_ids)
        encoded = [self.tok(t)["input_ids"] for t in texts]
        jobs = [(i, p) for i, ids in enumerate(encoded) for p, tid in enumerate(ids) if tid not in special]
        jobs.sort(key=lambda j: (len(encoded[j[0]]), j))
        pll = np.zeros(len(texts))
        count = np.zeros(len(texts), dtype=int)
        for b in range(0, len(jobs), self.batch_size):
            batch = jobs[b:b + self.batch_size]
            ids = []
            for i, p in batch:
                x = list(encoded[i])
                x[p] = mask_id
                ids.append(x)
            logp = self.torch.log_softmax(self._logits(ids), dim=-1)
            for row, (i, p) in enumerate(batch):
                pll[i] += float(logp[row, p, encoded[i][p]])
                count[i] += 1
        return [(float(s), int(c)) for s, c in zip(pll, count)]


# ------------------------------------------------------------------ the stage
def lexicalize(edges: pd.DataFrame, *, masked_lm: ModelDir = None, templates: dict[str, list[str]] = TEMPLATES,
               fillers: list[str] = ["for", "to", "as", "in"], subject_forms: dict[str, str] = {"person": "a person"},
               batch_size: int = 64, device: str = "auto", ctx: StageContext | None = None) -> StageOutput:
    """One fact sentence per edge: the best-scoring filled template; every candidate kept with its score.

    Args:
        masked_lm: masked-LM directory (e.g. roberta-large saved locally) scoring candidates by pseudo-perplexity
            and filling [MASK] slots; empty: the offline spaCy grammar scorer (recorded in the manifest)
        templates: per relation, templates with {S} (subject, capitalised at the start) / {s}, {O} and at most
            one [MASK]
        fillers: words tried in a [MASK] slot by the offline scorer (the masked LM picks its own)
        subject_forms: concept texts written otherwise as subjects (the release writes "A person")
        batch_size: masked copies per forward pass
        device: "auto", "cpu" or "cuda"
    """
    missing = sorted(set(edges["relation"]) - set(templates))
    if missing:
        from csk.errors import ConfigError

        raise ConfigError(f"lexicalize: no templates for relation(s) {missing}; add them to "
                          "corequisite.lexicalize.templates")
    use_lm = not unused(masked_lm)
    scorer = MaskedLM(masked_lm, batch_size, device) if use_lm else GrammarScorer()
    cands: list[dict] = []
    for e in edges.itertuples(index=False):
        for t in templates[e.relation]:
            base = fill(t, e.head, e.tail, subject_forms)
            if "[MASK]" not in t:
                cands.append({"edge": e.id, "template": t, "filler": None, "sentence": base})
            elif not use_lm:
                cands += [{"edge": e.id, "template": t, "filler": f, "sentence": base.replace("[MASK]", f)}
                          for f in fillers]
            else:
                cands.append({"edge": e.id, "template": t, "filler": "[MASK]", "sentence": base})
    if use_lm:
        masked = [i for i, c in enumerate(cands) if c["filler"] == "[MASK]"]
        for i, word in zip(masked, scorer.fill_masks([cands[i]["sentence"] for i in masked])):
            cands[i]["filler"] = word
            cands[i]["sentence"] = cands[i]["sentence"].replace("[MASK]", word) if word else None
        cands = [c for c in cands if c["sentence"]]
        for c, (pll, n) in zip(cands, scorer.pseudo_log_likelihoods([c["sentence"] for c in cands])):
            c["score"] = -math.exp(-pll / max(n, 1))  # higher is better: minus the pseudo-perplexity
            c["pseudo_perplexity"] = math.exp(-pll / max(n, 1))
        if ctx is not None:
            ctx.record_model("masked_lm", str(masked_lm), None, device=scorer.device, precision="fp32",
                             candidates=len(cands))
    else:
        heads = dict(zip(edges["id"], edges["head"]))
        tails = dict(zip(edges["id"], edges["tail"]))
        for c in cands:
            c["score"] = -float(scorer.violations(c["template"], c["filler"], heads[c["edge"]], tails[c["edge"]]))
            c["pseudo_perplexity"] = None
    by_edge: dict[str, list[dict]] = {}
    for c in cands:
        by_edge.setdefault(c["edge"], []).append(c)
    rows = []
    for e in edges.itertuples(index=False):
        options = by_edge.get(e.id, [])
        best = max(range(len(options)), key=lambda i: (options[i]["score"], -i)) if options else None
        rows.append({"id": fact_id(e.id), "edge_id": e.id, "relation": e.relation, "head": e.head, "tail": e.tail,
                     "statement": options[best]["sentence"] if best is not None else "",
                     "template": options[best]["template"] if best is not None else "",
                     "score": options[best]["score"] if best is not None else float("nan"),
                     "candidates": [{"template": o["template"], "filler": o["filler"] or "",
                                     "sentence": o["sentence"], "score": float(o["score"])} for o in options]})
    data = pd.DataFrame(rows, columns=["id", "edge_id", "relation", "head", "tail", "statement", "template", "score",
                                       "candidates"])
    rejected = data[data["statement"] == ""].assign(reason_code="no_candidate",
                                                    reason="no template produced a sentence for this edge")
    notes = {"scorer": scorer.name, "candidates": len(cands),
             "scorer_detail": ("pseudo-perplexity under the masked LM (lower is better); [MASK] filled with its "
                               "top word") if use_lm else (f"grammatical disagreements counted with {scorer.pipeline};"
                                                            f" [MASK] tried with {fillers}"),
             "templates_chosen": data["template"].value_counts().to_dict()}
    return StageOutput(data=data[data["statement"] != ""], rejected=rejected if len(rejected) else None, notes=notes)
