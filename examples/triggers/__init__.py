"""Example triggers: Airflow's own documentation examples, ported by changing only their imports.

`temporal.DateTimeTrigger` is the "very simplified version of Airflow's DateTimeTrigger" from Airflow's
"Deferrable Operators & Triggers" guide. Its `serialize` returns a datetime, as Airflow's does;
`zonda.triggers.serialize_trigger` stores it as an ISO 8601 string and `load_trigger` turns it back.
"""
