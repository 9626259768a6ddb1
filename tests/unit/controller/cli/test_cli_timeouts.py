"""A CLI command whose API call timed out (`controller.kube.timeouts`) says so in one line."""

from __future__ import annotations

import click
import pytest

from controller.cli.common import run_kube


def test_a_call_the_api_did_not_answer_in_time_is_a_one_line_error_naming_the_settings() -> None:
    async def stalled() -> None:
        raise TimeoutError  # what a bounded call raises (aiohttp's timeout errors are subclasses)

    with pytest.raises(click.ClickException) as raised:
        run_kube(stalled())
    assert raised.value.message == (
        "the Kubernetes API did not answer in time ($ZONDA_API_TIMEOUT_SECONDS, "
        "$ZONDA_API_CONNECT_TIMEOUT_SECONDS)"
    )
