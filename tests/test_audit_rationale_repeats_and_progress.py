"""Review of the upgrade audit: a co-ranked composite's rationale states the parts' contain(E->N); repeated
rows count once; a cancelled job leaves the runner's queue at once; two workers pruning one progress folder
do not fail each other's jobs; the last progress record of a job stays its last."""

from __future__ import annotations

import asyncio
import json
import threading
import time

import numpy as np
import pytest

from intentvcs.core.dataio import Example
from intentvcs.service.audit import AuditConfig, audit_batch
from intentvcs.service.audit.containment import wilson
from intentvcs.service.audit.rules import Evidence, decide
from intentvcs.service.audit.sampling import row_key, sample_batch
from tests.test_audit import FakeEngine, World, _batch


# ------------------------------------------------------- rule 4's rationale
def _co_ranked(to_new, covered: int = 12, out_of_scope=None) -> Evidence:
    """A and B each accepted on ``covered`` of 100 rows (never together), ranked first and second on 60,
    never on their own rows: rule 4's composite whenever rules 1-3 do not hold."""
    n = 100
    accepted = np.zeros((n, 2), dtype=bool)
    accepted[:covered, 0] = accepted[covered:2 * covered, 1] = True
    ranked = np.zeros((n, 2), dtype=bool)
    ranked[:60] = True
    return Evidence(intent="N", candidates=("A", "B"), to_existing=(wilson(covered, n), wilson(covered, n)),
                    to_new=to_new, accepted=accepted, independent=accepted, ranked=ranked,
                    pair_baseline=np.zeros((2, 2)), implication=np.zeros((2, 2), dtype=bool),
                    multi=wilson(0, n), out_of_scope=out_of_scope)


def test_a_co_ranked_composite_says_neither_part_lies_inside_only_when_neither_does():
    """Rule 3 fails when the parts inside N cover under ``cover_min`` of its rows, or when the service refuses
    most of them; rule 4 then typed the pair a composite "and neither lies inside N" beside figures of 90%
    and 85%. The verdict stays (documented in rules.py); the rationale gives the figures and the reason."""
    config = AuditConfig(progress=False)
    low_cover = decide(_co_ranked((wilson(90, 100), wilson(85, 100))), config)
    assert (low_cover.relation, low_cover.existing) == ("composite", ("A", "B"))
    assert "neither lies inside" not in low_cover.rationale, low_cover.rationale
    assert "90% of A and 85% of B lie in N: A and B lie inside N (from 40%)" in low_cover.rationale
    assert "cover only 24% of N's (a superset needs 30%)" in low_cover.rationale, low_cover.rationale

    refused = decide(_co_ranked((wilson(90, 100), wilson(10, 100)), covered=20,
                                out_of_scope=wilson(95, 100)), config)
    assert refused.relation == "composite" and "neither lies inside" not in refused.rationale
    assert "90% of A and 10% of B lie in N: A lies inside N" in refused.rationale, refused.rationale
    assert "answers 95% of N's rows out of scope (a superset needs under 90%)" in refused.rationale

    apart = decide(_co_ranked((wilson(3, 100), wilson(0, 100))), config)
    assert apart.relation == "composite"
    assert apart.rationale.endswith("and neither lies inside N (3% of A and 0% of B lie in it, under 40%)"), \
        apart.rationale

    unknown = decide(_co_ranked((wilson(3, 100), None)), config)
    assert "neither lies inside" not in unknown.rationale, unknown.rationale
    assert "3% of A lies in N (under 40%), and how much of B lies in N could not be estimated" in unknown.rationale


