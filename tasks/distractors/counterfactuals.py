"""Counterfactual candidate pools (docs/method.md 1.6a): alternatives to every gold answer.

Generators run in the configured order; the first gives all its candidates and each next one
fills the pools still below `min_pool` ("where a generator cannot produce enough, the next fills
in"), each row naming the generator and rule that made it:
* `lexical` (offline default): the rule-based rewrites of `tasks.distractors.lexical`, by the rules
  that contradict the answer (antonym, negation, quantity: `lexical_rules`);
* `dialogue`: answers of the same dialogue about other targets, to a question of the same type;
* `retrieval`: gold answers to the same question in other dialogues of the same split, most similar
  first, their named entities swapped for this dialogue's of the same type; where a question does not
  repeat (a file whose question carries its own target), answers from the whole split ranked by the
  similarity of question and answer;
* `t5`: any seq2seq model directory (the paper: T5 fine-tuned on SNLI contradiction pairs and
  TimeTravel counterfactual pairs, see `csk cicero train-generator`), batched, beam search or
  sampling with several returns per answer, bf16 on CUDA;
* `file`: candidates made by any other generator (an LLM, another paper's model), as JSON
  Lines `{"id": instance id, "candidates": [...]}`; the ids are those of the instance table.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Literal

import numpy as np
import pandas as pd

from csk import compute, conceptnet
from csk.errors import ConfigError, InputError
from csk.models import model_hash, resolve_model
from csk.params import InputPath, ModelDir
from csk.runtime import StageContext, StageOutput, to_parquet_bytes
from readers.base import iter_json_lines
from tasks import seq2seq
from tasks.distractors.answers import chinese_ids, written_answers
from tasks.distractors.keys import instance_keys
from tasks.distractors.grounded import CONTRARY as GROUNDED_CONTRARY
from tasks.distractors.grounded import DEFAULT as GROUNDED_DEFAULT
from tasks.distractors.lexical import CONTRADICTING, evidence, rewrite_all
from tasks.distractors.placement import GENERATED, IN_PLACE, PREFERENCE, SLOTS, TIERS, mark, preference, tier
from tasks.distractors.served import ServerSpec, server_pools
from tasks.distractors.window import TAG, locate, nearest_first
from tasks.english import PIPELINE, entities, nouns
from tasks.embed import EmbedSpec, open_embedder
from tasks.vocabulary import GENERIC_NOUNS

PREFIX = "counterfactual: "  # the task prefix the generator is trained with


def t5_generate(texts: list[str], path: Path, *, num_return: int = 8, num_beams: int = 8, do_sample: bool = False,
                top_p: float = 0.95, max_new_tokens: int = 48, batch_size: int = 16, seed: int = 0) -> list[list[str]]:
    """Counterfactuals of each text from the generator (its task prefix added); bf16 on CUDA."""
    device = compute.device()
    sampling = {"do_sample": True, "top_p": top_p} if do_sample else {}
    return seq2seq.generate([PREFIX + t for t in texts], path, num_return=num_return, num_beams=num_beams,
                            batch_size=batch_size, max_input_length=128, precision="bf16" if device == "cuda" else "fp32",
                            device=device, seed=seed, desc="t5 counterfactuals", max_new_tokens=max_new_tokens,
                            **sampling)


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


Pool = dict[str, list[tuple[str, str]]]  # instance id -> [(rule, candidate text)]


def lexical_pools(view: pd.DataFrame, *, conceptnet_db: str | None, max_per_answer: int, seed: int,
                  fluency: bool = True, rejected: list[dict] | None = None, checked: list[str] | None = None,
                  rules: tuple[str, ...] = CONTRADICTING) -> Pool:
    """The rule-based rewrites of every gold answer; with `fluency`, each checked by
    `tasks.distractors.fluency` (its rule appended to `checked`) and a failing one left out (appended
    to `rejected` with its reason)."""

    from tasks.distractors import chinese

    lookup = lookup_zh = None
    if conceptnet_db:
        conceptnet.connect(conceptnet_db)
        lookup = conceptnet.antonyms
        lookup_zh = lambda w: conceptnet.related(w, ("antonym", "distinct_from"), "zh")  # noqa: E731
    zh = chinese_ids(view)
    answers = dict(zip(view["id"], written_answers(view)))
    texts_of = {inst.id: _texts(inst.passage, inst.gold) for inst in view.itertuples() if inst.id not in zh}
    entities([t for ts in texts_of.values() for t in ts])  # parse every text once, in batches
    found: dict[str, list[tuple[str, str]]] = {}
    base: dict[tuple[str, str], str] = {}  # (instance, rewrite) -> the correct answer it rewrites
    key_of = instance_keys(view)
    for inst in view.itertuples():
        pool = []
        # Every correct answer is rewritten, not only the gold: each is in place, and a v2 item has two to
        # four, so an item gets more rewrites of its own dialogue's answers.
        for answer in answers[inst.id]:
            if inst.id in zh:  # Chinese: jieba's part-of-speech rules (tasks/distractors/chinese.py)
                made = chinese.rewrite_all(answer, list(inst.passage), lookup_zh)
            else:
                made = rewrite_all(answer, entities(texts_of[inst.id] + [answer]), lookup, kinds=rules)
            for rule, text in made:
                if (inst.id, text) not in base:
                    base[(inst.id, text)] = answer
                    pool.append((rule, text))
        # A deterministic, seeded subsample keeps pools bounded when chains explode (twice the pool when
        # the fluency checks will still remove some).
        bound = max_per_answer * (2 if fluency else 1)
        if len(pool) > bound:
            rng = compute.rng(seed, "counterfactual-subsample", key_of[inst.id])
            pool = [pool[i] for i in sorted(rng.choice(len(pool), bound, replace=False))]
        found[inst.id] = pool
    if fluency:  # the parser checks are English: Chinese rewrites are not checked (the manifest says so)
        found.update(fluent(view, {i: p for i, p in found.items() if i not in zh}, base, "lexical", checked, rejected))
    out: Pool = {}
    for iid, pool in found.items():
        if len(pool) > max_per_answer:
            rng = compute.rng(seed, "counterfactual-fluent-subsample", key_of[iid])
            pool = [pool[i] for i in sorted(rng.choice(len(pool), max_per_answer, replace=False))]
        out[iid] = pool
    return out


def dialogue_words(view: pd.DataFrame) -> dict[str, frozenset[str]]:
    """Each instance's dialogue words, lower-cased: its names and slang are no typos."""
    return {i: frozenset(w.lower() for u in _listed(p) for w in re.findall(r"[A-Za-z]+", u))
            for i, p in zip(view["id"], view["passage"] if "passage" in view.columns else [None] * len(view))}


def dialogue_names(view: pd.DataFrame) -> dict[str, frozenset[str]]:
    """Each instance's words its dialogue writes only capitalised, lower-cased (its names, with words that
    only start sentences: `fluency.names_in_lower_case` keeps the names the lexicon does not know)."""
    out = {}
    for i, p in zip(view["id"], view["passage"] if "passage" in view.columns else [None] * len(view)):
        words = [w for u in _listed(p) for w in re.findall(r"[A-Za-z]+", TAG.sub("", u))]
        lower = {w for w in words if w.islower()}
        out[i] = frozenset(w.lower() for w in words if w[:1].isupper() and w.lower() not in lower)
    return out


