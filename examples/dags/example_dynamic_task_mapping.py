"""Dynamic task mapping (Airflow 2.3): fan out over a list made at run time, then reduce it.

`add` gets one task instance per number `make_numbers` returns (`add[0]`, `add[1]`...), `total` sums
their results in map-index order, `describe` maps over the doubled numbers (`.map()`), and `echo` is a
classic operator mapped over a literal list, at most two at a time. Renders to
example_dynamic_task_mapping.yaml.
"""

from examples.operators import mapping
from zonda import DAG
from zonda.decorators import task
from zonda.operators.bash import BashOperator

with DAG(dag_id="example_dynamic_task_mapping", schedule=None) as dag:
    numbers = task(mapping.make_numbers)()
    added = task(mapping.add).partial(y=10).expand(x=numbers)
    task(mapping.total)(added)
    task(mapping.describe).expand(number=numbers.map(mapping.double))
    BashOperator.partial(task_id="echo", max_active_tis_per_dagrun=2).expand(
        bash_command=["echo one", "echo two", "echo three"]
    )
