"""Request and response schemas of the HTTP API: what a client may send (and why not), and what it gets.

The schemas are pydantic models, so one declaration gives three things: the
validation itself, the OpenAPI spec BentoML publishes (limits included, as
``maxLength`` / ``maxItems`` / ``maximum``), and 400 answers whose ``detail``
names the field (``loc``, e.g. ``["texts", 3]``) and the limit (``msg``, e.g.
"String should have at most 1000 characters"). Validation is strict: a number
where a string belongs, or ``"5"`` / ``true`` for ``top_k``, is a wrong type,
not something to coerce. Every rejection is counted in
``intentvcs_request_errors_total{reason}`` with a reason from a fixed set,
and logged as one line without the input (``intentvcs.service.rejections``).
"""

from __future__ import annotations

import codecs
import json
from typing import Annotated, Any

import bentoml
from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    RootModel,
    StringConstraints,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError

from intentvcs.core.dataio import readable
from intentvcs.service import rejections
from intentvcs.service.settings import ENV_PREFIX, Limits

LIMITS = Limits.from_env()
ID_MAX_CHARS = 200  # an audit row's id, a /model/parse message_id
LANG_MAX_CHARS = 35  # a /model/parse lang: a BCP 47 tag, with room to spare
# Failed checks a 400 lists at most (its ``error`` still counts them all). A body within the size limit can
# fail millions of checks (one per unknown key): all listed, a 10 MB body took 14 s of the event loop, 1.4 GB
# and a 141 MB answer; a client fixing its request reads the first few.
MAX_REPORTED_ERRORS = 20


def _not_blank(text: str) -> str:
    # Refusing a text with nothing to read is clearer than answering with the model's guess for an empty string.
    if not readable(text):
        raise PydanticCustomError("empty_text", "String should contain at least one non-whitespace character "
                                                "(a letter, digit, punctuation mark or symbol)")
    return text


Text = Annotated[
    str,
    StringConstraints(min_length=1, max_length=LIMITS.max_text_chars),
    AfterValidator(_not_blank),
    Field(description=f"An utterance, 1 to {LIMITS.max_text_chars} characters (Unicode code points)."),
]
Label = Annotated[str, StringConstraints(min_length=1, max_length=LIMITS.max_label_chars), AfterValidator(_not_blank)]


class CountedRequest(bentoml.IODescriptor):
    """Base of the request bodies: strict, closed, and counted when rejected."""

    model_config = ConfigDict(strict=True, extra="forbid")

    @classmethod
    def model_validate_json(cls, json_data: str | bytes | bytearray, **kwargs: Any) -> CountedRequest:
        # The one reading of a request body: BentoML's JSON serde, direct_routes and job_body_problem all call
        # this. An empty body is {} (as BentoML reads it; the /audit/job/submit check alone called it malformed
        # JSON), and a leading UTF-8 byte order mark is skipped, as RFC 8259 lets a parser do and Python's
        # json.loads does: refused, its answer named "line 1 column 1", where the client sees a "{".
        if isinstance(json_data, str):
            json_data = json_data.removeprefix("\ufeff")
        else:
            json_data = bytes(json_data).removeprefix(codecs.BOM_UTF8)
        return super().model_validate_json(json_data or b"{}", **kwargs)

    @classmethod
    async def from_http_request(cls, request: Any, serde: Any) -> bentoml.IODescriptor:
        # The one place every rejected body passes through, malformed JSON
        # included (it fails before any field validator could see it).
        # BentoML answers the re-raised error with 400 and a body naming the
        # field and the limit, and logs it with its traceback, which
        # rejections.QuietRequestErrors drops: the line logged here replaces it.
        try:
            return await super().from_http_request(request, serde)
        except ValidationError as exc:
            errors = first_errors(exc)
            rejections.refused(request.method, request.url.path, 400, rejection_reason(exc, errors))
            if exc.error_count() <= MAX_REPORTED_ERRORS:
                raise
            # BentoML renders every error of the one it is given, on the event loop (see MAX_REPORTED_ERRORS):
            # it is given the first few. Their types and messages are kept; pydantic counts these few, so the
            # title carries the count of all ("20 validation errors for AuditRequest (of 500 failed checks...").
            title = f"{exc.title} (of {exc.error_count()} failed checks, the first {len(errors)} listed)"
            raise ValidationError.from_exception_data(title, [
                {"type": PydanticCustomError(error["type"], error["msg"]), "loc": tuple(error["loc"]), "input": None}
                for error in errors]) from None


