"""Airflow's data-aware scheduling classes, in both dialects: 2.x `Dataset`, `DatasetAlias`,
`DatasetAll`/`DatasetAny`, 3.x `Asset`, `AssetAlias`, `AssetAll`/`AssetAny`, `@asset`, and `Metadata`.

`--airflow-compat` maps `airflow.datasets` and the `airflow.sdk` asset names here. They record what
the DAG file said; `zonda.authoring.manifests` writes them into the manifest (`assetSchedule`, task
`outlets`/`inlets`, as `zonda.resources.asset_refs.AssetRef`), and `zonda.schedules.assets` decides
from the resulting events. The URI is checked and normalised as Airflow does, so a bad URI fails the
DAG file where it is written.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from zonda.resources.asset_refs import sanitize_uri
from zonda.resources.json_values import to_json_safe
from zonda.resources.run_types import RunType
from zonda.timetables.partitions import IdentityMapper, PartitionMapper


class BaseAsset:
    """What can go in `schedule=`: an asset, an alias, or `&`/`|` of them (Airflow's `BaseAsset`)."""

    #: The dialect the class comes from: its runs are `dataset_triggered` or `asset_triggered`.
    run_type: RunType = RunType.ASSET_TRIGGERED

    def __and__(self, other: BaseAsset) -> BaseAsset:
        return (DatasetAll if self.run_type is RunType.DATASET_TRIGGERED else AssetAll)(self, other)

    def __or__(self, other: BaseAsset) -> BaseAsset:
        return (DatasetAny if self.run_type is RunType.DATASET_TRIGGERED else AssetAny)(self, other)

    def to_manifest(self) -> dict[str, Any]:
        raise NotImplementedError

    def iter_assets(self) -> Iterator[Asset]:
        return iter(())


class AssetWatcher:
    """Airflow 3's `AssetWatcher(name, trigger)`: the triggerer runs `trigger` (a `BaseEventTrigger`)
    and every event it yields is an AssetEvent of the asset the watcher is on."""

    def __init__(self, name: str, trigger: Any) -> None:
        if not isinstance(name, str) or not name.strip():
            raise ValueError("AssetWatcher name cannot be empty")
        if getattr(trigger, "event_trigger", None) is not True or not callable(
            getattr(trigger, "serialize", None)
        ):
            raise ValueError("The trigger used to watch an asset must inherit ``BaseEventTrigger``")
        self.name = name
        self.trigger = trigger

    def __repr__(self) -> str:
        return f"AssetWatcher(name={self.name!r}, trigger={self.trigger!r})"

    def to_manifest(self) -> dict[str, Any]:
        classpath, kwargs = self.trigger.serialize()
        return {
            "name": self.name,
            "classpath": classpath,
            "kwargs": to_json_safe(dict(kwargs), path="kwargs"),
        }


def _teams(field: str, value: Sequence[str] | None) -> list[str] | None:
    if value is None:
        return None
    for entry in value:
        if not isinstance(entry, str) or not entry.strip():
            raise ValueError(f"Each entry in {field} must be a non-empty string")
    return list(value)


class AssetAccessControl:
    """Airflow 3.3's `AssetAccessControl(producer_teams=[], consumer_teams=None, allow_global=True)`
    (its multi-team mode). Accepted and kept on the asset, not acted on: in Zonda a team is a namespace
    and a consumer sees its own namespace's events, which is what Airflow does with multi-team off
    (its default); events across namespaces are not provided (docs/assets.md, Teams)."""

    def __init__(
        self,
        producer_teams: Sequence[str] | None = None,
        consumer_teams: Sequence[str] | None = None,
        allow_global: bool = True,
    ) -> None:
        if not isinstance(allow_global, bool):
            raise TypeError(f"'allow_global' must be a bool, not {allow_global!r}")
        self.producer_teams = _teams("producer_teams", producer_teams) or []
        self.consumer_teams = _teams("consumer_teams", consumer_teams)
        self.allow_global = allow_global

    def __repr__(self) -> str:
        return (
            f"AssetAccessControl(producer_teams={self.producer_teams!r}, "
            f"consumer_teams={self.consumer_teams!r}, allow_global={self.allow_global!r})"
        )


class Asset(BaseAsset):
    """Airflow 3's `Asset(name=None, uri=None, *, group="asset", extra=None)`: either of name and uri
    stands for the other when only one is given."""

    def __init__(
        self,
        name: str | None = None,
        uri: str | None = None,
        *,
        group: str = "asset",
        extra: dict[str, Any] | None = None,
        watchers: Sequence[AssetWatcher] | None = None,
        access_control: AssetAccessControl | None = None,
    ) -> None:
        if name is None and uri is None:
            raise TypeError("Asset() requires either 'name' or 'uri'")
        if access_control is not None and not isinstance(access_control, AssetAccessControl):
            raise TypeError(f"access_control must be an AssetAccessControl, not {access_control!r}")
        self.access_control = access_control
        if name is not None and not name.strip():
            raise ValueError("Asset name cannot be empty")
        self.name = name if name is not None else str(uri)
        self.uri = sanitize_uri(uri if uri is not None else self.name)
        self.group = group
        self.extra = dict(extra or {})
        self.watchers = list(watchers or [])
        for watcher in self.watchers:
            if not isinstance(watcher, AssetWatcher):
                raise TypeError(f"Asset watchers must be AssetWatcher instances, not {watcher!r}")

    @classmethod
    def ref(cls, *, name: str | None = None, uri: str | None = None) -> Asset:
        """Airflow 3's `Asset.ref(name=...)` / `Asset.ref(uri=...)`: the asset defined under that name
        or URI elsewhere (an `@asset` of this file, or by its name or URI alone)."""
        if (name is None) == (uri is None):
            raise TypeError("Asset.ref() takes exactly one of 'name' and 'uri'")
        if name is not None:
            return _named(name)
        wanted = sanitize_uri(str(uri))
        return next((a for a in _DEFINED.values() if a.uri == wanted), None) or Asset(uri=wanted)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Asset) and (self.uri, self.name) == (other.uri, other.name)

    def __hash__(self) -> int:
        return hash((self.uri, self.name))

    def __fspath__(self) -> str:
        return self.uri

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r}, uri={self.uri!r}, group={self.group!r})"

    def to_manifest(self) -> dict[str, Any]:
        ref: dict[str, Any] = {"uri": self.uri}
        if self.name != self.uri:
            ref["name"] = self.name
        if self.group not in ("asset", "dataset", ""):
            ref["group"] = self.group
        if self.extra:
            ref["extra"] = self.extra
        if self.watchers:
            ref["watchers"] = [w.to_manifest() for w in self.watchers]
        return ref

    def iter_assets(self) -> Iterator[Asset]:
        yield self


