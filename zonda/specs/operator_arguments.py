"""Check a task's operator arguments when its DAG is validated, as Airflow does when it parses a DAG file.

The accepted names, the required ones and their types come from the operator class itself: the
parameters of every `__init__` in its MRO (each forwards `**kwargs` to its base, as Airflow operators
do) plus its `ignored_arguments`, and their annotations. There is no second list to keep in step.

Only Zonda's own operators (those under `zonda.`) are checked here: a user's operator or a provider's
(`controller.providers...`) may not be importable where DAGs are validated, and `zonda` never imports
`controller`. Their arguments are checked by the same code when the task runner builds them.

Values come from JSON/YAML, so a type check asks "could this JSON value be that annotation": classes
JSON cannot hold (`timedelta`, `datetime`, user classes) are not judged, and a template field accepts
any string holding a Jinja expression, since rendering decides its final value.
"""

from __future__ import annotations

import collections.abc
import difflib
import enum
import functools
import inspect
import types
import typing
import weakref
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any

from zonda.resources import xcom_refs
from zonda.specs import operator_registry
from zonda.specs.imports import import_string

#: Packages whose operators are imported to check their arguments at validation time.
CHECKED_PACKAGES = ("zonda.",)


@dataclass(frozen=True)
class OperatorSignature:
    """What an operator class accepts, derived from its `__init__` chain."""

    name: str
    accepted: frozenset[str]
    required: tuple[str, ...]
    annotations: Mapping[str, Any]  # argument name -> resolved annotation (only those that resolved)
    template_fields: frozenset[str]


