"""docs/method.md 4.2: a response is kept when it has at least 5 words, at least one sentence that is not a
question, and says more than a courtesy ("It's been nice chatting with you.").

Sentences come from spaCy's parser (en_core_web_sm 3.8.0, offline); a sentence is a question when
it ends with "?" (unless a statement precedes a tag question after a comma: "I went to Japan,
how about you?", or an answer without a verb precedes a bare "how about you?" / "what about you?" /
"and you?": "pretty good, how about you?", which the release keeps) or opens with subject-auxiliary inversion ("do you like cars", "what are you
doing") whatever its punctuation. A sentence is a courtesy when, lower-cased and stripped of
punctuation, it is one on the courtesy list, or its embedding is at least `courtesy_similarity`
cosine to one of them (catching "it was really nice talking to you").
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from csk.progress import track
from csk.runtime import StageContext, StageOutput
from tasks.embed import EmbedSpec, open_embedder
from tasks.english import PIPELINE, english

WORD = re.compile(r"[^\W_]+")  # a contraction is two words, as tokenizers split it (He's = He 's)
WH_TAGS = {"WDT", "WP", "WP$", "WRB"}
SUBJECTS = {"nsubj", "nsubjpass", "expl", "csubj"}
BARE_TAGS = {"how about you", "what about you", "and you", "how bout you", "what about yourself", "and yourself"}
ANSWER_POS = {"ADJ", "ADV", "NOUN", "PROPN", "NUM"}
COURTESIES = [
    "It's been nice chatting with you.", "It was nice talking to you.", "Nice to meet you.", "Nice to meet you too.",
    "Thank you.", "Thanks.", "Thank you very much.", "Thanks for chatting.", "You're welcome.", "No problem.",
    "Have a nice day.", "Have a good day.", "Have a great weekend.", "Goodbye.", "Bye.", "See you later.",
    "Talk to you later.", "Good night.", "Good morning.", "Hello.", "Hi.", "Hi there.", "I'm fine, thank you.",
    "I'm doing well, thanks.", "Take care.", "Same to you.", "You too.", "Okay.", "Ok, bye.",
]


def words(text: str) -> int:
    return len(WORD.findall(text))


def is_question(sent) -> bool:
    """A spaCy sentence that asks: it ends with "?", or opens with an auxiliary before its subject
    ("do you ...", "can I ...") or a wh-word followed by that inversion ("what are you ...")."""
    toks = [t for t in sent if not t.is_space]
    while toks and toks[-1].is_punct and toks[-1].text not in "?":
        if toks[-1].text in ".!":
            break
        toks.pop()  # trailing quotes, brackets, emoticon bits
    if not toks:
        return False
    if toks[-1].text.endswith("?"):
        return not _statement_before_tag(toks)
    if toks[-1].text in ".!":
        return False
    k = 1 if toks[0].tag_ in WH_TAGS else 0
    return (len(toks) > k + 1 and toks[k].pos_ == "AUX" and toks[k].lower_ not in {"'s", "'re", "'m"}
            and toks[k + 1].dep_ in SUBJECTS)


def _statement_before_tag(toks) -> bool:
    """A statement with a question tagged on after a comma ("I went to Japan, how about you?"):
    the part before the last comma has a subject of its own and does not open with inversion."""
    commas = [i for i, t in enumerate(toks) if t.text == ","]
    if not commas:
        return False
    head = toks[:commas[-1]]
    if head and (head[0].pos_ == "AUX" or head[0].tag_ in WH_TAGS):
        return False
    if any(t.dep_ in SUBJECTS and t.head.i < toks[commas[-1]].i for t in head):
        return True
    tail = " ".join(t.lower_ for t in toks[commas[-1] + 1:] if not t.is_punct)
    return tail in BARE_TAGS and any(t.pos_ in ANSWER_POS for t in head)  # "pretty good, how about you?"


def _norm(text: str) -> str:
    return " ".join(WORD.findall(text.lower().replace("’", "'")))


def response_filter(samples: pd.DataFrame, *, min_words: int = 5, courtesies: list[str] = COURTESIES,
                    courtesy_similarity: float = 0.8, embed: EmbedSpec = EmbedSpec(),
                    ctx: StageContext | None = None) -> StageOutput:
    """Responses kept or rejected with the rule they fail (too_short, only_questions, only_courtesy).

    Args:
        min_words: fewest words a response has (the paper: 5)
        courtesies: sentences that say nothing but politeness; a response made only of these (and
            questions) is rejected
        courtesy_similarity: a sentence this close (cosine, the embedder's) to a courtesy is one;
            above 1: the list alone decides
        embed: the sentence embedder of the courtesy check
    """
    responses = samples["response"].astype(str).tolist()
    docs = list(track(english().pipe(responses, batch_size=256), len(responses), "spaCy sentences",
                      unit="responses", disable=len(responses) < 2000))
    statements = [[s.text.strip() for s in doc.sents if s.text.strip() and not is_question(s)
                   and WORD.search(s.text)] for doc in docs]
    listed = {_norm(c) for c in courtesies}
    unique = sorted({s for ss in statements for s in ss if _norm(s) not in listed})
    nearest: dict[str, tuple[float, str]] = {}
    embedder = None
    if unique and courtesies and courtesy_similarity <= 1:
        with open_embedder(embed, ctx) as emb:
            # words only: the embedder must not see "Thank you" and "thank you ." as different
            a, b = emb.encode([_norm(u) for u in unique]), emb.encode([_norm(c) for c in courtesies])
            embedder = {"model": embed.model, "precision": emb.precision}
        sims = a @ b.T
        best = sims.argmax(axis=1)
        nearest = {s: (float(sims[i, best[i]]), courtesies[best[i]]) for i, s in enumerate(unique)}

    def courtesy(s: str) -> bool:
        return _norm(s) in listed or nearest.get(s, (0.0, ""))[0] >= courtesy_similarity

    verdicts = []
    for text, ss in zip(responses, statements):
        n = words(text)
        content = [s for s in ss if not courtesy(s)]
        if n < min_words:
            verdicts.append(("too_short", f"{n} words, fewer than {min_words}"))
        elif not ss:
            verdicts.append(("only_questions", "every sentence is a question"))
        elif not content:
            why = "; ".join(f"{s!r} ~ {nearest[s][1]!r} ({nearest[s][0]:.2f})" if s in nearest and
                            _norm(s) not in listed else f"{s!r} is on the list" for s in ss)
            verdicts.append(("only_courtesy", f"only courtesies besides questions: {why}"))
        else:
            verdicts.append(None)
    keep = np.array([v is None for v in verdicts], dtype=bool)
    bad = samples[~keep].assign(reason_code=[v[0] for v in verdicts if v], reason=[v[1] for v in verdicts if v])
    counts = bad["reason_code"].value_counts().to_dict() if len(bad) else {}
    return StageOutput(
        data=samples[keep].assign(words=[words(t) for t, k in zip(responses, keep) if k],
                                  statements=[ss for ss, k in zip(statements, keep) if k]).reset_index(drop=True),
        rejected=bad,
        notes={"sentences": PIPELINE, "rules": ["too_short", "only_questions", "only_courtesy"],
               "rejected_by_rule": {k: int(v) for k, v in counts.items()},
               "courtesy_embedder": embedder or "not used"})