def spelled(found: Pool, view: pd.DataFrame, generator: str, rejected: list[dict], checked: list[str]) -> Pool:
    """Human-written candidates (answers of this or other dialogues) that pass `fluency.WRITER_CHECKS`:
    no misspelt word, no subject and verb that disagree ("The speaker show the pictures"; draw C's readers
    marked 7 of 24 such answers broken), no construction English does not have ("The clerk given us the
    keys", the writers' slips draws D-F's readers marked); the others rejected with the words."""
    from tasks.distractors import fluency as fl

    zh = chinese_ids(view)
    known, names = dialogue_words(view), dialogue_names(view)
    gold = dict(zip(view["id"], view["gold"]))
    parsed = fl.parse([t for i, pool in found.items() if i not in zh for _, t in pool])
    out: Pool = {}
    for iid, pool in found.items():
        if iid in zh:
            out[iid] = pool
            continue
        out[iid] = []
        for rule, text in pool:
            checked.append(generator)
            failed = fl.writer_check(text, parsed[text], known[iid], names[iid])
            if failed:
                check, reason = failed
                rejected.append({"instance_id": iid, "gold": gold[iid], "candidate": text, "rule": rule,
                                 "check": check, "reason": reason, "generator": generator})
            else:
                out[iid].append((rule, text))
    return out


def _listed(passage) -> list[str]:
    return [] if passage is None else [str(u) for u in passage]


def grounded_pools(view: pd.DataFrame, *, rules: tuple[str, ...], per_rule: int, fluency: bool = True,
                   rejected: list[dict] | None = None, checked: list[str] | None = None) -> Pool:
    """Every correct answer rewritten with things of its own dialogue (`tasks.distractors.grounded`): a
    place for another place of the dialogue, a time for another, who did what to whom flipped; English
    only. With `fluency`, each rewrite is checked as the lexical ones are and a failing one left out."""
    from tasks.distractors import grounded

    zh = chinese_ids(view)
    answers = dict(zip(view["id"], written_answers(view)))
    english = [inst for inst in view.itertuples() if inst.id not in zh]
    grounded.parse([grounded.TAG.sub("", str(u)) for inst in english for u in _listed(inst.passage)] +
                   [a for inst in english for a in answers[inst.id]])
    out: Pool = {i: [] for i in view["id"]}
    base: dict[tuple[str, str], str] = {}
    for inst in english:
        words = grounded.dialogue_words(_listed(inst.passage), getattr(inst, "target", None))
        taken = grounded.lemmas(answers[inst.id])
        for answer in answers[inst.id]:
            for rule, text in grounded.rewrites(answer, words, taken, per_rule=per_rule, rules=rules):
                if (inst.id, text) not in base and text.strip().lower() not in {a.lower() for a in answers[inst.id]}:
                    base[(inst.id, text)] = answer
                    out[inst.id].append((rule, text))
    if fluency and base:
        out = fluent(view, out, base, "grounded", checked, rejected)
    return out


def fluent(view: pd.DataFrame, pools: Pool, base: dict[tuple[str, str], str], generator: str,
           checked: list[str] | None, rejected: list[dict] | None) -> Pool:
    """The rewrites of each pool that pass the parser's checks against the answer they rewrite
    (`base[(instance, rewrite)]`, `fluency.check`); each checked rule appended to `checked`, each failing
    rewrite to `rejected` with its check and reason."""
    from tasks.distractors import fluency as fl

    known = dialogue_words(view)
    parsed = fl.parse([base[(i, t)] for i, pool in pools.items() for _, t in pool] +
                      [t for pool in pools.values() for _, t in pool])
    out: Pool = {}
    for iid, pool in pools.items():
        out[iid] = []
        for rule, text in pool:
            if checked is not None:
                checked.append(rule)
            problem = fl.check(base[(iid, text)], text, parsed, known[iid])
            if problem is None:
                out[iid].append((rule, text))
            elif rejected is not None:
                rejected.append({"instance_id": iid, "gold": base[(iid, text)], "candidate": text, "rule": rule,
                                 "check": problem[0], "reason": problem[1], "generator": generator})
    return out


def fluency_report(checked: list[str], rejected: list[dict]) -> list[dict]:
    """Per lexical rule kind (a chain counts for each kind in it) and check: rewrites checked (the rules
    of all of them), rejected, and the share each check lost."""
    kinds = lambda rule: sorted({p.split(":")[0] for p in str(rule).split("+") if p})  # noqa: E731
    total: dict[str, int] = {}
    for rule in checked:
        for k in kinds(rule):
            total[k] = total.get(k, 0) + 1
    lost: dict[tuple[str, str], int] = {}
    for r in rejected:
        for k in kinds(r["rule"]):
            lost[(k, r["check"])] = lost.get((k, r["check"]), 0) + 1
    from tasks.distractors.fluency import CHECKS

    rows = []
    for k in sorted(total):
        for c in CHECKS:
            n = lost.get((k, c), 0)
            rows.append({"rule": k, "check": c, "checked": total[k], "rejected": n, "share": round(n / total[k], 4)})
    return rows


def t5_pools(view: pd.DataFrame, *, model: str | None, num_return: int, num_beams: int, do_sample: bool,
             batch_size: int, seed: int, ctx: StageContext | None) -> Pool:
    path = resolve_model(model, "counterfactual generator", "counterfactuals.model")
    sha = model_hash(path)
    if ctx is not None:
        ctx.record_model("counterfactual-generator", str(path), sha, kind="seq2seq")
    outs = t5_generate(view["gold"].tolist(), path, num_return=num_return, num_beams=num_beams, do_sample=do_sample,
                       batch_size=batch_size, seed=seed)
    return {i: [(f"{Path(path).name}@{sha[:12]}", t) for t in gens if t] for i, gens in zip(view["id"], outs)}


def file_pools(view: pd.DataFrame, *, candidates: str | None) -> Pool:
    if not candidates:
        raise ConfigError('counterfactuals.generators has "file": set counterfactuals.candidates to a JSON Lines file')
    given = read_candidate_file(candidates, set(view["id"]))
    return {i: [(Path(candidates).name, t) for t in given.get(i, [])] for i in view["id"]}


RESERVE = 4  # answers naming a thing the dialogue lacks kept per item, beside its pool, for an item left short
RETRIEVAL_BLOCK = 1024  # rows of the split scored at once (1024 x 30K float64: 240 MB)
SAME_QUESTION = 10.0  # lifts answers to the same question above every other (two cosines sum to at most 2)


def retrieval_pools(view: pd.DataFrame, *, embed: EmbedSpec, depth: int, ctx: StageContext | None,
                    foreign: bool = False, left_out: dict[str, int] | None = None,
                    time: dict[str, str] | None = None) -> Pool:
    """Gold answers of other groups (dialogues) in the same split, the most similar first (the hardest to
    tell apart), with names the other dialogue had swapped for this dialogue's names of the same kind; a
    candidate naming someone this dialogue cannot stand in for is left out.

    Answers to the same question are drawn first (the paper's pool); where fewer than `depth` instances of
    other groups share the question (a file whose question carries its own target, or a question asked
    once), the rest of the split fills in, ranked by the similarity of question plus answer; never an answer
    to a question of another type (`question_type` by `time`'s relations: a reaction is no cause).
    An answer that names no thing of this dialogue but generic ones ("The speaker was out playing") could
    be about any conversation: it comes after those that name one of this dialogue's things
    (`retrieval:unanchored:`, `placement.PREFERENCE`).

    An answer naming a thing (a noun lemma) that neither this dialogue nor its correct answers name is
    about another conversation: a careful reader dismisses it at a glance. Unless `foreign` (then it comes
    after every other) it is counted in `left_out[instance]`; the first RESERVE of them met are kept beside
    the pool (`retrieval:foreign:reserve:`, outside `min_pool`), for AF to take only to fill an item it
    cannot fill otherwise, never to swap in (five of 810 items of a CICERO v2 file had one distractor left
    after the filters without them: the filters removed their in-place answers as likely correct). An item whose passage is no
    dialogue (one text: a SWAG or HellaSwag context, a PaCo statement) has no conversation to be out of
    place in: there such answers come after every other, as with `foreign`."""
    split = view["split"].astype(str).tolist() if "split" in view.columns else ["all"] * len(view)
    with open_embedder(embed, ctx) as emb:
        vectors = emb.lookup(view["gold"].tolist() + view["question"].tolist())
    gold_v = np.stack([vectors(g) for g in view["gold"]]) if len(view) else np.zeros((0, 1))
    question_v = np.stack([vectors(q) for q in view["question"]]) if len(view) else np.zeros((0, 1))
    finder = _Retrieval(view, time, foreign, left_out if left_out is not None else {})
    out: Pool = {i: [] for i in finder.ids}
    members: dict[str, list[int]] = {}
    for k, s in enumerate(split):
        members.setdefault(s, []).append(k)
    for _, rows in members.items():
        rows = np.asarray(rows)
        g, q = gold_v[rows].astype(np.float64), question_v[rows].astype(np.float64)
        # answers to a question of the same type (the relation it names; else the same question) come first
        code = pd.factorize(pd.Series([finder.kinds[k] or finder.questions[k] for k in rows]))[0]
        # Scored a block of rows at a time (a split of 30K answers is never one 30K x 30K matrix), answers to
        # the same question lifted above every other (cosines sum to at most 2)
        for start in range(0, len(rows), RETRIEVAL_BLOCK):
            block = np.arange(start, min(len(rows), start + RETRIEVAL_BLOCK))
            scores = g[block] @ g.T + q[block] @ q.T + SAME_QUESTION * (code[block][:, None] == code[None, :])
            for r, a_local in enumerate(block):
                out[finder.ids[rows[a_local]]] = finder.row(rows[a_local], scores[r], rows, depth)
    return out


