"""Fault injection: bad files, corrupt bundles, hostile HTTP bodies, audit floods and interrupted writes.

    python -m benchmarks.faults                 # every case; writes benchmarks/results/faults.json and .md
    python -m benchmarks.faults --cases NAME... # some of them (--list names them)

Each case drives the real command line (``python -m intentvcs.cli.main`` in a
subprocess) or a real BentoML server on loopback (``running()``), on a tiny
random model built for the run, and records ``case``, ``input``,
``expected``, ``observed`` and ``passed``. ``tests/test_faults.py`` runs the
same cases in CI, so the results file is what the suite checks. The HTTP
cases share one server per configuration (``SERVERS``).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from benchmarks.common import RESULTS, write_results
from intentvcs.cli import exit_codes
from intentvcs.core.dataio import MAX_NESTING, MAX_TEXT_CHARS

CLI_TIMEOUT_S = 180


@dataclass
class Workspace:
    """A scratch folder with a tiny exported model, shared by the cases of one run."""

    root: Path
    servers: dict[str, str] = field(default_factory=dict)  # configuration -> base URL, started on demand
    _stack: contextlib.ExitStack = field(default_factory=contextlib.ExitStack)

    @property
    def checkpoint(self) -> Path:
        return self.root / "model" / "checkpoint"

    @property
    def bundle(self) -> Path:
        return self.root / "model" / "bundle"

    def fresh(self, name: str) -> Path:
        """An empty folder of its own for one case."""
        folder = Path(tempfile.mkdtemp(prefix=f"{name}-", dir=self.root))
        return folder

    def copy_of_bundle(self, name: str) -> Path:
        import shutil

        target = self.fresh(name) / "bundle"
        shutil.copytree(self.bundle, target)
        return target

    def server(self, configuration: str) -> str:
        """The base URL of a server on the tiny bundle with ``SERVERS[configuration]``'s environment."""
        if configuration not in self.servers:
            from intentvcs.cli.commands.serve import running

            log = self.root / f"server-{configuration}.log"
            self.servers[configuration] = self._stack.enter_context(
                running(self.bundle, extra_env=SERVERS[configuration], log_path=log))
        return self.servers[configuration]

    def server_log(self, configuration: str) -> str:
        return (self.root / f"server-{configuration}.log").read_text(encoding="utf-8", errors="replace")

    def close(self) -> None:
        self._stack.close()


@contextlib.contextmanager
def workspace() -> Iterator[Workspace]:
    from intentvcs.core.dataio import read_jsonl
    from intentvcs.training import DEFAULT_DATA
    from tests.helpers.bundle import make_tiny_bundle

    # The embedded default data's intents, so that its upgrade batch has existing intents to audit against.
    labels = sorted({label for ex in read_jsonl(DEFAULT_DATA / "train.jsonl") for label in ex.labels})
    with tempfile.TemporaryDirectory(prefix="intentvcs-faults-") as root:
        space = Workspace(Path(root))
        make_tiny_bundle(space.root / "model", quantize=False, spelling_texts=["play some music"], labels=labels)
        try:
            yield space
        finally:
            space.close()


# ----------------------------------------------------------------------------- the command line

@dataclass(frozen=True)
class Ran:
    code: int
    err: str
    seconds: float


def cli(*args: str | os.PathLike, timeout_s: float = CLI_TIMEOUT_S) -> Ran:
    """Run ``intentvcs ARGS`` as a user would, in a fresh interpreter."""
    started = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "intentvcs.cli.main", *map(str, args)], capture_output=True,
                          text=True, timeout=timeout_s, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    return Ran(proc.returncode, proc.stderr.strip(), time.perf_counter() - started)


def last_line(text: str) -> str:
    return text.strip().splitlines()[-1] if text.strip() else ""


def exit_2_naming(ran: Ran, *needles: str) -> tuple[str, bool]:
    """Exit 2 with one error line holding every needle and no traceback."""
    observed = f"exit {ran.code}: {last_line(ran.err)[:300]}"
    return observed, (ran.code == exit_codes.BAD_INPUT and "Traceback" not in ran.err
                      and all(n in ran.err for n in needles))


