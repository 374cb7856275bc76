"""TextRank over sentence vectors (PageRank on the cosine graph) and the top-ranked items of each
segment of a sequence: shared by any stage that ranks the utterances of a dialogue (CICERO's target
selection) and by the embedder's precision ladder, which checks that a cheaper precision ranks alike.
Knows no dataset."""

from __future__ import annotations

import numpy as np


def segment_bounds(n: int, n_segments: int) -> list[tuple[int, int]]:
    """Consecutive segments of roughly equal size."""
    n_segments = max(1, min(n_segments, n))
    edges = np.linspace(0, n, n_segments + 1).round().astype(int)
    return [(int(a), int(b)) for a, b in zip(edges[:-1], edges[1:]) if b > a]


def textrank(vectors: np.ndarray, damping: float = 0.85) -> np.ndarray:
    """PageRank over the graph whose edge weights are cosine similarities (negatives clipped):
    networkx.pagerank, one dialogue (the reference `textrank_batch` is checked against)."""
    n = len(vectors)
    if n == 1:
        return np.ones(1)
    sims = np.clip(vectors @ vectors.T, 0.0, None)
    np.fill_diagonal(sims, 0.0)
    import networkx as nx

    graph = nx.from_numpy_array(sims)
    if graph.size(weight="weight") == 0:
        return np.full(n, 1.0 / n)
    pr = nx.pagerank(graph, alpha=damping, weight="weight", tol=1e-10, max_iter=1000)
    return np.array([pr[i] for i in range(n)])


def textrank_batch(blocks: list[np.ndarray], damping: float = 0.85, tol: float = 1e-10,
                   max_iter: int = 1000) -> list[np.ndarray]:
    """`textrank` of many dialogues at once: networkx.pagerank's power iteration (row-normalised
    weights, dangling nodes to the uniform vector, stop when the L1 change < n * tol) run for every
    dialogue of the same length together, each dialogue stopping at its own convergence, so each
    gets the iterate networkx would return (to float rounding: the same rankings). networkx per
    dialogue cost ~3 ms in Python overhead; this is one batched matrix product per iteration."""
    out: list[np.ndarray | None] = [None] * len(blocks)
    by_length: dict[int, list[int]] = {}
    for i, v in enumerate(blocks):
        by_length.setdefault(len(v), []).append(i)
    for n, idx in sorted(by_length.items()):
        if n == 1:
            for i in idx:
                out[i] = np.ones(1)
            continue
        V = np.stack([blocks[i] for i in idx])
        A = np.clip(V @ V.transpose(0, 2, 1), 0.0, None).astype(np.float64)  # (B, n, n), as textrank's sims
        A[:, np.arange(n), np.arange(n)] = 0.0
        S = A.sum(axis=2)
        M = A * np.divide(1.0, S, out=np.zeros_like(S), where=S != 0)[:, :, None]
        dangling = S == 0
        p = 1.0 / n
        x = np.full((len(idx), n), p)
        active = np.arange(len(idx))
        for _ in range(max_iter):
            xa = x[active]
            new = damping * (np.matmul(xa[:, None, :], M[active])[:, 0, :]
                             + (xa * dangling[active]).sum(axis=1, keepdims=True) * p) + (1 - damping) * p
            done = np.abs(new - xa).sum(axis=1) < n * tol
            x[active] = new
            active = active[~done]
            if not len(active):
                break
        else:
            raise RuntimeError(f"TextRank did not converge in {max_iter} iterations for {len(active)} dialogue(s) "
                               f"of {n} utterances")
        for row, i in enumerate(idx):
            out[i] = x[row]
    return out


def select_x1(scores: np.ndarray, k: int, n_segments: int, exclude: set[int] = frozenset()) -> list[int]:
    """The top-ranked utterances (by the whole-dialogue `scores`) of each segment, k split as evenly
    as the segments allow; utterances in `exclude` (already targets) are passed over."""
    n = len(scores)
    bounds = segment_bounds(n, n_segments)
    quota = [k // len(bounds) + (1 if s < k % len(bounds) else 0) for s in range(len(bounds))]
    ranked = sorted(range(n), key=lambda i: (-scores[i], i))
    chosen: list[int] = []
    for (a, b), q in zip(bounds, quota):
        chosen += [i for i in ranked if a <= i < b and i not in exclude][:q]
    return sorted(chosen)
