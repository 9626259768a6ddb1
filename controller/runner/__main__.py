"""`python -m controller.runner`: run one task-instance try (what a task pod's container runs)."""

from datetime import UTC, datetime

started_at = datetime.now(UTC)  # before the imports: the try starts with the process

from controller.runner.process import leave, main  # noqa: E402

leave(main(started_at=started_at))
