"""The reads and writes a user makes through the CLI, the UI and the providers, in one neutral place:
a run action applied with its resourceVersion (`run_actions`), a task instance's tries and logs
(`try_logs`), pools as rows (`pool_rows`).

May import: `controller.xcom`, `controller.kube`, `zonda`.
"""
