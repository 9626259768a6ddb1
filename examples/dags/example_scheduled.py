"""The README's DAG: the controller creates a run every minute, on time. catchup=False creates only the
latest interval when the DAG is first applied (no backlog since start_date). Renders to
example_scheduled.yaml: `zonda dags render examples/dags | kubectl apply -f -`.
"""

from datetime import timedelta

import pendulum

from examples.operators.callables import return_value
from zonda import DAG
from zonda.operators.bash import BashOperator
from zonda.operators.container import ContainerOperator
from zonda.operators.python import PythonOperator

with DAG(
    dag_id="example_scheduled",
    schedule="* * * * *",  # cron, preset (@daily), a timedelta, a timetable, or None for manual runs only
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
    default_args={"retries": 1, "retry_delay": timedelta(seconds=5)},
) as dag:
    extract = BashOperator(
        task_id="extract",
        bash_command='echo "interval {{ data_interval_start }} .. {{ data_interval_end }}"; echo 42',
    )
    transform = PythonOperator(
        task_id="transform",
        python_callable=return_value,  # importable: written as "examples.operators.callables:return_value"
        op_kwargs={"value": "{{ ti.xcom_pull(task_ids='extract') }}"},
    )
    publish = ContainerOperator(  # no operator in the manifest: the container runs as-is
        task_id="publish", image="alpine:3.20", command=["sh", "-c", "echo published"]
    )
    extract >> transform >> publish
