"""What gives a correct answer away without the dialogue: the choices alone.

SWAG filtered its endings against a stylistic ensemble that read the ending alone; HellaSwag's BERT loses
11.9 points without the context; Story Cloze's ending-only baseline reads negation and sentiment (72.5%,
chance 50%). A choice set whose correct answers a model finds from the choices alone does not test reading
the dialogue. Three measures, cheap enough to run in AF's every round and in `distractor_quality`:

* the ending-only probe (`EndingOnlyProbe`, SWAG / HellaSwag's baseline): logistic regression on each
  choice's sentence embedding, its mean and highest cosine to the other choices of its set, and whether it
  holds a negation; no dialogue;
* the centre giveaway (`centre_is_correct`): the choice nearest on average to the others is a correct one
  (correct answers paraphrase each other; distractors made by rewriting them gather round them too);
* near-copy sets (`near_copy_set`): two or more distractors that rewrite a correct answer (word Jaccard
  >= 0.5, or the same words but a negation);
* negated-copy sets (`negated_copy_set`): a distractor that is a correct answer's near-copy with a
  negation added or dropped, the pair that names its correct member.
"""

from __future__ import annotations

import re
from typing import Callable

import numpy as np

from csk import compute

# English's negators (a closed class of words): "not", its contraction, and the negative determiners,
# pronouns and adverbs
NEGATORS = frozenset({"not", "n't", "never", "no", "nobody", "nothing", "none", "neither", "nor", "nowhere",
                      "cannot"})
WORD = re.compile(r"n't|[a-z]+")
NEAR_COPY_JACCARD = 0.5


def words(text: str) -> list[str]:
    """Lower-cased words, "n't" split off its verb ("didn't" -> "did", "n't")."""
    return WORD.findall(str(text).lower().replace("n't", " n't"))


def negated(text: str) -> bool:
    """Does the sentence hold a negation (one of English's negators)?"""
    return any(w in NEGATORS for w in words(text))


def rewrites(distractor: str, answer: str, threshold: float = NEAR_COPY_JACCARD) -> bool:
    """Is `distractor` a rewrite of `answer`: word Jaccard >= threshold, or the same words but a negation?"""
    a, b = set(words(distractor)), set(words(answer))
    if not a or not b:
        return False
    if a - NEGATORS == b - NEGATORS:
        return True
    return len(a & b) / len(a | b) >= threshold


DO_SUPPORT = frozenset({"do", "does", "did"})
SENTENTIAL_FRAME = re.compile(r"^it\s+(?:is|was)\s+(?:not\s+|n't\s+)?(?:true|false|the\s+case)\s+that\s+", re.I)


def bare_negation(candidate: str, answer: str) -> bool:
    """Is `candidate` the answer with a negation added or removed and nothing else changed ("The speaker
    goes home" -> "The speaker does not go home", "It is not true that the speaker goes home"): the same words, read as lemmas, less negators and the
    do-support a negation brings? A reader spots such a distractor without the dialogue; 0.6% of CICERO v2
    val's published distractors are one."""
    from lemminflect import getAllLemmas

    def lemmas(text: str) -> list[str]:
        out = []
        # a sentential negation's frame ("It is not true that ...", "It was not the case that ...") negates
        # the clause it frames: read that clause
        text = SENTENTIAL_FRAME.sub("", str(text).strip())
        for w in words(text):
            if w in NEGATORS or w in DO_SUPPORT:
                continue
            found = getAllLemmas(w)
            out.append(min(found.get("VERB", found.get("NOUN", (w,)))) if found else w)
        return sorted(out)

    return negated(candidate) != negated(answer) and bool(lemmas(candidate)) and lemmas(candidate) == lemmas(answer)


def negated_copy(distractor: str, answer: str) -> bool:
    """Is `distractor` a near-copy of `answer` (`rewrites`) that negates it or drops its negation ("The
    speaker does not want to rent the flat" beside "The speaker wants to rent the flat")? The pair names
    its correct member without the dialogue: the one without the negation, as a reader and the ending-only
    probe (a negation beside a high cosine to the set) both take it. 3.3-3.8% of CICERO v2 val's items hold
    one."""
    return rewrites(distractor, answer) and negated(distractor) != negated(answer)


def negated_copy_set(choices: list[str], correct: set[int]) -> bool:
    """A distractor of the set is a negated copy of a correct answer (`negated_copy`)."""
    answers = [choices[k] for k in correct]
    return any(negated_copy(d, a) for k, d in enumerate(choices) if k not in correct for a in answers)


def near_copy_set(choices: list[str], correct: set[int], threshold: float = NEAR_COPY_JACCARD) -> bool:
    """Two or more distractors of the set rewrite a correct answer: the set is the correct answers and their
    near-copies, and the odd one out is found without reading the dialogue."""
    answers = [choices[k] for k in correct]
    return sum(any(rewrites(d, a, threshold) for a in answers)
               for k, d in enumerate(choices) if k not in correct) >= 2


def _cosines(vectors: np.ndarray) -> np.ndarray:
    unit = vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
    return unit @ unit.T


