"""The cyclic garbage collector of a long-running process that holds many JSON bodies.

The controller keeps every watched task pod and DagRun as plain dicts and lists (a few hundred
thousand containers with 100 runs at once) and replaces them on every watch event and status write.
At CPython's default thresholds (700, 10, 10) a young collection ran every 700 container allocations,
so a body that lived a few milliseconds outlived two of them and was promoted to the oldest
generation; once those promotions reached a quarter of the heap, a full collection scanned all of it.
Measured with `gc.callbacks` on 100 concurrent 20-task chains: 30 full collections of about 0.4 s
each in one round, against 24 s of the controller's CPU, and py-spy showed the cost wherever a body
happened to be allocated (the JSON decoding of a status write's answer, a cache's copy).

These bodies have no reference cycles: reference counting frees them, the collector is needed only
for the rare cycle (an exception's traceback, a task and its callbacks). So a young collection every
`THRESHOLDS[0]` allocations (most bodies are dead by then and are never promoted), and what start-up
built (modules, the kopf registry, parsed settings) frozen out of every collection.
"""

from __future__ import annotations

import gc

#: (young, middle, old): CPython's defaults are (700, 10, 10).
THRESHOLDS = (50_000, 20, 10)


def tune() -> None:
    """Collect less often, and never scan again what exists now (call once start-up is done)."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(*THRESHOLDS)
