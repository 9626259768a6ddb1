"""An asset as a DAG spec names it (`AssetRef`), and Airflow's URI rules (`sanitize_uri`).

Apart from `zonda.resources.asset_models` because the DAG spec's models (`zonda.resources.models`)
name assets in tasks' outlets and inlets, and the asset resources' models derive from theirs. The
model config is `CrdModel`'s (camelCase on the wire, unknown fields are errors).
"""

from __future__ import annotations

import urllib.parse
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator
from pydantic.alias_generators import to_camel

_MAX_URI = 3000


def sanitize_uri(uri: str) -> str:
    """Airflow's `airflow.datasets._sanitize_uri` (2.10) and `airflow.sdk...asset._sanitize_uri` (3.x).

    Not empty nor blank, ASCII, at most 3,000 characters, scheme `airflow` reserved. A URI with a
    scheme is normalised: scheme lower-cased, auth dropped, trailing slashes of the path removed, query
    sorted, fragment dropped. Raises ValueError with Airflow's wording.
    """
    if not uri:
        raise ValueError("Asset URI cannot be empty")
    if uri.isspace():
        raise ValueError("Asset URI cannot be just whitespace")
    if not uri.isascii():
        raise ValueError("Asset URI must only consist of ASCII characters")
    if len(uri) > _MAX_URI:
        raise ValueError(f"Asset URI is longer than {_MAX_URI} characters")
    parsed = urllib.parse.urlsplit(uri)
    if not parsed.scheme and not parsed.netloc:  # does not look like a URI: kept as written
        return uri
    scheme = parsed.scheme.lower()
    if not scheme or scheme.startswith("x-"):
        return uri
    if scheme == "airflow":
        raise ValueError("Asset scheme 'airflow' is reserved")
    _, _, netloc = parsed.netloc.rpartition("@")  # auth info is dropped (Airflow warns)
    query = urllib.parse.urlencode(sorted(urllib.parse.parse_qsl(parsed.query))) if parsed.query else ""
    return urllib.parse.urlunsplit((scheme, netloc, parsed.path.rstrip("/") or "/", query, ""))


class AssetWatcherRef(BaseModel):
    """Airflow 3's `AssetWatcher(name, trigger)`: a trigger whose every event updates the asset."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid", frozen=True)

    name: str = Field(min_length=1, description="The watcher's name (Airflow's AssetWatcher.name).")
    classpath: str = Field(min_length=1, description="The trigger's class (a BaseEventTrigger).")
    kwargs: dict[str, Any] = Field(default_factory=dict, description="The trigger's serialize() kwargs.")


class AssetRef(BaseModel):
    """An asset as a DAG spec names it: by URI (and name, group, extra), or an alias resolved at run time."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid", frozen=True)

    uri: str | None = Field(default=None, description="The asset's URI (normalised as Airflow does).")
    name: str | None = Field(default=None, description="Airflow 3's asset name; unset: the URI.")
    group: str | None = Field(default=None, description="Airflow 3's asset group (`asset` by default).")
    extra: dict[str, Any] | None = None
    alias: str | None = Field(
        default=None, description="An AssetAlias (DatasetAlias): the task says at run time which assets."
    )
    watchers: list[AssetWatcherRef] | None = Field(
        default=None,
        description="AssetWatchers (Airflow 3): in a schedule, the triggerer runs each one's trigger and "
        "records an AssetEvent each time it fires.",
    )

    @field_validator("uri")
    @classmethod
    def _valid_uri(cls, uri: str | None) -> str | None:
        return None if uri is None else sanitize_uri(uri)

    @model_validator(mode="after")
    def _one_kind(self) -> AssetRef:
        if (self.uri is None) == (self.alias is None):
            raise ValueError("an asset reference names either a uri or an alias")
        if self.watchers and self.uri is None:
            raise ValueError("watchers belong to an asset (a uri), not an alias")
        names = [w.name for w in self.watchers or []]
        if len(names) != len(set(names)):
            raise ValueError(f"watcher names must be unique: {sorted(names)}")
        return self

    def key(self) -> str:
        """What schedules and events match on: the URI, or `alias:<name>`."""
        return self.uri if self.uri is not None else f"alias:{self.alias}"
