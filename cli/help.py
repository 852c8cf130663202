"""``--help`` that reads at 80 columns: options grouped into panels, two columns (the option with a
short metavar, then its description), choices listed in the description where they wrap between words.

typer's own renderer gives every option five columns (flag, short flag, ``--no-`` flag, type, help); with
``label``'s 60 options and its longest names that left a 17-character description column at 80 columns and
folded ``<blank-line|step-prefix|...>`` mid-word. Here the option column is at most ``OPT_MAX`` wide and wraps
at spaces (``--max-tokens-per-solution`` then ``N`` below it), so the description keeps the rest.

Errors are made uniform too: :class:`McprmGroup` prints a usage error (a bad option value, an unknown option)
as ``error: ...``, as every command's own errors begin (:func:`cli.common.err`), not typer's framed "Error"
panel.
"""

from __future__ import annotations

import enum
import sys
import typing

import typer
from typer.core import TyperCommand, TyperGroup

OPT_MAX = 30  # widest option column; longer option cells wrap at their spaces
DEFAULT_PANEL = "Options"


def _annotation(param):
    td = getattr(param, "type_descriptor", None)
    ann = getattr(td, "annotation", None)
    if typing.get_origin(ann) in (list, tuple):
        ann = (typing.get_args(ann) or (str,))[0]
    return ann


def choices(param) -> list[str] | None:
    """The allowed values of an option declared with an Enum (typer makes those click choices)."""
    ann = _annotation(param)
    if isinstance(ann, type) and issubclass(ann, enum.Enum):
        return [str(m.value) for m in ann]
    return None


def _metavar(param) -> str:
    if getattr(param, "is_flag", False):
        return ""
    if param.metavar:  # declared: FILE, JUDGE-ID, ...
        return param.metavar
    if choices(param):
        return "NAME"
    ann = _annotation(param)
    return {int: "N", float: "X", bool: "BOOL"}.get(ann, "TEXT")


def option_cell(param) -> str:
    """``-i, --input TEXT``; ``--early-stop / --no-early-stop``; an argument's name in capitals."""
    if param.param_type_name == "argument":
        return param.name.upper()
    shorts = [o for o in param.opts if not o.startswith("--")]
    longs = [o for o in param.opts if o.startswith("--")]
    names = ", ".join(shorts + longs)
    if param.secondary_opts:
        names += " / " + ", ".join(param.secondary_opts)
    mv = _metavar(param)
    if getattr(param, "multiple", False) and mv:
        mv += " ..."
    return f"{names} {mv}".rstrip()


def _default_text(param) -> str | None:
    if not getattr(param, "show_default", False) or param.name == "help":
        return None
    d = param.default
    if d is None or callable(d):
        return None
    if isinstance(d, enum.Enum):
        d = d.value
    if isinstance(d, bool):
        return "on" if d else "off"
    if isinstance(d, list | tuple):
        return ", ".join(map(str, d)) if d else None
    return str(d)


def help_text(param) -> str:
    """The description, then the choices (if not named in it already) and the default (if not said already)."""
    text = (param.help or "").strip()
    ch = choices(param)
    if ch and not all(c in text for c in ch):
        listed = f"Choices: {', '.join(ch)}."
        at = text.find("(default:")  # the choices, then the default
        text = f"{text} {listed}" if at < 0 else f"{text[:at]}{listed} {text[at:]}"
    d = _default_text(param)
    if d is not None and "(default:" not in text:
        text += f" (default: {d})"
    if getattr(param, "envvar", None) and isinstance(param.envvar, str) and param.envvar not in text:
        text += f" [env: {param.envvar}]"
    return text.strip()


