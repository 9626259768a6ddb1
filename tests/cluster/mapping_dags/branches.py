"""A branch and a short-circuit inside a mapped task group, for tests/cluster/test_mapping.py: each map
index follows its own branch (Airflow 2's `skip_all_except` at the branch's map index)."""

import pendulum

from zonda import dag, task, task_group


@dag(dag_id="mapped_branches", schedule=None, start_date=pendulum.datetime(2024, 1, 1, tz="UTC"))
def mapped_branches():
    @task
    def make_numbers(dag_run=None) -> list[int]:
        return list(range(int(dag_run.conf.get("count", 4))))

    @task_group
    def per_number(number):
        @task.branch
        def choose(n: int) -> str:
            return "per_number.even" if n % 2 == 0 else "per_number.odd"

        @task
        def even(n: int) -> str:
            return f"{n} is even"

        @task
        def odd(n: int) -> str:
            return f"{n} is odd"

        @task.short_circuit(trigger_rule="none_failed_min_one_success")
        def not_zero(n: int) -> bool:
            return n != 0

        @task
        def report(n: int, ti=None) -> dict:
            return {"index": ti.map_index, "number": n}

        reported = report(number)
        choose(number) >> [even(number), odd(number)] >> not_zero(number) >> reported
        return reported

    @task(trigger_rule="all_done")
    def collect(reports: list) -> list:
        return reports

    collect(per_number.expand(number=make_numbers()))


mapped_branches()
