"""Where the controller's coroutines wait: py-spy for an event loop (bench only).

    python bench/await_sampler.py OUT.txt -- <zonda command line, e.g. controller --namespace x ...>

py-spy sees threads, and an asyncio process's one thread mostly sits in `select`: it says the
controller is idle, not what its reconcile workers are waiting for. This runs the command with an
event loop policy whose loops sample every task every `INTERVAL` seconds from a callback on the loop
itself: each task's await chain (coroutine frames down to the future it waits on), grouped by the
task's name with its number cut off (`reconcile-worker`), written as collapsed stacks (py-spy's
`raw` format: `stack;frames count`) to OUT.txt on exit, plus the loop's lag (how late the sampling
callback ran: a loop starved of CPU shows here) to OUT.txt.lag. Sampling thousands of tasks costs:
the cost is written too (keep it small against the controller's CPU).
"""

from __future__ import annotations

import asyncio
import atexit
import re
import sys
import time
import weakref
from collections import Counter
from pathlib import Path
from typing import Any

INTERVAL = 0.1
WRITE_EVERY = 5.0

_stacks: Counter[str] = Counter()
_lags: list[float] = []
_cost: list[float] = [0.0]
_out: list[Path] = []
_written: list[float] = [0.0]


def _frames(task: asyncio.Task[Any]) -> list[str]:
    out = []
    coro: Any = task.get_coro()
    while coro is not None:
        frame = getattr(coro, "cr_frame", None) or getattr(coro, "gi_frame", None)
        if frame is None:
            break
        code = frame.f_code
        module = code.co_filename.rpartition("/")[2].removesuffix(".py")
        out.append(f"{code.co_name}({module}:{frame.f_lineno})")
        awaited = getattr(coro, "cr_await", None) or getattr(coro, "gi_yieldfrom", None)
        if awaited is not None and not (hasattr(awaited, "cr_frame") or hasattr(awaited, "gi_frame")):
            name = type(awaited).__name__
            if isinstance(awaited, asyncio.Task):
                name = f"Task {_group(awaited.get_name())}"
            out.append(f"<{name}>".replace(" ", "_"))
            break
        coro = awaited
    return out


_TRAILING_NUMBER = re.compile(r"[-_ ]?\d+$")
_groups: weakref.WeakKeyDictionary[asyncio.Task[Any], str] = weakref.WeakKeyDictionary()


def _group(name: str) -> str:
    return _TRAILING_NUMBER.sub("", name)


def _group_of(task: asyncio.Task[Any]) -> str:
    group = _groups.get(task)
    if group is None:
        group = _groups[task] = _group(task.get_name()).replace(" ", "_")
    return group


def _sample(loop: asyncio.AbstractEventLoop, due: float) -> None:
    now = loop.time()
    _lags.append(now - due)
    for task in asyncio.all_tasks(loop):
        _stacks[";".join([_group_of(task), *_frames(task)])] += 1
    _cost[0] += loop.time() - now
    if _out and now - _written[0] > WRITE_EVERY:  # a controller killed at the end loses nothing
        _written[0] = now
        _write(_out[0])
    loop.call_at(now + INTERVAL, _sample, loop, now + INTERVAL)


class _Policy(asyncio.DefaultEventLoopPolicy):
    def new_event_loop(self) -> asyncio.AbstractEventLoop:
        loop = super().new_event_loop()
        loop.call_soon(lambda: _sample(loop, loop.time()))
        return loop


def _write(out: Path) -> None:
    out.write_text("".join(f"{stack} {n}\n" for stack, n in _stacks.items()))
    lags = sorted(_lags) or [0.0]

    def pick(q: float) -> float:
        return lags[min(len(lags) - 1, int(q * len(lags)))] * 1000

    out.with_suffix(out.suffix + ".lag").write_text(
        f"samples {len(lags)} loop lag ms p50 {pick(0.5):.1f} p90 {pick(0.9):.1f} "
        f"p99 {pick(0.99):.1f} max {lags[-1] * 1000:.1f}; sampling cost {_cost[0]:.1f} s; "
        f"at {time.time():.0f}\n"
    )


def main() -> None:
    out, _, command = sys.argv[1], sys.argv[2], sys.argv[3:]
    asyncio.set_event_loop_policy(_Policy())
    _out.append(Path(out))
    atexit.register(_write, Path(out))
    sys.argv = ["zonda", *command]
    from controller.cli.main import main as zonda

    zonda()


if __name__ == "__main__":
    main()
