"""Airflow's secrets masker: values of Connections and sensitive Variables become `***` in task logs.

The rules are Airflow's (`airflow/utils/log/secrets_masker.py` in 2.x, `airflow/_shared/secrets_masker`
behind `airflow.sdk.execution_time.secrets_masker` in 3.x):

- a Connection's password (and its URL-quoted form) is always masked, and each value of its extra
  JSON whose key is sensitive (`Connection.extra_dejson`);
- a Variable's value is masked when its key is sensitive (`Variable.get` -> `mask_secret(value, key)`);
- a name is sensitive when, stripped and lower-cased, it contains one of `DEFAULT_SENSITIVE_FIELDS`
  or of `[core] sensitive_var_conn_names` (`should_hide_value_for_key`); `[core]
  hide_sensitive_var_conn_fields = False` turns the name rule off (a password is still masked);
- `redact` replaces every masked value found in a string with `***`, and a whole value whose key is
  sensitive (in a dict, at any depth up to 5) even when it was never registered;
- Airflow 3 skips values shorter than `[logging] min_length_masked_secret` (5) and the word
  "airflow"; Airflow 2.10 masks values of any length.

`SecretsMasker.for_airflow(version, environment)` builds the masker a try's DAG was written for, with
those settings read from Airflow's environment variables. The task runner installs one per try
(`controller.runner.masking`); `mask_secret` and `redact` are Airflow's module-level functions.
"""

from __future__ import annotations

import collections.abc
import logging
import re
from collections.abc import Mapping
from enum import Enum
from typing import Any
from urllib.parse import quote

#: Airflow 2.10's `DEFAULT_SENSITIVE_FIELDS` (airflow/utils/log/secrets_masker.py).
AIRFLOW2_SENSITIVE_FIELDS = frozenset(
    {
        "access_token",
        "api_key",
        "apikey",
        "authorization",
        "passphrase",
        "passwd",
        "password",
        "private_key",
        "secret",
        "token",
        "keyfile_dict",
        "service_account",
    }
)
#: Airflow 3's (airflow/_shared/secrets_masker/secrets_masker.py, 3.1): four more.
DEFAULT_SENSITIVE_FIELDS = AIRFLOW2_SENSITIVE_FIELDS | {"access_key", "connection_string", "proxy", "proxies"}
#: Airflow 3's `SECRETS_TO_SKIP_MASKING` (Airflow 2 skips it in its unit-test mode only).
SECRETS_TO_SKIP_MASKING = frozenset({"airflow"})
#: Airflow 3's default `[logging] min_length_masked_secret`.
MIN_LENGTH_TO_MASK = 5
log = logging.getLogger(__name__)
MAX_RECURSION_DEPTH = 5
REPLACEMENT = "***"

#: Airflow's settings, as environment variables (`AIRFLOW__SECTION__KEY`).
SENSITIVE_NAMES_ENV = "AIRFLOW__CORE__SENSITIVE_VAR_CONN_NAMES"
HIDE_SENSITIVE_ENV = "AIRFLOW__CORE__HIDE_SENSITIVE_VAR_CONN_FIELDS"
MIN_LENGTH_ENV = "AIRFLOW__LOGGING__MIN_LENGTH_MASKED_SECRET"


