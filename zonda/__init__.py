"""Zonda: Airflow-style DAG orchestration, native to Kubernetes. The pure domain and authoring API."""
