"""The distractor engine's rules in one registry: every rewrite rule (the lexical generator's, the grounded
generator's), every fluency check of a rewrite, every check of a human-written candidate and every rule of
grammar those checks read off a parse, each a small named object stating its name (the rule or reason code
rows carry), what it changes or catches, and its function. The rules' words come from one vocabulary
(tasks/vocabulary.py); inflection is lemminflect's.

Each rule's test (tests/distractors/test_rules.py) records how often it fires on real CICERO answers; a rule
that fires on none has no place here."""

from __future__ import annotations

from tasks.distractors.fluency import AGREEMENT_RULES, CONSTRUCTION_RULES, FLUENCY_RULES, WRITER_CHECKS
from tasks.distractors.grounded import GROUNDED_RULES
from tasks.distractors.lexical import REWRITE_RULES
from tasks.distractors.statements import STATEMENT_RULES

REGISTRY = {**{f"lexical:{r.name}": r for r in REWRITE_RULES},
            **{f"grounded:{r.name}": r for r in GROUNDED_RULES},
            **{f"statement:{r.name}": r for r in STATEMENT_RULES},
            **{f"fluency:{r.name}": r for r in FLUENCY_RULES},
            **{f"writer:{r.name}": r for r in WRITER_CHECKS},
            **{f"grammar:{r.name}": r for r in (*AGREEMENT_RULES, *CONSTRUCTION_RULES)}}


def firing_rates(view, written: dict[str, list[str]], max_per_answer: int = 24) -> dict[str, dict]:
    """How often each rule of the registry fires on the answers of `view` (a counterfactuals instance
    table) and on `written` (instance id -> the answers people wrote for it: its released choices): a
    rewrite rule, the answers it rewrote at least once (alone or in a chain, kept or left out by a fluency
    check); a fluency check, the rewrites it left out; a writer's check, the written answers it rejects
    (the first check that fails, as `counterfactuals` asks them); a rule of grammar, the texts (written
    answers and rewrites) it finds something in; a statement rule, the items it made a statement of their
    dialogue for (`statements.statements`, for the item's gold answer's subject and the other person).
    {name: {"fired", "of", "share"}}."""
    import pandas as pd

    from tasks.distractors import fluency
    from tasks.distractors.counterfactuals import counterfactuals, dialogue_names, dialogue_words
    from tasks.distractors.statements import statements

    out = counterfactuals(view, generators=["lexical", "grounded"], lexical_rules=[r.name for r in REWRITE_RULES],
                          grounded_rules=[r.name for r in GROUNDED_RULES], max_per_answer=max_per_answer,
                          min_pool=10**6)
    rejected = out.rejected if out.rejected is not None else pd.DataFrame(columns=["reason_code", "rule"])
    fluent = rejected[rejected["reason_code"].astype(str).str.startswith("fluency_")]
    made = pd.concat([out.data[["instance_id", "generator", "rule"]],
                      fluent[["instance_id", "generator", "rule"]]], ignore_index=True)
    checked = int(out.notes.get("fluency_checked", 0))
    people = [(iid, t) for iid in view["id"] for t in written.get(iid, [])]
    texts = [t for _, t in people] + out.data["candidate"].tolist() + fluent["candidate"].tolist()
    parsed = fluency.parse(texts)
    known, names = dialogue_words(view), dialogue_names(view)
    writer = [fluency.writer_check(t, parsed[t], known[iid], names[iid]) for iid, t in people]
    spoken = [statements(list(r.passage) if r.passage is not None else [], r.target, [r.gold]) for r in view.itertuples()]
    golds = view["gold"].tolist()
    rates = {}
    for key, rule in REGISTRY.items():
        family, name = key.split(":", 1)
        if family == "fluency":
            fired, of = int((fluent["reason_code"] == f"fluency_{name}").sum()), checked
        elif family == "writer":
            fired, of = sum(1 for w in writer if w and w[0] == name), len(people)
        elif family == "statement":
            fired, of = sum(1 for made, gold in zip(spoken, golds) if any(rule.fired(s, c, gold) for _, s, c in made)), \
                len(view)
        elif family == "grammar":
            fired, of = sum(1 for t in dict.fromkeys(texts) if fluency.grammar([rule], parsed[t])), len(set(texts))
        else:
            gen = "lexical" if family == "lexical" else "grounded"
            steps = made[made["generator"] == gen]
            hit = steps["rule"].astype(str).map(lambda r, name=name: any(p.split(":")[0] == name for p in r.split("+")))
            fired, of = int(steps.loc[hit, "instance_id"].nunique()), len(view)
        rates[key] = {"fired": fired, "of": of, "share": round(fired / of, 4) if of else 0.0}
    return rates
