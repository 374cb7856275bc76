"""The token-batched `TransformerMC` against the per-instance path it replaced (kept here as the reference):
a fit is the same bytes in fp32 on a CPU, scores give the same choices in fp32 and agree within bf16 rounding
under bf16 autocast."""

from __future__ import annotations

import numpy as np
import pytest

from tests import tiny_models


def _mc_task(n: int = 20):
    """Instances of 3 to 5 choices and contexts of different lengths (so steps need padding choices and
    padded rows), the gold the choice about the dog."""
    contexts = [f"the speaker wants to buy a new dog . {'the storm is coming tonight . ' * (i % 4)}" for i in range(n)]
    wrong = ["the listener is happy about the cat .", "they go to the park on saturday .", "i am going home now .",
             "jenny and her father prepare food ."]
    choices, gold = [], []
    for i in range(n):
        ch = wrong[:2 + i % 3]
        ch.insert(i % len(ch), "the speaker wants a dog .")
        choices.append(ch)
        gold.append(i % (len(ch) - 1))
    return contexts, choices, gold


def _reference_fit(disc, contexts, choices, gold):
    """The per-step path as it was: each step's instances tokenised by one tokenizer call (padding=True),
    padding choices "" masked out of the loss."""
    import torch
    from transformers import get_linear_schedule_with_warmup

    from csk import compute

    torch.manual_seed(disc.seed + disc.fits)
    disc.fits += 1
    disc._load()
    opt = torch.optim.AdamW(disc.model.parameters(), lr=disc.lr, weight_decay=disc.weight_decay)
    steps = disc.epochs * ((len(contexts) + disc.batch_size - 1) // disc.batch_size)
    sched = get_linear_schedule_with_warmup(opt, int(disc.warmup * steps), max(steps, 1))
    rng = compute.rng(disc.seed, "mc-batches", disc.fits)
    disc.model.train()
    for _ in range(disc.epochs):
        order = rng.permutation(len(contexts))
        for s in range(0, len(order), disc.batch_size):
            idx = order[s:s + disc.batch_size]
            enc, mask = _reference_encode(disc, [contexts[i] for i in idx], [choices[i] for i in idx])
            labels = torch.tensor([gold[i] for i in idx])
            with disc._autocast():
                logits = disc.model(**enc).logits.float()
            loss = torch.nn.functional.cross_entropy(logits.masked_fill(~mask, -1e4), labels)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(disc.model.parameters(), 1.0)
            opt.step()
            sched.step()
            opt.zero_grad()
    disc.model.eval()
    return disc


def _reference_encode(disc, contexts, choices):
    import torch

    width = max(len(ch) for ch in choices)
    first, second, mask = [], [], []
    for c, ch in zip(contexts, choices):
        first += [c] * width
        second += list(ch) + [""] * (width - len(ch))
        mask.append([1] * len(ch) + [0] * (width - len(ch)))
    enc = disc.tokenizer(first, second, truncation=True, max_length=disc.max_length, padding=True, return_tensors="pt")
    return {k: v.view(len(contexts), width, -1) for k, v in enc.items()}, torch.tensor(mask, dtype=torch.bool)


def _reference_score(disc, contexts, choices, chunk=8):
    """One instance at a time, its choices in chunks of 8."""
    import torch

    out = []
    with torch.inference_mode():
        for c, ch in zip(contexts, choices):
            parts = []
            for s in range(0, len(ch), chunk):
                enc, _ = _reference_encode(disc, [c], [list(ch[s:s + chunk])])
                with disc._autocast():
                    parts.append(disc.model(**enc).logits.float()[0].numpy())
            out.append(np.concatenate(parts))
    return out


def _fp32(monkeypatch):
    from tasks.distractors.discriminators import TransformerMC

    monkeypatch.setattr(TransformerMC, "precision", property(lambda self: "fp32"))


def test_batched_fit_is_the_per_step_fit_in_bytes_and_scores_choose_alike(tmp_path, monkeypatch):
    import torch

    from tasks.distractors.discriminators import TransformerMC

    _fp32(monkeypatch)
    model = tiny_models.multiple_choice(tmp_path / "mc", layers=2)
    contexts, choices, gold = _mc_task(20)
    settings = dict(epochs=2, lr=1e-3, batch_size=4, max_length=24, seed=3, device="cpu")
    batched = TransformerMC(str(model), **settings).fit(contexts[:14], choices[:14], gold[:14])
    reference = _reference_fit(TransformerMC(str(model), **settings), contexts[:14], choices[:14], gold[:14])
    new, old = batched.model.state_dict(), reference.model.state_dict()
    assert all(torch.equal(new[k], old[k]) for k in old)  # dropout included: the same tensors, the same draws
    # scored together, longest first, in passes of at most 64 padded tokens (several instances per pass)
    batched.batch_tokens = 64
    scores = batched.score(contexts[14:], choices[14:])
    ref = _reference_score(reference, contexts[14:], choices[14:])
    assert [len(s) for s in scores] == [len(ch) for ch in choices[14:]]
    assert [int(np.argmax(s)) for s in scores] == [int(np.argmax(s)) for s in ref]
    for a, b in zip(scores, ref):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)
    # every ordering relation AF reads (gold vs each choice) is the same
    assert all(np.array_equal(a[:, None] > a[None, :], b[:, None] > b[None, :]) for a, b in zip(scores, ref))


