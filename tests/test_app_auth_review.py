"""Defects a review of the service's auth, identity, tokenization and OpenAPI document found, each held
against one real ``bentoml serve`` on loopback (with a bearer token) and reproduced before its fix.

- The request bodies ``/docs.json`` published were BentoML's inline copies of the request schemas, in
  which every optional field had lost its ``null`` (BentoML flattens pydantic's ``anyOf: [X, null]`` to
  ``X``) and Rasa's ``token`` its number and boolean forms: the body Rasa's own client posts to
  ``/model/parse`` (``{"text", "message_id": null, "token": null}``), which the service answers 200, was
  invalid by the document, and so was ``"training_rows": null`` on ``/audit``. The components of the same
  name (pydantic's own schemas, in OpenAPI 3.0's dialect) were right; the bodies now refer to them.
- The ``X-Intentvcs-Model`` header carried the bundle's name as it was exported (``export --name`` takes any
  string): a name with a control character (a newline) made uvicorn drop the connection of every
  ``/predict``, ``/model/parse`` and ``/audit`` answer, unanswered ("Invalid HTTP header value"), and a
  name outside Latin-1 failed every audit job (its header is set through Starlette, which writes Latin-1).
  The header (and ``/status``'s ``model``, its value) now percent-encodes what is not printable ASCII.
"""

from __future__ import annotations

import copy
import urllib.parse

import httpx
import jsonschema
import pytest

from intentvcs.cli.commands.serve import running
from intentvcs.export.exporter import export_bundle
from tests.helpers.bundle import make_tiny_checkpoint
from tests.helpers.http import wait_for
from tests.test_http_bodies_and_refusals import port_in_range
from tests.test_openapi_contract import json_schema

pytestmark = pytest.mark.slow

TOKEN = "review-token-0123456789"
AUTH = {"authorization": f"Bearer {TOKEN}"}
# Names no header can carry as they are (export --name takes any string): an em dash is outside Latin-1, a
# newline a control character.
OUTSIDE_LATIN_1 = "modèle — été"
WITH_CONTROL = "modèle\nv2"
ROWS = [{"text": f"play some jazz {tail}", "labels": ["PlayJazz"]} for tail in ("now", "loud", "please")]


def serve_named(tmp_path_factory, name: str):
    """A server, with the bearer token, of a tiny bundle exported as ``name``."""
    folder = tmp_path_factory.mktemp("auth_review")
    bundle = export_bundle(make_tiny_checkpoint(folder / "checkpoint"), folder / "bundle", name=name)["bundle"]
    return running(bundle, port=port_in_range(), extra_env={"INTENTVCS_API_TOKEN": TOKEN},
                   log_path=folder / "server.log")


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    with serve_named(tmp_path_factory, OUTSIDE_LATIN_1) as url:
        yield url, httpx.get(f"{url}/docs.json", timeout=30).json()


@pytest.fixture(scope="module")
def served_control(tmp_path_factory):
    with serve_named(tmp_path_factory, WITH_CONTROL) as url:
        yield url


def request_body_problems(spec: dict, path: str, body) -> list[str]:
    """What the document's request body schema of ``POST path`` finds wrong with ``body`` (read as OpenAPI
    3.0 reads it); [] when the document admits it."""
    schema = spec["paths"][path]["post"]["requestBody"]["content"]["application/json"]["schema"]
    schema = {**json_schema(schema), "components": json_schema(copy.deepcopy(spec["components"]))}
    return [f"{list(error.absolute_path)}: {error.message[:200]}"
            for error in jsonschema.Draft202012Validator(schema).iter_errors(body)]