class _Retrieval:
    """The answers retrieval may offer one item, from its split's scored row (see retrieval_pools)."""

    def __init__(self, view: pd.DataFrame, time: dict[str, str] | None, foreign: bool, dropped: dict[str, int]):
        self.ids, self.golds, self.groups = view["id"].tolist(), view["gold"].tolist(), view["group_id"].tolist()
        self.content = instance_keys(view)  # ties broken by what an item is, not by its id
        self.questions, self.passages = view["question"].tolist(), view["passage"].tolist()
        self.chinese, self.answers = chinese_ids(view), written_answers(view)
        self.kinds = [question_type(q, time) for q in self.questions] if time else [None] * len(view)
        self.foreign_allowed, self.dropped = foreign, dropped

    def row(self, a: int, scores: np.ndarray, rows: np.ndarray, depth: int) -> list[tuple[str, str]]:
        """Item `a`'s retrieved answers: in-place ones up to `depth`, then foreign ones, then the reserve.
        Each row's best few found by argpartition, then ordered by (score, id) as a full sort would."""
        iid, n = self.ids[a], len(rows)
        here_texts = _texts(self.passages[a], self.golds[a])
        self.ours = entities(here_texts) if iid not in self.chinese else {}
        self.here = nouns(here_texts + self.answers[a]) | GENERIC_NOUNS if iid not in self.chinese else None
        # speaking of things this dialogue never names: after the rest (foreign), or only where the rest fall
        # short (reserve)
        found: dict[str, list] = {"taken": [], "foreign": [], "reserve": []}
        seen = {self.golds[a].strip().lower()}
        looked, width = 0, min(n, 4 * depth + 16)
        while len(found["taken"]) < depth and looked < n:  # in-place answers up to depth, within 4 x depth + 16
            best = np.argpartition(-scores, width - 1)[:width] if width < n else np.arange(n)
            for b_local in sorted(best.tolist(), key=lambda b: (-scores[b], self.content[self.ids[rows[b]]]))[looked:]:
                if len(found["taken"]) >= depth:
                    break
                self.offer(a, rows[b_local], seen, found)
            # enough found, the whole split looked at, or 16 widths of it (a 50K split is never walked whole
            # for one row whose near answers all name other things)
            if looked >= n or width >= 4 * depth + 16 and len(found["taken"]) + len(found["foreign"]) >= depth or \
                    width >= 16 * (4 * depth + 16):
                break
            looked, width = width, min(n, width * 4)  # too many skipped: look further down the row
        return (found["taken"] + found["foreign"])[:depth] + found["reserve"]

    def offer(self, a: int, b: int, seen: set, found: dict[str, list]) -> None:
        """Item `b`'s gold offered to item `a`: taken (naming this dialogue's things), foreign, kept in
        reserve, or passed over (the same dialogue, a text already met, another type of question, a name
        this dialogue cannot stand in for)."""
        other = self.golds[b].strip().lower()
        if self.groups[b] == self.groups[a] or other in seen:
            return
        if not same_type(self.kinds[a], self.kinds[b]):  # an answer to another type of question
            seen.add(other)
            return
        iid = self.ids[a]
        # Chinese text: spaCy's English NER finds no names to adapt; taken as written
        adapted = self.golds[b] if iid in self.chinese else \
            adapt_names(self.golds[b], entities(_texts(self.passages[b], self.golds[b])), self.ours)
        if adapted is None:
            return
        seen.add(other)
        how = "retrieval" if self.questions[b] == self.questions[a] else "retrieval:other_question"
        if self.here is None or nouns([adapted]) <= self.here:
            # anchored: it names a thing of this dialogue (not only "the speaker", "a day"): about its things,
            # not an event any conversation could hold
            anchored = self.here is None or bool(nouns([adapted]) - GENERIC_NOUNS)
            found["taken"].append((f"{how}:{'' if anchored else 'unanchored:'}{self.ids[b]}", adapted))
        elif not (self.foreign_allowed or len(_listed(self.passages[a])) < 2):
            # kept in reserve: offered only to an item that cannot be filled otherwise
            self.dropped[iid] = self.dropped.get(iid, 0) + 1
            if len(found["reserve"]) < RESERVE:
                found["reserve"].append((f"{how}:foreign:reserve:{self.ids[b]}", adapted))
        else:
            found["foreign"].append((f"{how}:foreign:{self.ids[b]}", adapted))


def _position(target: str, passage) -> int | None:
    """Index of the utterance a target is in its dialogue (speaker tags and case ignored), or None."""
    key = " ".join(str(target).lower().split())
    if not key or passage is None:
        return None
    turns = [" ".join(t.lower().split()) for t in _texts(passage, "")[:-1]]
    exact = [i for i, t in enumerate(turns) if t == key]
    if exact:
        return exact[0]
    within = [i for i, t in enumerate(turns) if key in t or (t and t in key)]
    return within[0] if within else None


# When a question's answers happen, relative to its target, by the relation the question names (the
# ATOMIC / CICERO vocabulary of commonsense relations): a cause, a prerequisite, a prior event or a
# motivation comes before the target; a subsequent event or a reaction after it. Matched as words of the
# question (case ignored). The relation a question names is its type: an answer of another type reads as
# the answer to another question ("The listener feels hopeful" offered as a motivation).
QUESTION_TIME = {"cause": "before", "prior event": "before", "prerequisite": "before", "motivation": "before",
                 "intent": "before", "subsequent event": "after", "reaction": "after", "effect": "after"}
Time = Literal["before", "after"]


def _relations(question: str, time: dict[str, str]) -> set[str]:
    text = " ".join(str(question).lower().split())
    return {words for words in time if re.search(rf"\b{re.escape(words.lower())}\b", text)}


def time_of(question: str, time: dict[str, str]) -> str | None:
    """"before" or "after" where the question names relations of one side only (else None: unknown)."""
    sides = {time[w] for w in _relations(question, time)}
    return sides.pop() if len(sides) == 1 else None


def question_type(question: str, time: dict[str, str] = QUESTION_TIME) -> str | None:
    """The relation a question asks about (its type: "cause", "subsequent event", "reaction", ...), where it
    names exactly one of `time`'s relations; else None (unknown: a question of no known relation)."""
    found = _relations(question, time)
    return found.pop() if len(found) == 1 else None