def test_micro_batches_add_up_to_the_step(tmp_path, monkeypatch):
    """A step over batch_tokens is split into micro-batches of whole instances; their gradients, each loss
    weighted by its share, add up to the whole step's (dropout off: a split draws other masks). Compared on
    the gradient itself: AdamW would hide a uniform scale and blow rounding up on zero-gradient weights."""
    import torch
    from transformers import BertForMultipleChoice

    from tasks.distractors.discriminators import TransformerMC

    _fp32(monkeypatch)
    out = tmp_path / "mc"
    tok = tiny_models.tokenizer(out)
    BertForMultipleChoice(tiny_models.encoder_config(len(tok), num_hidden_layers=2, hidden_dropout_prob=0.0,
                                                     attention_probs_dropout_prob=0.0)).save_pretrained(out)
    contexts, choices, gold = _mc_task(12)
    disc = TransformerMC(str(out), max_length=24, device="cpu")
    disc._load()
    disc.model.train()
    data = disc._fit_rows(contexts, choices, gold)
    idx = np.asarray([5, 0, 9, 2, 7, 11])  # 3 to 5 choices: padding choices in play

    def gradients(batch_tokens):
        disc.batch_tokens = batch_tokens
        disc.model.zero_grad(set_to_none=True)
        passes = disc._backward(data, idx)
        return passes, {k: p.grad.clone() for k, p in disc.model.named_parameters() if p.grad is not None}

    (one, whole), (several, split) = gradients(10**6), gradients(150)
    assert one == 1 and several >= 3
    scale = max(float(g.abs().max()) for g in whole.values())
    assert scale > 0 and set(whole) == set(split)
    assert all(torch.allclose(whole[k], split[k], rtol=1e-4, atol=1e-4 * scale) for k in whole)


