"""The HTTP service end to end: a real ``bentoml serve`` on a tiny bundle, on loopback.

Two servers per module: one with the default settings, one with tightened
limits and two workers (limits from the environment, metrics merged across
worker processes). Both are always stopped (``intentvcs.cli.commands.serve.running``).
"""

from __future__ import annotations

import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from intentvcs.cli.commands.serve import running
from intentvcs.service.settings import Limits
from tests.helpers.bundle import DEFAULT_LABELS, make_tiny_bundle
from tests.helpers.http import assert_400_names, post

LIMITS = Limits()
# The tiny bundle's "training texts", for its spelling normaliser.
SPELLING_TEXTS = ("play some jazz music", "book a table for tonight")


# The bundle's sample of its training rows, which /audit reads when given none.
REFERENCE_ROWS = [{"text": f"{phrase} {tail}", "labels": [label]}
                  for label, phrase in zip(DEFAULT_LABELS, ("play a song", "book a table", "will it rain",
                                                            "rate this novel", "find the film"))
                  for tail in ("now", "please", "tonight", "for me")]


@pytest.fixture(scope="module")
def bundle(tmp_path_factory):
    return make_tiny_bundle(tmp_path_factory.mktemp("service"), spelling_texts=SPELLING_TEXTS,
                            references=REFERENCE_ROWS)


@pytest.fixture(scope="module")
def url(bundle):
    with running(bundle) as base:
        yield base


@pytest.fixture(scope="module")
def tight_url(bundle):
    env = {"INTENTVCS_MAX_TEXTS": "3", "INTENTVCS_MAX_TEXT_CHARS": "20", "INTENTVCS_MAX_TOP_K": "4",
           "INTENTVCS_MAX_BODY_BYTES": "4096", "INTENTVCS_SPELLING": "0"}
    with running(bundle, workers=2, threads=1, extra_env=env) as base:
        yield base


def scrape(base: str) -> dict[str, list]:
    """``/metrics`` as {sample name: [(labels, value), ...]}."""
    samples: dict[str, list] = {}
    for family in text_string_to_metric_families(httpx.get(f"{base}/metrics", timeout=10).text):
        for sample in family.samples:
            samples.setdefault(sample.name, []).append((sample.labels, sample.value))
    return samples


def total(samples: dict[str, list], name: str, **labels) -> float:
    return sum(value for found, value in samples.get(name, []) if labels.items() <= found.items())


def test_probes(url):
    assert httpx.get(f"{url}/healthz").status_code == 200
    assert httpx.get(f"{url}/readyz").status_code == 200


def test_predict_matches_the_engine(url, bundle):
    from intentvcs.service.engine import Engine

    texts = ["play some music", "book a table for two tonight", "will it rain tomorrow",
             "play some music and then will it rain tomorrow"]
    response = post(url, "/predict", {"texts": texts, "top_k": 3})
    assert response.status_code == 200, response.text
    served = response.json()["predictions"]
    expected = Engine(bundle, provider="cpu").predict(texts, top_k=3)
    assert [p["text"] for p in served] == texts
    for got, want in zip(served, expected):
        assert [i["intent"] for i in got["intents"]] == [i["intent"] for i in want["intents"]]
        assert [i["confidence"] for i in got["intents"]] == pytest.approx([i["confidence"] for i in want["intents"]])
        assert got["accepted"] == want["accepted"]
        assert got["parts"] == want["parts"]
        assert got["out_of_scope"] == want["out_of_scope"]
        assert got["oos"]["rule"] == want["oos"]["rule"] == "threshold"


def test_single_text_and_default_top_k(url):
    one = post(url, "/predict", {"text": "play some music"}).json()["predictions"]
    many = post(url, "/predict", {"texts": ["play some music"]}).json()["predictions"]
    assert one == many
    assert len(one[0]["intents"]) == min(LIMITS.default_top_k, len(DEFAULT_LABELS))
    ranked = [i["confidence"] for i in one[0]["intents"]]
    assert ranked == sorted(ranked, reverse=True)


@pytest.mark.parametrize("text", [
    "play music 🎵🎶", "ok 👍🏽 family 👨‍👩‍👧", "清除我的闹钟", "مرحبا play اغنية", "Ünïcödé ñ café", "a\u0000b", "x",
])
def test_unicode_emoji_and_mixed_scripts(url, text):
    response = post(url, "/predict", {"text": text})
    assert response.status_code == 200, response.text
    assert response.json()["predictions"][0]["text"] == text


