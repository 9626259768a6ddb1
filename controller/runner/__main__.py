"""`python -m controller.runner`: run one task-instance try (what a task pod's container runs)."""

import sys
from datetime import UTC, datetime

started_at = datetime.now(UTC)  # before the imports: the try starts with the process

from controller.runner.task import main  # noqa: E402

sys.exit(main(started_at=started_at))