class PredictRequest(CountedRequest):
    """Classify one utterance (``text``) or several (``texts``), not both.

    After validation ``texts`` always holds the utterances (``text`` folded in).
    """

    texts: list[Text] | None = Field(
        None, min_length=1, max_length=LIMITS.max_texts,
        description=f"Utterances to classify, 1 to {LIMITS.max_texts}.",
    )
    text: Text | None = Field(None, description="A single utterance; shorthand for texts=[text].")
    top_k: int = Field(
        LIMITS.default_top_k, ge=1, le=LIMITS.max_top_k,
        description="How many ranked intents to return per utterance; "
        "a value above the label count returns every label.",
    )

    @model_validator(mode="after")
    def _exactly_one_input(self) -> PredictRequest:
        if (self.texts is None) == (self.text is None):
            raise PydanticCustomError(
                "text_or_texts", "Give exactly one of 'text' (a string) or 'texts' (a list of strings)"
            )
        if self.texts is None:
            self.texts = [self.text]
        return self


class ParseRequest(CountedRequest):
    """Rasa's NLU-server request (``POST /model/parse``): one utterance, and the fields Rasa's client adds.

    Rasa's ``RasaNLUHttpInterpreter`` posts ``{"text", "message_id", "token"}``,
    the last two often null; refusing them as unknown fields would refuse Rasa.
    Its server also takes ``lang`` and ``metadata`` (which its parse ignores):
    accepted too, and not used. Other keys are still refused, naming them, as
    every request body of this API refuses them (a typo is not silently ignored).
    """

    # Not ``Text``: Rasa strips a message to "" when a user sends only spaces; refused, it would reach the
    # assistant as an empty intent. Such a text is answered with the fallback intent (``intentvcs.service.rasa``).
    text: Annotated[str, StringConstraints(max_length=LIMITS.max_text_chars)] = Field(
        description=f"The message, at most {LIMITS.max_text_chars} characters (Unicode code points); one with "
        "nothing to read, \"\" included, is answered with the fallback intent, and a button's payload "
        "(\"/intent\", \"/intent@0.8\", '/intent{\"entity\": \"value\"}') with the intent it names.")
    message_id: str | None = Field(
        None, max_length=ID_MAX_CHARS, description="Rasa's conversation (sender) id; accepted, not used.")
    # Any JSON scalar: Rasa's client sends endpoints.yml's token as YAML read it (token: 12345 is a number).
    token: str | int | float | bool | None = Field(
        None, description="Rasa's NLU endpoint token, which its client sends in the body; accepted, not used: "
        f"with {ENV_PREFIX}API_TOKEN set, the token goes in the Authorization header (Bearer).")
    lang: str | None = Field(
        None, max_length=LANG_MAX_CHARS, description="The message's language, as Rasa's server takes it; accepted, "
        "not used (the bundle's model decides).")
    metadata: dict[str, Any] | None = Field(
        None, description="Rasa's message metadata; accepted, not used (bounded by the request body limit only).")


class AuditSpan(BaseModel):
    """An entity or slot: characters ``[start, end)`` of the row's text (code points), and its type."""

    model_config = ConfigDict(strict=True, extra="forbid")

    start: int = Field(ge=0)
    end: int = Field(ge=1)
    label: Label = Field(description="The entity type, e.g. 'artist'.")


class AuditRow(BaseModel):
    """One labelled utterance in the canonical data format (``intentvcs.core.dataio``), sent as read from a file.

    Its keys are the format's; any other key is refused, naming it, as the
    data files refuse it, so a typo (``"label"``) is not silently ignored.
    """

    model_config = ConfigDict(strict=True, extra="forbid")

    text: Text
    labels: list[Label] = Field(
        max_length=LIMITS.max_labels_per_row, description="Gold labels; an empty list means out of scope.",
    )
    id: str | None = Field(None, max_length=ID_MAX_CHARS)
    spans: list[AuditSpan] | None = Field(
        None, max_length=LIMITS.max_spans_per_row,
        description=f"Entity annotations, at most {LIMITS.max_spans_per_row}, each inside the text "
        "(0 <= start < end <= its length). The audit compares which entity types new and existing "
        "intents carry (a new intent that keeps only an existing intent's utterances with, say, an "
        "artist is a subset of it, not a duplicate).",
    )
    meta: dict[str, Any] | None = Field(
        None, description="Free-form; accepted so that rows can be sent as read, not used by the audit "
        "(bounded by the request body limit only).",
    )

    @field_validator("spans")
    @classmethod
    def _spans_inside_text(cls, spans: list[AuditSpan] | None, info: ValidationInfo) -> list[AuditSpan] | None:
        text = info.data.get("text")
        if spans is None or text is None:  # a text already refused has no length to check against
            return spans
        for i, span in enumerate(spans):
            if not span.start < span.end <= len(text):
                raise PydanticCustomError(
                    "span_outside_text",
                    "Span {index} [{start}, {end}) should satisfy 0 <= start < end <= {length} (the text's length)",
                    {"index": i, "start": span.start, "end": span.end, "length": len(text)},
                )
        return spans


