"""A zonda DAG exercising the Python authoring API end to end on the local executor.

Nested @task functions in @dag, a lambda PythonOperator, a @task_group, XComArg passing (with
multiple_outputs), a custom timetable, and a helper module imported from the DAGs folder.
"""

import pendulum
from team.helpers import double

from examples.timetables.workday import AfterWorkdayTimetable
from zonda import dag, task
from zonda.operators.bash import BashOperator
from zonda.operators.python import PythonOperator
from zonda.utils.task_group import task_group


@dag(
    dag_id="authoring_pipeline",
    start_date=pendulum.datetime(2021, 1, 1, tz="UTC"),
    timetable=AfterWorkdayTimetable(),
    catchup=False,
    is_paused_upon_creation=True,  # only the test's manual run
    default_args={"retries": 0},
)
def pipeline(factor: int = 3):
    @task(multiple_outputs=True)
    def extract() -> dict:
        return {"a": 1, "b": 2}

    @task
    def add(x: int, y: int) -> int:
        return double(x + y)

    @task_group
    def checks(total):
        @task
        def positive(value: int) -> bool:
            return value > 0

        @task
        def describe(value: int, ok: bool) -> str:
            return f"{value} is {'positive' if ok else 'not positive'}"

        return describe(total, positive(total))

    values = extract()
    total = add(values["a"], values["b"])
    summary = checks(total)
    constant = PythonOperator(task_id="constant", python_callable=lambda: 42)
    echo = BashOperator(task_id="echo", bash_command="echo {{ ti.xcom_pull(task_ids='add') }}")
    constant >> echo
    total >> echo >> summary


dag = pipeline()
