"""Kubernetes-aware operators and triggers (`WaitForObjectSensor`, `ObjectConditionTrigger`)."""