def centre_is_correct(vectors: np.ndarray, correct: set[int]) -> bool:
    """Is the choice with the highest mean cosine to the other choices of its set a correct one?"""
    n = len(vectors)
    if n < 2:
        return bool(correct)
    sims = _cosines(vectors)
    mean = (sims.sum(axis=1) - np.diag(sims)) / (n - 1)
    return int(np.argmax(mean)) in correct


class EndingOnlyProbe:
    """Logistic regression on what a choice says alone and how it sits among its set: its embedding, its
    mean and highest cosine to the set's other choices, whether it holds a negation. `fit(sets, correct)`
    learns every correct choice against every distractor; `score(sets, texts)` scores each text of
    `texts[i]` against the choices of `sets[i]` (itself left out where it is one of them), so candidates
    outside a set are scored as if they stood in it."""

    name = "ending-only probe"

    def __init__(self, vector: Callable[[str], np.ndarray], seed: int = 0, C: float = 1.0, max_iter: int = 2000):
        self.vector, self.seed, self.C, self.max_iter = vector, seed, C, max_iter
        self.model = None

    def features(self, members: list[str], texts: list[str]) -> np.ndarray:
        own = np.stack([np.asarray(self.vector(t), dtype=np.float64) for t in texts])
        ref = np.stack([np.asarray(self.vector(t), dtype=np.float64) for t in members])
        unit = lambda m: m / np.maximum(np.linalg.norm(m, axis=1, keepdims=True), 1e-12)  # noqa: E731
        sims = unit(own) @ unit(ref).T
        lowered = [m.strip().lower() for m in members]
        itself = np.asarray([[m == t.strip().lower() for m in lowered] for t in texts])  # never compared with itself
        others = (~itself).sum(axis=1)
        mean = np.where(others > 0, np.where(itself, 0.0, sims).sum(axis=1) / np.maximum(others, 1), 0.0)
        high = np.where(others > 0, np.where(itself, -np.inf, sims).max(axis=1), 0.0)
        neg = np.asarray([negated(t) for t in texts], dtype=np.float64)
        return np.concatenate([own, mean[:, None], high[:, None], neg[:, None]], axis=1)

    def fit(self, sets: list[list[str]], correct: list[set[int]]) -> "EndingOnlyProbe":
        from sklearn.linear_model import LogisticRegression

        X = np.concatenate([self.features(ch, ch) for ch in sets])
        y = np.concatenate([[int(k in cor) for k in range(len(ch))] for ch, cor in zip(sets, correct)])
        self.model = LogisticRegression(C=self.C, max_iter=self.max_iter, class_weight="balanced",
                                        random_state=self.seed)
        self.model.fit(X, y)
        return self

    def score(self, sets: list[list[str]], texts: list[list[str]] | None = None) -> list[np.ndarray]:
        texts = sets if texts is None else texts
        return [self.model.decision_function(self.features(ch, ts)) for ch, ts in zip(sets, texts)]


def ending_only_accuracy(train: list[int], test: list[int], choices: list[list[str]], correct: list[set[int]],
                         vector: Callable[[str], np.ndarray], seed: int = 0) -> np.ndarray:
    """Per test item: does the ending-only probe, fitted on the train items, put a correct choice on top?"""
    probe = EndingOnlyProbe(vector, seed=seed).fit([choices[i] for i in train], [correct[i] for i in train])
    scores = probe.score([choices[i] for i in test])
    return np.asarray([int(np.argmax(s)) in correct[i] for i, s in zip(test, scores)], dtype=float)


def ending_only_halvings(groups: list[str], sets: dict[str, tuple[list[list[str]], list[set[int]]]],
                         vector: Callable[[str], np.ndarray], halvings: int, seed: int = 0) -> dict[str, np.ndarray]:
    """The ending-only probe's accuracy over `halvings` seeded halvings of the groups (dialogues): fitted on
    one half's items, tested on the other's, each set of choices on the same halves (paired). One halving
    of 810 items moves the accuracy by a standard error of about two points, the size of the differences
    between rebuilt and published sets; the mean over halvings is steadier. `groups[i]` is item i's group;
    every set names choices for every item. Returns each set's accuracies, one per halving (a halving whose
    train half holds no wrong choice in some set, or whose test half is empty, is left out of every set)."""
    keys = list(dict.fromkeys(groups))  # first appearance: the same halves whatever the groups are called
    out: dict[str, list[float]] = {name: [] for name in sets}
    for k in range(halvings):
        order = compute.rng(seed, "ending-only-halving", k).permutation(len(keys))
        half = {keys[j] for j in order[: len(keys) // 2]}
        train = [i for i, g in enumerate(groups) if g in half]
        test = [i for i, g in enumerate(groups) if g not in half]
        # a half with nothing to learn from (no wrong choice in some set) or nothing to test: no halving
        if not test or not all(any(len(ch[i]) > len(cor[i]) for i in train) for ch, cor in sets.values()):
            continue
        for name, (choices, correct) in sets.items():
            out[name].append(float(ending_only_accuracy(train, test, choices, correct, vector, seed).mean()))
    return {name: np.asarray(v) for name, v in out.items()}
