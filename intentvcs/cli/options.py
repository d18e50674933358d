"""Command-line options derived from the settings dataclasses.

A setting's default, help text and vocabulary are written once, on its
dataclass field (``intentvcs.training.config``: ``metadata["help"]`` and
``metadata["choices"]``). ``add_option`` turns a field into an option and
``config_from_args`` builds the dataclass back from the parsed arguments, so
the command line never types a default or a list of choices again.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import types
import typing
from pathlib import Path
from typing import Any, TypeVar

Config = TypeVar("Config")

_PARSERS = {int, float, str}


def add_option(parser: argparse.ArgumentParser, config: type, name: str, *flags: str,
               **overrides: Any) -> argparse.Action:
    """Add the option setting field ``name`` of dataclass ``config``.

    ``flags``: its option strings (default ``--name-with-dashes``). Its
    default, help text and choices are the field's; a bool field becomes a
    ``--flag/--no-flag`` pair, an int, float or str field parses as such.
    ``overrides`` go to ``add_argument`` as they are: a ``metavar``, a
    ``type`` for other fields or stricter parsing, a command's own ``default``,
    a subset of the ``choices``, or ``action="store_false"`` for a flag that
    turns a bool off (give its ``help`` then: the field's says what "on" does).
    """
    spec = {f.name: f for f in dataclasses.fields(config)}[name]
    kind = _value_type(typing.get_type_hints(config)[name])
    kwargs: dict[str, Any] = {"dest": name, "default": _default(spec),
                              "help": spec.metadata.get("help", "").replace("%", "%%")}
    if kind is bool:
        kwargs["action"] = argparse.BooleanOptionalAction
    elif kind in _PARSERS:
        kwargs["type"] = kind
    if "choices" in spec.metadata:
        kwargs["choices"] = spec.metadata["choices"]
    kwargs.update(overrides)
    if "type" not in kwargs and "action" not in kwargs:
        raise TypeError(f"{config.__name__}.{name}: give a type= that parses {kind}")
    action = parser.add_argument(*(flags or (f"--{name.replace('_', '-')}",)), **kwargs)
    # Set after add_argument: BooleanOptionalAction appends its own default on some Python versions.
    valued = kwargs.get("action") in (None, argparse.BooleanOptionalAction)
    action.help = kwargs["help"] + (" (default: %(default)s)" if valued and action.default is not None else "")
    return action


def config_from_args(config: type[Config], args: argparse.Namespace) -> Config:
    """``config`` built from the parsed options named after its fields (``add_option``'s);
    the fields without an option keep their defaults."""
    return config(**{f.name: getattr(args, f.name) for f in dataclasses.fields(config) if hasattr(args, f.name)})


def share(text: str) -> float:
    """An argparse ``type``: a float strictly between 0 and 1."""
    value = float(text)
    if not 0.0 < value < 1.0:
        raise argparse.ArgumentTypeError(f"must lie strictly between 0 and 1, got {text}")
    return value


def floor_or_fit(text: str) -> float | str:
    """An argparse ``type``: ``fit``, or a float in [0, 1)."""
    if text == "fit":
        return text
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected fit or a number in [0, 1), got {text!r}") from None
    if not 0.0 <= value < 1.0:
        raise argparse.ArgumentTypeError(f"must be fit or lie in [0, 1), got {text}")
    return value


def json_object(text: str) -> dict:
    """An argparse ``type``: a JSON object."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise argparse.ArgumentTypeError(f"not JSON: {exc}") from None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError(f"expected a JSON object, got {text}")
    return value


def json_object_file(path: str) -> dict:
    """An argparse ``type``: a file holding a JSON object; its errors name the file."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise argparse.ArgumentTypeError(f"{path}: cannot read it: {exc}") from None
    try:
        return json_object(text)
    except argparse.ArgumentTypeError as exc:
        raise argparse.ArgumentTypeError(f"{path}: {exc}") from None


def _default(spec: dataclasses.Field) -> Any:
    return spec.default_factory() if spec.default is dataclasses.MISSING else spec.default


def _value_type(hint: Any) -> Any:
    """``int`` for ``int`` or ``int | None``; the hint itself otherwise."""
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(hint) if a is not type(None)]
        return args[0] if len(args) == 1 else hint
    return hint
