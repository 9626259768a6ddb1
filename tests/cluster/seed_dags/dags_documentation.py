"""
### My great DAG
"""

import pendulum
from airflow import DAG
from airflow.operators.bash import BashOperator

dag = DAG(
    "my_documented_dag",  # DEVIATION: dags_default_args.py already uses "my_dag"
    start_date=pendulum.datetime(2021, 1, 1, tz="UTC"),
    schedule_interval="@daily",
    catchup=False,
)
dag.doc_md = __doc__

# DEVIATION: the page writes BashOperator("foo", dag=dag), which Airflow 2 rejects too (keyword-only
# arguments, no bash_command).
t = BashOperator(task_id="foo", bash_command="echo foo", dag=dag)
t.doc_md = """\
#Title"
Here's a [url](www.airbnb.com)
"""