def same_type(a: str | None, b: str | None) -> bool:
    """May an answer to a question of type `b` stand as an answer to one of type `a`? Yes where the types
    agree, or where either is unknown (nothing says they differ)."""
    return a is None or b is None or a == b


def dialogue_pools(view: pd.DataFrame, min_gap: int = 1, time: dict[str, str] | None = None,
                   left_out: dict[str, int] | None = None, contrary: tuple[str, ...] = (), fluency: bool = True,
                   rejected: list[dict] | None = None, checked: list[str] | None = None) -> Pool:
    """Answers written for the same dialogue (group) about another target, to a question of the same type:
    they name its people and its events and answer this kind of question, so they read as in place, and
    a careful reader still finds them wrong for this target. Never an answer about the item's own target
    (where the file names targets; else about its own question), nor one of its correct answers.

    An answer to a question of another type (a question's type: the relation it names, `question_type`)
    is not offered: a reader rejects an emotion offered as a motivation, or an earlier event offered as
    what follows, at a glance by its type (blind readers marked half of such distractors out of place).
    Each one passed over is counted in `left_out[instance]`.

    Where both targets are located in the dialogue and the question's time is known (`time`: relation
    words -> before / after, see QUESTION_TIME), the answer must be about a target on the other side of
    this one: a cause of the target (before it) may be offered the cause of a later target, a subsequent
    event (after it) that of an earlier one. Events chain: the cause of an earlier turn is often a cause of
    this one too, and what follows a later turn also follows this one (a blind reader judged such answers
    correct). Elsewhere answers about a target fewer than `min_gap` utterances away are left out. In
    dialogue order of the other items (their targets' places, then their content), deterministic. Every correct answer of the other item
    is offered, not only its first.

    With `contrary` (grounded rules: `contrary_verb`, `predicate_negation`, `emotion_swap`), each answer of
    the same type of question, on either side of this target, is also offered rewritten into a contrary
    statement for its own subject (`contrary_answers`), before the answers as written: the dialogue rules
    it out, and it says something other than the correct answer, as the released distractors do. So is what
    the person a correct answer names says of themselves in the dialogue, as a statement for that subject
    (`statements.statements`: "i 'm ready for the exam" -> "The speaker is ready for the exam"), said contrary: a predicate of
    the dialogue's own events, changed as a whole, where a rewrite of the correct answer changes one word."""
    ids, golds, groups = view["id"].tolist(), view["gold"].tolist(), view["group_id"].tolist()
    about = (view["target"] if "target" in view.columns and view["target"].astype(str).str.strip().any()
             else view["question"]).astype(str).str.strip().str.lower().tolist()
    questions = view["question"].astype(str).tolist()
    side = [time_of(q, time) for q in questions] if time else [None] * len(view)
    kind = [question_type(q, time) for q in questions] if time else [None] * len(view)
    correct: list[set[str]] = []
    for g, ch, cor in zip(golds, view["choices"] if "choices" in view.columns else [None] * len(view),
                          view["correct_answers"] if "correct_answers" in view.columns else [None] * len(view)):
        texts = {g.strip().lower()}
        if ch is not None and cor is not None:
            texts |= {str(ch[int(k)]).strip().lower() for k in cor if 0 <= int(k) < len(ch)}
        correct.append(texts)
    members: dict[str, list[int]] = {}
    for k, g in enumerate(groups):
        members.setdefault(g, []).append(k)
    has_target = "target" in view.columns and view["target"].astype(str).str.strip().any()
    passages = view["passage"].tolist() if "passage" in view.columns else [None] * len(view)
    where = [_position(t, p) for t, p in zip(view["target"], passages)] if has_target else [None] * len(view)
    dropped = left_out if left_out is not None else {}

    def admissible(a: int, b: int) -> bool:
        if where[a] is None or where[b] is None:
            return True
        if side[a] is not None:  # the time-order rule: the other side of this target
            return where[b] > where[a] if side[a] == "before" else where[b] < where[a]
        return abs(where[a] - where[b]) >= min_gap

    answers = written_answers(view)
    # dialogue order: the other targets by their place in the dialogue, then by content (never by id: the
    # two rebuild commands name one record differently, and "r266" sorts before "r57")
    keys = instance_keys(view)
    order = lambda b: (where[b] if where[b] is not None else float("inf"), keys[str(ids[b])])  # noqa: E731
    out: Pool = {}
    offered: Pool = {}  # every answer of the same type, either side: to be rewritten into a contrary statement
    for a, iid in enumerate(ids):
        found, seen, offered[iid] = [], set(correct[a]), []
        for b in sorted(members[groups[a]], key=order):
            if b == a or about[b] == about[a]:
                continue
            if not same_type(kind[a], kind[b]):
                dropped[iid] = dropped.get(iid, 0) + len(answers[b])
                continue
            for text in answers[b]:
                if text and text.lower() not in seen:
                    seen.add(text.lower())
                    offered[iid].append((f"dialogue:{ids[b]}", text))
                    if admissible(a, b):
                        found.append((f"dialogue:{ids[b]}", text))
        out[iid] = found
    if not contrary:
        return out
    spoken = spoken_statements(view, answers, kind)
    rewritten = contrary_answers(view, offered, contrary, fluency=fluency, rejected=rejected, checked=checked,
                                 spoken=spoken)
    return {iid: rewritten.get(iid, []) + found for iid, found in out.items()}


def spoken_statements(view: pd.DataFrame, answers: list[list[str]], kinds: list[str | None] | None = None
                      ) -> dict[str, list[tuple[int, str, str | None]]]:
    """Each English item's `statements.statements` (utterance index, statement, its contrary or None), the
    utterances nearest its target first (those nearest read as about the same moment); for a question about an
    emotional reaction (`kinds`: each item's `question_type`), only statements of a feeling."""
    from tasks.distractors.statements import feeling, statements

    zh = chinese_ids(view)
    out: dict[str, list[tuple[int, str, str | None]]] = {}
    for k, (inst, said) in enumerate(zip(view.itertuples(), answers)):
        passage = _listed(getattr(inst, "passage", None))
        if inst.id in zh or not passage or not said:
            continue
        at = locate(getattr(inst, "target", None), passage)
        rank = {k: r for r, k in enumerate(nearest_first(at, len(passage)))} if at is not None else {}
        made = statements(passage, getattr(inst, "target", None), said)
        if kinds is not None and kinds[k] == "reaction":
            made = [m for m in made if feeling(m[1])]
        out[inst.id] = sorted(made, key=lambda s: (rank.get(s[0], len(passage)), s[0]))
    return out


