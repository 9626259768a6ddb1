"""The controller manager: the kopf process that hosts the reconcilers (controller-runtime's name for it).

`main` (kopf wiring: handlers only enqueue), `settings` (read once; the CLI's defaults), `workqueue`
(dedupe, precise wake-ups, backoff, failing reconciles reported on the object), `leader` (election).

May import: `controller.reconcilers`, `controller.executors` and the shared packages below; never the
triggerer, the runner or the UI (the `deployables-are-independent` contract).
"""
