"""One scheduler pass over one DagRun: what it observed in, everything the controller must do out.

`decisions` (the pass's types: what was observed, the `RunPlan`), `run_pass` (`decide`: the pass, step
by step) with its steps `readiness` (which task instances may run: `trigger_rules`, `skips`),
`attempts` (what the executor and triggerer saw; `retries`), `mapped_instances` (expansions;
`status_budget`), `graphs`; admission to pools and concurrency limits (`pools`, `run_slots`); a mapped
KubernetesPodOperator's arguments (`container_mapping`); `plans` (a run's start, its strays, the
LatestOnly window, `decide_run`); `callbacks` (callback tries and SLA misses a pass leaves due);
`events` (which of its Events are posted); `history` (which finished runs and pods to delete).

May import: `zonda.schedules`, `zonda.tries`, `zonda.specs`, `zonda.timetables`, `zonda.resources`.
"""