TOO_LONG = "a" * (LIMITS.max_text_chars + 1)


@pytest.mark.parametrize("body, field, limit", [
    ({"text": ""}, "text", "at least 1 character"),
    ({"text": "   \n\t"}, "text", "non-whitespace"),
    # Nothing visible: a zero-width space, a BOM with a lone combining accent, a NUL and a soft hyphen.
    ({"text": "\u200b"}, "text", "non-whitespace"),
    ({"texts": ["ok", "\ufeff\u0301", "\u0000\u00ad"]}, "texts", "non-whitespace"),
    ({"texts": ["ok", ""]}, "texts", "at least 1 character"),
    ({"text": TOO_LONG}, "text", f"at most {LIMITS.max_text_chars} characters"),
    ({"texts": ["ok", TOO_LONG]}, "texts", f"at most {LIMITS.max_text_chars} characters"),
    ({"texts": ["hi"] * (LIMITS.max_texts + 1)}, "texts", f"at most {LIMITS.max_texts} items"),
    ({"texts": []}, "texts", "at least 1 item"),
    ({"text": 5}, "text", "valid string"),
    ({"texts": "play music"}, "texts", "valid array"),
    ({"texts": [1, 2]}, "texts", "valid string"),
    ({"text": "hi", "top_k": "3"}, "top_k", "valid integer"),
    ({"text": "hi", "top_k": True}, "top_k", "valid integer"),
    ({"text": "hi", "top_k": 2.5}, "top_k", "valid integer"),
    ({"text": "hi", "top_k": 0}, "top_k", "greater than or equal to 1"),
    ({"text": "hi", "top_k": LIMITS.max_top_k + 1}, "top_k", f"less than or equal to {LIMITS.max_top_k}"),
    ({"text": "hi", "texts": ["hi"]}, "", "exactly one of 'text'"),
    ({}, "", "exactly one of 'text'"),
    ({"txt": "hi"}, "txt", "Extra inputs"),
    ("{not json", "", "Invalid JSON"),
    ("[1, 2]", "", "should be an object"),
])
def test_bad_requests_get_a_4xx_naming_field_and_limit(url, body, field, limit):
    assert_400_names(post(url, "/predict", body), field, limit)


def test_an_intent_only_bundle_answers_no_entities(url, bundle):
    """The tiny bundle has no entity head: every answer's entities are [], and /status says so."""
    assert post(url, "/predict", {"text": "play some music"}).json()["predictions"][0]["entities"] == []
    parsed = post(url, "/model/parse", {"text": "play some music"})
    assert parsed.status_code == 200, parsed.text
    assert parsed.json()["entities"] == [] and parsed.json()["intent"]["name"]
    status = httpx.get(f"{url}/status", timeout=10).json()
    assert status["entity_types"] == [] and status["labels"] == list(DEFAULT_LABELS)


def test_openapi_types_the_audit_report_from_its_schema(url):
    """/audit's 200 answer is published with the report's own schema (report.schema.json), in
    OpenAPI 3.0's dialect: references inlined, nullable instead of a null type."""
    import json

    from intentvcs.service.audit import SCHEMA_PATH

    spec = httpx.get(f"{url}/docs.json", timeout=10).json()
    schema = spec["paths"]["/audit"]["post"]["responses"]["200"]["content"]["application/json"]["schema"]
    if "$ref" in schema:
        schema = spec["components"]["schemas"][schema["$ref"].rsplit("/", 1)[-1]]
    source = json.loads(SCHEMA_PATH.read_text())
    assert schema["required"] == source["required"]
    finding = schema["properties"]["findings"]["items"]
    assert finding["properties"]["relation"]["enum"] == source["$defs"]["relation"]["enum"]
    assert finding["properties"]["statistic"]["nullable"] is True
    text = json.dumps(schema)
    assert "$ref" not in text and '"null"' not in text and '"const"' not in text