class Dataset(Asset):
    """Airflow 2's `Dataset(uri, extra=None)`."""

    run_type = RunType.DATASET_TRIGGERED

    def __init__(self, uri: str, extra: dict[str, Any] | None = None) -> None:
        super().__init__(uri=uri, group="dataset", extra=extra)

    def __repr__(self) -> str:
        return f"Dataset(uri={self.uri!r})"


class AssetAlias(BaseAsset):
    """An alias a task resolves at run time (`outlet_events[alias].add(asset)`)."""

    def __init__(self, name: str, group: str = "asset") -> None:
        if not name or not name.strip():
            raise ValueError("Asset alias name cannot be empty")
        self.name = name
        self.group = group

    def __eq__(self, other: object) -> bool:
        return isinstance(other, AssetAlias) and self.name == other.name

    def __hash__(self) -> int:
        return hash(("alias", self.name))

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r})"

    def to_manifest(self) -> dict[str, Any]:
        return {"alias": self.name}


class DatasetAlias(AssetAlias):
    run_type = RunType.DATASET_TRIGGERED


class _BooleanCondition(BaseAsset):
    kind = ""

    def __init__(self, *objects: BaseAsset) -> None:
        if not all(isinstance(o, BaseAsset) for o in objects):
            raise TypeError("expect asset expressions in condition")
        self.objects = objects

    def to_manifest(self) -> dict[str, Any]:
        return {self.kind: [o.to_manifest() for o in self.objects]}

    def iter_assets(self) -> Iterator[Asset]:
        for o in self.objects:
            yield from o.iter_assets()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({', '.join(map(repr, self.objects))})"


class AssetAll(_BooleanCondition):
    kind = "all"

    def __and__(self, other: BaseAsset) -> BaseAsset:
        # as Airflow's (2.9+ and 3.x): `a & b & c` is one all-of of three, not an all-of nested in one
        return type(self)(*self.objects, other)


class AssetAny(_BooleanCondition):
    kind = "any"

    def __or__(self, other: BaseAsset) -> BaseAsset:
        return type(self)(*self.objects, other)


class DatasetAll(AssetAll):
    run_type = RunType.DATASET_TRIGGERED


class DatasetAny(AssetAny):
    run_type = RunType.DATASET_TRIGGERED


class Metadata:
    """`yield Metadata(asset, extra)` from a task: the extra of the event it records for that asset."""

    def __init__(self, target: Any, extra: dict[str, Any], alias: Any = None) -> None:
        self.target = target
        self.uri = getattr(target, "uri", str(target))
        self.extra = dict(extra)
        self.alias = getattr(alias, "name", alias)


