"""Defects a review of the HTTP contract found, each held against one real ``bentoml serve`` on loopback.

The contract is the OpenAPI document the server serves (``GET /docs.json``, ``openapi_document``) and
Rasa's NLU-server answer (``rasa``). Every answer checked here is validated against that document, read
as OpenAPI 3.0 reads it (``nullable`` beside a ``type``), with jsonschema: the status must be declared,
the media type JSON, the body of the declared schema.

- A button's payload whose entity JSON nests deeper than the answer's serialiser allows, or escapes a lone
  surrogate (which no UTF-8 answer can carry), held ``/model/parse`` for BentoML's 60 s request timeout and
  then answered a plain-text 500.
- The document said ``openapi: 3.0.2`` but carried JSON Schema 2020-12's ``{"type": "null"}`` in the
  request and response schemas BentoML generates, which OpenAPI 3.0 tools refuse ("Unknown type 'null'").
- ``TaskStatus.executed_at`` was documented as "When it ended; null while it runs"; BentoML sets it when the
  job is submitted, and neither timestamp is the server's local time (both are UTC, without an offset).
"""

from __future__ import annotations

import copy
import json
import time

import httpx
import jsonschema
import pytest

from intentvcs.cli.commands.serve import running
from tests.helpers.bundle import make_tiny_bundle
from tests.helpers.http import post

pytestmark = pytest.mark.slow

ENTITY_TYPES = ("city", "date")
SPELLING_TEXTS = ("play some jazz music", "will it rain tomorrow in london")
TYPO = "play jazz muisc tomorrow in londn"  # the spelling normaliser rewrites it: "normalised" is a string
OPENAPI_30_TYPES = {"string", "number", "integer", "boolean", "array", "object"}
QUICK_S = 15  # an answer that takes longer than this is the hang, not a slow machine


@pytest.fixture(scope="module")
def url(tmp_path_factory):
    bundle = make_tiny_bundle(tmp_path_factory.mktemp("contract"), spelling_texts=SPELLING_TEXTS,
                              entity_types=ENTITY_TYPES)
    with running(bundle) as base:
        yield base


@pytest.fixture(scope="module")
def spec(url):
    return httpx.get(f"{url}/docs.json", timeout=30).json()


# ------------------------------------------------------------------ reading the document as OpenAPI 3.0
def subschemas(schema: dict):
    """The schemas directly inside ``schema`` (its keywords that hold schemas, not data)."""
    for key in ("items", "additionalProperties", "not"):
        if isinstance(schema.get(key), dict):
            yield schema[key]
    for key in ("anyOf", "oneOf", "allOf"):
        yield from schema.get(key, [])
    yield from schema.get("properties", {}).values()


def every_schema(spec: dict):
    """Every schema of the document, with where it sits: components, bodies, answers and parameters."""
    roots = [(f"components/{name}", schema) for name, schema in spec["components"]["schemas"].items()]
    for path, operations in spec["paths"].items():
        for method, operation in operations.items():
            if not isinstance(operation, dict):
                continue
            bodies = [("requestBody", operation.get("requestBody", {}))]
            bodies += [(status, response) for status, response in operation.get("responses", {}).items()]
            for where, body in bodies:
                for media, content in body.get("content", {}).items():
                    if "schema" in content:
                        roots.append((f"{method} {path} {where} {media}", content["schema"]))
                for name, header in body.get("headers", {}).items():
                    roots.append((f"{method} {path} {where} header {name}", header["schema"]))
            for parameter in operation.get("parameters", []):
                roots.append((f"{method} {path} parameter {parameter['name']}", parameter["schema"]))
    stack = list(roots)
    while stack:
        where, schema = stack.pop()
        yield where, schema
        stack.extend((where, inner) for inner in subschemas(schema))


def json_schema(node):
    """An OpenAPI 3.0 schema as JSON Schema: ``nullable`` beside a ``type`` admits null."""
    if isinstance(node, list):
        return [json_schema(item) for item in node]
    if not isinstance(node, dict):
        return node
    out = {key: (value if key in ("enum", "default", "example") else json_schema(value))
           for key, value in node.items() if key != "nullable"}
    if key_map := node.get("properties"):
        out["properties"] = {name: json_schema(schema) for name, schema in key_map.items()}
    if node.get("nullable") is True:
        if isinstance(out.get("type"), str):
            out["type"] = [out["type"], "null"]
            if "enum" in out:
                out["enum"] = [*out["enum"], None]
        else:  # lenient: some tools read nullable without a type too
            out = {"anyOf": [out, {"type": "null"}]}
    return out