def test_audit(url):
    rows = [{"text": "play some jazz", "labels": ["PlayJazz"]}, {"text": "play jazz music", "labels": ["PlayJazz"]},
            {"text": "book a table", "labels": ["BookRestaurant"], "meta": {"source": "test"}}]
    response = post(url, "/audit", {"rows": rows})
    assert response.status_code == 200, response.text
    report = response.json()
    assert report["format"] == "intentvcs-audit"
    assert report["summary"]["new_intents"] == ["PlayJazz"]
    # No training rows sent: the existing intents' rows come from the bundle's own sample.
    jazz = [{"text": f"play some jazz {tail}", "labels": ["PlayJazz"]} for tail in ("now", "loud", "please", "again")]
    report = post(url, "/audit", {"rows": jazz}).json()
    sources = {pair["reference"] for f in report["findings"] for pair in f["containment"]}
    # (None: too few of the new rows are accepted as that intent to estimate the reverse.)
    assert "model" in sources and sources <= {"model", None} and report["summary"]["missing_references"] == []
    sent = post(url, "/audit", {"rows": jazz, "training_rows": REFERENCE_ROWS}).json()
    sources = {pair["reference"] for f in sent["findings"] for pair in f["containment"]}
    assert "training" in sources and sources <= {"training", None}
    refused = post(url, "/audit", {"rows": [{"text": "hi", "labels": ["a", "a"]}]})
    assert refused.status_code == 400 and "rows[0]" in refused.json()["error"]
    assert post(url, "/audit", {"rows": []}).status_code == 400


def test_metrics(url):
    before = scrape(url)
    texts = ["play some music", "book a table", "rate this book"]
    assert post(url, "/predict", {"texts": texts}).status_code == 200
    assert post(url, "/predict", {"text": ""}).status_code == 400
    after = scrape(url)

    def delta(name, **labels):
        return total(after, name, **labels) - total(before, name, **labels)

    assert delta("intentvcs_input_length_characters_count") == len(texts)
    assert delta("intentvcs_confidence_count") == len(texts)
    assert delta("intentvcs_batch_size_sum") == len(texts)
    assert delta("intentvcs_request_errors_total", reason="empty_text") == 1
    intents = {labels["intent"] for labels, _ in after["intentvcs_predictions_total"]}
    assert intents == {*DEFAULT_LABELS, "out_of_scope"}  # bounded: only the bundle's labels
    # Every utterance is either out of scope or accepts at least one intent.
    assert delta("intentvcs_predictions_total") >= len(texts)
    [(info, value)] = after["intentvcs_model_info"]
    assert value == 1 and info["backbone"] == "tiny-random-bert" and info["provider"] == "CPUExecutionProvider"
    assert delta("bentoml_service_request_duration_seconds_count", endpoint="/predict") == 2


def test_limits_from_env_and_metrics_across_workers(tight_url):
    assert post(tight_url, "/predict", {"texts": ["a", "b", "c"]}).status_code == 200
    too_many = post(tight_url, "/predict", {"texts": ["a", "b", "c", "d"]})
    assert too_many.status_code == 400 and "at most 3 items" in too_many.json()["detail"][0]["msg"]
    assert "at most 20 characters" in post(tight_url, "/predict", {"text": "x" * 21}).json()["detail"][0]["msg"]
    assert post(tight_url, "/predict", {"text": "hi", "top_k": 5}).status_code == 400
    schema = httpx.get(f"{tight_url}/docs.json").json()["components"]["schemas"]["PredictRequest"]
    assert schema["properties"]["texts"]["maxItems"] == 3

    before = scrape(tight_url)
    requests = 40
    with ThreadPoolExecutor(8) as pool:  # a new connection per request, so both workers get traffic
        codes = list(pool.map(lambda i: post(tight_url, "/predict", {"text": f"play song {i}"}).status_code,
                              range(requests)))
    assert codes == [200] * requests
    after = scrape(tight_url)
    served = total(after, "intentvcs_confidence_count") - total(before, "intentvcs_confidence_count")
    assert served == requests  # counters from both worker processes are merged, none lost or doubled
    assert len(after["intentvcs_model_info"]) == 1  # one series, not one per worker
    workers = {labels["pid"] for labels, _ in after["bentoml_service_last_request_timestamp_seconds"]}
    assert len(workers) == 2, "expected both workers to have served requests"


