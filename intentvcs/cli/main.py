"""The ``intentvcs`` console command.

Each subcommand lives in its own module under ``intentvcs.cli.commands`` and exposes
``register(subparsers)``. Modules are discovered, so adding a command never
touches this file. Command modules import heavy libraries (torch, bentoml)
inside their run functions only, so ``intentvcs --help`` stays fast.
"""

from __future__ import annotations

import argparse
import difflib
import importlib
import logging
import os
import pkgutil
import select
import signal
import sys
import threading
import traceback

from intentvcs import __version__
from intentvcs.cli import commands, exit_codes
from intentvcs.cli.options import in_option_words

# Every module of the package logs under it (the training, export and service folders install as
# intentvcs.training and so on).
PACKAGE_LOGGER = "intentvcs"

def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="intentvcs",
        description="Train, export, evaluate, audit and serve PU multi-label intent models.",
    )
    parser.add_argument("--version", action="version", version=f"intentvcs {__version__}")
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for info in sorted(pkgutil.iter_modules(commands.__path__), key=lambda m: m.name):
        module = importlib.import_module(f"{commands.__name__}.{info.name}")
        module.register(sub)
    return parser


def parse_args(parser: argparse.ArgumentParser, argv: list[str] | None = None) -> argparse.Namespace:
    """``parser.parse_args``, but an unknown argument is reported by the subcommand's parser (its usage,
    not the top-level one) with the closest option it has (``--epohcs``: did you mean ``--epochs``?);
    exit 2, argparse's code for a usage error."""
    args, unknown = parser.parse_known_args(argv)
    if unknown:
        command = getattr(args, "command", None)
        words = list(sys.argv[1:] if argv is None else argv)
        # An unknown argument before the command's name is the top-level parser's (--verbsoe: --verbose?).
        before = command in words and any(words.index(arg) < words.index(command) for arg in unknown if arg in words)
        target = parser if before else _subparser(parser, command) or parser
        target.error(unrecognized(target, unknown))
    return args


def _subparser(parser: argparse.ArgumentParser, command: str | None) -> argparse.ArgumentParser | None:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction) and command in action.choices:
            return action.choices[command]
    return None


def unrecognized(parser: argparse.ArgumentParser, unknown: list[str]) -> str:
    """argparse's "unrecognized arguments" message, with the closest option of ``parser`` for each unknown one."""
    options = [option for action in parser._actions for option in action.option_strings]
    guesses = {}
    for arg in unknown:
        name = arg.split("=", 1)[0]
        if name.startswith("-") and name not in options:
            close = difflib.get_close_matches(name, options, n=1)
            if close:
                guesses[name] = close[0]
    message = f"unrecognized arguments: {' '.join(unknown)}"
    if len(guesses) == 1:
        message += f" (did you mean {next(iter(guesses.values()))}?)"
    elif guesses:
        message += f" (did you mean {', '.join(f'{right} for {wrong}' for wrong, right in guesses.items())}?)"
    return message


class Terminated(BaseException):
    """SIGTERM, raised where the command is, so that its outputs' temporary files are removed as on
    Ctrl-C (every writer cleans up on any exception); a BaseException, so no handler of errors takes it."""


def _terminated(signum, frame) -> None:
    raise Terminated


def configure_logging(verbose: bool) -> int:
    """This package's lines at INFO (``-v``: DEBUG), every other library's at WARNING (``-v`` on the root
    logger would be a page of matplotlib's and onnxruntime's debug lines); the package logger's level before."""
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    package = logging.getLogger(PACKAGE_LOGGER)
    before = package.level
    package.setLevel(logging.DEBUG if verbose else logging.INFO)
    return before


def _named_as_option(message: str, parser: argparse.ArgumentParser, command: str) -> str:
    """A setting's refusal in the words of the command line: field names (raised where the setting is
    checked, for every caller: "learning_rate must be > 0", "needs augment_ratio > 0") become the command's
    options ("--lr must be > 0", "needs --augment > 0"); ``intentvcs.cli.options.in_option_words``."""
    sub = _subparser(parser, command)
    return in_option_words(message, sub) if sub is not None else message


def main(argv: list[str] | None = None) -> int:
    try:
        parser = build_parser()
        args = parse_args(parser, argv)
    except KeyboardInterrupt:
        # Ctrl-C as the command starts (its modules import numpy, a few tenths of a second): a line and 130, as
        # later on, not an import's traceback.
        print("intentvcs: interrupted", file=sys.stderr)
        return exit_codes.INTERRUPTED
    if not getattr(args, "func", None):
        parser.print_help()
        return exit_codes.BAD_INPUT
    logging_before = configure_logging(args.verbose)
    # Only the main thread may set a handler (main() may be called from another, e.g. by a test).
    on_main_thread = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGTERM, _terminated) if on_main_thread else None
    try:
        code = int(args.func(args) or exit_codes.OK)
        sys.stdout.flush()  # here, so that a reader that has gone is seen below, not at the interpreter's exit
        return code
    except (ValueError, OSError, ImportError) as exc:
        if isinstance(exc, BrokenPipeError) and _reader_gone():
            return _reader_went()
        # Data, usage and environment errors (typed errors name the file, line
        # or setting; an ImportError names the package to install): one clear
        # line, no traceback.
        print(f"intentvcs {args.command}: error: {_named_as_option(str(exc), parser, args.command)}", file=sys.stderr)
        return exit_codes.BAD_INPUT
    except KeyboardInterrupt:
        print(f"intentvcs {args.command}: interrupted", file=sys.stderr)
        return exit_codes.INTERRUPTED
    except Terminated:
        print(f"intentvcs {args.command}: terminated (SIGTERM)", file=sys.stderr)
        return exit_codes.TERMINATED
    except Exception:
        # Anything else is ours: its own code, so that a CI gate can tell a
        # crash from a finding, and the traceback to report it with.
        traceback.print_exc()
        print(f"intentvcs {args.command}: internal error (a bug in intentvcs; the traceback above says where)",
              file=sys.stderr)
        return exit_codes.INTERNAL_ERROR
    finally:
        # main() may run inside a longer-lived process (tests).
        logging.getLogger(PACKAGE_LOGGER).setLevel(logging_before)
        if on_main_thread:
            signal.signal(signal.SIGTERM, previous)


def _reader_went() -> int:
    """The end of a command whose output's reader has gone (`intentvcs evaluate ... | head -1`): its files
    are written and nobody reads the rest, so it ends as a program killed by SIGPIPE would, without a message."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())  # else the interpreter's last flush fails again, with a message
    os.close(devnull)
    return exit_codes.BROKEN_PIPE


def _reader_gone() -> bool:
    """Whether standard output is a pipe whose reading end is closed (poll reports an error on its end)."""
    try:
        poller = select.poll()
        poller.register(sys.stdout.fileno(), select.POLLOUT)
        return any(events & select.POLLERR for _, events in poller.poll(0))
    except (AttributeError, OSError, ValueError):  # no poll on this system, or stdout is no file (a test's)
        return False


if __name__ == "__main__":
    sys.exit(main())
