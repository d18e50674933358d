"""Exit status of every ``intentvcs`` command, one meaning each, so a CI step can branch on it.

0  the command did its work;
1  it ran and its gate said no: audit findings at ``--fail-on``, an export's parity check;
2  the input is the user's to fix: data, options, files, settings, a missing optional package
   (one line naming the file, line or setting; no traceback);
3  an internal error, a bug in intentvcs (the traceback is printed for the report).
"""

OK = 0
GATE_FAILED = 1
BAD_INPUT = 2
INTERNAL_ERROR = 3
INTERRUPTED = 130  # the shell's convention for Ctrl-C
TERMINATED = 143  # and for SIGTERM (128 + 15), e.g. a job scheduler stopping the command
BROKEN_PIPE = 141  # and for SIGPIPE (128 + 13): the reader of the output went first (`| head -1`)
