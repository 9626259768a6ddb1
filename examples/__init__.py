"""Example code for Zonda users; importable so that tests and DAG resources can name it."""