# ------------------------------------------------------------ repeated rows
def test_repeated_rows_count_once_and_the_first_stands_for_them():
    rows = [Example("book a table", ("new", "old"), id="first"), Example("book a table", ("old", "new"), id="again"),
            Example("book a table", ("new",)), Example("Book a table", ("new", "old")),
            Example("plain", ("old",)), Example("plain", ("old",), id="again")]
    sample = sample_batch(rows, ["old"], cap=10, reference_cap=10, seed=0)
    assert (sample.batch_rows, sample.duplicate_rows, sample.audited_rows) == (6, 2, 3)
    assert sample.rows_per_intent == {"new": 3}
    assert [row.id for row in sample.rows] == ["first", None, None]  # the first of the repeats is kept
    assert [row.id for row in sample.existing["old"]] == [None]
    assert len(row_key(rows[0])) == 16  # what is kept per distinct row while streaming


def test_a_batch_repeated_three_times_gives_the_same_findings_as_once():
    """The same rows three times narrowed every interval (the demo's 16 call_contact rows under a new name x3:
    severity info -> warning); now every finding, figure and severity is the single batch's."""
    world = World()
    batch, training = _batch(world), world.training()
    config = AuditConfig(progress=False)
    once = audit_batch(FakeEngine(world.table), batch, training, config).to_dict()
    thrice = audit_batch(FakeEngine(world.table), iter(batch * 3), training, config).to_dict()
    assert thrice["findings"] == once["findings"] and thrice["new_pairs"] == once["new_pairs"]
    assert thrice["cooccurrence"] == once["cooccurrence"]
    summary = {k: v for k, v in thrice["summary"].items() if k != "timing_s"}
    assert summary == {**{k: v for k, v in once["summary"].items() if k != "timing_s"},
                       "batch_rows": 3 * len(batch), "duplicate_rows": 2 * len(batch)}
    assert once["summary"]["duplicate_rows"] == 0 and once["summary"]["audited_rows"] == len(batch)


def test_repeated_training_rows_count_once_too():
    """The old rows behind contain(E->N) repeated three times gave other findings (a superset's part read 90% ->
    35% inside); the existing intents' rows count once, as the batch's do."""
    world = World()
    batch, training = _batch(world), world.training()
    config = AuditConfig(progress=False)
    once = audit_batch(FakeEngine(world.table), batch, training, config).to_dict()
    thrice = audit_batch(FakeEngine(world.table), batch, training * 3, config).to_dict()
    assert thrice["findings"] == once["findings"] and thrice["new_pairs"] == once["new_pairs"]


def test_the_html_report_sets_the_repeats_beside_the_batch_rows():
    """Repeats are counted over the whole batch, old-intent rows included: the clause belongs to the batch."""
    from intentvcs.service.audit.render import render_html

    world = World()
    batch = _batch(world)
    report = audit_batch(FakeEngine(world.table), batch * 2, world.training(), AuditConfig(progress=False)).to_dict()
    html = render_html(report)
    rows = report["summary"]["batch_rows"]
    assert f"<p>{rows} batch rows ({len(batch)} repeated rows set aside: one row counts once), " in html


# ------------------------------------------------------- a cancelled job
def test_a_cancelled_job_leaves_the_runners_queue_at_once_and_never_starts():
    """A job queued behind a long one was not told its cancel until the long one ended; it then started."""
    from intentvcs.service.audit_control import AuditCancelled
    from intentvcs.service.audit_jobs import job_runner

    runner = job_runner(timeout_s=30)
    runner.poll_s = 0.05
    release, ran = threading.Event(), []

    def long_job(should_stop):
        release.wait(10)
        return "first"

    async def run():
        first = asyncio.ensure_future(runner.run(long_job))
        await asyncio.sleep(0.1)
        flag = {"cancelled": False}
        second = asyncio.ensure_future(runner.run(lambda should_stop: ran.append("second"),
                                                  cancelled=lambda: flag["cancelled"]))
        await asyncio.sleep(0.2)
        assert not second.done()  # waiting for the thread
        flag["cancelled"] = True
        started = time.monotonic()
        with pytest.raises(AuditCancelled):
            await second
        waited = time.monotonic() - started
        assert not first.done()  # it left the queue while the long job still ran
        with pytest.raises(AuditCancelled):  # cancelled before it is queued: never queued
            await runner.run(lambda should_stop: ran.append("third"), cancelled=lambda: True)
        release.set()
        assert await first == "first"
        return waited

    waited = asyncio.run(run())
    assert waited < 1.0
    time.sleep(0.1)
    assert ran == []  # neither cancelled job ever started


