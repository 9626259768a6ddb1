"""`zonda tasks respond`: answer a human-in-the-loop task (Airflow 3.1+'s HITL operators); registered in
the `tasks` group of `controller.cli.listings`.

What a waiting task asks is in `kubectl describe dagrun RUN` (its reason and the TaskDeferred
Event); the answer is written by `controller.operations.hitl_responses`.
"""

from __future__ import annotations

from datetime import UTC, datetime

import click

from controller.cli.common import connect, namespace_options, namespace_or_default, run_kube
from controller.operations import hitl_responses
from zonda.resources import hitl


@click.command("respond")
@click.argument("run_name")
@click.argument("task")
@click.option("--option", "-o", "options", multiple=True, help="An option to choose (repeat when multiple).")
@click.option("--param", "-p", "params", multiple=True, help="A form field: key=value (JSON, else text).")
@click.option("--map-index", type=int, default=None, help="The mapped instance to answer.")
@namespace_options
def respond(
    run_name: str,
    task: str,
    options: tuple[str, ...],
    params: tuple[str, ...],
    map_index: int | None,
    namespace: str | None,
    kubeconfig: str | None,
) -> None:
    """Answer TASK of RUN_NAME, a human-in-the-loop task waiting for a response.

    \b
    zonda tasks respond example-hitl-operator-manual-... choose_a_branch_to_run --option task_2
    zonda tasks respond RUN wait_for_input --option OK --param information="all good"
    """
    try:
        params_input = hitl.parse_param_inputs(params)
    except hitl.ResponseError as error:
        raise click.BadParameter(str(error), param_hint="--param") from None
    key = task if map_index is None else f"{task}[{map_index}]"
    ns = namespace_or_default(namespace)

    async def go() -> hitl_responses.Answered:
        async with await connect(kubeconfig) as kube:
            user = await kube.whoami()
            return await hitl_responses.respond(
                kube,
                ns,
                run_name,
                key,
                options=list(options),
                params_input=params_input,
                user=user,
                now=datetime.now(UTC),
            )

    try:
        answered = run_kube(go())
    except hitl_responses.RespondError as error:
        raise click.ClickException(str(error)) from None
    chosen = ", ".join(answered.event["chosen_options"])
    click.echo(f"{run_name} task {key}: answered {chosen} (trigger.zonda.dev/{answered.trigger} fired)")