def contrary_answers(view: pd.DataFrame, offered: Pool, rules: tuple[str, ...], *, fluency: bool = True,
                     rejected: list[dict] | None = None, checked: list[str] | None = None,
                     spoken: dict[str, list[tuple[int, str, str | None]]] | None = None) -> Pool:
    """This dialogue's answers to other targets rewritten into a contrary statement for their own subject by
    the grounded `rules` (`tasks.distractors.grounded`: "The speaker shows the listener the photos" -> "The
    speaker refuses to show ..."), one rewrite per rule and answer, each named `rule:words+dialogue:<item>`;
    English only. After them the statements `spoken` in the dialogue (`spoken_statements`): a negated one's
    contrary as it is (`predicate_negation:not->+utterance:<n>`, n counted from 1), an affirmed one rewritten
    by the rules (`rule:words+utterance:<n>`). With `fluency`, each is checked against the text it rewrites as
    the rewrites of a correct answer are, and a failing one left out."""
    from tasks.distractors import grounded

    zh = chinese_ids(view)
    answers = dict(zip(view["id"], written_answers(view)))
    english = [inst for inst in view.itertuples() if inst.id not in zh and (offered.get(inst.id) or
                                                                            (spoken or {}).get(inst.id))]
    grounded.parse([t for inst in english for _, t in offered.get(inst.id, [])] +
                   [t for inst in english for _, t, _ in (spoken or {}).get(inst.id, [])])
    out: Pool = {i: [] for i in [*offered, *(spoken or {})]}
    base: dict[tuple[str, str], str] = {}
    for inst in english:
        words = grounded.dialogue_words(_listed(inst.passage), getattr(inst, "target", None))
        taken = grounded.lemmas(answers[inst.id])
        correct = {a.strip().lower() for a in answers[inst.id]}
        made = [(source, text, None) for source, text in offered[inst.id]]
        made += [(f"utterance:{k + 1}", said, contra) for k, said, contra in (spoken or {}).get(inst.id, [])]
        for source, text, contra in made:
            found = [("predicate_negation:not->", contra)] if contra else \
                grounded.rewrites(text, words, taken, per_rule=1, rules=rules)
            for rule, new in found:
                if (inst.id, new) not in base and new.strip().lower() not in correct:
                    base[(inst.id, new)] = text
                    out[inst.id].append((f"{rule}+{source}", new))
    if fluency and base:
        out = fluent(view, out, base, "dialogue", checked, rejected)
    return out


def _texts(passage, gold: str) -> list[str]:
    """The dialogue's utterances without speaker tags, and the gold answer."""
    return [re.sub(r"^\s*[A-Z][a-z]?\s*:\s*", "", str(u)) for u in passage] + [gold]


# Entity types a retrieved answer's names are adapted for: people, places, organisations. A time, a date or
# a number is left as written: swapping it for a phrase of this dialogue ("Only 10 minutes'") breaks the
# sentence (a blind reader found "to spend a weekend Only 10 minutes' with the speaker").
ADAPTED = frozenset({"PERSON", "ORG", "GPE", "LOC", "FAC", "NORP"})


def adapt_names(text: str, theirs: dict[str, str], ours: dict[str, str]) -> str | None:
    """Replace the other dialogue's named entities in `text` by this dialogue's entities of the same type
    (spaCy NER), in order of appearance; None when one has no stand-in."""
    spare = [n for n in ours if n not in theirs]
    for name, label in theirs.items():
        if name in ours or label not in ADAPTED or not re.search(rf"(?<!\w){re.escape(name)}(?!\w)", text):
            continue
        stand_in = next((n for n in spare if ours[n] == label), None)
        if stand_in is None:
            return None
        spare.remove(stand_in)
        text = re.sub(rf"(?<!\w){re.escape(name)}(?!\w)", stand_in, text)
    return text


def counterfactuals(instances: pd.DataFrame, *,
                    generators: list[Literal["lexical", "dialogue", "grounded", "t5", "file", "server", "retrieval"]] =
                    ["grounded", "dialogue", "lexical", "retrieval"],
                    min_pool: int = 16, model: ModelDir = None, conceptnet_db: InputPath = None,
                    max_per_answer: int = 24, num_return: int = 8, num_beams: int = 8, do_sample: bool = False,
                    batch_size: int = 16, candidates: InputPath = None, retrieval_depth: int = 32,
                    dialogue_min_gap: int = 1, question_time: dict[str, Time] = QUESTION_TIME,
                    embed: EmbedSpec = EmbedSpec(), fluency: bool = True,
                    lexical_rules: list[Literal["antonym", "negation", "quantity", "role_swap", "entity_swap"]] =
                    list(CONTRADICTING),
                    grounded_rules: list[Literal["swap_place", "swap_time", "role_flip", "swap_event", "swap_object",
                                                 "swap_attribute", "predicate_negation", "contrary_verb",
                                                 "emotion_swap", "feeling_alone"]] =
                    list(GROUNDED_DEFAULT),
                    grounded_per_rule: int = 2,
                    dialogue_contrary: list[Literal["predicate_negation", "contrary_verb", "emotion_swap"]] =
                    list(GROUNDED_CONTRARY),
                    retrieval_foreign: bool = False, server: ServerSpec = ServerSpec(),
                    own_margin: int = 2,
                    seed: int = 0, ctx: StageContext | None = None) -> StageOutput:
    """A pool of alternatives to every instance's gold answer (distractors.Instances in).

    Args:
        generators: generators in order; the first gives all its candidates, each next one fills the
            pools still below min_pool: lexical (rule-based rewrites of every correct answer), dialogue
            (answers written for the same dialogue about other targets, to the same type of question: in
            place, as a reader expects), grounded (correct answers rewritten with
            the dialogue's own places, times and people), t5 (a seq2seq directory in
            model), file (candidates from any other generator), server (a language model behind an
            OpenAI-compatible server: `server`), retrieval (answers to the same question from other dialogues)
        min_pool: candidates per instance the later generators fill up to (the candidate filter removes
            some; AF needs spares to swap in)
        model: seq2seq model directory for the t5 generator (see csk cicero train-generator)
        conceptnet_db: conceptnet-lite SQLite database adding antonyms to the lexical rules
        max_per_answer: lexical pools are subsampled (seeded) above this size
        num_return: t5 outputs per answer
        num_beams: t5 beam width
        do_sample: t5 nucleus sampling instead of beam search
        batch_size: t5 answers per batch
        candidates: JSON Lines {"id": instance id, "candidates": [...]} for the file generator
        retrieval_depth: most retrieved answers per instance
        dialogue_min_gap: where the questions' times are unknown, the dialogue generator takes answers about
            targets at least this many utterances from the item's own (1: every other target)
        question_time: relation words of a question -> when its answers happen, "before" or "after" its
            target; the relation a question names is its type, and the dialogue and retrieval generators
            offer only answers to questions of the item's type, the dialogue generator only about targets on
            the other side of the item's (the time-order rule of dialogue_pools); {} turns both rules off
        embed: the sentence embedder ranking retrieved answers
        fluency: check every lexical rewrite with the parser (fixed expressions left alone, number
            agreement, articles; `tasks.distractors.fluency`) and leave out those that fail: rejected rows
            (reason_code fluency_<check>) under their instance, each rule's losses in the manifest's `fluency`
        lexical_rules: the rule kinds the lexical generator chains: by default only those that make the
            rewrite contradict the answer (antonym, negation, quantity); role_swap and entity_swap rewrite
            who did something, which is as often as not just as true (a name for a name)
        grounded_rules: the grounded generator's rules (tasks/distractors/grounded.py): by default who did
            what to whom flipped (role_flip) and a contrary predicate for the answer's subject (its negation
            inside the predicate, predicate_negation; its event under refuses / fails / forgets to,
            contrary_verb; a feeling of the other polarity, emotion_swap, or said alone, feeling_alone);
            then the answer's thing or place for the dialogue's own (swap_object, swap_place: placed behind
            the others); a verb, a time or an adjective for the
            dialogue's (swap_event, swap_time, swap_attribute) only when named: readers found them broken
            English as often as not
        grounded_per_rule: most rewrites per rule and word of an answer (the dialogue's words nearest the
            target first)
        dialogue_contrary: the grounded rules the dialogue generator rewrites this dialogue's answers to
            other targets, and what the answer's subject says of themselves in the dialogue
            (`statements.statements`), with, into a contrary statement for their own subject, offered before the answers
            as written (readers judged 16-23% of those correct for the item); [] offers them as written only
        retrieval_foreign: also offer retrieved answers that name a thing (a noun) this dialogue and its
            correct answers never name (then after every other candidate); off: left out, counted in the
            manifest (`retrieval_foreign_left_out`)
        server: the server generator's server, model, sampling, concurrency, retries and prompt templates
            (tasks/distractors/served.py; the API key only by the name of its environment variable)
        own_margin: an item whose own generator (t5, file, server: candidates written for the item) gave
            its slots plus this many is not filled by the offline generators: AF chooses among its own
            generator's candidates alone, with two spare (the filters removed at most 3% of the published
            distractors of the real samples: bench/results/filters_on_published_epyc.txt)
        seed: seed of subsampling and sampling
    """
    view = instances
    if not generators:
        raise ConfigError("counterfactuals.generators is empty: name at least one of lexical, dialogue, t5, file, "
                          "retrieval")
    # the question type each item asks (the relation its question names) and its written answers
    kind = {i: question_type(q, question_time) for i, q in zip(view["id"], view["question"].astype(str))}
    answers = dict(zip(view["id"], written_answers(view)))
    said = Said()  # what the generators report beside their candidates
    make = {
        "lexical": partial(lexical_pools, conceptnet_db=conceptnet_db, max_per_answer=max_per_answer,
                           seed=seed, fluency=fluency, rejected=said.disfluent, checked=said.checked,
                           rules=tuple(lexical_rules)),
        "t5": partial(t5_pools, model=model, num_return=num_return, num_beams=num_beams, do_sample=do_sample,
                      batch_size=batch_size, seed=seed, ctx=ctx),
        "file": partial(file_pools, candidates=candidates),
        "dialogue": partial(dialogue_pools, min_gap=dialogue_min_gap, time=question_time,
                            left_out=said.type_left_out, contrary=tuple(dialogue_contrary), fluency=fluency,
                            rejected=said.disfluent, checked=said.checked),
        "grounded": partial(grounded_pools, rules=tuple(grounded_rules), per_rule=grounded_per_rule,
                            fluency=fluency, rejected=said.disfluent, checked=said.checked),
        "server": partial(said.served, spec=server, kind=kind, answers=answers, seed=seed,
                          cache_dir=ctx.cache_dir if ctx is not None else None, library=view),
        "retrieval": partial(retrieval_pools, embed=embed, depth=retrieval_depth, ctx=ctx,
                             foreign=retrieval_foreign, left_out=said.foreign_left_out, time=question_time),
    }
    pools, added = fill_pools(view, generators, make, min_pool=min_pool, fluency=fluency, said=said,
                              own_margin=own_margin)
    data = candidate_rows(view, pools, kind, answers)
    if said.responses and ctx is not None:
        ctx.record_model("counterfactual-generator", None, None, kind="served chat model", served_as=server.model,
                         temperature=server.temperature, candidates=server.candidates)
    return _counterfactuals_report(view, data, said, added, kind, generators=generators, lexical_rules=lexical_rules,
                                   retrieval_foreign=retrieval_foreign, min_pool=min_pool, server=server)


