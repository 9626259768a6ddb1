"""The task runner: the code that runs inside a task pod (or a local-executor process) for one try.

It imports only `zonda` (never kopf or the Kubernetes client) so a try starts cheaply.
"""
