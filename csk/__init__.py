"""csk: reference data-construction pipelines for commonsense-dialogue datasets."""

import os

__version__ = "0.1.0"

# Fair speed beside a busy neighbour: torch's OpenMP threads spin at each barrier for GOMP's default
# 300,000 spins before they sleep, burning the time slices a sibling thread needs when another process
# holds a core (MiniLM encode beside a one-core busy loop: 5.3-5.8x its idle time on 2 cores, where a fair
# share is 2x). A short spin keeps the idle speed and gives 2.2-2.3x (`bench/fair_share.py`). The thread
# count and the order of every sum stay as they are: the bytes do not move. Read when the OpenMP runtime
# starts, so it is set before anything imports torch; a user's own setting wins.
if "OMP_WAIT_POLICY" not in os.environ:
    os.environ.setdefault("GOMP_SPINCOUNT", "10000")
