"""Concepts > DAGs > The DAG decorator (Airflow's example_dag_decorator.py).

DEVIATION: EmailOperator does not exist in Zonda (no e-mail); the last task echoes the e-mail instead.
GetRequestOperator is defined here as in Airflow's example file.
"""

from typing import Any

import pendulum
from airflow.decorators import dag, task
from airflow.models.baseoperator import BaseOperator
from airflow.operators.bash import BashOperator


class GetRequestOperator(BaseOperator):
    """Custom operator sending a GET request to the provided url (as in Airflow's example)."""

    def __init__(self, *, url: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.url = url

    def execute(self, context: Any) -> Any:
        import json
        import urllib.request

        with urllib.request.urlopen(self.url) as response:
            return json.load(response)


@dag(
    schedule_interval=None,
    start_date=pendulum.datetime(2021, 1, 1, tz="UTC"),
    catchup=False,
    tags=["example"],
)
def example_dag_decorator(email: str = "example@example.com"):
    """
    DAG to send server IP to email.

    :param email: Email to send IP to. Defaults to example@example.com.
    """
    get_ip = GetRequestOperator(task_id="get_ip", url="http://httpbin.org/get")

    @task(multiple_outputs=True)
    def prepare_email(raw_json: dict[str, Any]) -> dict[str, str]:
        external_ip = raw_json["origin"]
        return {
            "subject": f"Server connected from {external_ip}",
            "body": f"Seems like today your server executing Airflow is connected from IP {external_ip}<br>",
        }

    email_info = prepare_email(get_ip.output)

    BashOperator(  # DEVIATION: EmailOperator(task_id="send_email", to=email, subject=..., html_content=...)
        task_id="send_email",
        bash_command=f"echo 'to {email}'",
        env={"SUBJECT": email_info["subject"], "BODY": email_info["body"]},
    )


dag = example_dag_decorator()
