"""Executors run task-instance tries (pods or local processes) and report what became of them."""