TRAINING_ROWS_DESCRIPTION = ("Optional sample of the old training data (preferred evidence for existing intents); "
                             "without it the audit reads the bundle's own sample of its training rows "
                             "(references.jsonl), when the bundle carries one.")


class AuditRequest(CountedRequest):
    """An upgrade batch to audit with the served model, and optionally a sample of the old data."""

    rows: list[AuditRow] = Field(
        min_length=1, max_length=LIMITS.max_audit_rows,
        description=f"The batch, 1 to {LIMITS.max_audit_rows} rows; labels the model does not know are the new "
        f"intents under audit, at most {LIMITS.max_audit_new_intents} per request ({ENV_PREFIX}MAX_AUDIT_NEW_INTENTS;"
        f" more: 413). An audit that has not finished {LIMITS.audit_timeout_s} s after its request was read stops "
        f"and answers 504 ({ENV_PREFIX}AUDIT_TIMEOUT_S); a worker runs audits one at a time and holds at most "
        f"{LIMITS.max_audits_in_flight} ({ENV_PREFIX}MAX_AUDITS_IN_FLIGHT; more: 429 with Retry-After). "
        "Larger batches: `intentvcs audit`, which has none of these limits.",
    )
    training_rows: list[AuditRow] | None = Field(
        None, min_length=1, max_length=LIMITS.max_audit_rows,
        description=TRAINING_ROWS_DESCRIPTION,
    )



class AuditJobRequest(CountedRequest):
    """An upgrade batch of any size to audit as a background job (``/audit/job``)."""

    rows: list[AuditRow] = Field(
        min_length=1, max_length=LIMITS.max_audit_job_rows,
        description=f"The batch, 1 to {LIMITS.max_audit_job_rows} rows ({ENV_PREFIX}MAX_AUDIT_JOB_ROWS); labels "
        "the model does not know are the new intents under audit. The job runs in the background: "
        "/audit/job/submit answers a task_id at once, /audit/job/status and /audit/job/progress say where it "
        f"stands, /audit/job/get gives the report. A job stops and fails after {LIMITS.audit_job_timeout_s} s "
        f"({ENV_PREFIX}AUDIT_JOB_TIMEOUT_S); a worker runs one job at a time and holds at most "
        f"{LIMITS.max_audit_jobs} unfinished ({ENV_PREFIX}MAX_AUDIT_JOBS; more: 429 with Retry-After).",
    )
    training_rows: list[AuditRow] | None = Field(
        None, min_length=1, max_length=LIMITS.max_audit_job_rows,
        description=TRAINING_ROWS_DESCRIPTION,
    )


