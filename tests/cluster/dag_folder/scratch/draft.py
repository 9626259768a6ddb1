"""A half-written zonda DAG, ignored by .airflowignore (importing it would fail)."""

raise RuntimeError("scratch/draft.py was imported despite .airflowignore")
