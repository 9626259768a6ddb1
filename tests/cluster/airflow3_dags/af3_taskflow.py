import pendulum
from airflow.sdk import dag, task
from airflow.providers.standard.operators.bash import BashOperator

@dag(schedule="@daily", start_date=pendulum.datetime(2024, 1, 1, tz="UTC"), catchup=False)
def af3_example():
    @task
    def extract():
        return {"a": 1}
    @task
    def load(d: dict):
        print(d)
    load(extract()) >> BashOperator(task_id="echo", bash_command="echo hi")
af3_example()
