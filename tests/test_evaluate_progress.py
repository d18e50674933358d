"""``intentvcs evaluate --bundle`` shows its progress on a terminal, as every long command does.

The engine draws no bar of its own (a checkpoint's predictor does), so a bundle evaluated on a large test
set said nothing until its figures came. ``predictor.in_chunks`` is the one chunked, counted inference of
``evaluate`` and the robustness suite.
"""

from __future__ import annotations

import io

import numpy as np

from intentvcs.cli import exit_codes
from intentvcs.cli.main import main
from intentvcs.core import predictor
from intentvcs.core.outputs import GraphOutputs


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def numbered(calls: list):
    """An ``infer`` whose row of a text is its length, recording each call's texts."""
    def infer(texts):
        calls.append(list(texts))
        lengths = np.array([[len(t)] for t in texts], dtype=np.float32).reshape(len(texts), 1)
        return GraphOutputs(lengths, lengths, lengths)
    return infer


def test_in_chunks_gives_the_rows_of_one_call_in_order_and_counts_them_on_a_terminal(monkeypatch):
    monkeypatch.setattr(predictor, "CHUNK", 2)
    texts = ["a", "bbb", "cc", "dddd", "e"]
    calls: list = []
    terminal = Terminal()
    monkeypatch.setattr("sys.stderr", terminal)
    outputs = predictor.in_chunks(numbered(calls), texts, "evaluate")
    assert outputs.logits.ravel().tolist() == [1, 3, 2, 4, 1]
    assert calls == [["a", "bbb"], ["cc", "dddd"], ["e"]]
    assert "evaluate" in terminal.getvalue() and "5/5" in terminal.getvalue()


def test_in_chunks_draws_nothing_off_a_terminal_or_when_told(monkeypatch):
    quiet = io.StringIO()
    monkeypatch.setattr("sys.stderr", quiet)
    predictor.in_chunks(numbered([]), ["a", "b"], "evaluate")
    terminal = Terminal()
    monkeypatch.setattr("sys.stderr", terminal)
    predictor.in_chunks(numbered([]), ["a", "b"], "evaluate", progress=False)
    assert quiet.getvalue() == terminal.getvalue() == ""
    assert predictor.in_chunks(numbered([]), [], "evaluate").logits.shape == (0, 1)


def test_evaluate_of_a_bundle_shows_its_progress_on_a_terminal(tmp_path, monkeypatch):
    from tests.helpers.bundle import make_tiny_bundle

    bundle = make_tiny_bundle(tmp_path / "model")
    data = tmp_path / "test.jsonl"
    data.write_text('{"text": "play some music", "labels": ["PlayMusic"]}\n'
                    '{"text": "book a table for two", "labels": ["BookRestaurant"]}\n')
    terminal = Terminal()
    monkeypatch.setattr("sys.stderr", terminal)
    assert main(["evaluate", "--bundle", str(bundle), "--data", str(data),
                 "--out", str(tmp_path / "figures.json")]) == exit_codes.OK
    assert "evaluate" in terminal.getvalue() and "2/2" in terminal.getvalue()


def test_evaluate_of_a_checkpoint_reads_its_rows_in_one_call(tmp_path, monkeypatch):
    """The checkpoint's predictor draws its own bar over a call: called in chunks, it drew one per chunk."""
    from intentvcs.training.predict import TorchPredictor
    from tests.helpers.bundle import make_tiny_checkpoint

    checkpoint = make_tiny_checkpoint(tmp_path / "checkpoint")
    data = tmp_path / "test.jsonl"
    data.write_text("".join('{"text": "play some music %d", "labels": ["PlayMusic"]}\n' % i for i in range(5)))
    calls = []
    infer = TorchPredictor.infer
    monkeypatch.setattr(TorchPredictor, "infer", lambda self, texts: calls.append(len(texts)) or infer(self, texts))
    monkeypatch.setattr(predictor, "CHUNK", 2)
    assert main(["evaluate", "--checkpoint", str(checkpoint), "--data", str(data),
                 "--out", str(tmp_path / "figures.json")]) == exit_codes.OK
    assert calls[0] == 5
