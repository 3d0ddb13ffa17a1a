"""Fast construction of the frozen slots dataclasses every reading makes (DeviceSample & co.).

A frozen dataclass's ``__init__`` stores each field through ``object.__setattr__`` (~0.2 µs a
field) and matching ~80 keyword arguments costs about as much again: for DeviceSample that was
more than the rest of a device's reading. ``builder(cls)`` returns ``build(values)``, which
takes the fields as one dict (missing ones get their defaults), stores them into a plain class
with the same ``__slots__`` and then sets the instance's ``__class__`` to ``cls`` (CPython
allows that between classes of identical slot layout): the result is a genuine ``cls``
instance, equal to ``cls(**values)``. Where that does not apply (no matching slots, a
``__post_init__``, a field outside ``__init__``) ``build`` is ``cls(**values)``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, TypeVar, cast

T = TypeVar("T")


class _Marker:
    """Stands for a field without a plain default until the caller's values replace it."""


_REQUIRED, _FACTORY = _Marker(), _Marker()


def builder(cls: type[T]) -> Callable[[dict[str, Any]], T]:
    """``build(values) -> cls`` as described above; raises TypeError like ``cls(**values)`` for
    a missing required field or a name that is not a field."""
    if not dataclasses.is_dataclass(cls):
        return lambda values: cls(**values)
    fields = dataclasses.fields(cls)
    names = tuple(f.name for f in fields)
    if (
        getattr(cls, "__slots__", None) != names
        or cls.__bases__ != (object,)
        or hasattr(cls, "__post_init__")
        or not all(f.init for f in fields)
    ):
        return lambda values: cls(**values)
    shadow = type(f"_{cls.__name__}Slots", (), {"__slots__": names})
    try:  # the layout check CPython does on __class__ assignment
        object.__new__(shadow).__class__ = cls  # type: ignore[assignment]
    except TypeError:
        return lambda values: cls(**values)
    start: dict[str, Any] = {}
    scope: dict[str, Any] = {
        "_new": object.__new__,
        "_shadow": shadow,
        "_cls": cls,
        "_start": start,
        "_count": len(names),
        "_required": _REQUIRED,
        "_factory": _FACTORY,
        "_unknown": lambda values: cls(**values),  # raises the TypeError naming the field
    }
    body = []
    for i, f in enumerate(fields):
        body.append(f" o.{f.name} = d[{f.name!r}]")
        if f.default is not dataclasses.MISSING:
            start[f.name] = f.default
        elif f.default_factory is not dataclasses.MISSING:
            start[f.name], scope[f"_f{i}"] = _FACTORY, f.default_factory
            body.append(f" if o.{f.name} is _factory: o.{f.name} = _f{i}()")
        else:
            start[f.name] = _REQUIRED
            body.append(f" if o.{f.name} is _required: return _unknown(values)")
    source = (
        "def build(values):\n d = _start.copy()\n d.update(values)\n"
        " if len(d) != _count: return _unknown(values)\n o = _new(_shadow)\n"
        + "\n".join(body)
        + "\n o.__class__ = _cls\n return o\n"
    )
    exec(compile(source, f"<builder of {cls.__name__}>", "exec"), scope)
    return cast(Callable[[dict[str, Any]], T], scope["build"])
