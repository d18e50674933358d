"""Benchmarks: scripts that measure, run from the repository root as ``python -m benchmarks.<name>``.

The top floor of the project (docs/ARCHITECTURE.md): a benchmark may import
anything of ``intentvcs``; nothing imports a benchmark. Each writes
``benchmarks/results/<name>.json`` (``benchmarks.common.write_results``), from
which ``python -m benchmarks.render_results`` renders docs/RESULTS.md and the
README's headline table.
"""

# Imported first so that its thread policy is in place before any benchmark imports numpy.
import intentvcs  # noqa: F401
