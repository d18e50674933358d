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
import os
import re
import sys
import types
import typing
from pathlib import Path
from typing import Any, TypeVar

from intentvcs.core import atomic

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


def option_words(parser: argparse.ArgumentParser) -> dict[str, tuple[str, str | None, str | None]]:
    """How a message names each setting of ``parser``'s command: its field (``dest``) -> (the option, what
    "<field> on" reads as, what "<field> off" reads as; None for a setting that is no flag).

    The option is the one the user types: ``--lr`` for ``learning_rate``, a ``--flag/--no-flag`` pair by its
    positive form, a long option before a short one. A flag that turns its setting off (``--train-embeddings``
    sets ``freeze_embeddings`` off) reads as given for "off", as left out for "on"."""
    words: dict[str, tuple[str, str | None, str | None]] = {}
    for action in parser._actions:
        if not action.option_strings or action.dest in words or action.dest == argparse.SUPPRESS:
            continue
        strings = [s for s in action.option_strings if not s.startswith("--no-")] or action.option_strings
        option = next((s for s in strings if s.startswith("--")), strings[0])
        if isinstance(action, argparse.BooleanOptionalAction):
            words[action.dest] = (option, option, action.option_strings[-1])
        elif isinstance(action, argparse._StoreConstAction) and action.const is False:  # store_false
            words[action.dest] = (option, f"without {option}", option)
        elif isinstance(action, argparse._StoreConstAction) and action.const is True:  # store_true
            words[action.dest] = (option, option, f"without {option}")
        else:
            words[action.dest] = (option, None, None)
    return words


# A field's name as a word of its own: not part of a longer name, a path (/tmp/max_length/x), a dotted key
# (decision.oos_rule, max_length.json) or a quoted key ('max_length', a file's).
_NAME = r"(?<![\w/.'\"-])({})(?![\w/'\"-]|\.\w)(?: (on|off)\b)?"


def in_option_words(message: str, parser: argparse.ArgumentParser) -> str:
    """A setting's refusal in the words of ``parser``'s command line (``option_words``): each field written
    with an underscore ("needs augment_ratio > 0", "max_length: expected ...") and a one-word field that is the
    message's first word ("epochs must be >= 1") name the option ("needs --augment > 0", "--epochs must
    ..."). Checks raise in field names, for every caller; the command line translates them here."""
    words = option_words(parser)

    def named(match: re.Match) -> str:
        option, on, off = words[match.group(1)]
        state = match.group(2)
        return {"on": on, "off": off}.get(state) or option + (f" {state}" if state else "")

    for field in words:
        # A plain word ("train", "relations") names a setting only as the subject of the message.
        if "_" in field or message.startswith(field + " "):
            message = re.sub(_NAME.format(re.escape(field)), named, message, count=0 if "_" in field else 1)
    return message


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


# What ``--out -`` means for a file output: standard output, as ``--out /dev/stdout`` (``intentvcs.core.atomic``
# writes it as a stream, and ``summary_stream`` then moves the summary to standard error).
STDOUT = "/dev/stdout"
STDOUT_HELP = "- or /dev/stdout: standard output"  # what a file output's help says of it


def given(text: str) -> str:
    """An argparse ``type`` for a path or a name: refuses an empty or blank value (``--train "$OLD"`` with the
    variable unset). Read as it was, an empty optional path was no option at all (``--train ""``: the audit ran
    without the old data), an empty required one the working folder, and an empty ``--checkpoint`` a crash."""
    if not text.strip():
        raise argparse.ArgumentTypeError("empty (an unset shell variable?): give a value, or leave the option out")
    return text


def output_file(text: str) -> str:
    """An argparse ``type`` for a file output (``given``): ``-`` is standard output, ``/dev/stdout``; it wrote a
    file named ``-`` in the working folder."""
    text = given(text)
    return STDOUT if text == "-" else text


def output_folder(text: str) -> str:
    """An argparse ``type`` for an output folder (``given``): ``-``, standard output for a file output
    (``output_file``), is refused; it made a folder named ``-`` in the working folder."""
    text = given(text)
    if text == "-":
        raise argparse.ArgumentTypeError("- is standard output, which takes a file, not a folder: give the "
                                         "folder's path (./- for a folder named -)")
    return text


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


def summary_stream(*outputs: str | os.PathLike | None):
    """Where a command prints its summary: standard error when one of its ``outputs`` is what standard output
    writes to (``--out /dev/stdout | jq``: the summary would follow the output as one more document, read as
    part of it), else standard output."""
    return sys.stderr if any(output is not None and atomic.writes_to(output, sys.stdout) for output in outputs) \
        else sys.stdout


def print_summary(summary: Any, *outputs: str | os.PathLike | None) -> None:
    """Print a command's summary as indented JSON where ``summary_stream(*outputs)`` says."""
    report = summary_stream(*outputs)
    json.dump(summary, report, indent=2)
    print(file=report)
