"""Help as a Unix command's: ``Usage: ddr run [OPTIONS] PIPELINE``, arguments and options by
their metavars (``FILE``, ``KEY=VALUE``), never a Python type name, wrapped at spaces only."""

from __future__ import annotations

from typing import Any

from typer.core import TyperCommand, TyperGroup

__all__ = ["Command", "Group"]

# Help wraps at spaces only: a value such as skip-if-complete is never split at a hyphen.
# The formatter wraps a copy with non-breaking hyphens (which textwrap does not break at)
# and puts the hyphens back in the text it prints.
_NB_HYPHEN = "\u2011"


def _wrap_at_spaces(cls: type) -> type:
    formatter_base = cls.context_class.formatter_class

    class Formatter(formatter_base):  # type: ignore[misc,valid-type]
        def write_text(self, text: str) -> None:
            super().write_text(text.replace("-", _NB_HYPHEN))

        def write_dl(self, rows: Any, *args: Any, **kwargs: Any) -> None:
            rows = [(a, b.replace("-", _NB_HYPHEN)) for a, b in rows]
            super().write_dl(rows, *args, **kwargs)

        def getvalue(self) -> str:
            return super().getvalue().replace(_NB_HYPHEN, "-")

    context = type("Context", (cls.context_class,), {"formatter_class": Formatter})
    return type(cls.__name__, (cls,), {"context_class": context})


def _argument_name(param: Any) -> str:
    name = param.metavar or param.name.upper()
    return name + ("..." if param.nargs != 1 else "")


#: the ``ddr`` group: its help wraps at spaces only
Group: type = _wrap_at_spaces(TyperGroup)


class Command(_wrap_at_spaces(TyperCommand)):  # type: ignore[misc]
    """A command whose usage line and help name arguments and options by their metavars."""

    def collect_usage_pieces(self, ctx: Any) -> list[str]:
        pieces = [self.options_metavar] if self.options_metavar else []
        for param in self.get_params(ctx):
            if param.param_type_name == "argument":
                name = _argument_name(param)
                pieces.append(name if param.required else f"[{name}]")
        return pieces

    def format_options(self, ctx: Any, formatter: Any) -> None:
        args, opts = [], []
        for param in self.get_params(ctx):
            if param.param_type_name == "argument" and not getattr(param, "hidden", False):
                args.append((_argument_name(param), param.help or ""))
            elif param.param_type_name == "option":
                record = param.get_help_record(ctx)
                if record is not None:
                    opts.append(record)
        for title, rows in (("Arguments", args), ("Options", opts)):
            if rows:
                with formatter.section(title):
                    formatter.write_dl(rows)