def bad_file(content: bytes, line: int, reason: str) -> Callable[[Workspace], tuple[str, bool]]:
    """``intentvcs evaluate`` on a data file with ``content``: exit 2 naming file, ``line`` and ``reason``."""
    def check(space: Workspace) -> tuple[str, bool]:
        folder = space.fresh("data")
        data, out = folder / "data.jsonl", folder / "out.json"
        data.write_bytes(content)
        observed, passed = exit_2_naming(cli("evaluate", "--bundle", space.bundle, "--data", data, "--out", out),
                                         f"{data}:{line}: ", reason)
        return observed, passed and not out.exists()
    return check


GOOD = b'{"text": "play some music", "labels": ["PlayMusic"]}\n'
ANOTHER = b'{"text": "book a table for two", "labels": ["BookRestaurant"]}\n'


def output_is_a_directory(space: Workspace) -> tuple[str, bool]:
    folder = space.fresh("outdir")
    data = folder / "data.jsonl"
    data.write_bytes(GOOD)
    ran = cli("evaluate", "--bundle", space.bundle, "--data", data, "--out", folder)
    return exit_2_naming(ran, f"{folder} is a directory")


def second_output_under_a_file(command: str) -> Callable[[Workspace], tuple[str, bool]]:
    """``command`` with its second output under a file: exit 2 and none of its outputs written."""
    def check(space: Workspace) -> tuple[str, bool]:
        folder = space.fresh(command)
        data, blocker = folder / "data.jsonl", folder / "blocker"
        data.write_text("".join(json.dumps({"text": f"play some music {i}", "labels": ["PlayTunes"]}) + "\n"
                                for i in range(6)))
        blocker.write_text("a file where a folder should be")
        if command == "evaluate":
            args = ("--data", data, "--out", folder / "x.json", "--heatmap", blocker / "h.png")
        else:
            args = ("--batch", data, "--out", folder / "r.json", "--html", blocker / "r.html")
        observed, passed = exit_2_naming(cli(command, "--bundle", space.bundle, *args), "is a file, not a folder")
        left = sorted(p.name for p in folder.iterdir() if p.name not in ("data.jsonl", "blocker"))
        return f"{observed}; files left: {left}", passed and not left
    return check


def export_over_a_foreign_folder(space: Workspace) -> tuple[str, bool]:
    mine = space.fresh("foreign")
    (mine / "notes.txt").write_text("the user's own work")
    ran = cli("export", "--checkpoint", space.checkpoint, "--out", mine)
    observed, passed = exit_2_naming(ran, "holds no manifest.json", "--force")
    kept = [p.name for p in mine.iterdir()] == ["notes.txt"]
    return f"{observed}; folder kept: {kept}", passed and kept


def export_over_the_working_folder(space: Workspace) -> tuple[str, bool]:
    work = space.fresh("cwd")
    (work / "keep.txt").write_text("x")
    proc = subprocess.run([sys.executable, "-m", "intentvcs.cli.main", "export", "--checkpoint",
                           str(space.checkpoint), "--out", "."], cwd=work, capture_output=True, text=True,
                          timeout=CLI_TIMEOUT_S)
    ran = Ran(proc.returncode, proc.stderr.strip(), 0.0)
    observed, passed = exit_2_naming(ran, "refusing to replace it")
    kept = sorted(p.name for p in work.iterdir()) == ["keep.txt"]
    return f"{observed}; folder kept: {kept}", passed and kept


def export_over_a_file(space: Workspace) -> tuple[str, bool]:
    target = space.fresh("file") / "bundle"
    target.write_text("keep me")
    ran = cli("export", "--checkpoint", space.checkpoint, "--out", target, "--force")
    observed, passed = exit_2_naming(ran, "is not a directory")
    return observed, passed and target.read_text() == "keep me"


