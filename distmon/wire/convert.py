"""Reports to msgpack's plain values and back, checking the type of every field on the way in:
a malformed or foreign message raises :class:`WireError` and never reaches the detector."""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Callable
from functools import cache
from typing import Any, Union

from distmon.wire.schema import WireError


def to_wire(obj: Any) -> Any:
    fields = _fields(obj.__class__)
    if fields is not None:
        wire = {}
        for name, plain in fields:
            if (value := getattr(obj, name)) is not None:
                wire[name] = value if plain else to_wire(value)
        return wire
    if isinstance(obj, list):
        return [to_wire(item) for item in obj]
    return obj


@cache
def _fields(cls: Any) -> tuple[tuple[str, bool], ...] | None:
    """A dataclass's field names, each with whether its values go as they are (:func:`_plain`),
    else None; asked once a type: every rank encodes a report a second, a simulated job
    thousands."""
    if not dataclasses.is_dataclass(cls):
        return None
    hints = typing.get_type_hints(cls)
    return tuple((f.name, _plain(hints[f.name])) for f in dataclasses.fields(cls))


def _plain(tp: Any) -> bool:
    """Whether values of ``tp`` are msgpack's as they are: no dataclass anywhere inside."""
    origin = typing.get_origin(tp)
    if origin in (Union, types.UnionType, list, dict, tuple):
        return all(_plain(arg) for arg in typing.get_args(tp) if arg is not Ellipsis)
    return tp in (int, float, str, bool, bytes, type(None))


Convert = Callable[[Any], Any]


@cache
def converter(tp: Any) -> Convert:
    """A checker-and-builder for one type, made once: decoding runs per message, at scale."""
    origin = typing.get_origin(tp)
    if origin in (Union, types.UnionType):
        (inner,) = [a for a in typing.get_args(tp) if a is not type(None)]
        convert_inner = converter(inner)
        return lambda value: None if value is None else convert_inner(value)
    if origin is list:
        convert_item = converter(typing.get_args(tp)[0])

        def convert_list(value: Any) -> list[Any]:
            if type(value) is not list:
                raise WireError("malformed", f"{_name(value)} where a list belongs")
            return [convert_item(item) for item in value]

        return convert_list
    if dataclasses.is_dataclass(tp):
        return _dataclass_converter(tp)
    if tp is float:

        def convert_float(value: Any) -> float:
            if type(value) is float:
                return value
            if type(value) is int:
                return float(value)
            raise WireError("malformed", f"{_name(value)} where a number belongs")

        return convert_float

    def convert_exact(value: Any) -> Any:
        if type(value) is not tp:
            raise WireError("malformed", f"{_name(value)} where {tp.__name__} belongs")
        return value

    return convert_exact


def _dataclass_converter(cls: Any) -> Convert:
    hints = typing.get_type_hints(cls)
    fields = {f.name: converter(hints[f.name]) for f in dataclasses.fields(cls)}
    required = frozenset(
        f.name
        for f in dataclasses.fields(cls)
        if f.default is dataclasses.MISSING
        and f.default_factory is dataclasses.MISSING
        and not _optional(hints[f.name])
    )

    optional_missing = frozenset(
        f.name
        for f in dataclasses.fields(cls)
        if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING and _optional(hints[f.name])
    )

    def convert(value: Any) -> Any:
        if type(value) is not dict:
            raise WireError("malformed", f"{_name(value)} where a {cls.__name__} map belongs")
        if not required <= value.keys():
            missing = ", ".join(sorted(required - value.keys()))
            raise WireError("malformed", f"{cls.__name__} lacks {missing}")
        known = {}
        for key, item in value.items():
            field_converter = fields.get(key)
            if field_converter is not None:  # unknown keys: a newer minor revision, ignored
                try:
                    known[key] = field_converter(item)
                except WireError as e:
                    raise WireError(e.reason, f"{cls.__name__}.{key}: {e.detail}") from None
        for name in optional_missing - known.keys():
            known[name] = None
        return cls(**known)

    return convert


def _optional(tp: Any) -> bool:
    """``X | None``: may be left out, as :func:`encode` leaves out every ``None``."""
    return typing.get_origin(tp) in (Union, types.UnionType) and type(None) in typing.get_args(tp)


def _name(value: Any) -> str:
    return type(value).__name__
