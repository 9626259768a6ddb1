"""Where the repository is, for tests that read its files (examples, charts, docs), wherever they sit."""

from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
