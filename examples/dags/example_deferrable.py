"""A deferrable sensor: `wait` frees its worker while the triggerer waits until 5 seconds after the
data interval ends (for a manual run: 5 s after it was triggered). Renders to example_deferrable.yaml.
"""

from datetime import timedelta

from zonda import DAG
from zonda.operators.bash import BashOperator
from zonda.operators.empty import EmptyOperator
from zonda.sensors.time import TimeDeltaSensorAsync

with DAG(dag_id="example_deferrable", schedule_interval=None) as dag:
    start = EmptyOperator(task_id="start")
    wait = TimeDeltaSensorAsync(task_id="wait", delta=timedelta(seconds=5))
    done = BashOperator(task_id="done", bash_command='echo "waited; resumed at $(date -u +%H:%M:%S)"')
    start >> wait >> done