def assert_documented(spec: dict, method: str, path: str, response: httpx.Response) -> None:
    """``response`` is as the document says: its status declared, JSON, and of the declared schema."""
    operation = spec["paths"][path][method.lower()]
    declared = operation["responses"]
    assert str(response.status_code) in declared, (method, path, response.status_code, sorted(declared))
    content = declared[str(response.status_code)].get("content", {})
    assert "application/json" in content, (method, path, response.status_code)
    assert response.headers["content-type"].split(";")[0] == "application/json", response.headers
    schema = {**json_schema(content["application/json"]["schema"]),
              "components": json_schema(copy.deepcopy(spec["components"]))}
    errors = [f"{list(error.absolute_path)}: {error.message[:200]}"
              for error in jsonschema.Draft202012Validator(schema).iter_errors(response.json())]
    assert not errors, (method, path, response.status_code, errors)


def parse(url: str, text: str) -> httpx.Response:
    return httpx.post(f"{url}/model/parse", json={"text": text, "message_id": "sender-1", "token": None},
                      timeout=QUICK_S)


# ------------------------------------------------------------------ /model/parse: a payload's entities
DEEP = 300  # list levels: past pydantic's serialiser (about 255), within the default 1,000 characters


@pytest.mark.parametrize("text", [
    '/affirm{"city": ' + "[" * DEEP + "]" * DEEP + "}",
    '/affirm{"city": "\\ud800"}',  # an escaped lone surrogate: no UTF-8 answer can carry it
    '/affirm{"\\udc00": "paris"}',
], ids=["nested-300-deep", "lone-surrogate-value", "lone-surrogate-entity"])
def test_a_payload_whose_entities_no_answer_can_carry_is_answered_without_them(url, spec, text):
    """Such a payload held the request for BentoML's 60 s timeout, then answered 500 in plain text: the
    intent is still the one it names, and its entities are read as none, as entities that are no JSON
    object are (with a warning in the log)."""
    started = time.monotonic()
    answer = parse(url, text)
    assert time.monotonic() - started < QUICK_S
    assert answer.status_code == 200, answer.text
    assert_documented(spec, "POST", "/model/parse", answer)
    parsed = answer.json()
    assert parsed["intent"] == {"name": "affirm", "confidence": 1.0} and parsed["entities"] == []
    assert "@sha256:" in answer.headers["x-intentvcs-model"]


def test_a_payloads_entities_within_bounds_keep_their_values(url, spec):
    nested = {"room": [["kitchen", {"floor": [1, 2]}]], "lights": True}
    answer = parse(url, "/turn_off" + json.dumps(nested))
    assert answer.status_code == 200, answer.text
    assert_documented(spec, "POST", "/model/parse", answer)
    assert [(e["entity"], e["value"]) for e in answer.json()["entities"]] == \
        [("room", ["kitchen", {"floor": [1, 2]}]), ("lights", True)]


def test_payload_entities_that_python_cannot_read_as_json_are_none():
    """An integer past Python's 4,300-digit limit is a ValueError, not a JSONDecodeError: reachable with
    INTENTVCS_MAX_TEXT_CHARS raised, it failed the request as the cases above did."""
    from intentvcs.service.rasa import payload_answer
    from intentvcs.service.schemas import ParseResponse

    for text in ('/affirm{"n": ' + "9" * 5000 + "}", '/affirm{"city": ' + "[" * 5000 + "]" * 5000 + "}"):
        parsed = payload_answer(text)
        assert parsed["intent"]["name"] == "affirm" and parsed["entities"] == []
        ParseResponse(**parsed).model_dump_json()  # the answer serialises


# ------------------------------------------------------------------ the document is OpenAPI 3.0
def test_the_document_is_openapi_3_0_without_json_schema_2020_types(spec):
    """``openapi: 3.0.2``, yet BentoML's request and response schemas carried ``{"type": "null"}`` (11 fields:
    texts, text, message_id, token, lang, metadata, id, spans, meta, training_rows, normalised), which an
    OpenAPI 3.0 validator refuses ("Unknown type 'null'") and client generators misread."""
    assert spec["openapi"].startswith("3.0")
    wrong = []
    for where, schema in every_schema(spec):
        kind = schema.get("type")
        if kind is not None and kind not in OPENAPI_30_TYPES:
            wrong.append((where, "type", kind))
        for keyword in ("const", "prefixItems", "$defs", "$schema"):
            if keyword in schema:
                wrong.append((where, keyword))
        if schema.get("nullable") is True and "type" not in schema and "$ref" not in json.dumps(schema):
            wrong.append((where, "nullable without a type"))  # OpenAPI 3.0.3: nullable needs a type beside it
    assert not wrong, wrong