def check_operator_arguments(
    operator: str, args: Mapping[str, Any], mapped: Collection[str] = ()
) -> list[str]:
    """Every problem with `args` for `operator` (a built-in name or import path), as sentences.

    `mapped` names the arguments a mapped task gets per instance (`.expand`): known, never missing.

    Empty when the arguments are fine, or when the operator is not one whose class is checked here.
    """
    signature = operator_signature(operator)
    if signature is None:
        return []
    errors: list[str] = []
    unknown = [name for name in [*args, *mapped] if name not in signature.accepted or name == "task_id"]
    for name in unknown:
        if name == "task_id":
            errors.append("'task_id' may not be an operator argument: the task's id is its task_id")
            continue
        close = difflib.get_close_matches(name, sorted(signature.accepted), n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        errors.append(f"{signature.name} got an unexpected argument {name!r}{hint}")
    missing = [name for name in signature.required if name not in args and name not in mapped]
    if missing:
        plural = "s" if len(missing) > 1 else ""
        errors.append(
            f"{signature.name} is missing required argument{plural} {', '.join(repr(n) for n in missing)}"
        )
    for name, value in args.items():
        annotation = signature.annotations.get(name)
        if annotation is None or name in unknown:
            continue
        if name in signature.template_fields and (_is_template(value) or xcom_refs.is_reference(value)):
            continue  # a template, or another task's XCom (`XComArg`): its value is known at run time
        if _accepts(annotation, value) is False:
            errors.append(
                f"{signature.name} argument {name!r} should be {_describe(annotation)}, "
                f"got {_json_type(value)} {_shorten(repr(value))}"
            )
    return errors


def apply_default_args(
    operator: str, *, defaults: Mapping[str, Any], own: Mapping[str, Any]
) -> dict[str, Any]:
    """A task's arguments: its own over the `default_args` its operator accepts (Airflow's `apply_defaults`).

    `defaults` is every layer merged (DAG < groups < task); a default the operator does not take is
    dropped, as Airflow drops it, so one DAG's `default_args` can serve different operators. Unknown
    names a task gives itself stay, for `check_operator_arguments` to report.
    """
    signature = operator_signature(operator)
    if signature is None:
        return dict(defaults)
    return {name: value for name, value in defaults.items() if name in own or name in signature.accepted}


def operator_signature(operator: str) -> OperatorSignature | None:
    """The signature of `operator`'s class when it is one of Zonda's own, else None."""
    try:
        classpath = operator_registry.operator_classpath(operator)
    except operator_registry.UnknownOperator:
        return None  # reported by DAG validation as an unknown operator
    if not classpath.startswith(CHECKED_PACKAGES):
        return None
    return _signature_of(classpath)


@functools.cache
def _signature_of(classpath: str) -> OperatorSignature | None:
    try:
        operator_class = import_string(classpath)
    except ImportError:
        return None
    if not isinstance(operator_class, type):
        return None
    return signature_of_class(operator_class)


#: Each class's signature, computed once: every operator built while rendering asks for its class's
#: (`operator_hooks.before_init`), and `typing.get_type_hints` was half of rendering an Airflow file.
#: Weak keys: a class defined in a DAG file is a new class each time the file is loaded.
_SIGNATURES: weakref.WeakKeyDictionary[type, OperatorSignature] = weakref.WeakKeyDictionary()


def signature_of_class(operator_class: type) -> OperatorSignature:
    """Accepted, required and annotated arguments of an operator class (nearest `__init__` wins)."""
    found = _SIGNATURES.get(operator_class)
    if found is None:
        found = _SIGNATURES[operator_class] = _signature_of_class(operator_class)
    return found


def _signature_of_class(operator_class: type) -> OperatorSignature:
    accepted: set[str] = set(getattr(operator_class, "ignored_arguments", ()))
    required: list[str] = []
    annotations: dict[str, Any] = {}
    for klass in operator_class.__mro__:
        if klass is object or "__init__" not in klass.__dict__:
            continue
        init = inspect.unwrap(klass.__dict__["__init__"])
        try:
            hints = typing.get_type_hints(init)
        except Exception:  # an annotation naming something only imported for type checking
            hints = {}
        for parameter in list(inspect.signature(init).parameters.values())[1:]:
            if parameter.kind not in (parameter.KEYWORD_ONLY, parameter.POSITIONAL_OR_KEYWORD):
                continue
            if parameter.name in accepted:
                continue  # a subclass already declared it: its default and annotation win
            accepted.add(parameter.name)
            if parameter.default is parameter.empty and parameter.name != "task_id":
                required.append(parameter.name)
            if parameter.name in hints:
                annotations[parameter.name] = hints[parameter.name]
    return OperatorSignature(
        name=operator_class.__name__,
        accepted=frozenset(accepted),
        required=tuple(required),
        annotations=annotations,
        template_fields=frozenset(getattr(operator_class, "template_fields", ())),
    )


# ------------------------------------------------------------------------------------- type checks

_JSON_SCALARS: dict[type, tuple[type, ...]] = {
    str: (str,),
    bool: (bool,),
    int: (int,),
    float: (int, float),
    type(None): (type(None),),
}
_SEQUENCE_ORIGINS = (
    list,
    tuple,
    set,
    frozenset,
    collections.abc.Sequence,
    collections.abc.Collection,
    collections.abc.Iterable,
    collections.abc.MutableSequence,
    collections.abc.Set,
)
_MAPPING_ORIGINS = (dict, collections.abc.Mapping, collections.abc.MutableMapping)


def _accepts(annotation: Any, value: Any) -> bool | None:
    """Whether a JSON `value` fits `annotation`: True, False, or None when JSON cannot tell."""
    if annotation is Any or isinstance(annotation, typing.TypeVar):
        return True
    origin = typing.get_origin(annotation)
    arguments = typing.get_args(annotation)
    if origin in (typing.Union, types.UnionType):
        verdicts = [_accepts(member, value) for member in arguments]
        if any(verdict is True for verdict in verdicts):
            return True
        # `timedelta | float | str`: the JSON forms are listed, so a class JSON cannot hold adds none.
        judged = [v for member, v in zip(arguments, verdicts, strict=True) if not _is_opaque(member)]
        if judged and all(verdict is False for verdict in judged):
            return False
        return None if any(verdict is None for verdict in verdicts) else False
    if origin is typing.Literal:
        return value in arguments
    if origin is collections.abc.Callable or annotation is collections.abc.Callable:
        return False  # JSON holds no function: give an import path where the annotation allows a str
    if origin in _SEQUENCE_ORIGINS or annotation in _SEQUENCE_ORIGINS:
        if not isinstance(value, list):
            return False
        element = arguments[0] if arguments and arguments[-1] is not Ellipsis else Any
        return _all(_accepts(element, item) for item in value)
    if origin in _MAPPING_ORIGINS or annotation in _MAPPING_ORIGINS:
        if not isinstance(value, dict):
            return False
        element = arguments[1] if len(arguments) == 2 else Any
        return _all(_accepts(element, item) for item in value.values())
    if annotation in _JSON_SCALARS:
        if isinstance(value, bool) and annotation is not bool:
            return False  # JSON's true is not a number
        return isinstance(value, _JSON_SCALARS[annotation])
    if isinstance(annotation, type) and issubclass(annotation, enum.Enum):
        if not isinstance(value, str | int | float):
            return False
        return value in {member.value for member in annotation} or value in annotation.__members__
    return None  # timedelta, datetime, user classes: parsed by the operator, not judged here


def _is_opaque(annotation: Any) -> bool:
    """A class JSON cannot hold (`timedelta`, a user class): `_accepts` cannot judge a value for it."""
    return (
        typing.get_origin(annotation) is None
        and isinstance(annotation, type)
        and not (
            annotation in _JSON_SCALARS
            or annotation in _SEQUENCE_ORIGINS
            or annotation in _MAPPING_ORIGINS
            or issubclass(annotation, enum.Enum)
        )
    )


def _all(verdicts: typing.Iterable[bool | None]) -> bool | None:
    result: bool | None = True
    for verdict in verdicts:
        if verdict is False:
            return False
        if verdict is None:
            result = None
    return result


def _is_template(value: Any) -> bool:
    return isinstance(value, str) and ("{{" in value or "{%" in value)


def _describe(annotation: Any) -> str:
    """`str | None` rather than `typing.Optional[str]`, `Callable` rather than its module path."""
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        return " or ".join(_describe(member) for member in typing.get_args(annotation))
    if annotation is type(None):
        return "null"
    if origin is collections.abc.Callable or annotation is collections.abc.Callable:
        return "a callable"
    if origin in _SEQUENCE_ORIGINS or annotation in _SEQUENCE_ORIGINS:
        return "a list"
    if origin in _MAPPING_ORIGINS or annotation in _MAPPING_ORIGINS:
        return "a mapping"
    if origin is typing.Literal:
        return " or ".join(repr(value) for value in typing.get_args(annotation))
    if annotation in _SCALAR_NAMES:
        return _SCALAR_NAMES[annotation]
    return str(getattr(annotation, "__name__", annotation))


_SCALAR_NAMES: dict[Any, str] = {str: "a string", bool: "a boolean", int: "an integer", float: "a number"}


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "a mapping"
    return type(value).__name__


def _shorten(text: str, limit: int = 60) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"
