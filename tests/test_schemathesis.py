"""Property-based fuzzing of the live service from its own OpenAPI spec (schemathesis).

Valid and invalid bodies (positive and negative generation) go to every
operation the document publishes; the service must never answer 5xx, every
answer must be as the document says (status, media type, body schema:
``intentvcs.service.openapi_document``), and every 4xx must be a JSON body
that says what was wrong. At least 1,000 cases run.
"""

from __future__ import annotations

import pytest

schemathesis = pytest.importorskip("schemathesis")
from hypothesis import HealthCheck, given, settings
from schemathesis import GenerationMode
from schemathesis.checks import (content_type_conformance, not_a_server_error, response_schema_conformance,
                                 status_code_conformance)

from intentvcs.cli.commands.serve import running
from tests.helpers.bundle import make_tiny_bundle

pytestmark = pytest.mark.slow

MIN_CASES = 1000
EXAMPLES = 260  # per operation and generation mode; parameterless GET probes yield one case each
# No 5xx, and every answer as /docs.json documents it: its status listed, its media type, its body's schema.
CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance]


@pytest.fixture(scope="module")
def api_schema(tmp_path_factory):
    bundle = make_tiny_bundle(tmp_path_factory.mktemp("fuzz"))
    with running(bundle) as url:
        schema = schemathesis.openapi.from_url(f"{url}/docs.json")
        schema.config.update(base_url=url)
        yield schema


def an_explained_4xx(ctx, response, case):
    """4xx answers are JSON naming the problem (``error`` and, for schema violations, ``detail``)."""
    if 400 <= response.status_code < 500 and case.path in ("/predict", "/model/parse", "/audit"):
        body = response.json()
        assert isinstance(body, dict) and body.get("error"), f"unexplained {response.status_code}: {response.text}"


def fuzz(operation, mode: GenerationMode) -> int:
    """Send up to ``EXAMPLES`` generated cases to one operation; return how many were sent."""
    sent = 0

    @given(case=operation.as_strategy(generation_mode=mode))
    @settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None,
              suppress_health_check=list(HealthCheck))
    def send(case):
        nonlocal sent
        case.call_and_validate(checks=CHECKS, additional_checks=[an_explained_4xx], timeout=60)
        sent += 1

    send()
    return sent


def test_no_server_errors(api_schema):
    # schemathesis' pytest plugin (``from_fixture``) does not run under pytest 9,
    # so each operation's strategy is driven by hypothesis directly.
    cases = {}
    for result in api_schema.get_all_operations():
        operation = result.ok()
        # A parameterless probe has no invalid variant to generate.
        modes = [GenerationMode.POSITIVE] + ([GenerationMode.NEGATIVE] if len(operation.body) else [])
        for mode in modes:
            cases[f"{operation.method.upper()} {operation.path} {mode.value}"] = fuzz(operation, mode)
    assert {key.split()[1] for key in cases} >= {"/predict", "/model/parse", "/audit"}
    assert sum(cases.values()) >= MIN_CASES, cases