@dataclass
class Said:
    """What the generators report beside their candidates, gathered for the stage's rejected rows and
    manifest: rewrites the fluency checks left out (`disfluent`, with every rewrite checked), answers passed
    over (naming a foreign thing, of another question type) per instance, and the server's requests."""

    disfluent: list[dict] = field(default_factory=list)
    checked: list[str] = field(default_factory=list)
    foreign_left_out: dict[str, int] = field(default_factory=dict)
    type_left_out: dict[str, int] = field(default_factory=dict)
    server_rejected: list[dict] = field(default_factory=list)
    copied: list[dict] = field(default_factory=list)  # a generator's candidates copying another dialogue's answer
    responses: list[dict] = field(default_factory=list)  # one row per server request: the artifact, lineage
    sent: int = 0

    def served(self, view: pd.DataFrame, **settings) -> Pool:
        pools, self.sent = server_pools(view, rejected=self.server_rejected, responses=self.responses, **settings)
        return pools


def _norm(text: str) -> str:
    return " ".join(re.sub(r"[\W_]+", " ", str(text).lower()).split())


class Echoes:
    """What a generator's candidate for an item repeats of the file's correct answers: another dialogue's
    (an answer about another conversation: no candidate written for this item), another item's of the same
    dialogue (as often correct here: readers judged 18-32% of them correct), or one of the item's own with
    only a negation changed (a giveaway without the dialogue). The published distractors of the real samples
    do the last two now and then (0.6% and 0.3% of MuTual's) and the first never
    (bench/results/filters_on_published_epyc.txt): the first is rejected, the others kept behind the item's
    other candidates (placement "echo")."""

    def __init__(self, view: pd.DataFrame):
        self.group = dict(zip(view["id"], view["group_id"]))
        self.correct = dict(zip(view["id"], written_answers(view)))
        self.answered: dict[str, list[str]] = {}  # a correct answer's words -> the items that have it
        for iid in sorted(self.correct):
            for text in self.correct[iid]:
                self.answered.setdefault(_norm(text), []).append(iid)

    def of(self, iid: str, text: str) -> tuple[str, str] | None:
        """("another_dialogue" | "echo", why) for a candidate of item `iid`, or None."""
        from tasks.distractors.giveaways import bare_negation

        others = [i for i in self.answered.get(_norm(text), []) if i != iid]
        foreign = [i for i in others if self.group[i] != self.group[iid]]
        if foreign and len(foreign) == len(others):
            return "another_dialogue", f"a copy of item {foreign[0]}'s correct answer, about another dialogue"
        if others:
            return "echo", f"a copy of item {others[0]}'s correct answer (this dialogue, another question)"
        negated = next((a for a in self.correct[iid] if bare_negation(text, a)), None)
        return ("echo", f"the correct answer {negated!r} with only a negation changed") if negated else None


def own_writing(found: Pool, echoes: Echoes, generator: str, copied: list[dict]) -> Pool:
    """A generator's candidates less those copying another dialogue's correct answer (appended to `copied`
    with the reason)."""
    out: Pool = {}
    for iid, pool in found.items():
        out[iid] = []
        for rule, text in pool:
            echo = echoes.of(iid, text)
            if echo and echo[0] == "another_dialogue":
                copied.append({"instance_id": iid, "candidate": text, "rule": rule, "generator": generator,
                               "reason": echo[1]})
            else:
                out[iid].append((rule, text))
    return out


def fill_pools(view: pd.DataFrame, generators: list[str], make: dict, *, min_pool: int, fluency: bool,
               said: Said, own_margin: int) -> tuple[dict[str, list[tuple[str, str, str]]], dict[str, int]]:
    """Each instance's pool, (generator, rule, text) in the generators' order: the first gives all its
    candidates, each next one fills the pools still short (a reserve answer kept beside, outside `min_pool`);
    a text already in the pool (or the gold) is not taken twice. A pool is short while it holds fewer than
    `min_pool` candidates, unless a generator that writes for the item (placement.GENERATED) gave it its
    slots plus `own_margin`: then the offline generators are not asked for it. A generator that writes for
    the item is asked only for the items still short. Returns the pools and how many each generator added."""
    pools: dict[str, list[tuple[str, str, str]]] = {i: [] for i in view["id"]}
    seen = {i: {g.strip().lower()} for i, g in zip(view["id"], view["gold"])}
    slots = dict(zip(view["id"], view["n_distractors"] if "n_distractors" in view.columns else [0] * len(view)))
    echoes = Echoes(view)
    added: dict[str, int] = {}

    def own_enough(iid: str) -> bool:  # its own generator gave its slots and the margin
        own = sum(g in GENERATED for g, _, _ in pools[iid])
        return bool(own) and own >= (int(slots[iid]) or SLOTS) + own_margin

    for k, name in enumerate(generators):
        if name not in make:
            raise ConfigError(f"counterfactuals.generators: unknown generator {name!r}; choose from {', '.join(make)}")
        wanted = set(view["id"]) if k == 0 else \
            {i for i in view["id"] if len(pools[i]) < min_pool and not own_enough(i)}
        if not wanted:
            break
        # a generator writing for the item is asked only for the items it may fill (a request, a beam search
        # each); the others read the whole file (retrieval and dialogue draw on the other items)
        made = make[name](view[view["id"].isin(wanted)] if name in GENERATED and k else view)
        if fluency and name in WRITTEN:  # written by a person or a model, not by a rule: typos and all
            made = spelled(made, view, name, said.disfluent, said.checked)
        if name in GENERATED:
            made = own_writing(made, echoes, name, said.copied)
        for iid, found in made.items():
            if k and own_enough(iid):
                continue
            room = len(found) if k == 0 else max(0, min_pool - len(pools[iid]))
            for rule, text in found:
                spare = mark(name, rule) == "reserve"  # beside the pool, outside min_pool
                if room <= 0 and not spare:
                    continue
                text = text.strip()
                if text and text.lower() not in seen[iid]:
                    seen[iid].add(text.lower())
                    pools[iid].append((name, rule, text))
                    added[name] = added.get(name, 0) + 1
                    room -= not spare
    return pools, added