def render_help(cmd, ctx, console) -> None:
    from rich.markup import escape
    from rich.padding import Padding
    from rich.panel import Panel
    from rich.table import Table
    from rich.text import Text

    pieces = cmd.collect_usage_pieces(ctx)
    console.print(Text(f"Usage: {ctx.command_path} {' '.join(pieces)}", style="bold"))
    if cmd.help:
        console.print()
        console.print(Padding(Text(" ".join(cmd.help.split())), (0, 0, 0, 2)))
    console.print()
    panels: dict[str, list] = {}
    for p in cmd.get_params(ctx):
        if getattr(p, "hidden", False):
            continue
        name = "Arguments" if p.param_type_name == "argument" else (getattr(p, "rich_help_panel", None)
                                                                    or DEFAULT_PANEL)
        panels.setdefault(name, []).append(p)
    if DEFAULT_PANEL in panels and "help" in [p.name for p in panels[DEFAULT_PANEL]]:
        # --help closes the last panel rather than standing alone
        helps = [p for p in panels[DEFAULT_PANEL] if p.name == "help"]
        rest = [p for p in panels[DEFAULT_PANEL] if p.name != "help"]
        if rest:
            panels[DEFAULT_PANEL] = rest
        else:
            del panels[DEFAULT_PANEL]
        panels.setdefault(list(panels)[-1] if panels else DEFAULT_PANEL, []).extend(helps)
    width = console.width
    for title, params in panels.items():
        cells = [option_cell(p) for p in params]
        longest_word = max(len(w) for c in cells for w in c.split())  # never cut an option's name
        col = max(longest_word, min(max(len(c) for c in cells), OPT_MAX, max(12, (width - 6) // 3)))
        t = Table(show_header=False, box=None, padding=(0, 1), pad_edge=False, expand=True)
        t.add_column(width=col, overflow="fold", style="cyan", no_wrap=False)
        t.add_column(ratio=1, overflow="fold")
        for p, c in zip(params, cells, strict=True):
            t.add_row(Text(c), Text(help_text(p)))
        console.print(Panel(t, title=escape(title), title_align="left", border_style="dim"))


def render_group_help(group, ctx, console) -> None:
    """The group's usage, description, its commands (name and first paragraph, one line each where it fits) and
    ``--help``: the options panel as :func:`render_help` draws one (a flag has no type)."""
    from rich.padding import Padding
    from rich.panel import Panel
    from rich.table import Table
    from rich.text import Text

    console.print(Text(f"Usage: {ctx.command_path} [OPTIONS] COMMAND [ARGS]...", style="bold"))
    if group.help:
        console.print()
        console.print(Padding(Text(" ".join(group.help.split())), (0, 0, 0, 2)))
    console.print()
    opts = Table(show_header=False, box=None, padding=(0, 1), pad_edge=False, expand=True)
    opts.add_column(style="cyan", no_wrap=True)
    opts.add_column(ratio=1, overflow="fold")
    for p in group.get_params(ctx):
        if not getattr(p, "hidden", False):
            opts.add_row(Text(option_cell(p)), Text(help_text(p)))
    console.print(Panel(opts, title="Options", title_align="left", border_style="dim"))
    cmds = Table(show_header=False, box=None, padding=(0, 1), pad_edge=False, expand=True)
    cmds.add_column(style="cyan", no_wrap=True)
    cmds.add_column(ratio=1, overflow="fold")
    for name in group.list_commands(ctx):
        cmd = group.get_command(ctx, name)
        if cmd is None or cmd.hidden:
            continue
        first = (cmd.help or "").strip().split("\n\n")[0]  # the first paragraph, its line breaks joined
        cmds.add_row(Text(name), Text(" ".join(first.split())))
    console.print(Panel(cmds, title="Commands", title_align="left", border_style="dim"))


class HelpCommand(TyperCommand):
    """A typer command whose ``--help`` is :func:`render_help`'s."""

    def format_help(self, ctx, formatter) -> None:
        from rich.console import Console

        render_help(self, ctx, Console(highlight=False))


class McprmGroup(TyperGroup):
    """The ``mcprm`` group: usage errors begin ``error:`` as every other error (see the module docstring), and
    its ``--help`` is :func:`render_group_help`'s (typer's own showed ``--help <bool>``)."""

    def format_help(self, ctx, formatter) -> None:
        from rich.console import Console

        render_group_help(self, ctx, Console(highlight=False))

    def main(self, args=None, prog_name=None, complete_var=None, standalone_mode=True, **extra):
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        from typer import _click as click

        try:
            rv = super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        except click.exceptions.UsageError as e:
            from cli.common import err

            err(e.format_message().replace("Value error, ", ""))  # typer's validator wording
            if e.ctx is not None:
                print(f"(see: {e.ctx.command_path} --help)", file=sys.stderr)
            sys.exit(e.exit_code)
        except click.exceptions.ClickException as e:
            from cli.common import err

            err(e.format_message())
            sys.exit(e.exit_code)
        except typer.Abort:
            from cli.common import err

            err("aborted")
            sys.exit(1)
        sys.exit(rv if isinstance(rv, int) else 0)


def command(app: typer.Typer, name: str, **kw):
    """``app.command(name)`` with this module's help."""
    return app.command(name, cls=HelpCommand, **kw)
