"""The engine's rules, one registry: every rewrite rule, fluency check, check of a human-written answer and
rule of grammar is an object there, and each fires on real CICERO answers (the real v2 sample's 300 items and the MuTual file's 161:
every gold answer rewritten by every lexical and grounded rule, every rewrite checked, every released choice
read as a human-written candidate). A rule that fires on none has no place in the registry."""

from __future__ import annotations

import pandas as pd
import pytest

from tests.conftest import real_samples


@pytest.fixture(scope="module")
def rates():
    from readers import read_cicero_release
    from tasks.distractors.rules import firing_rates

    rows = [r for name in ("cicero_v2_val_sample.jsonl", "cicero_v2_val_mutual.jsonl")
            for r in read_cicero_release(real_samples() / "cicero" / name, lenient=True).rows]
    view = pd.DataFrame({"id": [r["id"] for r in rows], "group_id": [r["cicero_id"] for r in rows],
                         "question": [r["question"] for r in rows], "target": [r.get("target") or "" for r in rows],
                         "passage": [r["dialogue"] for r in rows], "choices": [[] for _ in rows],
                         "correct_answers": [[] for _ in rows],
                         "gold": [r["choices"][r["correct_answers"][0]] for r in rows]})
    written = {r["id"]: list(r["choices"]) for r in rows}
    return firing_rates(view, written)


def test_every_rule_is_an_object_of_the_registry():
    from tasks.distractors import fluency, grounded, lexical, statements
    from tasks.distractors.rules import REGISTRY

    assert [k.split(":", 1)[1] for k in REGISTRY if k.startswith("lexical:")] == list(lexical.RULE_KINDS)
    assert [k.split(":", 1)[1] for k in REGISTRY if k.startswith("grounded:")] == list(grounded.RULES)
    assert [k.split(":", 1)[1] for k in REGISTRY if k.startswith("statement:")] == \
        [r.name for r in statements.STATEMENT_RULES]
    assert {k.split(":", 1)[1] for k in REGISTRY if k.startswith("fluency:")} == {r.name for r in fluency.FLUENCY_RULES}
    # the checks a report lists (fluency.CHECKS) are the rewrite checks and the writer's
    assert set(fluency.CHECKS) == {r.name for r in fluency.FLUENCY_RULES + fluency.WRITER_CHECKS}
    grammar = [k.split(":", 1)[1] for k in REGISTRY if k.startswith("grammar:")]
    assert grammar == [r.name for r in (*fluency.AGREEMENT_RULES, *fluency.CONSTRUCTION_RULES)]
    assert all(getattr(r, "changes", None) or getattr(r, "catches", None) for r in REGISTRY.values())


def test_every_rule_fires_on_real_answers(rates, record_property):
    for name, r in rates.items():
        record_property(name, f"{r['fired']} of {r['of']}")  # how often: in the test report (junit xml)
    print("\n" + "\n".join(f"{k:<26} {r['fired']:>5} of {r['of']:>5} ({r['share']:.1%})" for k, r in rates.items()))
    silent = sorted(k for k, r in rates.items() if not r["fired"])
    assert not silent, f"rules that fire on none of the real answers: {silent}"
    # the contradicting rewrites reach most answers: a pool is mostly in place
    assert rates["lexical:antonym"]["share"] > 0.3 and rates["lexical:negation"]["share"] > 0.3
