"""What the ending-only probe reads: its accuracy with each group of its features alone, published beside rebuilt.

The probe (giveaways.EndingOnlyProbe) reads a choice's embedding, its mean and highest cosine to the other
choices of its set, and whether it holds a negation. Refitted on one group at a time over the same paired
halvings as the card (`giveaways.ending_only_halvings`), it says which of them finds a rebuilt file's correct
answers: the embedding (what a choice says), the set's shape (the cosines), the negation, or a pair of them
(a negation beside a high cosine: a correct answer's negated copy).

    python bench/ending_only_features.py PUBLISHED.jsonl REBUILT.jsonl [REBUILT.jsonl ...] [--splits 12]
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.ending_only_splits import read_files  # noqa: E402
from tasks.distractors import giveaways  # noqa: E402
from tasks.embed import EmbedSpec, open_embedder  # noqa: E402

GROUPS = (("embedding", "cosines", "negation"), ("embedding",), ("cosines",), ("negation",),
          ("cosines", "negation"), ("embedding", "negation"))


def main(argv: list[str] | None = None) -> None:
    files, ids, sets, texts, splits = read_files(argv, __doc__.split("\n\n")[0])
    full = giveaways.EndingOnlyProbe.features
    print(f"ending-only probe by feature group, mean accuracy over {splits} halvings of the dialogues")
    print(f"{'features':35s}" + "".join(f"{Path(f).name[:28]:>30s}" for f in files))
    with open_embedder(EmbedSpec(), None) as emb:
        vector = emb.lookup(texts)
        for keep in GROUPS:
            def features(self, members, texts, keep=keep):
                x = full(self, members, texts)
                d = x.shape[1] - 3  # the embedding, then mean cosine, highest cosine, negation
                cols = {"embedding": list(range(d)), "cosines": [d, d + 1], "negation": [d + 2]}
                return x[:, [c for name in keep for c in cols[name]]]
            giveaways.EndingOnlyProbe.features = features
            try:
                acc = giveaways.ending_only_halvings(ids, sets, vector, splits, seed=0)
            finally:
                giveaways.EndingOnlyProbe.features = full
            print(f"{' + '.join(keep):35s}" + "".join(f"{np.mean(acc[f]):30.3f}" for f in files))


if __name__ == "__main__":
    main()