# Rejection reasons form a closed set so that the error counter's label stays
# bounded whatever a client sends. Anything unforeseen is "invalid_request".
_REASON_BY_TYPE = {
    "json_invalid": "malformed_json",
    "model_type": "malformed_json",  # valid JSON, but not an object
    "model_attributes_type": "malformed_json",
    "extra_forbidden": "unknown_field",
    "missing": "missing_field",
    "text_or_texts": "missing_field",
    "span_outside_text": "invalid_span",
}
_REASON_BY_FIELD = {  # emptiness, length and range limits, which depend on the field
    ("greater_than_equal", "top_k"): "top_k_out_of_range",
    ("less_than_equal", "top_k"): "top_k_out_of_range",
    ("greater_than_equal", "start"): "invalid_span",
    ("greater_than_equal", "end"): "invalid_span",
    ("string_too_short", "labels"): "empty_label",
    ("empty_text", "labels"): "empty_label",
    ("string_too_short", "label"): "empty_label",  # a span's entity type
    ("empty_text", "label"): "empty_label",
    ("string_too_long", "label"): "label_too_long",
    ("string_too_short", None): "empty_text",
    ("empty_text", None): "empty_text",
    ("string_too_long", "labels"): "label_too_long",
    ("string_too_long", "id"): "id_too_long",
    ("string_too_long", "message_id"): "id_too_long",
    ("string_too_long", "lang"): "invalid_request",
    ("string_too_long", None): "text_too_long",
    ("too_long", "texts"): "too_many_texts",
    ("too_long", "rows"): "too_many_rows",
    ("too_long", "labels"): "too_many_labels",
    ("too_long", "training_rows"): "too_many_rows",
    ("too_long", "spans"): "too_many_spans",
    ("too_short", None): "empty_list",
}
# Refusals decided outside the schemas: body_limit and direct_routes (client_gone: a body abandoned mid-way, an
# answer whose client left), media_type, auth, the
# new-intent cap of /audit (it needs the bundle's labels), and the job routes
# of audit_jobs (the synchronous form, a cancel by another method, of an
# unknown job or of one that has ended).
OTHER_REJECTIONS = ("wrong_type", "invalid_rows", "invalid_request", "body_too_large", "body_timeout",
                    "client_gone", "unsupported_media_type",
                    "unauthorized", "too_many_new_intents", "not_found", "method_not_allowed", "job_ended")
REJECTION_REASONS = sorted({*_REASON_BY_TYPE.values(), *_REASON_BY_FIELD.values(), *OTHER_REJECTIONS})


def first_errors(exc: ValidationError, limit: int = MAX_REPORTED_ERRORS) -> list[dict[str, Any]]:
    """The first ``limit`` errors of ``exc`` as ``exc.errors(include_context=False, include_input=False)``
    gives them (``loc`` a list), without making Python objects of the others.

    ``errors()`` builds every error (about 3 us each, 3.5 s for a million); ``json()`` writes them all in
    Rust (0.15 s for a million), of which the first few are read back."""
    if exc.error_count() <= limit:
        return exc.errors(include_context=False, include_input=False)
    text, decoder, errors, index = exc.json(include_context=False, include_input=False), json.JSONDecoder(), [], 1
    while len(errors) < limit:
        error, index = decoder.raw_decode(text, index)
        errors.append(error)
        index += 1  # the comma between two errors (json() writes no white space)
    return errors


def rejection_reason(exc: ValidationError, errors: list[dict[str, Any]] | None = None) -> str:
    """Map a validation error to one of ``REJECTION_REASONS`` (its first error decides; ``errors``: its
    ``first_errors`` when the caller has them already)."""
    error = (errors or first_errors(exc, 1))[0]
    kind = error["type"]
    if kind in _REASON_BY_TYPE:
        return _REASON_BY_TYPE[kind]
    field = next((part for part in reversed(error["loc"]) if isinstance(part, str)), None)
    for key in ((kind, field), (kind, None)):
        if key in _REASON_BY_FIELD:
            return _REASON_BY_FIELD[key]
    if kind.endswith(("_type", "_parsing")):
        return "wrong_type"
    return "invalid_request"


