"""Airflow's secrets masker rules (`zonda.secrets_masker`), each expectation taken from Airflow's code
and its tests: `airflow/utils/log/secrets_masker.py` and `tests/utils/log/test_secrets_masker.py`
(2.x: `DEFAULT_SENSITIVE_FIELDS`, `should_hide_value_for_key`, `add_mask`, `redact`), and Airflow 3.1's
`airflow/_shared/secrets_masker/secrets_masker.py` (four more sensitive names, `min_length_masked_secret`
5, "airflow" never masked). What reading a Variable or a Connection masks follows Airflow's
`Variable.get` (`mask_secret(value, key)`) and `Connection` (the password and `quote(password)`, the
sensitive keys of `extra_dejson`).
"""

from __future__ import annotations

from typing import Any

import pytest

from zonda import secrets_masker
from zonda.secrets_masker import (
    AIRFLOW2_SENSITIVE_FIELDS,
    DEFAULT_SENSITIVE_FIELDS,
    SecretsMasker,
)
from zonda.variables import Connection, get_connection, get_variable


def airflow2(**environment: str) -> SecretsMasker:
    return SecretsMasker.for_airflow("2", environment)


@pytest.fixture
def installed(monkeypatch: pytest.MonkeyPatch) -> SecretsMasker:
    masker = airflow2()
    monkeypatch.setattr(secrets_masker, "_masker", masker)
    return masker


def test_the_default_sensitive_names_are_airflows() -> None:
    airflow2_names = {
        "access_token", "api_key", "apikey", "authorization", "passphrase", "passwd", "password",
        "private_key", "secret", "token", "keyfile_dict", "service_account",
    }  # fmt: skip
    assert airflow2_names == AIRFLOW2_SENSITIVE_FIELDS
    added_in_3 = {"access_key", "connection_string", "proxy", "proxies"}
    assert added_in_3 == DEFAULT_SENSITIVE_FIELDS - AIRFLOW2_SENSITIVE_FIELDS
    assert SecretsMasker.for_airflow("3", {}).sensitive_fields == DEFAULT_SENSITIVE_FIELDS
    assert airflow2().sensitive_fields == AIRFLOW2_SENSITIVE_FIELDS


# TestShouldHideValueForKey.test_hiding_defaults
@pytest.mark.parametrize(
    ("key", "hidden"),
    [("", False), (None, False), ("key", False), ("google_api_key", True), ("GOOGLE_API_KEY", True),
     ("GOOGLE_APIKEY", True), (1, False), (" Password ", True), ("db_passwd", True)],
)  # fmt: skip
def test_should_hide_value_for_key_by_the_default_names(key: Any, hidden: bool) -> None:
    assert airflow2().should_hide_value_for_key(key) is hidden


# TestShouldHideValueForKey.test_hiding_config: `[core] sensitive_var_conn_names` adds to the defaults
@pytest.mark.parametrize(
    ("names", "key", "hidden"),
    [("key", "TRELLO_KEY", True), ("key", "TRELLO_API_KEY", True), ("key", "GITHUB_APIKEY", True),
     ("key, token", "TRELLO_TOKEN", True), ("mysecretword, mysensitivekey", "GITHUB_mysecretword", True),
     ("", "TRELLO_API", False), ("token", "TRELLO_KEY", False), ("token, mysecretword", "TRELLO_KEY", False)],
)  # fmt: skip
def test_should_hide_value_for_key_with_sensitive_var_conn_names(names: str, key: str, hidden: bool) -> None:
    masker = airflow2(AIRFLOW__CORE__SENSITIVE_VAR_CONN_NAMES=names)
    assert masker.should_hide_value_for_key(key) is hidden


def test_hide_sensitive_var_conn_fields_false_turns_the_name_rule_off_not_the_password() -> None:
    masker = airflow2(AIRFLOW__CORE__HIDE_SENSITIVE_VAR_CONN_FIELDS="False")
    assert not masker.should_hide_value_for_key("password")
    masker.add_mask("hunter22", "api_token")
    masker.mask_connection("s3cr3tpw", {}, None)
    assert masker.patterns == {"s3cr3tpw"}


# TestSecretsMasker.test_mask_secret
@pytest.mark.parametrize(
    ("name", "value", "expected"),
    [
        (None, "secret", {"secret"}),
        ("apikey", "secret", {"secret"}),
        (None, {"apikey": "secret", "other": {"val": "innocent", "password": "foo"}}, {"secret", "foo"}),
        (None, ["secret", "other"], {"secret", "other"}),
        ("api_key", {"other": "innoent"}, set()),
        (None, {"password": ""}, set()),
        (None, "", set()),
        ("not_sensitive", "secret", set()),
    ],
)
def test_add_mask(name: str | None, value: Any, expected: set[str]) -> None:
    masker = airflow2()
    masker.add_mask(value, name)
    assert masker.patterns == expected


