"""The controller process: kopf wiring (`main`), the work queue, leader election and metrics."""