def test_spelling_normaliser_on_by_default_and_off_by_setting(url, tight_url):
    typed, meant = "play jazz muisc", "play jazz music"

    def answer(base: str, text: str) -> dict:
        response = post(base, "/predict", {"text": text, "top_k": 4})
        assert response.status_code == 200
        [answer] = response.json()["predictions"]
        assert answer["text"] == text  # the answer names what was sent; "normalised", what the graph read
        return answer

    corrected_before = total(scrape(url), "intentvcs_spelling_corrected_total")
    fixed, clean = answer(url, typed), answer(url, meant)
    assert fixed["intents"] == clean["intents"]
    assert (fixed["normalised"], clean["normalised"]) == (meant, None)
    # Counted by this server although tight_url's server started after it (its own BentoML home).
    assert total(scrape(url), "intentvcs_spelling_corrected_total") == corrected_before + 1
    # INTENTVCS_SPELLING=0: the graph reads the typo as typed.
    raw = answer(tight_url, typed)
    assert raw["normalised"] is None and raw["intents"] != answer(tight_url, meant)["intents"]


def test_oversized_bodies_are_refused_before_parsing(tight_url):
    """413 naming the limit and its setting, whether or not the client declares the length."""
    big = b'{"texts": ["' + b"x" * 5000 + b'"]}'
    declared = post(tight_url, "/predict", big)
    assert declared.status_code == 413
    assert declared.json()["error"] == ("request body of 5015 bytes exceeds the limit of 4096 bytes "
                                        "(setting INTENTVCS_MAX_BODY_BYTES)")

    def chunks():  # no Content-Length: the body arrives chunked and is counted as it comes
        yield big[:3000]
        yield big[3000:]

    streamed = httpx.post(f"{tight_url}/predict", content=chunks(), headers={"content-type": "application/json"},
                          timeout=30)
    assert streamed.status_code == 413 and "of at least" in streamed.json()["error"]
    # A body within the limit still reaches the schema, which names its own limit.
    assert post(tight_url, "/predict", {"text": "x" * 21}).status_code == 400
    assert total(scrape(tight_url), "intentvcs_request_errors_total", reason="body_too_large") >= 2


def test_only_json_bodies_reach_the_api(url):
    """A web page can POST text/plain, form or multipart (or no type) without a CORS preflight: all 415."""
    before = total(scrape(url), "intentvcs_request_errors_total", reason="unsupported_media_type")
    refused = [
        httpx.post(f"{url}/predict", content='{"text": "hi"}', headers={"content-type": "text/plain"}, timeout=30),
        httpx.post(f"{url}/predict", data={"text": "hi"}, timeout=30),
        httpx.post(f"{url}/audit", files={"rows": ("rows.json", b"[]")}, timeout=30),
        httpx.post(f"{url}/audit", content=b'{"rows": []}', timeout=30),  # no Content-Type
    ]
    for response in refused:
        assert response.status_code == 415, response.text
        assert response.json()["error"].endswith("send the body as application/json in UTF-8")
    assert total(scrape(url), "intentvcs_request_errors_total", reason="unsupported_media_type") == before + 4


def test_another_charset_or_method_gets_the_json_error_contract(url):
    """JSON is UTF-8 (RFC 8259): a body declared latin-1 would be read as UTF-8 anyway. A GET is a 405 with
    the same JSON body as every other refusal, not the server's plain text."""
    before = total(scrape(url), "intentvcs_request_errors_total", reason="method_not_allowed")
    latin = httpx.post(f"{url}/predict", content='{"text": "caf\u00e9"}'.encode("latin-1"), timeout=30,
                       headers={"content-type": "application/json; charset=latin-1"})
    assert latin.status_code == 415 and "charset 'latin-1'" in latin.json()["error"]
    for path in ("/predict", "/model/parse", "/audit", "/audit/job/submit"):
        got = httpx.get(f"{url}{path}", timeout=30)
        assert got.status_code == 405 and got.headers["allow"] == "POST", path
        assert got.json() == {"error": f"{path} takes POST with a JSON body, not GET"}
    assert total(scrape(url), "intentvcs_request_errors_total", reason="method_not_allowed") == before + 4


def test_service_imports_no_torch():
    # The serving path must stay importable with torch, transformers and optimum absent.
    code = ("import sys; [sys.modules.__setitem__(m, None) for m in ('torch', 'transformers', 'optimum')]; "
            "import intentvcs.service.app")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)