def schedule_expression(value: Any) -> tuple[dict[str, Any], RunType] | None:
    """A DAG's `schedule=` as an asset condition (`assetSchedule`) and its run type, or None when it is
    not about assets. A list of assets is all of them, as in Airflow."""
    if isinstance(value, BaseAsset):
        return value.to_manifest(), value.run_type
    if isinstance(value, list | tuple) and value and all(isinstance(v, BaseAsset) for v in value):
        run_type = value[0].run_type
        items = [v.to_manifest() for v in value]
        return (items[0] if len(items) == 1 else {"all": items}), run_type
    return None


class AssetOrTimeSchedule:
    """Airflow 3's `AssetOrTimeSchedule(timetable=..., assets=...)`: a run per tick, and per asset update."""

    def __init__(self, *, timetable: Any, assets: Any) -> None:
        self.timetable = timetable
        self.assets = assets if isinstance(assets, BaseAsset) else AssetAll(*assets)


class PartitionedAssetTimetable:
    """Airflow 3.2+'s `PartitionedAssetTimetable(assets=..., partition_mapper_config={},
    default_partition_mapper=IdentityMapper())`: a run per partition key of the consumed events, once
    the assets' condition holds for that key; each asset's event key goes through its mapper
    (`partition_mapper_config`, else the default)."""

    partitioned = True

    def __init__(
        self,
        *,
        assets: Any,
        partition_mapper_config: dict[Any, PartitionMapper] | None = None,
        default_partition_mapper: PartitionMapper | None = None,
    ) -> None:
        self.assets = assets if isinstance(assets, BaseAsset) else AssetAll(*assets)
        self.partition_mapper_config = dict(partition_mapper_config or {})
        self.default_partition_mapper = default_partition_mapper or IdentityMapper()
        for target, mapper in self.partition_mapper_config.items():
            if not isinstance(target, Asset):
                raise TypeError(f"partition_mapper_config keys must be assets, not {target!r}")
            if not isinstance(mapper, PartitionMapper):
                raise TypeError(
                    f"partition_mapper_config[{target.name!r}] must be a partition mapper, not {mapper!r}"
                )
        if not isinstance(self.default_partition_mapper, PartitionMapper):
            raise TypeError(
                f"default_partition_mapper must be a partition mapper, not {default_partition_mapper!r}"
            )

    def to_manifest(self) -> dict[str, Any]:
        """`spec.assetPartitions`: the default mapper and one per configured asset (by URI)."""
        found: dict[str, Any] = {"defaultMapper": self.default_partition_mapper.to_manifest()}
        if self.partition_mapper_config:
            found["mappers"] = [
                {"uri": target.uri, "mapper": mapper.to_manifest()}
                for target, mapper in self.partition_mapper_config.items()
            ]
        return found


class PartitionedAtRuntime:
    """Airflow 3.2+'s `PartitionedAtRuntime()`: no scheduled runs; a run's partition key is given when
    it is triggered (`partitionKey` of the DagRun), and a task may emit events for keys it decides
    (`outlet_events[asset].add_partitions(...)`)."""

    partitioned = True
    partitioned_at_runtime = True
    can_be_scheduled = False


class DatasetOrTimeSchedule(AssetOrTimeSchedule):
    """Airflow 2.9+'s `DatasetOrTimeSchedule(timetable=..., datasets=...)`."""

    def __init__(self, *, timetable: Any, datasets: Any) -> None:
        super().__init__(
            timetable=timetable, assets=datasets if isinstance(datasets, BaseAsset) else DatasetAll(*datasets)
        )


#: Parameters of an `@asset` function that are not inlet assets (Airflow's `_INVALID_INLET_ASSET_NAMES`).
_NOT_INLETS = ("self", "context", "outlet_events")
#: The assets `@asset`/`@asset.multi` defined in this process, by name: what Airflow's task fetches by
#: name (`GetAssetByName`) for a parameter named after an asset. The runner re-imports the DAG file,
#: so the file's own definitions are here when the task runs.
_DEFINED: dict[str, Asset] = {}


def _named(name: str) -> Asset:
    """The asset of that name: one defined by `@asset` here, else `Asset(name)` (its URI the name)."""
    return _DEFINED.get(name) or Asset(name=name)


def _validate_arguments(function: Callable[..., Any]) -> None:
    """Airflow's `_validate_asset_function_arguments`."""
    for name, param in inspect.signature(function).parameters.items():
        if param.kind == inspect.Parameter.VAR_POSITIONAL:
            raise TypeError(f"wildcard '*{name}' is not supported in @asset")
        if param.kind == inspect.Parameter.VAR_KEYWORD:
            raise TypeError(f"wildcard '**{name}' is not supported in @asset")
        if param.kind == inspect.Parameter.POSITIONAL_ONLY and param.default is inspect.Parameter.empty:
            raise TypeError(f"positional-only argument '{name}' without a default is not supported in @asset")


