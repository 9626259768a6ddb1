"""Sensors with Airflow 2.x's names and semantics; `zonda.specs.operator_registry` maps names to them."""
