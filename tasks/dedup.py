"""Near-duplicate removal over normalised embeddings (CICERO docs/method.md 1.2: cosine >= 0.87).

The N x N similarity matrix is never materialised. Exact path: blocked products of the
upper triangle in bf16 (AMX/tensor cores) to find candidate pairs within a safety margin of
the threshold, each candidate then re-scored exactly in fp32, so the result equals an fp32
search. Above `approximate_above` rows a faiss IVF index answers range queries instead.
Whether the screen runs in bf16 is this machine's precision decision (`csk.precision`): on CPUs without native
bf16 it would be far slower than fp32, and the result is the same either way.
Pairs become a graph; each connected component keeps one dialogue: the first in input order
(sources in configuration order DailyDialog, MuTual, DREAM, then file order).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from csk import compute
from csk.errors import CskError
from csk.runtime import StageOutput
from csk.shards import map_shards, shard_rows

# bf16 keeps 8 mantissa bits: for unit vectors the dot-product error stays well below this.
BF16_MARGIN = 0.02
# The pairs depend on the vectors alone, not on the thread count: the fp32 screen's sums may run in any order
# (a BLAS splits them by its threads), so it keeps pairs within twice the worst-case rounding of a d-term sum
# of unit vectors (Higham's gamma_d, about d * 2^-24), and `_rescore` decides in its own fixed order; the faiss
# path trains and searches on one OpenMP thread.
THREAD_COUNT_FREE = "the screens keep a rounding margin and the fixed-order re-score decides; faiss on one thread"


def fp32_margin(d: int) -> float:
    """A bound on |screen - re-score| for unit vectors of dimension d summed in any order (2 gamma_d)."""
    return 2.02 * d * 2.0 ** -24


def exact_pairs(x: np.ndarray, threshold: float, block_size: int = 2048, col_block: int = 8192,
                screen_bf16: bool | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """All pairs i < j with cosine(x_i, x_j) >= threshold, by tiled matrix products.

    Only upper-triangle tiles are computed, into one preallocated tile buffer (memory stays
    block_size x col_block whatever n is). A tile is scanned for hits only when its maximum
    reaches the screening cut, so the elementwise work is one reduction per tile. On a Dask
    cluster the row blocks are shards (each screens its tiles); candidates are re-scored here in
    fp32 and sorted, so the pairs are the same whichever shard found them. `screen_bf16` None:
    bf16 screening only where a bf16 matmul is measured faster here (never on an AVX2-only CPU,
    where it is emulated two orders of magnitude slower).
    """
    if screen_bf16 is None:
        screen_bf16 = compute.bf16_faster("cpu")[0]
    n = len(x)
    if n < 2:
        return np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.float32)
    blocks = [(r0, min(r0 + block_size, n)) for r0 in range(0, n, block_size)]
    per_shard = max(1, shard_rows() // block_size)
    shards = [pd.DataFrame({"r0": [a for a, _ in blocks[k:k + per_shard]], "r1": [b for _, b in blocks[k:k + per_shard]]})
              for k in range(0, len(blocks), per_shard)]
    found = map_shards(screen_tiles, shards, arrays={"x": x}, threshold=float(threshold), col_block=int(col_block),
                       screen_bf16=bool(screen_bf16))
    i = np.concatenate([f["i"].to_numpy(np.int64) for f in found])
    j = np.concatenate([f["j"].to_numpy(np.int64) for f in found])
    return _rescore(x, i, j, threshold)


def screen_tiles(blocks: pd.DataFrame, *, x: np.ndarray, threshold: float, col_block: int,
                 screen_bf16: bool) -> pd.DataFrame:
    """Candidate pairs (i < j) of the row blocks [r0, r1) against every column at or after r0."""
    import torch

    n = len(x)
    xt = torch.from_numpy(np.array(x, dtype=np.float32))  # a copy: shards read a read-only memory map
    xs = xt.to(torch.bfloat16) if screen_bf16 else xt
    xs_t = xs.T.contiguous()
    cut = threshold - (BF16_MARGIN if screen_bf16 else fp32_margin(x.shape[1]))
    height = int((blocks["r1"] - blocks["r0"]).max()) if len(blocks) else 0
    tile = torch.empty(height, col_block, dtype=xs.dtype)
    rows, cols = [np.zeros(0, np.int64)], [np.zeros(0, np.int64)]
    with torch.inference_mode():
        for r0, r1 in zip(blocks["r0"].tolist(), blocks["r1"].tolist()):
            for c0 in range(r0, n, col_block):
                c1 = min(c0 + col_block, n)
                out = tile[: r1 - r0, : c1 - c0]
                torch.matmul(xs[r0:r1], xs_t[:, c0:c1], out=out)
                if out.max().item() < cut:
                    continue
                r, c = torch.nonzero(out >= cut, as_tuple=True)
                r, c = r + r0, c + c0
                keep = c > r
                rows.append(r[keep].numpy().astype(np.int64))
                cols.append(c[keep].numpy().astype(np.int64))
    return pd.DataFrame({"i": np.concatenate(rows), "j": np.concatenate(cols)})


def approximate_pairs(x: np.ndarray, threshold: float, nlist: int = 0, nprobe: int = 16,
                      seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Pairs above threshold from a faiss IVF inner-product index (range search), re-scored in fp32.

    nlist 0: 4 sqrt(n) lists (faiss's guideline), so a query scans about nprobe / (4 sqrt(n)) of the
    rows and the search grows as n^1.5. A fixed nlist keeps it quadratic: bench/scale.py measured
    nlist 256 no faster than the exact BLAS search up to 128K rows on a 2-core EPYC."""
    import faiss

    x = np.ascontiguousarray(x, dtype=np.float32)
    n, d = x.shape
    nlist = ivf_lists(n, nlist)
    threads = faiss.omp_get_max_threads()
    faiss.omp_set_num_threads(1)  # the coarse assignment's BLAS sums in an order its threads decide: one thread
    try:
        quantizer = faiss.IndexFlatIP(d)
        index = faiss.IndexIVFFlat(quantizer, d, nlist, faiss.METRIC_INNER_PRODUCT)
        index.cp.seed = seed
        index.train(x)
        index.add(x)
        index.nprobe = min(nprobe, nlist)
        lims, _, ids = index.range_search(x, float(threshold - fp32_margin(d)))
    finally:
        faiss.omp_set_num_threads(threads)
    counts = np.diff(lims.astype(np.int64))
    i = np.repeat(np.arange(n, dtype=np.int64), counts)
    j = ids.astype(np.int64)
    keep = j > i
    return _rescore(x, i[keep], j[keep], threshold)