CANDIDATE_COLUMNS = ["id", "instance_id", "gold", "candidate", "generator", "rule", "rationale", "question_type",
                     "item_question_type", "written_for", "placement"]
WRITTEN_ELSEWHERE = ("dialogue", "retrieval")  # generators whose candidates are answers written for another item
# generators whose candidates a person or a model wrote (not a rule): each meets the writers' checks
WRITTEN = frozenset(WRITTEN_ELSEWHERE) | GENERATED


def candidate_rows(view: pd.DataFrame, pools: dict[str, list[tuple[str, str, str]]], kind: dict[str, str | None],
                   answers: dict[str, list[str]]) -> pd.DataFrame:
    """One row per candidate. Every candidate states the question type it answers (a rewrite or a
    generator's output that of its own item; an answer of this or another dialogue that of the item it was
    written for, which its rule names), the item it was written for (`csk lineage` follows it), and where it
    was written (`placement`, declared once here for AF's order, placement.PREFERENCE)."""
    gold = dict(zip(view["id"], view["gold"]))
    echoes = Echoes(view)

    def written_for(iid: str, name: str, rule: str) -> str:
        return str(rule).rsplit(":", 1)[-1] if name in WRITTEN_ELSEWHERE else iid

    rows = [{"id": f"{iid}/cf{k:03d}", "instance_id": iid, "gold": gold[iid], "candidate": text, "generator": name,
             "rule": rule, "rationale": _rationale(name, rule, answers[iid], text),
             "question_type": kind.get(written_for(iid, name, rule)) if name in WRITTEN_ELSEWHERE else kind[iid],
             "item_question_type": kind[iid], "written_for": written_for(iid, name, rule),
             "placement": "echo" if name in GENERATED and echoes.of(iid, text) else PREFERENCE[preference(name, rule)][0]}
            for iid, pool in pools.items() for k, (name, rule, text) in enumerate(pool)]
    return pd.DataFrame(rows, columns=CANDIDATE_COLUMNS)


def _counterfactuals_report(view: pd.DataFrame, data: pd.DataFrame, said: Said, added: dict[str, int],
                            kind: dict[str, str | None], *, generators: list[str], lexical_rules: list[str],
                            retrieval_foreign: bool, min_pool: int, server: ServerSpec) -> StageOutput:
    """The stage's bookkeeping: pools by generator and placement, question types, what was left out, the
    card's lines, the fluency report, the rejected rows with their reasons, the per-instance yields and the
    server's requests."""
    gold = dict(zip(view["id"], view["gold"]))
    per = data.groupby("instance_id").size().reindex(view["id"], fill_value=0)
    tiers = pd.Series([tier(g, r) for g, r in zip(data["generator"], data["rule"])], index=data.index, dtype=object)
    in_place = data[tiers.isin(IN_PLACE)].groupby("instance_id").size().reindex(view["id"], fill_value=0)
    langs = view["language"].value_counts().to_dict() if "language" in view.columns else {"en": len(view)}
    notes = {"generators": list(generators), "candidates_by_generator": added, "instances": len(view),
             "lexical_rules": list(lexical_rules),
             "pool_by_generator": {g: _quantiles(data[data["generator"] == g].groupby("instance_id").size()
                                                  .reindex(view["id"], fill_value=0)) for g in generators},
             "languages": langs,
             **({"chinese": "lexical: jieba part-of-speech rules (zh_swap, zh_antonym with a ConceptNet database, "
                            "zh_negation), no fluency check (the parser checks are English); retrieval: answers "
                            "taken as written (no name adaptation); t5 and file generators as configured"}
                if langs.get("zh") else {}),
             "named_entities": PIPELINE if {"lexical", "retrieval"} & set(generators) else None,
             # where each item's candidates were written (tasks/distractors/placement.py): in place (rewrites,
             # this dialogue's answers) before answers of other dialogues
             "pool_by_placement": {t: _quantiles(tiers[tiers == t].groupby(data.loc[tiers.index, "instance_id"])
                                                 .size().reindex(view["id"], fill_value=0)) for t in TIERS},
             "in_place_per_instance": _quantiles(in_place),
             # the type of question each candidate answers, checked against its item's (the contract holds them
             # equal where both are known): answers of another type passed over, and mismatches kept (0)
             "question_types": {str(k): int(v) for k, v in pd.Series(list(kind.values()), dtype=object)
                                .fillna("unknown").value_counts().sort_index().items()},
             # this dialogue's answers to another type of question, not offered
             "question_type_left_out": {"candidates": int(sum(said.type_left_out.values())),
                                        "instances": len(said.type_left_out)},
             "question_type_mismatches": int(((data["question_type"] != data["item_question_type"]) &
                                              data["question_type"].notna() & data["item_question_type"].notna()).sum()),
             "retrieval_foreign_left_out": {"candidates": int(sum(said.foreign_left_out.values())),
                                            "instances": len(said.foreign_left_out),
                                            "allowed": bool(retrieval_foreign),
                                            # kept beside the pool, only to fill an item left short
                                            "reserve": int(data["rule"].map(lambda r: mark("retrieval", r) ==
                                                                            "reserve").sum()) if len(data) else 0},
             "instances_without_candidates": int((per == 0).sum()), "mean_pool": float(per.mean()) if len(per) else 0.0,
             "median_pool": float(per.median()) if len(per) else 0.0, "min_pool": min_pool,
             "samples": _samples(data)}
    notes["card"] = _card_lines(notes, added, len(data), retrieval_foreign)
    report = fluency_report(said.checked, said.disfluent) if said.checked else []
    if report:
        notes["fluency"] = report  # each rule's losses to each check (the rewrites themselves: rejected rows)
        notes["fluency_checked"] = len(said.checked)
        notes["fluency_rejected"] = len(said.disfluent)
        notes["fluency_rejected_by_check"] = {c: sum(r["rejected"] for r in report if r["check"] == c)
                                              for c in sorted({r["check"] for r in report})}
    empty = per[per == 0].index.tolist()
    parts = [pd.DataFrame({"id": empty, "instance_id": empty, "reason_code": "no_candidate",
                           "reason": f"no generator of {list(generators)} produced an alternative to this answer"})] \
        if empty else []
    if said.disfluent:  # rewrites the fluency checks left out, each under its instance with the rule that made it
        rows_out = [{"id": f"{r['instance_id']}/disfluent{k:03d}", "instance_id": r["instance_id"],
                     "reason_code": f"fluency_{r['check']}", "reason": r["reason"], "gold": r["gold"],
                     "candidate": r["candidate"], "generator": r.get("generator", "lexical"), "rule": r["rule"]}
                    for k, r in enumerate(said.disfluent)]
        parts.append(pd.DataFrame(rows_out))
    if said.copied:  # a generator's candidates that copy another dialogue's correct answer
        parts.append(pd.DataFrame([{"id": f"{r['instance_id']}/copied{k:03d}", "instance_id": r["instance_id"],
                                    "reason_code": "another_dialogues_answer", "reason": r["reason"],
                                    "gold": gold[r["instance_id"]], "candidate": r["candidate"],
                                    "generator": r["generator"], "rule": r["rule"]} for k, r in enumerate(said.copied)]))
    if said.server_rejected:  # responses and candidates of the server that could not be used, with the reason
        parts.append(pd.DataFrame([{**r, "gold": gold[r["instance_id"]], "generator": "server"}
                                   for r in said.server_rejected]))
    rejected = pd.concat(parts, ignore_index=True) if parts else None
    # every generator's yield per instance: where a pool came up short, and why
    files = {"pool_per_instance.parquet": to_parquet_bytes(pd.DataFrame(_per_instance(view, data, generators)))}
    notes["pool_per_instance"] = "pool_per_instance.parquet"
    if said.responses:  # every server request and its response: a candidate's rule names its request
        files["server_responses.parquet"] = to_parquet_bytes(pd.DataFrame(said.responses))
        requests = len({r["request"] for r in said.responses})
        answered = {str(k): int(v) for k, v in pd.Series([r.get("model") or server.model for r in said.responses],
                                                          dtype=object).value_counts().sort_index().items()}
        notes["server"] = {"model": server.model, "requests": requests, "answered_by": answered,
                           "sent_this_run": said.sent, "responses": "server_responses.parquet",
                           # a rerun against a changed or dead base_url still reads its kept responses: say so
                           "answered_from_the_request_cache": requests - said.sent,
                           "rejected": {k: int(v) for k, v in pd.Series([r["reason_code"] for r in said.server_rejected],
                                                                        dtype=object).value_counts().items()}}
    if said.responses:
        by_server = int((data["generator"] == "server").sum())
        notes["summary"] = [
            f"The server ({server.base_url or 'no base_url'}, model {server.model}, answered by "
            f"{', '.join(notes['server']['answered_by'])}): {notes['server']['requests']} requests, "
            f"{said.sent} sent this run, {notes['server']['answered_from_the_request_cache']} answered from the "
            f"request cache; {by_server} candidates for {data.loc[data['generator'] == 'server', 'instance_id'].nunique()}"
            f" of {len(view)} items."]
    return StageOutput(data=data, rejected=rejected, rows_in=len(view), notes=notes, files=files,
                       tables={"pools": [{"measure": k, "value": json.dumps(v) if not isinstance(v, (int, float)) else v}
                                         for k, v in notes.items() if k != "samples"],
                               "rule_samples": [{"rule": r, "gold": g, "candidate": c} for r, g, c in notes["samples"]],
                               **({"fluency": report} if report else {})})