# ----------------------------------------------- pruning beside other workers
def test_a_file_or_folder_another_worker_pruned_meanwhile_is_skipped(tmp_path, monkeypatch):
    """Every worker prunes the shared folders as it starts a job: a file one listed and another removed
    made stat() raise FileNotFoundError, failing the new job with a 500."""
    import os
    from pathlib import Path

    from intentvcs.service.audit_jobs import prune

    for server in ("server-1", "server-2"):
        (tmp_path / server).mkdir()
        for name in ("a.json", "b.json", "c.cancel"):
            (tmp_path / server / name).write_text("{}")
            os.utime(tmp_path / server / name, (1, 1))
    (tmp_path / "server-2" / "fresh.json").write_text("{}")
    real_stat, real_glob = Path.stat, Path.glob

    def stat(self, *args, **kwargs):
        if self.name == "b.json" and os.path.exists(self):  # another worker removes it between listing and stat
            os.unlink(self)
        return real_stat(self, *args, **kwargs)

    def glob(self, pattern, *args, **kwargs):
        if self.name == "server-1" and os.path.isdir(self):  # another worker empties and removes the folder
            for name in os.listdir(self):
                os.unlink(os.path.join(self, name))
            os.rmdir(self)
            raise FileNotFoundError(2, "No such file or directory", str(self))  # glob's scandir, once is_dir passed
        return real_glob(self, pattern, *args, **kwargs)

    monkeypatch.setattr(Path, "stat", stat)
    monkeypatch.setattr(Path, "glob", glob)
    prune(tmp_path, time.time() - 3600, keep=tmp_path / "server-2")
    monkeypatch.undo()
    assert not (tmp_path / "server-1").exists()
    assert sorted(path.name for path in (tmp_path / "server-2").iterdir()) == ["fresh.json"]


def test_workers_pruning_one_folder_at_once_fail_no_job(tmp_path):
    from intentvcs.service.audit_jobs import prune
    import os

    for server in range(3):
        folder = tmp_path / f"server-{server}"
        folder.mkdir()
        for i in range(1500):
            path = folder / f"{i:05d}.json"
            path.write_text("{}")
            os.utime(path, (1, 1))
    errors = []

    def worker():
        try:
            prune(tmp_path, time.time() - 86400, keep=tmp_path / "server-0")
        except Exception as exc:  # noqa: BLE001 - any error fails the job that pruned
            errors.append(repr(exc))

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == [] and sorted(path.name for path in tmp_path.iterdir()) == ["server-0"]
    assert not any((tmp_path / "server-0").iterdir())


# ---------------------------------------------------- the last progress record
def test_a_progress_write_under_way_does_not_overwrite_the_jobs_end(tmp_path, monkeypatch):
    """The job thread checked ``ended``, then wrote; the event loop ended the job (deadline, cancel) in
    between, and the job thread's write landed last: ``"ended": false`` for good."""
    import intentvcs.service.audit_jobs as jobs

    real = jobs.atomic.write_text
    writing = threading.Event()

    def slow(path, text):
        if '"ended": false' in text:
            writing.set()
            time.sleep(0.3)  # the job thread is preempted inside its progress write
        return real(path, text)

    monkeypatch.setattr(jobs.atomic, "write_text", slow)
    progress = jobs.JobProgress(tmp_path / "server-1", "abc", 100)
    thread = threading.Thread(target=progress, args=("audit: new intents", 256, 1000))
    thread.start()
    assert writing.wait(5)
    progress.end("stopped: deadline", 0, 100)
    thread.join()
    progress("audit: references", 1, 4, force=True)  # and none after it
    last = json.loads(progress.path.read_text())
    assert (last["stage"], last["ended"]) == ("stopped: deadline", True)