class SecretsMasker:
    """The values to mask, and Airflow's `should_hide_value_for_key`, `add_mask` and `redact`."""

    def __init__(
        self,
        sensitive_fields: collections.abc.Iterable[str] = DEFAULT_SENSITIVE_FIELDS,
        *,
        hide_sensitive_fields: bool = True,
        min_length: int = MIN_LENGTH_TO_MASK,
        skip: collections.abc.Iterable[str] = SECRETS_TO_SKIP_MASKING,
        mask_whole_extra: bool = True,
    ) -> None:
        self.sensitive_fields = frozenset(sensitive_fields)
        self.hide_sensitive_fields = hide_sensitive_fields
        self.min_length = min_length
        self.skip = frozenset(skip)
        self.mask_whole_extra = mask_whole_extra
        self._warned_short = False
        self.patterns: set[str] = set()
        self.replacer: re.Pattern[str] | None = None

    @classmethod
    def for_airflow(cls, version: str | None, environment: Mapping[str, str]) -> SecretsMasker:
        """The masker of the Airflow a DAG was written for ("2" or "3"), with its settings from
        `environment` (`[core] sensitive_var_conn_names` adds to the defaults, as in Airflow)."""
        airflow3 = version == "3"
        fields = set(DEFAULT_SENSITIVE_FIELDS if airflow3 else AIRFLOW2_SENSITIVE_FIELDS)
        extra = environment.get(SENSITIVE_NAMES_ENV, "")
        fields |= {name.strip() for name in extra.split(",") if name.strip()}
        hide = environment.get(HIDE_SENSITIVE_ENV, "True").strip().lower() not in ("false", "0", "f", "no")
        try:
            min_length = int(environment.get(MIN_LENGTH_ENV, MIN_LENGTH_TO_MASK)) if airflow3 else 0
        except ValueError:
            min_length = MIN_LENGTH_TO_MASK
        skip = SECRETS_TO_SKIP_MASKING if airflow3 else frozenset()
        return cls(
            fields, hide_sensitive_fields=hide, min_length=min_length, skip=skip, mask_whole_extra=airflow3
        )

    def should_hide_value_for_key(self, name: Any) -> bool:
        """Airflow's: whether the value of a Variable (or a Connection extra's key) named so is hidden."""
        if isinstance(name, str) and self.hide_sensitive_fields:
            name = name.strip().lower()
            return any(field in name for field in self.sensitive_fields)
        return False

    def add_mask(self, secret: Any, name: str | None = None) -> None:
        """Airflow's `add_mask`: a string is masked (if `name` is sensitive, when given); a dict's
        values by their own keys; any other iterable's items under `name`."""
        if isinstance(secret, dict):
            for key, value in secret.items():
                self.add_mask(value, key)
        elif isinstance(secret, str):
            if not secret or secret.lower() in self.skip:
                return
            if len(secret) < self.min_length:
                if not self._warned_short:  # Airflow 3 says so once, in the task's log
                    self._warned_short = True
                    log.warning(
                        "Skipping masking for a secret as it's too short (<%d chars)", self.min_length
                    )
                return
            pattern = re.escape(secret)
            if pattern not in self.patterns and (not name or self.should_hide_value_for_key(name)):
                self.patterns.add(pattern)
                # longest first: a secret inside another is not left half masked
                ordered = sorted(self.patterns, key=len, reverse=True)
                self.replacer = re.compile("|".join(ordered))
        elif isinstance(secret, collections.abc.Iterable):
            for value in secret:
                self.add_mask(value, name)

    def redact(self, item: Any, name: str | None = None, max_depth: int | None = None) -> Any:
        """Airflow's `redact`: masked values in strings become `***`, and so does every string under a
        sensitive name; dicts, lists and tuples are walked (sets become tuples), up to 5 deep."""
        return self._redact(item, name, 0, max_depth or MAX_RECURSION_DEPTH)

    def redact_text(self, text: str) -> str:
        """The masked values in a string replaced (what reaches a log line)."""
        return self.replacer.sub(REPLACEMENT, text) if self.replacer is not None else text

    def _redact_all(self, item: Any, depth: int, max_depth: int) -> Any:
        if depth > max_depth or isinstance(item, str):
            return REPLACEMENT
        if isinstance(item, dict):
            return {key: self._redact_all(value, depth + 1, max_depth) for key, value in item.items()}
        if isinstance(item, (tuple, set)):
            return tuple(self._redact_all(value, depth + 1, max_depth) for value in item)
        if isinstance(item, list):
            return [self._redact_all(value, depth + 1, max_depth) for value in item]
        return item

    def _redact(self, item: Any, name: str | None, depth: int, max_depth: int) -> Any:
        if depth > max_depth:
            return item
        if name and self.should_hide_value_for_key(name):
            return self._redact_all(item, depth, max_depth)
        if isinstance(item, dict):
            return {key: self._redact(value, key, depth + 1, max_depth) for key, value in item.items()}
        if isinstance(item, Enum):
            return self._redact(item.value, name, depth, max_depth)
        if isinstance(item, str):
            return self.redact_text(item)
        if isinstance(item, (tuple, set)):
            return tuple(self._redact(value, None, depth + 1, max_depth) for value in item)
        if isinstance(item, list):
            return [self._redact(value, None, depth + 1, max_depth) for value in item]
        return item

    def mask_connection(self, password: str | None, extra: dict[str, Any], raw_extra: str | None) -> None:
        """What reading a Connection masks: its password and its URL-quoted forms (Airflow's
        `Connection.__init__`), its extra's sensitive keys (`extra_dejson`), and for an Airflow 3 DAG
        the extra as one string (the Task SDK's `_mask_connection_secrets`)."""
        if password:
            self.add_mask(password)
            self.add_mask(quote(password))
            self.add_mask(quote(password, safe=""))  # as `get_uri` writes it (beyond Airflow's)
        if extra:
            self.add_mask(extra)
        if raw_extra and self.mask_whole_extra:
            self.add_mask(raw_extra)


_masker = SecretsMasker()


def install(masker: SecretsMasker) -> None:
    """Make `masker` the process's (the task runner does, once per try)."""
    global _masker
    _masker = masker


def secrets_masker() -> SecretsMasker:
    return _masker


def should_hide_value_for_key(name: Any) -> bool:
    """Airflow's `should_hide_value_for_key`, with the process's masker."""
    return _masker.should_hide_value_for_key(name)


def mask_secret(secret: Any, name: str | None = None) -> None:
    """Airflow's `mask_secret`: keep `secret` out of this try's log (only if `name` is sensitive,
    when given; a dict or other iterable is walked)."""
    if not secret:
        return
    _masker.add_mask(secret, name)


def redact(value: Any, name: str | None = None, max_depth: int | None = None) -> Any:
    """Airflow's `redact`, with the process's masker."""
    return _masker.redact(value, name, max_depth)


__all__ = [
    "DEFAULT_SENSITIVE_FIELDS",
    "SecretsMasker",
    "install",
    "mask_secret",
    "redact",
    "secrets_masker",
    "should_hide_value_for_key",
]