def validation_error_body(exc: ValidationError, errors: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """The 400 body of a refused request, as BentoML words it: ``error`` and ``detail``, one entry per
    failed check naming its field (``loc``), without the input it was given (a user's text); the first
    ``MAX_REPORTED_ERRORS`` checks when more failed, which ``error`` says."""
    count = exc.error_count()
    listed = "" if count <= MAX_REPORTED_ERRORS else f"; detail lists the first {MAX_REPORTED_ERRORS}"
    return {"error": f"{count} validation error{'' if count == 1 else 's'} for {exc.title}{listed}",
            "detail": first_errors(exc) if errors is None else errors}


def job_body_problem(body: bytes) -> tuple[str, dict[str, Any]] | None:
    """What is wrong with an ``/audit/job`` submit body, as ``(reason, 400 body)``; None when it is valid.

    The schema's checks (answered as ``/audit`` answers them), then the data format's
    (``validate_rows``: what ``/audit`` answers with 400 ``invalid_rows`` once the audit has started)."""
    from intentvcs.service.audit import AuditInputError, validate_rows

    try:
        request = AuditJobRequest.model_validate_json(body)
    except ValidationError as exc:
        errors = first_errors(exc)  # once: for a body failing many checks, each call writes them all
        return rejection_reason(exc, errors), validation_error_body(exc, errors)
    try:
        for name in ("rows", "training_rows"):
            rows = getattr(request, name)
            if rows is not None:
                validate_rows([row.model_dump(exclude_none=True) for row in rows], name)
    except AuditInputError as exc:
        return "invalid_rows", {"error": str(exc)}
    return None


# ------------------------------------------------------------------ responses
def openapi_schema(node: Any, defs: dict[str, Any]) -> Any:
    """A standalone JSON Schema 2020-12 ``node`` as OpenAPI 3.0 takes it: its ``$ref``s to ``defs`` inlined,
    then ``openapi_30``."""
    return openapi_30(_inlined(node, defs))


def _inlined(node: Any, defs: dict[str, Any]) -> Any:
    """``node`` with each ``$ref`` to ``defs`` replaced by the definition, and without ``$defs``."""
    if isinstance(node, list):
        return [_inlined(item, defs) for item in node]
    if not isinstance(node, dict):
        return node
    if "$ref" in node:
        return _inlined(defs[node["$ref"].rsplit("/", 1)[-1]], defs)
    return {key: _inlined(value, defs) for key, value in node.items() if key != "$defs"}


NULL = {"type": "null"}  # JSON Schema's null type, which OpenAPI 3.0 has not: nullable instead (openapi_30)


def openapi_30(schema: Any) -> Any:
    """A JSON Schema 2020-12 ``schema`` in OpenAPI 3.0's dialect, its ``$ref``s and layout kept (unlike
    ``openapi_schema``, which inlines a standalone schema's own definitions): a ``null`` member of
    ``anyOf`` (pydantic's optional field) becomes ``nullable``: the one other member of a type, nullable,
    as the schema itself; several, each nullable beside its ``type`` as OpenAPI 3.0.3 reads it (were a
    member without one, a ``$ref``, left, on the ``anyOf``'s schema); a null enum value likewise;
    a type list likewise; ``const`` a one-value ``enum``. Only the keywords that hold schemas are
    followed, never data (``default``, ``enum``, ``example``), and no property's name is read as a
    keyword. Idempotent."""
    if not isinstance(schema, dict):
        return schema
    out = {key: value for key, value in schema.items() if key not in ("$schema", "$id", "$defs")}
    nullable = False
    if isinstance(out.get("anyOf"), list) and NULL in out["anyOf"]:
        out["anyOf"] = [member for member in out["anyOf"] if member != NULL]
        nullable = True
    kinds = out.get("type")
    if isinstance(kinds, list):  # pydantic writes anyOf, never a type list; another generator might
        real = [kind for kind in kinds if kind != "null"]
        nullable = nullable or len(real) < len(kinds)
        del out["type"]
        if len(real) == 1:
            out["type"] = real[0]
        elif real and "anyOf" not in out:
            out["anyOf"] = [{"type": kind} for kind in real]
    if "const" in out:
        out["enum"] = [out.pop("const")]
    if None in out.get("enum", []):
        values = [value for value in out["enum"] if value is not None]
        nullable = True
        if "type" not in out and values and all(isinstance(value, str) for value in values):
            out["type"] = "string"  # OpenAPI 3.0.3 reads nullable only beside a type
    for key in ("items", "additionalProperties", "not"):
        if isinstance(out.get(key), dict):
            out[key] = openapi_30(out[key])
    for key in ("anyOf", "oneOf", "allOf"):
        if isinstance(out.get(key), list):
            out[key] = [openapi_30(member) for member in out[key]]
    if isinstance(out.get("properties"), dict):
        out["properties"] = {name: openapi_30(member) for name, member in out["properties"].items()}
    if nullable:
        members = out.get("anyOf")
        if members and len(members) == 1 and "type" in members[0] and "$ref" not in members[0]:
            # One type and null (an optional field): the plain schema, nullable, as clients' generators read it.
            return {**members[0], **{key: value for key, value in out.items() if key != "anyOf"}, "nullable": True}
        if members and all("type" in member for member in members):
            out["anyOf"] = [{**member, "nullable": True} for member in members]
        else:
            out["nullable"] = True
    return out


class AuditReportBody(RootModel[dict[str, Any]]):
    """The audit report (``service/audit/report.schema.json``, its single source; published in OpenAPI)."""

    @classmethod
    def __get_pydantic_json_schema__(cls, core_schema: Any, handler: Any) -> dict[str, Any]:
        import json

        from intentvcs.service.audit import SCHEMA_PATH

        schema = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))
        return openapi_schema(schema, schema["$defs"])