def train_over_a_foreign_folder(space: Workspace) -> tuple[str, bool]:
    folder = space.fresh("train")
    mine = folder / "mine"
    mine.mkdir()
    (mine / "x.txt").write_text("keep")
    data, held_out = folder / "d.jsonl", folder / "v.jsonl"  # train refuses to validate on its training file
    data.write_bytes(GOOD)
    held_out.write_bytes(GOOD)
    ran = cli("train", "--train", data, "--valid", held_out, "--out", mine)
    observed, passed = exit_2_naming(ran, "holds no checkpoint.json")
    # Refused before any training: in seconds, not after the epochs.
    return f"{observed} ({ran.seconds:.1f} s)", passed and (mine / "x.txt").exists() and ran.seconds < 60


def bad_option_value(option: str, value: str, *needles: str) -> Callable[[Workspace], tuple[str, bool]]:
    def check(space: Workspace) -> tuple[str, bool]:
        folder = space.fresh("option")
        data, held_out = folder / "d.jsonl", folder / "v.jsonl"  # train refuses to validate on its training file
        # Two intents and two validation rows: data train takes, so that the option is what it refuses (one
        # validation row is refused under the distance rule, one intent under a softmax method).
        data.write_bytes(GOOD + ANOTHER)
        held_out.write_bytes(GOOD + ANOTHER)
        given = value.replace("{folder}", str(folder))
        if given.endswith(".json") and not Path(given).exists():
            Path(given).write_text("{not json")
        ran = cli("train", "--train", data, "--valid", held_out, "--out", folder / "ckpt", option, given)
        return exit_2_naming(ran, *needles)
    return check


def audit_config_not_json(space: Workspace) -> tuple[str, bool]:
    folder = space.fresh("config")
    config, batch = folder / "config.json", folder / "batch.jsonl"
    config.write_text("{oops")
    batch.write_bytes(GOOD)
    ran = cli("audit", "--bundle", space.bundle, "--batch", batch, "--out", folder / "r.json", "--config", config)
    return exit_2_naming(ran, "--config", str(config))


# ----------------------------------------------------------------------------- corrupt bundles

def corrupt_bundle(corrupt: Callable[[Path], None], *needles: str) -> Callable[[Workspace], tuple[str, bool]]:
    """``intentvcs evaluate`` on a copy of the bundle damaged by ``corrupt``: exit 2 naming the file."""
    def check(space: Workspace) -> tuple[str, bool]:
        bundle = space.copy_of_bundle("corrupt")
        corrupt(bundle)
        data = bundle.parent / "data.jsonl"
        data.write_bytes(GOOD)
        ran = cli("evaluate", "--bundle", bundle, "--data", data, "--out", bundle.parent / "out.json")
        return exit_2_naming(ran, *needles)
    return check


