"""Subcommands of the ``intentvcs`` CLI, one module each (see ``intentvcs.cli.main``)."""
