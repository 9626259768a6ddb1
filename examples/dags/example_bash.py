"""A small everyday DAG: Bash and Python tasks passing an XCom, with retries from default_args.

Renders to example_bash.yaml.
"""

from datetime import timedelta

from examples.operators.callables import return_value
from zonda import DAG
from zonda.operators.bash import BashOperator
from zonda.operators.python import PythonOperator

with DAG(
    dag_id="example_bash",
    schedule_interval=None,  # manual runs only: `zonda trigger example-bash`
    default_args={"retries": 1, "retry_delay": timedelta(seconds=5)},
    params={"greeting": "hello"},
) as dag:
    extract = BashOperator(
        task_id="extract", bash_command='echo "extracting {{ ds }} for run {{ run_id }}"; echo 42'
    )
    transform = PythonOperator(
        task_id="transform",
        python_callable=return_value,
        op_kwargs={"value": "{{ params.greeting }} {{ ti.xcom_pull(task_ids='extract') }}"},
    )
    load = BashOperator(
        task_id="load", bash_command="echo \"loading: {{ ti.xcom_pull(task_ids='transform') }}\""
    )

    extract >> transform >> load