def truncate_graph(bundle: Path) -> None:
    data = (bundle / "model.onnx").read_bytes()
    (bundle / "model.onnx").write_bytes(data[: len(data) // 2])


def swap_two_labels(bundle: Path) -> None:
    path = bundle / "manifest.json"
    manifest = json.loads(path.read_text())
    for labels in (manifest["labels"], manifest["decision"]["labels"]):
        labels[0], labels[1] = labels[1], labels[0]
    path.write_text(json.dumps(manifest))


def newer_format(bundle: Path) -> None:
    path = bundle / "manifest.json"
    manifest = json.loads(path.read_text())
    manifest["format_version"] += 1
    path.write_text(json.dumps(manifest))


def serve_a_corrupt_bundle(space: Workspace) -> tuple[str, bool]:
    bundle = space.copy_of_bundle("serve")
    truncate_graph(bundle)
    ran = cli("serve", "--bundle", bundle, "--port", "1", timeout_s=60)
    observed, passed = exit_2_naming(ran, "model.onnx")
    return f"{observed} ({ran.seconds:.1f} s)", passed


def interrupted_export(space: Workspace) -> tuple[str, bool]:
    """SIGKILL an export that is replacing an earlier bundle: the earlier bundle still loads, unchanged."""
    from intentvcs.service.engine import Engine

    bundle = space.copy_of_bundle("interrupted")
    before = (bundle / "manifest.json").read_bytes()
    process = subprocess.Popen([sys.executable, "-m", "intentvcs.cli.main", "export", "--checkpoint",
                                str(space.checkpoint), "--out", str(bundle), "--quantize"],
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    # Killed once it is writing: its temporary folder beside the bundle exists.
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not list(bundle.parent.glob(".bundle.*.tmp")):
        time.sleep(0.05)
    writing = bool(list(bundle.parent.glob(".bundle.*.tmp")))
    process.send_signal(signal.SIGKILL)
    process.wait()
    unchanged = (bundle / "manifest.json").read_bytes() == before
    loads = Engine(bundle, provider="cpu").predict(["play some music"])[0]["intents"] != []
    observed = f"killed while writing: {writing}; earlier bundle unchanged: {unchanged}, loads: {loads}"
    return observed, writing and unchanged and loads


# ----------------------------------------------------------------------------- the HTTP service

TOKEN = "fault-injection-token"
SECRET = "PRIVATE-USER-TEXT-91c2"  # sent in bad requests: must never reach the server's log
GUARDED_TIMEOUT_S = 3


def http(space: Workspace, configuration: str, path: str, token: bool = False, **kwargs):
    import httpx

    headers = {**({"authorization": f"Bearer {TOKEN}"} if token else {}), **kwargs.pop("headers", {})}
    return httpx.post(f"{space.server(configuration)}{path}", headers=headers, timeout=kwargs.pop("timeout", 60),
                      **kwargs)


def refused(expected_status: int, *needles: str, configuration: str = "default", path: str = "/predict",
            token: bool = False, **request) -> Callable[[Workspace], tuple[str, bool]]:
    """One request answered ``expected_status`` with every needle in its body (a reason, a limit, a setting)."""
    def check(space: Workspace) -> tuple[str, bool]:
        response = http(space, configuration, path, token=token, **request)
        observed = f"{response.status_code}: {response.text[:200]}"
        return observed, response.status_code == expected_status and all(n in response.text for n in needles)
    return check


def new_intent_rows(intents: int, rows_each: int = 3) -> list[dict]:
    """``intents`` new names for one meaning: every pair of them is a duplicate candidate, the audit's worst
    case. The rows of an intent differ only in the blanks before the last word: distinct rows (the audit
    counts a repeated row once) that the model reads alike (the tokenizer splits on blanks)."""
    return [{"text": f"turn on the lights in room {i}{' ' * (1 + k)}now", "labels": [f"new_intent_{i}"]}
            for i in range(intents) for k in range(rows_each)]


def audit_flood(space: Workspace) -> tuple[str, bool]:
    """A second audit while the worker's one audit slot is taken is 429; the slow one stops at its deadline."""
    import threading

    slow: dict = {}

    def send() -> None:
        slow["response"] = http(space, "guarded", "/audit", token=True, json={"rows": new_intent_rows(100)})

    thread = threading.Thread(target=send)
    thread.start()
    time.sleep(1.0)
    busy = http(space, "guarded", "/audit", token=True, json={"rows": [{"text": "hi there", "labels": ["greet"]}]})
    thread.join()
    late = slow["response"]
    started = time.monotonic()
    after = http(space, "guarded", "/audit", token=True, json={"rows": [{"text": "hi there", "labels": ["greet"]}]})
    quick = time.monotonic() - started
    observed = (f"second audit {busy.status_code} (Retry-After {busy.headers.get('retry-after')}); slow audit "
                f"{late.status_code}; next audit {after.status_code} in {quick:.2f} s")
    return observed, (busy.status_code == 429 and "retry-after" in busy.headers and late.status_code == 504
                      and after.status_code == 200 and quick < 2.0)


def audit_reads_spans(space: Workspace) -> tuple[str, bool]:
    """/audit with the default upgrade batch (rows with entity spans): the library's report, entity evidence included."""
    from intentvcs.core.dataio import read_jsonl
    from intentvcs.service.audit import AuditConfig, audit_batch
    from intentvcs.service.engine import Engine
    from intentvcs.training import DEFAULT_DATA

    rows = [ex.to_dict() for ex in read_jsonl(DEFAULT_DATA / "upgrade.jsonl")]
    training = [ex.to_dict() for ex in read_jsonl(DEFAULT_DATA / "train.jsonl")]
    response = http(space, "default", "/audit", json={"rows": rows, "training_rows": training})
    if response.status_code != 200:
        return f"{response.status_code}: {response.text[:200]}", False
    local = audit_batch(Engine(space.bundle, provider="cpu"), rows, training, config=AuditConfig(progress=False))

    def pivots(report: dict) -> list:
        return [(f["intent"], c["existing"], c["entity_pivot"]) for f in report["findings"] for c in f["containment"]]

    served = pivots(response.json())
    found = sum(1 for *_, pivot in served if pivot)
    return f"200; {found} entity pivots over HTTP, same as the library: {served == pivots(local.to_dict())}", \
        served == pivots(local.to_dict()) and found > 0


def refusals_logged_as_one_line(space: Workspace) -> tuple[str, bool]:
    """Bad requests carrying a secret: one 'refused' line each in the server log, no traceback, no secret."""
    bad = [{"text": SECRET * 100}, {"text": "hi", "top_k": SECRET}, {"text": SECRET, SECRET: 1}]
    statuses = [http(space, "default", "/predict", json=body).status_code for body in bad]
    time.sleep(0.5)
    log = space.server_log("default")
    refusals = log.count(" refused POST /predict")
    observed = f"statuses {statuses}; {refusals} refusal lines; traceback: {'Traceback' in log}; secret: {SECRET in log}"
    return observed, statuses == [400] * 3 and refusals >= 3 and "Traceback" not in log and SECRET not in log


# ----------------------------------------------------------------------------- the catalogue

@dataclass(frozen=True)
class Fault:
    case: str
    input: str
    expected: str
    check: Callable[[Workspace], tuple[str, bool]]


FAULTS: list[Fault] = [
    Fault("data: spans not a list", '{"text": "hi", "labels": [], "spans": 5} on line 2', "exit 2, file:2, reason",
          bad_file(GOOD + b'{"text": "hi", "labels": [], "spans": 5}\n', 2, "'spans' must be a list")),
    Fault("data: deeply nested JSON", "100,000 nested brackets", "exit 2, file:1, nesting limit",
          bad_file(b'{"text": "hi", "labels": [], "meta": ' + b"[" * 100_000 + b"]" * 100_000 + b"}\n", 1,
                   f"nested deeper than {MAX_NESTING}")),
    Fault("data: lone surrogate", '"text": "caf\\ud800"', "exit 2, file:1, names the surrogate",
          bad_file(b'{"text": "caf\\ud800", "labels": []}\n', 1, "lone surrogate")),
    Fault("data: non-UTF-8 byte", "byte 0xe9 on line 3", "exit 2, file:3, byte and column",
          bad_file(GOOD * 2 + b'{"text": "caf\xe9", "labels": []}\n', 3, "byte 0xe9 at column 14")),
    Fault("data: text over the limit", f"a text of {MAX_TEXT_CHARS + 1} characters", "exit 2, file:1, the limit",
          bad_file(b'{"text": "' + b"a" * (MAX_TEXT_CHARS + 1) + b'", "labels": []}\n', 1,
                   f"the limit is {MAX_TEXT_CHARS}")),
    Fault("data: invalid JSON", "a truncated object on line 2", "exit 2, file:2",
          bad_file(GOOD + b'{"text": "hi", "labels": [}\n', 2, "invalid JSON")),
    Fault("data: unknown key", '"label" instead of "labels"', "exit 2, file:1, names the key",
          bad_file(b'{"text": "hi", "label": "x"}\n', 1, "unknown key(s) ['label']")),
    Fault("data: span outside its text", "span [0, 9) on a 2-character text", "exit 2, file:1",
          bad_file(b'{"text": "hi", "labels": [], "spans": [{"start": 0, "end": 9, "label": "x"}]}\n', 1,
                   "outside the text")),
    Fault("data: a directory as the data file", "--data <a folder>", "exit 2, 'is a directory'",
          lambda space: exit_2_naming(cli("evaluate", "--bundle", space.bundle, "--data", space.root,
                                          "--out", space.fresh("o") / "o.json"), "is a directory")),
    Fault("output: --out is a directory", "evaluate --out <a folder>", "exit 2 before the model runs",
          output_is_a_directory),
    Fault("output: heatmap to a bad path", "evaluate --heatmap under a file", "exit 2, no JSON or temp file left",
          second_output_under_a_file("evaluate")),
    Fault("output: audit page to a bad path", "audit --html under a file", "exit 2, no report left",
          second_output_under_a_file("audit")),
    Fault("output: export over the user's folder", "export --out <folder with notes.txt>",
          "exit 2, folder untouched, --force named", export_over_a_foreign_folder),
    Fault("output: export --out .", "export --out . in a folder with keep.txt", "exit 2, folder untouched",
          export_over_the_working_folder),
    Fault("output: export over a file", "export --out <a file> --force", "exit 2, file untouched",
          export_over_a_file),
    Fault("output: train over the user's folder", "train --out <folder with x.txt>",
          "exit 2 before training, folder untouched", train_over_a_foreign_folder),
    Fault("option: --augment-mix not JSON", "--augment-mix '{bad'", "exit 2 naming the option",
          bad_option_value("--augment-mix", "{bad", "--augment-mix")),
    Fault("option: --relations not a relations file", "--relations <file of '{not json'>",
          "exit 2 naming the file", bad_option_value("--relations", "{folder}/relations.json", "relations.json")),
    Fault("option: unknown --method", "--method nope", "exit 2 naming the choices",
          bad_option_value("--method", "nope", "--method", "invalid choice")),
    Fault("option: audit --config not JSON", "--config <file of '{oops'>", "exit 2 naming option and file",
          audit_config_not_json),
    Fault("bundle: truncated graph", "model.onnx cut in half", "exit 2 naming model.onnx",
          corrupt_bundle(truncate_graph, "model.onnx", "truncated")),
    Fault("bundle: two labels swapped by hand", "labels[0] <-> labels[1] in manifest.json",
          "exit 2: edited after export", corrupt_bundle(swap_two_labels, "manifest.json", "edited after export")),
    Fault("bundle: newer format_version", "format_version + 1", "exit 2 naming the remedy",
          corrupt_bundle(newer_format, "manifest.json", "format_version", "re-export")),
    Fault("serve: corrupt bundle", "intentvcs serve on a truncated graph", "exit 2 at once naming the file",
          serve_a_corrupt_bundle),
    Fault("interrupted write: export killed", "SIGKILL during an export over an earlier bundle",
          "the earlier bundle unchanged and loading", interrupted_export),
    Fault("http: text/plain body", "POST /predict, content-type text/plain", "415 naming application/json",
          refused(415, "application/json", content='{"text": "play"}', headers={"content-type": "text/plain"})),
    Fault("http: form body", "POST /predict as an HTML form", "415",
          refused(415, "application/json", data={"text": "play"})),
    Fault("http: multipart body", "POST /audit as multipart", "415",
          refused(415, "application/json", path="/audit", files={"rows": ("r.json", b"[]")})),
    Fault("http: no token", "POST /predict without Authorization, token set", "401 naming INTENTVCS_API_TOKEN",
          refused(401, "INTENTVCS_API_TOKEN", configuration="guarded", json={"text": "play some music"})),
    Fault("http: wrong token", "POST /predict with a wrong bearer token", "401",
          refused(401, "", configuration="guarded", json={"text": "play some music"},
                  headers={"authorization": "Bearer wrong"})),
    Fault("http: text over the limit", "a 1,001-character text", "400 naming the field and the limit",
          refused(400, "text", "1000 characters", json={"text": "a" * 1001})),
    Fault("http: body over the byte limit", "a 300 kB body, limit 200 kB", "413 naming INTENTVCS_MAX_BODY_BYTES",
          refused(413, "INTENTVCS_MAX_BODY_BYTES", configuration="guarded", token=True,
                  json={"texts": ["x" * 900] * 300})),
    Fault("http: audit with too many new intents", "101 new intents in one /audit", "413 naming the setting",
          refused(413, "INTENTVCS_MAX_AUDIT_NEW_INTENTS", configuration="guarded", path="/audit", token=True,
                  json={"rows": new_intent_rows(101, rows_each=1)})),
    Fault("http: audit flood", "a second audit while a slow one runs", "429 with Retry-After; the slow one 504 "
          f"at its {GUARDED_TIMEOUT_S} s deadline and stopped", audit_flood),
    Fault("http: audit rows with spans", "the default upgrade batch over /audit", "the library's report, entity "
          "pivots included", audit_reads_spans),
    Fault("http: refusals in the log", "3 bad requests carrying a secret", "one log line each, no traceback, no "
          "secret", refusals_logged_as_one_line),
]

# Server configurations of the HTTP cases: the environment each server starts with.
SERVERS: dict[str, dict[str, str]] = {
    "default": {"INTENTVCS_MAX_TEXT_CHARS": "1000"},
    "guarded": {"INTENTVCS_API_TOKEN": TOKEN, "INTENTVCS_AUDIT_TIMEOUT_S": str(GUARDED_TIMEOUT_S),
                "INTENTVCS_MAX_AUDITS_IN_FLIGHT": "1", "INTENTVCS_MAX_BODY_BYTES": "200000",
                # every pair of new intents tested, so that the flood's slow audit is slow
                "INTENTVCS_AUDIT_CONFIG": json.dumps({"max_new_pairs": 10_000})},
}


def run(faults: list[Fault], space: Workspace) -> list[dict]:
    records = []
    for fault in faults:
        try:
            observed, passed = fault.check(space)
        except Exception as exc:  # a case that crashes is a failed case, with the reason
            observed, passed = f"the case raised {type(exc).__name__}: {exc}", False
        records.append({"case": fault.case, "input": fault.input, "expected": fault.expected,
                        "observed": observed, "passed": bool(passed)})
        print(f"{'ok  ' if passed else 'FAIL'} {fault.case}: {observed}", file=sys.stderr)
    return records


def markdown(records: list[dict]) -> str:
    rows = ["| case | input | expected | observed | passed |", "|---|---|---|---|---|"]
    for r in records:
        cells = [r["case"], r["input"], r["expected"], r["observed"], "yes" if r["passed"] else "**no**"]
        rows.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    passed = sum(r["passed"] for r in records)
    return "\n".join(rows) + f"\n\n{passed} of {len(records)} cases passed.\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cases", nargs="+", metavar="NAME", help="run only these cases (default: all)")
    parser.add_argument("--list", action="store_true", help="print the case names and exit")
    parser.add_argument("--results-dir", type=Path, default=RESULTS, help="where faults.json and faults.md go")
    args = parser.parse_args(argv)
    if args.list:
        print("\n".join(f.case for f in FAULTS))
        return 0
    chosen = [f for f in FAULTS if not args.cases or f.case in args.cases]
    unknown = set(args.cases or ()) - {f.case for f in FAULTS}
    if unknown:
        parser.error(f"unknown case(s): {sorted(unknown)}")
    with workspace() as space:
        records = run(chosen, space)
    path = write_results("faults", records, markdown(records), directory=args.results_dir)
    print(f"wrote {path}", file=sys.stderr)
    return 0 if all(r["passed"] for r in records) else 1


if __name__ == "__main__":
    sys.exit(main())
