"""A zonda DAG file with a mistake: it fails to import, the other files still render."""

from zonda import DAG

with DAG("broken", schedule=None) as dag:
    undefined_name  # noqa: B018, F821
