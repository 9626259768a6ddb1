"""Deterministic crash points for the cluster tests: `ZONDA_FAULT_EXIT_AT=<moment>[,<moment>...]`.

Each names a moment where a SIGKILL would hurt most (`try-launched`: a try's pod created, its status
not yet written; `local-try-spawned`: a local try's process started, nothing recorded of it yet...);
the process SIGKILLs itself there. Unset in production.
"""

from __future__ import annotations

import logging
import os
import signal

logger = logging.getLogger(__name__)

FAULT_ENV = "ZONDA_FAULT_EXIT_AT"


def fault_point(name: str) -> None:
    """SIGKILL this process now when the environment names this moment (tests only): the controller
    killed at exactly that moment, nothing flushed, no handler run (its exit status is -SIGKILL).

    The variable may name several moments, comma-separated: the first reached kills.
    """
    if name in os.environ.get(FAULT_ENV, "").split(","):
        logger.warning("exiting at %s (%s): SIGKILL", name, FAULT_ENV)
        os.kill(os.getpid(), signal.SIGKILL)