# TestSecretsMasker.test_redact
@pytest.mark.parametrize(
    ("patterns", "name", "value", "expected"),
    [
        ({"secret"}, None, "secret", "***"),
        (
            {"secret", "foo"},
            None,
            {"apikey": "secret", "other": {"val": "innocent", "password": "foo"}},
            {"apikey": "***", "other": {"val": "innocent", "password": "***"}},
        ),
        ({"secret", "other"}, None, ["secret", "other"], ["***", "***"]),
        ({"secret", "other"}, None, {"data": {"secret": "secret"}}, {"data": {"secret": "***"}}),
        ({"secret", "other"}, None, {1: {"secret": "secret"}}, {1: {"secret": "***"}}),
        (
            {"secret"},
            "api_key",
            {"other": "innoent", "nested": ["x", "y"]},
            {"other": "***", "nested": ["***", "***"]},
        ),
        (
            set(),
            "env",
            {"api_key": "masked based on key name", "other": "foo"},
            {"api_key": "***", "other": "foo"},
        ),
        ({"secret"}, None, {"secret"}, ("***",)),  # a set comes back a tuple
        ({"password"}, None, "user:password@host", "user:***@host"),
    ],
)
def test_redact(patterns: set[str], name: str | None, value: Any, expected: Any) -> None:
    masker = airflow2()
    for pattern in patterns:
        masker.add_mask(pattern)
    assert masker.redact(value, name) == expected


# TestSecretsMasker.test_redact_max_depth
@pytest.mark.parametrize(
    ("value", "expected", "max_depth"),
    [
        (["abc"], ["***"], None),
        (["abc"], ["***"], 1),
        ([[[["abc"]]]], [[[["***"]]]], None),
        ([[[[["abc"]]]]], [[[[["***"]]]]], None),
        ([[[[[["abc"]]]]]], [[[[[["abc"]]]]]], None),  # below the maximum depth: left alone
        ([["abc"]], [["abc"]], 1),
    ],
)
def test_redact_stops_at_the_maximum_depth(value: Any, expected: Any, max_depth: int | None) -> None:
    masker = airflow2()
    masker.add_mask("abc")
    assert masker.redact(value, max_depth=max_depth) == expected


def test_redact_leaves_what_is_not_text_or_a_collection_alone() -> None:
    masker = airflow2()
    masker.add_mask("secret")
    with open("/dev/null", "w") as handle:
        assert masker.redact(handle) is handle
    assert masker.redact(42) == 42


def test_airflow3_skips_short_values_and_the_word_airflow_airflow2_masks_them() -> None:
    """Airflow 3.1: `min_length_masked_secret` (5) and `SECRETS_TO_SKIP_MASKING`; 2.10 has neither
    (outside its unit-test mode): "if you have a connection with a password of `a`, every instance
    of the letter a in your logs will be replaced with ***" (mask-sensitive-values.rst)."""
    three = SecretsMasker.for_airflow("3", {})
    for value in ("abcd", "airflow", "AIRFLOW"):
        three.add_mask(value)
    assert three.patterns == set()
    three.add_mask("abcde")
    assert three.patterns == {"abcde"}
    assert SecretsMasker.for_airflow("3", {"AIRFLOW__LOGGING__MIN_LENGTH_MASKED_SECRET": "2"}).min_length == 2
    two = airflow2()
    two.add_mask("abcd")
    two.add_mask("airflow")
    assert two.patterns == {"abcd", "airflow"}


def test_a_secret_inside_another_is_masked_whole() -> None:
    masker = airflow2()
    masker.add_mask("secret1")
    masker.add_mask("secret123")
    assert masker.redact_text("x secret123 y secret1 z") == "x *** y *** z"


def test_reading_a_variable_masks_its_value_when_its_key_is_sensitive(
    installed: SecretsMasker, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AIRFLOW_VAR_API_TOKEN", "tok-abcdef")
    monkeypatch.setenv("AIRFLOW_VAR_REGION", "eu-west-1")
    monkeypatch.setenv("AIRFLOW_VAR_DB_SECRET", '{"user": "bob", "password": "pw-123456"}')
    assert get_variable("api_token") == "tok-abcdef"
    assert get_variable("region") == "eu-west-1"
    assert get_variable("db_secret", deserialize_json=True)["password"] == "pw-123456"
    assert installed.redact_text("tok-abcdef eu-west-1") == "*** eu-west-1"
    # Airflow 2.10's `mask_secret(obj, key)`: the JSON's own sensitive keys (and the raw value whole)
    assert installed.redact_text("pw-123456 bob") == "*** bob"


def test_reading_a_connection_masks_its_password_quoted_too_and_its_sensitive_extra(
    installed: SecretsMasker, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(
        "AIRFLOW_CONN_DB", "postgres://bob:p%40ss%2Fword@db.example:5432/sales?api_key=k-778899&region=eu"
    )
    connection = get_connection("db")
    assert connection.password == "p@ss/word"
    text = f"{connection.password} {connection.get_uri()} {connection.login} k-778899 eu"
    assert (
        installed.redact_text(text)
        == "*** postgres://bob:***@db.example:5432/sales?api_key=***&region=eu bob *** eu"
    )


def test_a_connection_made_in_code_masks_its_password(installed: SecretsMasker) -> None:
    Connection(conn_id="x", conn_type="http", password="made-in-code")
    assert installed.redact_text("made-in-code") == "***"


def test_airflow3_masks_a_connections_extra_as_one_string_too() -> None:
    """The Task SDK's `_mask_connection_secrets`: `mask_secret(conn.extra)`, the JSON text whole."""
    three = SecretsMasker.for_airflow("3", {})
    three.mask_connection(None, {"region": "eu"}, '{"region": "eu"}')
    assert three.redact_text('extra={"region": "eu"}') == "extra=***"
    two = airflow2()
    two.mask_connection(None, {"region": "eu"}, '{"region": "eu"}')
    assert two.patterns == set()
