"""Command-line options made from their declarations (:func:`rollouts.options.option` fields): the flags, the
type, the choices, the help and the default as ``--help`` says it, all read from the field, so an option of
``mcprm label`` (:mod:`pipeline.options`) or ``mcprm train`` (:mod:`pipeline.training.options`) is declared in
one place and its command takes it from there."""

from __future__ import annotations

import dataclasses
import enum
import inspect
import types
import typing
from typing import Annotated, Any

import typer

from rollouts.options import field_default


def option_enum(name: str, values) -> type[enum.Enum]:
    return enum.Enum(name, {v: v for v in values}, type=str)


def shown_default(f: dataclasses.Field) -> str | None:
    """The default as ``--help`` says it: the field's ``shown`` text, else its value (on/off for flags)."""
    if "shown" in f.metadata:
        return f.metadata["shown"]
    v = field_default(f)
    if v is None or v is dataclasses.MISSING:
        return None
    return "on" if v is True else "off" if v is False else str(v)


def field_help(f: dataclasses.Field) -> str:
    """An option's description with its default, both from its declaration."""
    shown = shown_default(f)
    return f.metadata["help"] + (f" (default: {shown})" if shown is not None else "")


def typer_option(*decls: str, help: str, **kw):
    if any("/" in d for d in decls):
        kw.setdefault("metavar", "")
    return typer.Option(*decls, help=help, show_default=False, **kw)


def field_param(f: dataclasses.Field, typ: Any, panel: str | None = None) -> inspect.Parameter:
    """The command-line option of field ``f`` (of type ``typ``): ``--name`` (or its ``flags``), ``--name/--no-name``
    for a flag, its choices, its help with the default; unset, it is None (the declaration's default applies)."""
    md = f.metadata
    name = f.name
    flag = "--" + name.replace("_", "-")
    args = [a for a in typing.get_args(typ) if a is not type(None)]
    base = args[0] if typing.get_origin(typ) in (typing.Union, types.UnionType) and len(args) == 1 else typ
    if md.get("choices"):
        base = option_enum("".join(w.title() for w in name.split("_")), md["choices"])
    decls = tuple(md.get("flags") or (flag,))
    if base is bool:
        decls = (f"{flag}/--no-{name.replace('_', '-')}",)
    extra: dict[str, Any] = {"envvar": md["envvar"]} if md.get("envvar") else {}
    if panel is not None:
        extra["rich_help_panel"] = panel
    return inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=None,
                             annotation=Annotated[base | None, typer_option(*decls, help=field_help(f), **extra)])


def given(options: dict[str, Any]) -> dict[str, Any]:
    """The options a user gave (set, not None), their values as declared (an Enum choice as its text)."""
    return {k: (v.value if isinstance(v, enum.Enum) else v) for k, v in options.items() if v is not None and v != []}