def ivf_lists(n: int, nlist: int = 0) -> int:
    """The IVF list count used for n rows: `nlist`, or 4 sqrt(n) when 0; at most n / 39 (faiss wants
    ~39 training points per list)."""
    return max(1, min(nlist or int(4 * np.sqrt(n)), n // 39))


def _rescore(x, i, j, threshold):
    if len(i) == 0:
        return i, j, np.zeros(0, np.float32)
    sim = np.einsum("ij,ij->i", x[i].astype(np.float32), x[j].astype(np.float32))
    keep = sim >= threshold
    order = np.lexsort((j[keep], i[keep]))
    return i[keep][order], j[keep][order], sim[keep][order].astype(np.float32)


def duplicate_groups(n: int, i: np.ndarray, j: np.ndarray, sim: np.ndarray) -> list[dict]:
    """For every row that loses to an earlier one: the kept row, the row linking it and their cosine
    (the kept row itself when they are similar directly, else the closest neighbour in the group)."""
    import networkx as nx  # imported here: `csk` answers config errors before loading the heavy stack

    graph = nx.Graph()
    graph.add_nodes_from(range(n))
    graph.add_weighted_edges_from(zip(i.tolist(), j.tolist(), sim.tolist()))
    out = []
    for comp in nx.connected_components(graph):
        if len(comp) < 2:
            continue
        keep = min(comp)
        for node in sorted(comp - {keep}):
            if graph.has_edge(node, keep):
                link, w = keep, graph[node][keep]
            else:
                link, w = max(graph[node].items(), key=lambda kv: (kv[1]["weight"], -kv[0]))
            out.append({"row": node, "kept": keep, "linked": link, "similarity": float(w["weight"])})
    return out


def dedup(dialogues: pd.DataFrame, embeddings: pd.DataFrame, *, threshold: float = 0.87,
          block_size: int = 2048, col_block: int = 8192, approximate_above: int = 50_000, nlist: int = 0,
          nprobe: int = 16) -> StageOutput:
    """Near-duplicate removal: one dialogue kept per group of cosine >= threshold.

    Args:
        threshold: cosine at or above which two dialogues are near-duplicates (the paper's 0.87 was set
            for a SimCSE RoBERTa embedder)
        block_size: rows per tile of the exact tiled similarity search
        col_block: columns per tile (memory per tile: block_size x col_block)
        approximate_above: use a faiss IVF index above this many dialogues
        nlist: faiss IVF lists of the approximate path; 0: 4 sqrt(n)
        nprobe: faiss IVF lists probed per query
    """
    vectors = embeddings.set_index("id")["embedding"]
    missing = set(dialogues["id"]) - set(vectors.index)
    if missing:
        raise CskError(f"dedup: {len(missing)} dialogues have no embedding, e.g. {sorted(missing)[:3]}")
    x = np.stack([np.asarray(vectors[i], dtype=np.float32) for i in dialogues["id"]]) if len(dialogues) else \
        np.zeros((0, 1), np.float32)
    screen_bf16, machine = compute.bf16_faster("cpu")
    screen = "bf16" if screen_bf16 else "fp32"
    method = (f"faiss-ivf-range (nlist {ivf_lists(len(x), nlist)}, nprobe {nprobe})" if len(x) > approximate_above
              else f"exact-blocked-{screen}-screen-fp32-rescore")
    if len(x) > approximate_above:
        i, j, sim = approximate_pairs(x, threshold, nlist, nprobe)
    else:
        i, j, sim = exact_pairs(x, threshold, block_size, col_block, screen_bf16=screen_bf16)
    losers = duplicate_groups(len(x), i, j, sim)
    ids = dialogues["id"].tolist()
    drop = {d["row"] for d in losers}
    rejected = dialogues.iloc[[d["row"] for d in losers]].copy()
    rejected["duplicate_of"] = [ids[d["kept"]] for d in losers]
    rejected["similarity"] = [d["similarity"] for d in losers]
    rejected["reason_code"] = "near_duplicate"
    rejected["reason"] = [
        f"near-duplicate of {ids[d['kept']]}" + ("" if d["linked"] == d["kept"] else f" via {ids[d['linked']]}")
        + f" (cosine {d['similarity']:.4f} >= {threshold})" for d in losers]
    kept = dialogues.iloc[[k for k in range(len(ids)) if k not in drop]]
    return StageOutput(data=kept, rejected=rejected,
                       notes={"method": method, "screen": machine["why"], **compute.machine(), "pairs_above_threshold": int(len(i)), "groups": len({d["kept"] for d in losers})})