def test_a_job_that_ends_early_keeps_the_counts_it_got_to(tmp_path):
    """A cancelled or stopped job's last record says how far it got (it said 0 done)."""
    import intentvcs.service.audit_jobs as jobs

    progress = jobs.JobProgress(tmp_path / "server-1", "abc", 100)
    progress("audit: new intents", 40, 80, force=True)
    progress.end("cancelled")
    record = json.loads(progress.path.read_text())
    assert (record["stage"], record["done"], record["total"], record["ended"]) == ("cancelled", 40, 80, True)
    finished = jobs.JobProgress(tmp_path / "server-1", "def", 100)
    finished.end("done", 100, 100)
    assert json.loads(finished.path.read_text())["done"] == 100


def test_the_entity_and_word_tests_read_every_old_row_held_not_the_knn_sample(monkeypatch):
    """The kNN estimate infers a sample of at most reference_cap rows per existing intent; the entity and word
    tests need no inference and read every distinct old row (up to intent_cap): a sample's share of an entity
    type can stray far from the intent's (a SNIPS sample of 200 RateBook rows read object_type on 34% of them,
    the 946 rows on 47%, and two duplicates were typed subsets)."""
    import intentvcs.service.audit.batch as batch

    world = World()
    training = world.training(per_label=60)
    seen: list[int] = []
    real = batch.entity_pivot

    def spy(own, theirs, **kwargs):
        seen.append(len(theirs))
        return real(own, theirs, **kwargs)

    monkeypatch.setattr(batch, "entity_pivot", spy)
    config = AuditConfig(progress=False, reference_cap=20)
    audit_batch(FakeEngine(world.table), _batch(world), training, config)
    assert seen and set(seen) == {60}  # every training row of the intent, not the 20 of the kNN sample


# ------------------------------------------- the page shows the rationale's figures
def test_the_html_shows_the_rates_the_rationale_names_not_rates_rounded_twice():
    """The page formatted the report's rates, already rounded to 4 places, as whole percents: 86 of 103 rows is
    0.83495, "83%" in the rationale, but 0.835 in the JSON and "84%" in the table and the heatmap beside it."""
    from intentvcs.service.audit.render import render_html
    from tests.test_audit import A_MIX

    world = World()
    batch = world.rows("dupA", 103, A_MIX, ("A",), 86 / 103)
    report = audit_batch(FakeEngine(world.table), batch, world.training(), AuditConfig(progress=False)).to_dict()
    finding = report["findings"][0]
    forward = finding["containment"][0]["new_in_existing"]
    assert (finding["containment"][0]["existing"], forward["k"], forward["n"]) == ("A", 86, 103)
    assert f"the model accepts A on {86 / 103:.0%} of dupA's rows" in finding["rationale"]  # 83%
    page = render_html(report)
    assert '<tr><td>A</td><td>83% <span class="muted">(86/103, ' in page
    assert "<title>dupA -&gt; A: 83%</title>" in page and 'fill="#fff">83</text>' in page


def test_the_html_shows_an_entity_pivots_shares_as_the_rationale_does():
    """The same for the entity pivot: 17 of 103 rows is "17%" in a subset's rationale, and was "16%" on the page."""
    from intentvcs.service.audit.render import _pivot
    from intentvcs.service.audit.slots import EntityPivot

    pivot = EntityPivot("city", 17 / 103, 86 / 103, 103, 103, 0.001, 1)
    assert (f"{pivot.new_share:.0%}", f"{pivot.existing_share:.0%}") == ("17%", "83%")  # what the rationale says
    assert "city: on 17% of the new rows, 83% of the old" in _pivot(pivot.to_dict())
