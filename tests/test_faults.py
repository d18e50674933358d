"""The fault-injection catalogue (``benchmarks.faults``) against the real CLI and a real server, in CI.

``python -m benchmarks.faults`` runs the same cases and writes
``benchmarks/results/faults.json``; here each case is a test of its own.
"""

from __future__ import annotations

import pytest

from benchmarks import faults


@pytest.fixture(scope="module")
def space():
    with faults.workspace() as workspace:
        yield workspace


@pytest.mark.slow
@pytest.mark.parametrize("fault", faults.FAULTS, ids=lambda fault: fault.case)
def test_fault(fault, space):
    observed, passed = fault.check(space)
    assert passed, f"{fault.case}: expected {fault.expected}; observed {observed}"


def test_the_catalogue_covers_every_kind_of_fault():
    kinds = {fault.case.split(":")[0] for fault in faults.FAULTS}
    assert {"data", "output", "option", "bundle", "serve", "interrupted write"} <= kinds
    assert len({fault.case for fault in faults.FAULTS}) == len(faults.FAULTS)  # names are unique