def test_fixed_shape_steps_give_the_eager_steps_gradient(tmp_path, monkeypatch):
    """cuda_graphs pads every fit step to one shape per length bucket (batch_size instances, the fit's most
    choices, the step's longest pair rounded up to GRAPH_BUCKET): filler instances weigh nothing and padding
    choices are masked, so the gradient is the eager step's (dropout off; fp32 float rounding). On a CPU the
    padded step runs eagerly, which is what a CUDA graph replays."""
    import torch
    from transformers import BertForMultipleChoice

    from tasks.distractors import discriminators
    from tasks.distractors.discriminators import TransformerMC

    _fp32(monkeypatch)
    monkeypatch.setattr(discriminators, "GRAPH_BUCKET", 16)  # the tiny task's pairs are under 24 tokens
    out = tmp_path / "mc"
    tok = tiny_models.tokenizer(out)
    BertForMultipleChoice(tiny_models.encoder_config(len(tok), num_hidden_layers=2, hidden_dropout_prob=0.0,
                                                     attention_probs_dropout_prob=0.0)).save_pretrained(out)
    contexts, choices, gold = _mc_task(12)
    disc = TransformerMC(str(out), max_length=24, batch_size=4, device="cpu")
    disc._load()
    disc.model.train()
    data = disc._fit_rows(contexts, choices, gold)

    def gradients(idx, graphs):
        disc.cuda_graphs, disc._graphs = graphs, {}
        disc.model.zero_grad(set_to_none=True)
        disc._backward(data, idx)
        return {k: p.grad.clone() for k, p in disc.model.named_parameters() if p.grad is not None}, disc._graphs

    for idx in (np.asarray([5, 0, 9, 2]), np.asarray([7, 1])):  # a full step; an epoch's last, short one
        eager, _ = gradients(idx, False)
        fixed, shapes = gradients(idx, True)
        (shape,) = shapes  # 4 instances x 5 choices x a multiple of 16 tokens, at most the fit's longest pair
        bucket = min(16 * -(-int(data["longest"][idx].max()) // 16), data["widest_row"])
        assert shape[0] == (4, data["width"], bucket) and data["width"] == 5
        scale = max(float(g.abs().max()) for g in eager.values())
        assert scale > 0 and set(eager) == set(fixed)
        # (the classifier bias's true gradient is 0: softmax rows sum to 1 up to rounding, ~1e-4 of the scale)
        assert all(torch.allclose(eager[k], fixed[k], rtol=1e-4, atol=1e-3 * scale) for k in eager)


def test_scores_tokenised_in_chunks_are_each_pairs_own(tmp_path, monkeypatch):
    """Scoring with the pairs tokenised in chunks (on CUDA: on a thread, ahead of the card; here chunks of 7
    pairs) gives every pair the logit it gets alone, and the same choices."""
    from tasks.distractors.discriminators import TransformerMC

    _fp32(monkeypatch)
    model = tiny_models.multiple_choice(tmp_path / "mc", layers=2)
    contexts, choices, gold = _mc_task(16)
    disc = TransformerMC(str(model), epochs=1, lr=1e-3, batch_size=4, max_length=24, seed=0, device="cpu",
                         batch_tokens=96, score_chunk=7).fit(contexts[:8], choices[:8], gold[:8])
    scores = disc.score(contexts, choices)
    ref = _reference_score(disc, contexts, choices, chunk=1)
    assert [len(s) for s in scores] == [len(ch) for ch in choices]
    assert [int(np.argmax(s)) for s in scores] == [int(np.argmax(s)) for s in ref]
    for a, b in zip(scores, ref):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)


def test_group_by_length_orders_each_epoch_into_steps_of_similar_length():
    """group_by_length: every instance once an epoch, each step's instances neighbours in length (a megabatch
    of 50 steps sorted), the steps in a seeded random order; off, the plain permutation of the per-step path."""
    from csk import compute
    from tasks.distractors.discriminators import TransformerMC

    lengths = np.random.default_rng(0).integers(20, 256, 800)
    plain = TransformerMC("unused", batch_size=4, device="cpu")._order(compute.rng(0, "x"), lengths)
    assert np.array_equal(plain, compute.rng(0, "x").permutation(800))
    order = TransformerMC("unused", batch_size=4, device="cpu", group_by_length=True)._order(compute.rng(0, "x"),
                                                                                            lengths)
    assert sorted(order.tolist()) == list(range(800))
    spread = lambda o: np.mean([np.ptp(lengths[o[s:s + 4]]) for s in range(0, 800, 4)])  # noqa: E731
    assert spread(order) < 0.2 * spread(plain)
    firsts = [int(lengths[order[s]]) for s in range(0, 800, 4)]
    assert firsts != sorted(firsts, reverse=True)  # the steps themselves are shuffled


def test_batched_scores_within_bf16_rounding(tmp_path, monkeypatch):
    from tasks.distractors.discriminators import TransformerMC

    model = tiny_models.multiple_choice(tmp_path / "mc", layers=2)
    contexts, choices, gold = _mc_task(12)
    monkeypatch.setattr(TransformerMC, "precision", property(lambda self: "bf16"))
    disc = TransformerMC(str(model), epochs=1, lr=1e-3, batch_size=4, max_length=24, seed=0, device="cpu",
                         batch_tokens=96).fit(contexts[:8], choices[:8], gold[:8])
    scores = disc.score(contexts, choices)
    ref = _reference_score(disc, contexts, choices)
    spread = max(float(np.ptp(np.concatenate(ref))), 1e-3)
    for a, b in zip(scores, ref):  # bf16 keeps 8 significant bits: 2^-7 of the scores' range
        np.testing.assert_allclose(a, b, atol=spread * 2 ** -7 + 1e-3)


def test_token_rows_pad_as_the_tokenizer_does(tmp_path):
    from transformers import AutoTokenizer

    from tasks.distractors.discriminators import TokenRows, length_passes

    tiny_models.tokenizer(tmp_path / "tok")
    tok = AutoTokenizer.from_pretrained(tmp_path / "tok")
    contexts, choices, _ = _mc_task(6)
    first = [c for c, ch in zip(contexts, choices) for _ in ch]
    second = [x for ch in choices for x in ch]
    rows = TokenRows(tok, first, second, max_length=20)
    pick = np.asarray([3, 0, 7])
    want = tok([first[i] for i in pick], [second[i] for i in pick], truncation=True, max_length=20, padding=True,
               return_tensors="np")
    got = rows.batch(pick)
    assert set(got) == set(want) and all(np.array_equal(got[k], want[k]) for k in want)
    passes = length_passes(rows.lengths, 64, multiple=8)
    assert sorted(np.concatenate(passes).tolist()) == list(range(len(rows)))
    assert all(len(p) * (-(-int(rows.lengths[p].max()) // 8) * 8) <= 64 or len(p) == 1 for p in passes)
    assert [int(rows.lengths[p].max()) for p in passes] == sorted((int(rows.lengths[p].max()) for p in passes),
                                                                  reverse=True)


def test_paper_preset_sets_the_papers_discriminator(tmp_path):
    """preset = "paper": the full transformer, 3 epochs, lr 1e-5, batch 4, 4 distractors, 256 tokens for the
    settings left at their defaults; a third value for one of them, or the bundled small encoder, is refused."""
    from csk.errors import ConfigError
    from csk.runtime import StageContext
    from csk.store import Store
    from tasks.distractors.adversarial import adversarial_filter
    from tests.distractors.test_distractors import EMBED, _af_data, _items

    inst, cands = _af_data()
    inst, cands = inst.iloc[:10], cands[cands["instance_id"].isin(inst["id"].iloc[:10])]
    model = tiny_models.multiple_choice(tmp_path / "mc")
    ctx = StageContext(Store(tmp_path / "s"), "cicero", "adversarial_filter")
    out = adversarial_filter(_items(inst), cands, seed=0, embed=EMBED, model=str(model), preset="paper",
                             max_iterations=1, ctx=ctx)
    used = next(m for m in ctx.models if m["name"] == "discriminator")
    assert (used["trained"], used["epochs"], used["lr"], used["max_length"]) == ("all layers", 3, 1e-5, 256)
    assert out.notes["discriminator"] == "transformer" and out.notes["preset"] == "paper"
    assert (out.data["distractors"].map(len) == 4).all()
    with pytest.raises(ConfigError, match="epochs = 3, and epochs is set to 5"):
        adversarial_filter(_items(inst), cands, embed=EMBED, model=str(model), preset="paper", epochs=5)
    with pytest.raises(ConfigError, match="roberta-large directory"):
        adversarial_filter(_items(inst), cands, embed=EMBED, preset="paper")


def test_nli_scores_in_length_passes_are_each_pairs_own(tmp_path):
    """The NLI filter's pairs run longest first in passes: each pair's probabilities are those of the pair
    scored alone (fp32, float rounding)."""
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    from tasks.distractors.candidate_filter import nli_scores

    model = tiny_models.nli(tmp_path / "nli")
    contexts, choices, _ = _mc_task(6)
    premises = [c for c, ch in zip(contexts, choices) for _ in ch]
    hypotheses = [x for ch in choices for x in ch]
    p, labels = nli_scores(premises, hypotheses, model, batch_size=4)
    tok = AutoTokenizer.from_pretrained(model)
    ref = AutoModelForSequenceClassification.from_pretrained(model).eval()
    with torch.inference_mode():
        alone = [torch.softmax(ref(**tok(a, b, truncation=True, max_length=256, return_tensors="pt")).logits, -1)[0]
                 for a, b in zip(premises, hypotheses)]
    np.testing.assert_allclose(p, [float(x[2]) for x in alone], rtol=1e-5, atol=1e-6)
    assert labels == [ref.config.id2label[int(x.argmax())] for x in alone]


if __name__ == "__main__":
    pytest.main([__file__])
