"""`zonda dags test` / `dag.test()`: one run in-process through `decide()` and the task runner.

The expected states are the controller's for the same examples (tests/cluster/test_controller.py,
`test_seed_examples_reproduce_airflows_outcomes`, and the examples' comments): the same code decides
both, so they must agree. Real: the scheduler core, the task runner, Bash and Python tasks, triggers.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from controller.cli.main import main
from controller.devtools import dag_runs
from tests.paths import REPO_ROOT
from zonda import DAG
from zonda.operators.bash import BashOperator
from zonda.operators.empty import EmptyOperator

EXAMPLES = REPO_ROOT / "examples" / "dags"

CONTROLLER_OUTCOMES = [
    pytest.param(
        "branch_without_trigger",
        {"branch": "success", "branch_a": "success", "follow_branch_a": "success",
         "branch_false": "skipped", "join": "skipped"},
        "success",
        id="branch_without_trigger: join is skipped under all_success",
    ),
    pytest.param(
        "branch_with_trigger",
        {"branch": "success", "branch_a": "success", "follow_branch_a": "success",
         "branch_false": "skipped", "join": "success"},
        "success",
        id="with none_failed_min_one_success the join runs",
    ),
    pytest.param(
        "example_default_args",
        {"flaky": "failed", "after": "upstream_failed"},
        "failed",
        id="default_args retries reach the task; after retries it fails",
    ),
    pytest.param(
        "example_bash",
        {"extract": "success", "transform": "success", "load": "success"},
        "success",
        id="example_bash: XComs flow from Bash to Python to Bash",
    ),
    pytest.param(
        "example_deferrable",
        {"start": "success", "wait": "success", "done": "success"},
        "success",
        id="a deferrable sensor's trigger fires in-process",
    ),
]  # fmt: skip


@pytest.mark.parametrize(("example", "expected", "run_state"), CONTROLLER_OUTCOMES)
def test_dags_test_gives_the_controllers_outcomes(
    example: str, expected: dict[str, str], run_state: str
) -> None:
    outcome = dag_runs.test_file(EXAMPLES / f"{example}.py")
    assert (outcome.task_states, outcome.state) == (expected, run_state)
    if example == "example_bash":
        assert outcome.xcoms["transform"] == "hello 42"
    if example == "example_default_args":
        assert outcome.status is not None and outcome.status.task_instances["flaky"].try_number == 3


def test_dag_test_runs_a_dag_object_and_prints_its_states(capsys: pytest.CaptureFixture[str]) -> None:
    with DAG("inline", schedule=None) as dag:
        BashOperator(task_id="hello", bash_command="echo hi") >> EmptyOperator(task_id="after")
    outcome = dag.test()
    assert outcome.task_states == {"hello": "success", "after": "success"}
    assert outcome.xcoms == {"hello": "hi"}
    assert capsys.readouterr().out.rstrip().endswith("DAG run inline: success")


def test_a_file_with_several_dags_needs_a_dag_id(tmp_path: Path) -> None:
    (tmp_path / "two.py").write_text(
        "from zonda import DAG\nfrom zonda.operators.empty import EmptyOperator\n"
        "with DAG('one', schedule=None) as a:\n    EmptyOperator(task_id='t')\n"
        "with DAG('two', schedule=None) as b:\n    EmptyOperator(task_id='t')\n"
    )
    with pytest.raises(dag_runs.DagTestError, match="defines DAGs one, two: pass --dag-id"):
        dag_runs.test_file(tmp_path / "two.py")
    assert dag_runs.test_file(tmp_path / "two.py", dag_id="two").state == "success"


PARAMS_FILE = """
from zonda import DAG, Param
from zonda.operators.bash import BashOperator

with DAG("checked", schedule=None, params={"n": Param(5, type="integer", minimum=1)}):
    BashOperator(task_id="echo", bash_command="echo {{ params.n }}")
"""


@pytest.mark.parametrize(
    ("conf", "message"),
    [
        pytest.param(
            '{"n": 0}',
            "conf does not match the DAG's params: param 'n': 0 is less than the minimum of 1",
            id="a conf breaking the params schema is refused before anything runs",
        ),
        pytest.param('{"n": ', "Invalid value for --conf: not JSON", id="conf that is not JSON"),
        pytest.param(
            "[1]", "Invalid value for --conf: must be a JSON object", id="conf that is not an object"
        ),
    ],
)
def test_dags_test_checks_conf_against_the_params_schema(tmp_path: Path, conf: str, message: str) -> None:
    (tmp_path / "checked.py").write_text(PARAMS_FILE)
    result = CliRunner().invoke(main, ["dags", "test", str(tmp_path / "checked.py"), "--conf", conf])
    assert result.exit_code in (1, 2)  # a CLI error or a usage error, never a traceback
    assert not isinstance(result.exception, Exception) or isinstance(result.exception, SystemExit)
    assert message in result.output, result.output


def test_dags_test_runs_with_a_conf_the_schema_accepts(tmp_path: Path) -> None:
    (tmp_path / "checked.py").write_text(PARAMS_FILE)
    result = CliRunner().invoke(main, ["dags", "test", str(tmp_path / "checked.py"), "--conf", '{"n": 7}'])
    assert result.exit_code == 0, result.output
