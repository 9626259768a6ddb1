"""`python -m controller.runner`: run one task-instance try (what a task pod's container runs)."""

import sys

from controller.runner.task import main

sys.exit(main())