def test_nullable_fields_keep_their_limits_in_the_document(spec):
    schemas = spec["components"]["schemas"]
    texts = schemas["PredictRequest"]["properties"]["texts"]
    array = next(member for member in texts.get("anyOf", [texts]) if member.get("type") == "array")
    assert array["nullable"] is True and array["maxItems"] >= 1 and array["items"]["maxLength"] >= 1
    message_id = schemas["ParseRequest"]["properties"]["message_id"]
    string = next(member for member in message_id.get("anyOf", [message_id]) if member.get("type") == "string")
    assert string["nullable"] is True and string["maxLength"] == 200
    token = schemas["ParseRequest"]["properties"]["token"]
    request = json_schema(token)
    for value in (None, "secret", 12345, 1.5, True):  # what Rasa's client sends, read as 3.0 reads it
        jsonschema.validate(value, request)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"a": 1}, request)


# ------------------------------------------------------------------ every answer, as the document says
def test_real_answers_are_as_the_document_says(url, spec):
    """A sweep of answers, 200s and refusals, each validated against the document (the regression net of
    the fixes above: nulls where the document now says nullable)."""
    json_type = {"content-type": "application/json"}
    predicted = post(url, "/predict", {"texts": ["play some music", TYPO], "top_k": 2})
    assert_documented(spec, "POST", "/predict", predicted)
    normalised = [p["normalised"] for p in predicted.json()["predictions"]]
    assert normalised[0] is None and isinstance(normalised[1], str)  # both branches of a nullable field
    for text in ("will it rain tomorrow in london", "hello", "", " \u200b", "/affirm@0.5", '/a{"b": [1, 2]}'):
        assert_documented(spec, "POST", "/model/parse", parse(url, text))
    assert_documented(spec, "GET", "/status", httpx.get(f"{url}/status", timeout=30))
    rows = [{"text": f"play some jazz {tail}", "labels": ["PlayJazz"], "id": None, "meta": None}
            for tail in ("now", "loud", "please")]
    assert_documented(spec, "POST", "/audit", post(url, "/audit", {"rows": rows}))
    refusals = [
        ("/predict", b"", json_type, 400), ("/predict", b"[1]", json_type, 400),
        ("/predict", b'{"text": "a", "top_k": 1e400}', json_type, 400),
        ("/predict", b'{"text": "\xff"}', json_type, 400), ("/predict", b'{"text": null}', json_type, 400),
        ("/predict", b'{"text": "a"}', {"content-type": "text/plain"}, 415),
        ("/predict", b'{"text": "a"}', {"content-type": "application/json; charset=latin-1"}, 415),
        ("/model/parse", b'{"text": "a", "extra": 1}', json_type, 400),
        ("/model/parse", b'{"text": 5}', json_type, 400),
        ("/audit", b'{"rows": [{"text": "x", "labels": "A"}]}', json_type, 400),
        ("/audit", b"null", json_type, 400),
    ]
    for path, body, headers, status in refusals:
        answer = httpx.post(f"{url}{path}", content=body, headers=headers, timeout=30)
        assert answer.status_code == status, (path, body, answer.text)
        assert_documented(spec, "POST", path, answer)


# ------------------------------------------------------------------ the job status' timestamps
def test_the_job_status_timestamps_are_documented_as_bentoml_sets_them(url, spec):
    rows = [{"text": f"play some jazz {tail}", "labels": ["PlayJazz"]} for tail in ("now", "loud", "please")]
    task_id = post(url, "/audit/job/submit", {"rows": rows}).json()["task_id"]
    status = httpx.get(f"{url}/audit/job/status", params={"task_id": task_id}, timeout=30)
    assert_documented(spec, "GET", "/audit/job/status", status)
    # Set when the job is submitted, running or not: never null, and not when it ended.
    assert status.json()["executed_at"] == status.json()["created_at"]
    described = spec["components"]["schemas"]["TaskStatus"]["properties"]
    assert "When it ended" not in described["executed_at"]["description"]
    assert "null while it runs" not in described["executed_at"]["description"]
    assert "UTC" in described["created_at"]["description"] and "server's time" not in \
        described["created_at"]["description"]


# ------------------------------------------------------------------ refusals of the body's framing
def test_a_transfer_coding_refusal_is_documented_on_every_route_with_a_body(spec):
    """``media_type.JsonOnly`` answers a transfer coding other than chunked with 501: the routes that read a
    body say so, in the body refusals' words."""
    for path in ("/predict", "/model/parse", "/audit", "/audit/job/submit"):
        described = spec["paths"][path]["post"]["responses"]["501"]["description"]
        assert "transfer coding other than chunked" in described, path
