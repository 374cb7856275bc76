"""Tiny randomly initialised transformers models, built from configs and a tokenizer trained on
test text: the real loading and training code paths run, nothing is downloaded."""

from __future__ import annotations

from pathlib import Path

TEXT = """the speaker wants to buy a new dog . the listener is happy about the dog .
the speaker does not want a cat . they go to the park on saturday . the storm is coming tonight .
what is or could be the cause of target ? what subsequent event happens or could happen following the target ?
jenny and her father prepare food . the bank opens an account . i am going home now .""".split()
SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "</s>"]


def tokenizer(out: Path):
    """The shared tokenizer; also seeds torch, so every model built after it has the same weights."""
    import torch
    from tokenizers import Tokenizer, models, pre_tokenizers, normalizers, processors
    from transformers import PreTrainedTokenizerFast

    vocab = {t: i for i, t in enumerate(SPECIALS + sorted(set(TEXT)))}
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="[UNK]"))
    tok.normalizer = normalizers.Lowercase()
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", vocab["[CLS]"]), ("[SEP]", vocab["[SEP]"])])
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="[UNK]", pad_token="[PAD]", cls_token="[CLS]",
                                   sep_token="[SEP]", mask_token="[MASK]", eos_token="</s>")
    fast.save_pretrained(out)
    torch.manual_seed(0)
    return fast


def encoder_config(vocab_size: int, **kw):
    from transformers import BertConfig

    return BertConfig(**{"vocab_size": vocab_size, "hidden_size": 32, "num_hidden_layers": 1, "num_attention_heads": 2,
                         "intermediate_size": 64, "max_position_embeddings": 512, **kw})


def multiple_choice(out: Path, layers: int = 1) -> Path:
    from transformers import BertForMultipleChoice

    tok = tokenizer(out)
    BertForMultipleChoice(encoder_config(len(tok), num_hidden_layers=layers)).save_pretrained(out)
    return out


def nli(out: Path) -> Path:
    from transformers import BertForSequenceClassification

    tok = tokenizer(out)
    cfg = encoder_config(len(tok), num_labels=3, id2label={0: "entailment", 1: "neutral", 2: "contradiction"},
                         label2id={"entailment": 0, "neutral": 1, "contradiction": 2})
    BertForSequenceClassification(cfg).save_pretrained(out)
    return out


def t5(out: Path) -> Path:
    from transformers import T5Config, T5ForConditionalGeneration

    tok = tokenizer(out)
    cfg = T5Config(vocab_size=len(tok), d_model=32, d_ff=64, d_kv=16, num_layers=1, num_decoder_layers=1,
                   num_heads=2, pad_token_id=tok.pad_token_id, eos_token_id=tok.eos_token_id,
                   decoder_start_token_id=tok.pad_token_id)
    T5ForConditionalGeneration(cfg).save_pretrained(out)
    return out


def bart(out: Path) -> Path:
    """A COMET-shaped model: BART (COMET-ATOMIC 2020 is a BART fine-tuned on "{head} {relation} [GEN]")."""
    from transformers import BartConfig, BartForConditionalGeneration

    tok = tokenizer(out)
    cfg = BartConfig(vocab_size=len(tok), d_model=32, encoder_layers=1, decoder_layers=1, encoder_attention_heads=2,
                     decoder_attention_heads=2, encoder_ffn_dim=64, decoder_ffn_dim=64, max_position_embeddings=256,
                     pad_token_id=tok.pad_token_id, bos_token_id=tok.cls_token_id, eos_token_id=tok.sep_token_id,
                     decoder_start_token_id=tok.sep_token_id, forced_eos_token_id=tok.sep_token_id)
    BartForConditionalGeneration(cfg).save_pretrained(out)
    return out


def causal_chat(out: Path) -> Path:
    """A tiny causal language model with a chat template (what `transformers serve` needs to answer
    /v1/chat/completions); random weights: it writes words of the test text."""
    from transformers import LlamaConfig, LlamaForCausalLM

    tok = tokenizer(out)
    tok.chat_template = ("{% for m in messages %}{{ m['role'] }} : {{ m['content'] }} {% endfor %}"
                         "{% if add_generation_prompt %}assistant : {% endif %}")
    tok.save_pretrained(out)
    cfg = LlamaConfig(vocab_size=len(tok), hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                      num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=4096,
                      pad_token_id=tok.pad_token_id, eos_token_id=tok.eos_token_id, bos_token_id=tok.cls_token_id)
    LlamaForCausalLM(cfg).save_pretrained(out)
    return out