# The engine's answer dicts (docs/ARCHITECTURE.md), as published in OpenAPI.
class RankedIntent(BaseModel):
    intent: str
    confidence: float = Field(description="Calibrated confidence in [0, 1].")


class OOSDecision(BaseModel):
    rule: str = Field(description="The bundle's out-of-scope rule: none, threshold, distance or train.")
    score: float
    threshold: float = Field(description="Out of scope when score > threshold.")


class PredictedEntity(BaseModel):
    entity: str = Field(description="The entity type, one of the bundle's (GET /status: entity_types).")
    value: str = Field(description="The entity's characters, text[start:end] of the utterance as sent.")
    start: int = Field(description="Offset of its first character in the utterance as sent (code points).")
    end: int = Field(description="Offset after its last character (exclusive).")
    confidence: float = Field(description="The entity head's mean probability of the entity's word tags, in [0, 1].")


class RequestPart(BaseModel):
    start: int = Field(description="Offset of the part's first character in the utterance as sent (code points).")
    end: int = Field(description="Offset after its last character (exclusive).")
    text: str = Field(description="text[start:end].")
    accepted: list[str] = Field(description="The intents accepted in this part, most confident first.")
    out_of_scope: bool = Field(description="This part is a request the model does not know.")


class Prediction(BaseModel):
    text: str = Field(description="The utterance as sent.")
    normalised: str | None = Field(
        None, description="The text the model read when the spelling normaliser rewrote it; null when unchanged.")
    intents: list[RankedIntent] = Field(description="The top_k intents, most confident first.")
    accepted: list[str] = Field(description="Accepted intents after label-relation closure, most confident first: "
                                "every request's, when the utterance chains several.")
    parts: list[RequestPart] = Field(
        description="Where each accepted intent sits: one part per request of a chained utterance (\"X and Y\"), "
        "an out-of-scope part among them saying which request the model does not know; else one part spanning "
        "the utterance. Off with INTENTVCS_SEGMENT=0.")
    entities: list[PredictedEntity] = Field(
        description="Entities found in the utterance, in text order; [] when the bundle has no entity head. "
        "Offsets point into the text as sent, also when the spelling normaliser rewrote it.")
    out_of_scope: bool
    oos: OOSDecision


class PredictResponse(BaseModel):
    predictions: list[Prediction] = Field(description="One per utterance, in request order.")


# Rasa's NLU parse result (intentvcs.service.rasa), as published in OpenAPI.
class RasaIntent(BaseModel):
    name: str
    confidence: float = Field(description="Calibrated confidence in [0, 1]; for the fallback intent, "
                              "1 - the top label's confidence.")


class RasaEntity(BaseModel):
    entity: str = Field(description="The entity type.")
    start: int = Field(description="Offset of its first character in the text as sent (code points).")
    end: int = Field(description="Offset after its last character (exclusive).")
    value: Any = Field(description="text[start:end]; for a button's payload, the value its JSON gives (any JSON "
                       "value), spanning the whole payload as in Rasa.")
    confidence_entity: float = Field(description="The entity head's confidence in [0, 1]; 1 for a payload's entity.")
    extractor: str = Field(description="'intentvcs', or 'RegexMessageHandler' for a payload's entity.")


class ParseResponse(BaseModel):
    text: str = Field(description="The utterance as sent.")
    intent: RasaIntent = Field(description="The top-ranked intent; the fallback intent (INTENTVCS_FALLBACK_INTENT, "
                               "default nlu_fallback) when the utterance is out of scope.")
    intent_ranking: list[RasaIntent] = Field(
        description=f"The most confident intents, at most {LIMITS.default_top_k} ({ENV_PREFIX}DEFAULT_TOP_K), most "
        "confident first; out of scope, the fallback intent is put first ahead of them (by position, as Rasa's "
        f"FallbackClassifier does, whatever its confidence: then up to {LIMITS.default_top_k + 1} entries).")
    entities: list[RasaEntity] = Field(description="As /predict's entities, in Rasa's form; [] without an entity head.")
    accepted: list[str] = Field(description="Accepted intents after label-relation closure, most confident first "
                                "(the multi-label decision, as /predict gives it).")
    out_of_scope: bool
