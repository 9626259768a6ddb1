"""default_args={'retries': 2} reaches every task: `flaky` fails each try and is retried twice.

Renders to example_default_args.yaml.
"""

from datetime import timedelta

from zonda import DAG
from zonda.operators.bash import BashOperator
from zonda.operators.empty import EmptyOperator

with DAG(
    dag_id="example_default_args",
    schedule_interval=None,
    default_args={"retries": 2, "retry_delay": timedelta(seconds=1)},
) as dag:
    flaky = BashOperator(task_id="flaky", bash_command='echo "try {{ ti.try_number }}"; exit 1')
    after = EmptyOperator(task_id="after")
    flaky >> after