@pytest.mark.parametrize("path, body", [
    # What Rasa's RasaNLUHttpInterpreter posts: message_id and token, often null.
    ("/model/parse", {"text": "play some jazz", "message_id": None, "token": None}),
    ("/model/parse", {"text": "play some jazz", "message_id": "sender-1", "token": 12345, "lang": None,
                      "metadata": None}),
    ("/predict", {"texts": ["play some jazz"], "text": None}),
    ("/predict", {"text": "play some jazz", "texts": None}),
    ("/audit", {"rows": ROWS, "training_rows": None}),
    ("/audit/job/submit", {"rows": ROWS, "training_rows": None}),
])
def test_a_request_body_the_service_answers_is_valid_by_the_documents_request_schema(served, path, body):
    url, spec = served
    answer = httpx.post(f"{url}{path}", json=body, headers=AUTH, timeout=60)
    assert answer.status_code == 200, answer.text
    assert request_body_problems(spec, path, body) == []


def test_the_documents_request_schemas_still_refuse_what_the_service_refuses(served):
    """The bodies' schemas are not loosened: an unknown key, a too long message and null rows are refused by
    the document as by the service."""
    url, spec = served
    for path, body in [("/predict", {"text": None}), ("/model/parse", {"text": "hi", "sender": "x"}),
                       ("/model/parse", {"text": "x" * 1001}), ("/audit", {"rows": None})]:
        answer = httpx.post(f"{url}{path}", json=body, headers=AUTH, timeout=60)
        assert answer.status_code == 400, (path, answer.text)
    # "text": null alone is refused by a cross-field rule (text or texts) that no JSON schema states; the rest
    # the document refuses too.
    assert request_body_problems(spec, "/model/parse", {"text": "hi", "sender": "x"})
    assert request_body_problems(spec, "/model/parse", {"text": "x" * 1001})
    assert request_body_problems(spec, "/audit", {"rows": None})


def model_header_problems(url: str, answer: httpx.Response, name: str) -> list[str]:
    """How ``answer``'s ``X-Intentvcs-Model`` fails to name the bundle ``name`` as ``/status`` does: printable
    ASCII, ``/status``'s ``model``, and the name percent-encoded; [] when it does."""
    header = answer.headers["x-intentvcs-model"]
    status = httpx.get(f"{url}/status", headers=AUTH, timeout=10).json()
    encoded, _, digest = header.rpartition("@")
    checks = {"printable ASCII": header.isascii() and header.isprintable(),
              "/status' model": status["model"] == header,
              "the name": status["name"] == name and urllib.parse.unquote(encoded) == name,
              "the digest": status["bundle_digest"].startswith(digest)}
    return [what for what, holds in checks.items() if not holds]


@pytest.mark.parametrize("path, body", [("/predict", {"text": "play some jazz"}),
                                        ("/model/parse", {"text": "play some jazz"}),
                                        ("/audit", {"rows": ROWS})])
def test_a_bundle_name_with_a_control_character_still_answers_and_is_percent_encoded_in_the_header(
        served_control, path, body):
    answer = httpx.post(f"{served_control}{path}", json=body, headers=AUTH, timeout=60)
    assert answer.status_code == 200, answer.text
    assert model_header_problems(served_control, answer, WITH_CONTROL) == []


def test_an_audit_job_on_a_bundle_whose_name_is_outside_latin_1_reports_and_names_it(served):
    url, _ = served
    submitted = httpx.post(f"{url}/audit/job/submit", json={"rows": ROWS}, headers=AUTH, timeout=30)
    assert submitted.status_code == 200, submitted.text
    task_id = submitted.json()["task_id"]

    def ended() -> bool:
        state = httpx.get(f"{url}/audit/job/status", params={"task_id": task_id}, headers=AUTH, timeout=10)
        return state.json()["status"] in ("completed", "failed")

    wait_for(ended)
    report = httpx.get(f"{url}/audit/job/get", params={"task_id": task_id}, headers=AUTH, timeout=30)
    assert report.status_code == 200, report.text
    assert model_header_problems(url, report, OUTSIDE_LATIN_1) == []
    assert model_header_problems(url, submitted, OUTSIDE_LATIN_1) == []
