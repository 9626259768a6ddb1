"""A helper module next to the DAG files (the DAGs folder is on sys.path, as in Airflow)."""


def double(value: int) -> int:
    return value * 2