def asset_callable(function: Callable[..., Any], definition_name: str) -> Callable[..., Any]:
    """The task's callable, given its arguments as Airflow 3's `_AssetMainOperator._iter_kwargs`: a
    default is kept, `self` is the asset (by the definition's name), `context` the context,
    `outlet_events` the context's, any other parameter the asset of that name."""
    parameters = inspect.signature(function).parameters

    def call(**context: Any) -> Any:
        kwargs: dict[str, Any] = {}
        for key, param in parameters.items():
            if param.default is not inspect.Parameter.empty:
                continue
            if key == "self":
                kwargs[key] = _named(definition_name)
            elif key == "context":
                kwargs[key] = context
            elif key == "outlet_events":
                kwargs[key] = context["outlet_events"]
            else:
                kwargs[key] = _named(key)
        return function(**kwargs)

    # named as the function (not `functools.wraps`: the signature must stay `**context`, so the task
    # is given the whole context), so the runner finds it in the re-imported DAG file as Airflow's task
    call.__name__, call.__qualname__ = function.__name__, function.__qualname__
    call.__module__, call.__doc__ = function.__module__, function.__doc__
    return call


def _one_task_dag(
    function: Callable[..., Any],
    outlets: list[BaseAsset],
    default_dag_id: str,
    definition_name: str,
    **dag_kwargs: Any,
) -> None:
    """Airflow 3's `_DAGFactory.create_dag` with the function as its one task (task id: its name);
    the parameters named after assets are its inlets (Airflow's `Asset.ref(name=...)`)."""
    from zonda.authoring.dags import DAG
    from zonda.decorators import task

    if function.__name__ != function.__qualname__:
        raise ValueError("nested function not supported")
    _validate_arguments(function)
    for outlet in outlets:
        if isinstance(outlet, Asset):
            _DEFINED[outlet.name] = outlet
    inlets = [
        _named(name)
        for name, param in inspect.signature(function).parameters.items()
        if name not in _NOT_INLETS and param.default is inspect.Parameter.empty
    ]
    with DAG(dag_id=dag_kwargs.pop("dag_id", None) or default_dag_id, **dag_kwargs):
        task(task_id=function.__name__, outlets=outlets, inlets=inlets)(
            asset_callable(function, definition_name)
        )()


class asset:
    """Airflow 3's `@asset`: a DAG named after the asset with one task named after the function, whose
    success updates the asset (name: the function's unless given). The decorated name is the `Asset`.

    `@asset.multi(outlets=[...])`: one such DAG (named after the function) updating every outlet; the
    decorated name is the `AssetAll` of them, as Airflow's `MultiAssetDefinition`, so a schedule on it
    waits for all.
    """

    def __init__(
        self,
        *,
        schedule: Any = None,
        uri: str | None = None,
        name: str | None = None,
        group: str = "asset",
        extra: dict[str, Any] | None = None,
        **dag_kwargs: Any,
    ) -> None:
        self.schedule, self.uri, self.name, self.group, self.extra = schedule, uri, name, group, extra
        self.dag_kwargs = dag_kwargs

    def __call__(self, function: Callable[..., Any]) -> Asset:
        name = self.name or function.__name__
        target = Asset(name=name, uri=self.uri, group=self.group, extra=self.extra)
        _one_task_dag(function, [target], name, name, schedule=self.schedule, **self.dag_kwargs)
        return target

    class multi:
        def __init__(self, *, outlets: Sequence[BaseAsset], schedule: Any = None, **dag_kwargs: Any) -> None:
            self.outlets, self.schedule, self.dag_kwargs = list(outlets), schedule, dag_kwargs

        def __call__(self, function: Callable[..., Any]) -> AssetAll:
            if not self.outlets:
                raise ValueError("no outlets provided")
            name = function.__name__
            _one_task_dag(function, self.outlets, name, name, schedule=self.schedule, **self.dag_kwargs)
            return AssetAll(*self.outlets)


__all__ = [
    "Asset",
    "AssetAlias",
    "AssetAll",
    "AssetAny",
    "AssetOrTimeSchedule",
    "AssetWatcher",
    "BaseAsset",
    "Dataset",
    "DatasetAlias",
    "DatasetAll",
    "DatasetAny",
    "DatasetOrTimeSchedule",
    "Metadata",
    "PartitionedAssetTimetable",
    "PartitionedAtRuntime",
    "asset",
    "schedule_expression",
]