def test_serve_command_refuses_a_missing_bundle(tmp_path):
    result = subprocess.run([sys.executable, "-m", "intentvcs.cli.main", "serve", "--bundle", str(tmp_path / "nope")],
                            check=False, capture_output=True, text=True, timeout=60)
    assert result.returncode == 2
    assert f"{tmp_path / 'nope'}: no such folder" in result.stderr
    (tmp_path / "empty").mkdir()
    result = subprocess.run([sys.executable, "-m", "intentvcs.cli.main", "serve", "--bundle", str(tmp_path / "empty")],
                            check=False, capture_output=True, text=True, timeout=60)
    assert result.returncode == 2
    assert "is not a bundle" in result.stderr


@pytest.mark.parametrize("flags, provider", [([], "cpu"), (["--provider", "auto"], "auto")])
def test_serve_keeps_the_environments_provider_unless_told(bundle, monkeypatch, flags, provider):
    """INTENTVCS_PROVIDER=cpu (or cuda: CUDA or refuse to start) is not turned into auto by a default."""
    from intentvcs.cli.commands import serve
    from intentvcs.cli.main import main

    monkeypatch.setenv("INTENTVCS_PROVIDER", "cpu")
    calls = []
    monkeypatch.setattr(serve.os, "execve", lambda path, argv, env: calls.append(env) or sys.exit(0))
    with pytest.raises(SystemExit):
        main(["serve", "--bundle", str(bundle), "--port", "3199", *flags])
    assert calls[0]["INTENTVCS_PROVIDER"] == provider


@pytest.mark.parametrize("flags, spelling_env, segment_env", [([], None, None), (["--no-spelling"], "0", None),
                                                             (["--no-segment"], None, "0")])
def test_serve_command_hands_bentoml_the_settings(bundle, monkeypatch, flags, spelling_env, segment_env):
    """What ``intentvcs serve`` (and the demo's last step, ``serve_bundle``) execs: bentoml serve with the env."""
    from intentvcs.cli.main import main
    from intentvcs.cli.commands import serve

    monkeypatch.delenv("INTENTVCS_SPELLING", raising=False)
    monkeypatch.delenv("INTENTVCS_SEGMENT", raising=False)
    calls = []

    def fake_execve(path, argv, env):
        calls.append((argv, env))
        raise SystemExit(0)  # execve never returns

    monkeypatch.setattr(serve.os, "execve", fake_execve)
    with pytest.raises(SystemExit):
        main(["serve", "--bundle", str(bundle), "--port", "3199", *flags])
    with pytest.raises(SystemExit):
        serve.serve_bundle(bundle, 3199, spelling="--no-spelling" not in flags, segment="--no-segment" not in flags)
    assert calls[0] == calls[1]
    argv, env = calls[0]
    assert argv[-4:] == ["--host", "127.0.0.1", "--port", "3199"] and "bentoml" in argv
    assert env["INTENTVCS_BUNDLE"] == str(bundle.resolve()) and env.get("INTENTVCS_SPELLING") == spelling_env
    assert env.get("INTENTVCS_SEGMENT") == segment_env
    # Each port gets its own BentoML home, so servers side by side keep their own metrics.
    assert env["BENTOML_HOME"] == str(serve.server_home(3199)) != str(serve.server_home(3200))


def test_a_full_batch_queue_answers_503_and_counts_it(bundle):
    """Queued utterances still waiting INTENTVCS_MAX_LATENCY_MS after they arrived are refused with 503, never a 500."""
    with running(bundle, extra_env={"INTENTVCS_MAX_LATENCY_MS": "1", "INTENTVCS_SPELLING": "0"}) as base:
        with ThreadPoolExecutor(24) as pool:
            answers = list(pool.map(lambda i: post(base, "/predict", {"texts": [f"play song {i}"] * 8}), range(48)))
        statuses = [answer.status_code for answer in answers]
        refused = [answer for answer in answers if answer.status_code == 503]
        assert set(statuses) <= {200, 503} and refused, statuses
        assert all(answer.json() == {"error": "the service is overloaded; retry later"} for answer in refused)
        # A request is refused, counted and logged once, however many of its utterances were refused.
        assert total(scrape(base), "intentvcs_request_errors_total", reason="overloaded") == len(refused)
