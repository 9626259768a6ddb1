"""Browser tests: Debian's Chromium (/usr/bin/chromium) driven by Playwright, against the UI process.

Real: the local control plane (tests/cluster), the controller running task code (local executor),
`zonda ui` as a process, a headless Chromium. Nothing is downloaded: Playwright's driver ships in its
wheel and the browser is the system one (`hack/install-browser.sh` installs it; CI calls it). Without
it these tests skip locally and fail under CI (`tests.tools`).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, sync_playwright

from tests.tools import require_file

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


# Package scope, not session: Playwright's sync API keeps an event loop running on the main thread
# while it is open, and the unit tier that runs after tests/ui calls asyncio.run().
@pytest.fixture(scope="package")
def browser() -> Iterator[Browser]:
    require_file(CHROMIUM, "run hack/install-browser.sh (apt-get install chromium)")
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            yield launched
        finally:
            launched.close()