def _card_lines(notes: dict, added: dict[str, int], candidates: int, retrieval_foreign: bool) -> list[str]:
    """The card's lines: where each item's candidates were written (tasks/distractors/placement.py), by
    which generator, and what was left out."""
    left = notes["retrieval_foreign_left_out"]
    return [
        "Pool per item by placement (min / median / max; items with none): " + "; ".join(
            f"{t} {q['min']} / {q['median']:g} / {q['max']} ({q['none']} none)"
            for t, q in notes["pool_by_placement"].items()) + f"; in place (rewrites and this dialogue's answers): "
        f"median {notes['in_place_per_instance']['median']:g}.",
        "Pool per item by generator (median): " + ", ".join(f"{g} {q['median']:g}"
                                                            for g, q in notes["pool_by_generator"].items()) + "; "
        "candidates by generator: " + ", ".join(f"{g} {n} ({100 * n / max(candidates, 1):.1f}%)"
                                               for g, n in sorted(added.items())) + ".",
        f"Answers of other dialogues naming a thing this dialogue never names: "
        f"{'offered last' if retrieval_foreign else 'left out'} ({left['candidates']} passed over for "
        f"{left['instances']} items"
        + ("" if retrieval_foreign else f"; {left['reserve']} kept in reserve for an item the rest cannot fill") + ").",
        f"This dialogue's answers to another type of question (an emotion offered as a motivation): left out "
        f"({notes['question_type_left_out']['candidates']} passed over); candidates answering another type than "
        f"their item's: {notes['question_type_mismatches']}.",
    ]


def _rationale(generator: str, rule: str, answers: list[str], text: str) -> str:
    """Why the candidate may be a wrong answer: a rewrite's changed words (against the correct answer it
    rewrote: the nearest one); a retrieved answer's source."""
    if generator in ("lexical", "grounded"):
        import difflib

        near = max(answers, key=lambda a: (difflib.SequenceMatcher(None, a.lower(), text.lower()).ratio(), a))
        return f"{rule}: {evidence(near, text)}" + ("" if near == answers[0] else f" (of the correct answer {near!r})")
    if generator == "retrieval":
        return f"the answer of {rule.rsplit(':', 1)[-1]}, another dialogue" + \
            (" asked another question" if ":other_question:" in rule else "") + \
            (", naming things this dialogue does not" if ":foreign:" in rule else "")
    if generator == "dialogue" and "+dialogue:" in rule:
        rewrite, source = rule.split("+dialogue:", 1)
        return f"the answer of {source}, this dialogue, about another target, rewritten into a contrary statement " \
               f"({rewrite})"
    if generator == "dialogue" and "+utterance:" in rule:
        rewrite, source = rule.split("+utterance:", 1)
        return f"utterance {source} of this dialogue, said of the answer's subject, rewritten into a contrary " \
               f"statement ({rewrite})"
    if generator == "dialogue":
        return f"the answer of {rule.rsplit(':', 1)[-1]}, this dialogue, about another target, same type of question"
    if generator == "server":  # server:<model>:<template>:<request>: the response it came from
        _, model, template, request = (rule.split(":", 1)[0], *rule.split(":", 1)[1].rsplit(":", 2))
        return (f"written by {model} behind the server, asked with the {template!r} template (request {request}: "
                f"server_responses.parquet)")
    return f"{generator} output ({rule})"


def _per_instance(view: pd.DataFrame, data: pd.DataFrame, generators) -> list[dict]:
    """Each instance's pool by generator and by placement (tasks/distractors/placement.py)."""
    counts = data.groupby(["instance_id", "generator"]).size()
    tiers = data.assign(tier=[tier(g, r) for g, r in zip(data["generator"], data["rule"])]) \
        .groupby(["instance_id", "tier"]).size()
    return [{"instance_id": iid, **{g: int(counts.get((iid, g), 0)) for g in generators},
             **{f"placement_{t}": int(tiers.get((iid, t), 0)) for t in TIERS},
             "pool": int(sum(counts.get((iid, g), 0) for g in generators))} for iid in view["id"]]


def _quantiles(sizes: pd.Series) -> dict:
    """Pool sizes per instance: min, median, max, and how many instances got none."""
    if not len(sizes):
        return {"min": 0, "median": 0.0, "max": 0, "none": 0}
    return {"min": int(sizes.min()), "median": float(sizes.median()), "max": int(sizes.max()),
            "none": int((sizes == 0).sum())}


def _samples(data: pd.DataFrame, per_rule: int = 3) -> list[tuple[str, str, str]]:
    """A few outputs of every rule kind, for review (first in id order: deterministic)."""
    kinds = data["rule"].map(lambda r: "+".join(sorted({p.split(":")[0] for p in str(r).split("+")})))
    out = []
    for kind, group in data.assign(kind=kinds).groupby("kind", sort=True):
        out += [(kind, r.gold, r.candidate) for r in group.head(per_rule).itertuples()]
    return out
