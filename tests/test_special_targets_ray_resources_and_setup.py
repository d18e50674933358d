"""Outputs that are not regular files, a Ray cluster that cannot host one actor, and a half-made ``.venv``.
Defects reproduced, then fixed:

- an existing output that is not a regular file (a FIFO, a character device such as /dev/null, or a link
  to one) was replaced by a regular file (``intentvcs.core.atomic``: a temporary sibling renamed onto
  it): as root ``--out /dev/null`` deleted the system's /dev/null, a FIFO's reader waited forever, and
  ``--out /dev/stdout`` (a pipe) failed naming a temporary path in /proc. A FIFO or a character device
  is now written as ``open`` would write it (and never removed); a block device or a socket is refused;
- ``predict --engine ray`` waited forever when no node of the cluster could host one actor
  (``--cpus-per-worker`` above every node's CPUs; with ``--provider cuda``, no node with a GPU and those
  CPUs): Ray Data waits for its actors without a limit, and its log is silenced; it now fails in a
  second, naming --cpus-per-worker and the largest node. With ``--provider cuda`` and no
  ``--ray-address`` the local cluster took every CPU of the machine, not ``workers * cpus_per_worker``
  as documented; the summary counted actors that had no room to start;
- ``scripts/setup.sh`` took ``.venv/bin/python`` for a finished venv: one left without ``activate`` or
  pip (Debian without python3-venv, an interrupted first run) failed every rerun at
  ``. .venv/bin/activate`` until deleted by hand.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import stat
import subprocess
import sys
import tempfile
import textwrap
import threading
from pathlib import Path

import pytest

from intentvcs.cli import exit_codes
from intentvcs.cli.main import main
from intentvcs.core import atomic
from tests.helpers.bundle import make_tiny_bundle

ROOT = Path(__file__).resolve().parents[1]
ROWS = [{"id": f"r{i}", "text": f"play song number {i}"} for i in range(6)]
NULL_DEVICE = os.makedev(1, 3)  # /dev/null's numbers on Linux


@pytest.fixture(scope="module")
def bundle(tmp_path_factory) -> Path:
    return make_tiny_bundle(tmp_path_factory.mktemp("special") / "model")


@pytest.fixture
def data(tmp_path) -> Path:
    path = tmp_path / "in.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in ROWS), encoding="utf-8")
    return path


def predict(bundle: Path, data: Path, out: str | Path, *options: str) -> int:
    return main(["predict", "--bundle", str(bundle), "--data", str(data), "--out", str(out), *options])


def hidden(folder: Path) -> list[str]:
    """Temporary files left in ``folder`` (they start with a dot)."""
    return sorted(p.name for p in folder.iterdir() if p.name.startswith("."))


@contextlib.contextmanager
def fifo_reader(fifo: Path):
    """A thread reading ``fifo`` to its end; yields a dict that holds ``data`` once it has.

    It opens the FIFO through a hard link of its own, so that it reads that FIFO even if the path is
    replaced; when nothing ever opens it for writing, the context's end opens it, so the thread ends.
    """
    keep = fifo.with_name(fifo.name + ".inode")
    os.link(fifo, keep)
    got: dict[str, bytes] = {}

    def read() -> None:
        with open(keep, "rb") as handle:
            got["data"] = handle.read()

    thread = threading.Thread(target=read, daemon=True)
    thread.start()
    try:
        yield got
    finally:
        thread.join(timeout=20)
        if thread.is_alive():  # no writer came: end the reader's wait
            os.close(os.open(keep, os.O_WRONLY | os.O_NONBLOCK))
            thread.join(timeout=10)
        keep.unlink()


def null_copy(folder: Path, name: str = "null") -> Path:
    """A character device with /dev/null's numbers, made in ``folder`` (skips where mknod is not allowed)."""
    path = folder / name
    try:
        os.mknod(path, stat.S_IFCHR | 0o666, NULL_DEVICE)
    except (PermissionError, OSError) as exc:
        pytest.skip(f"mknod of a character device is not permitted here ({exc})")
    return path


def is_null_device(path: str | Path) -> bool:
    info = os.lstat(path)
    return stat.S_ISCHR(info.st_mode) and info.st_rdev == NULL_DEVICE


# --------------------------------------------------------------------------- a FIFO
def test_a_fifo_is_written_through_and_stays_a_fifo(tmp_path):
    fifo = tmp_path / "answers.jsonl"
    os.mkfifo(fifo)
    payload = b"".join(b'{"row": %d}\n' % i for i in range(20000))  # past a pipe's buffer: it streams
    with fifo_reader(fifo) as got:
        with atomic.streamed(fifo) as handle:
            handle.write(payload)
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode), "the FIFO was replaced by a regular file"
    assert got.get("data") == payload
    assert hidden(tmp_path) == []
    with fifo_reader(fifo) as got:
        atomic.write_text(fifo, "one\n")
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode) and got.get("data") == b"one\n"


def test_a_fifo_among_several_outputs_gets_its_content_and_none_removes_nothing(tmp_path):
    fifo, report = tmp_path / "stream.txt", tmp_path / "report.json"
    os.mkfifo(fifo)
    with fifo_reader(fifo) as got:
        atomic.write_files({report: "{}\n", fifo: "streamed\n"})
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode) and got.get("data") == b"streamed\n"
    assert report.read_text() == "{}\n" and hidden(tmp_path) == []
    # "A file the new outputs no longer have" is removed; a FIFO is no such file.
    atomic.write_files({fifo: None, report: None})
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode) and not report.exists()


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs Linux's /dev/full, a device every write to fails")
def test_a_stream_that_cannot_be_written_publishes_no_folder_and_no_file(tmp_path):
    """A folder's result file on a stream that fails (a reader gone; /dev/full here): written after the folder
    was published, it left the folder published and its other files not, and the command failed."""
    out, side = tmp_path / "out", tmp_path / "side.json"
    with pytest.raises(OSError):
        with atomic.directory(out, atomic.OutputKind("marker.json"), also={side: "side\n", "/dev/full": "result\n"}) \
                as folder:
            (folder / "marker.json").write_text("{}")
    assert not out.exists() and not side.exists() and hidden(tmp_path) == []


def test_predict_writes_its_answers_into_a_fifo(bundle, data, tmp_path, capsys):
    assert predict(bundle, data, tmp_path / "local.jsonl") == exit_codes.OK
    fifo = tmp_path / "out.jsonl"
    os.mkfifo(fifo)
    with fifo_reader(fifo) as got:
        code = predict(bundle, data, fifo)
    assert code == exit_codes.OK, capsys.readouterr().err
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode), "predict replaced the FIFO by a regular file"
    assert got.get("data") == (tmp_path / "local.jsonl").read_bytes()
    assert hidden(tmp_path) == []


# --------------------------------------------------------------------------- character devices
def test_a_character_device_is_written_to_not_replaced(bundle, data, tmp_path, capsys):
    device = null_copy(tmp_path)
    with atomic.streamed(device) as handle:
        handle.write(b"gone\n")
    assert is_null_device(device), "the device was replaced by a regular file"
    atomic.write_json(device, {"a": 1})
    atomic.write_files({device: None})
    assert is_null_device(device) and hidden(tmp_path) == []
    assert predict(bundle, data, device) == exit_codes.OK, capsys.readouterr().err
    assert is_null_device(device) and hidden(tmp_path) == []


def test_a_link_to_a_device_is_the_device(tmp_path):
    device = null_copy(tmp_path)
    link = tmp_path / "out.jsonl"
    link.symlink_to(device)
    with atomic.streamed(link) as handle:
        handle.write(b"x\n")
    atomic.write_text(link, "y\n")
    assert link.is_symlink() and os.readlink(link) == str(device) and is_null_device(device)
    assert hidden(tmp_path) == []


def test_the_real_dev_null_is_written_to_and_kept(tmp_path, monkeypatch):
    # First on a copy: where the design would replace a device, this stops before /dev/null is touched.
    copy = null_copy(tmp_path)
    atomic.write_text(copy, "x\n")
    assert is_null_device(copy)
    real_replace, real_unlink = os.replace, os.unlink

    def guarded(function):
        def call(*paths, **kwargs):
            if any(os.path.realpath(p) == "/dev/null" for p in paths if isinstance(p, (str, os.PathLike))):
                raise AssertionError(f"{function.__name__}{paths} would change the system's /dev/null")
            return function(*paths, **kwargs)
        return call

    monkeypatch.setattr(atomic.os, "replace", guarded(real_replace))
    monkeypatch.setattr(atomic.os, "unlink", guarded(real_unlink))
    before = os.lstat("/dev/null")
    with atomic.streamed("/dev/null") as handle:
        handle.write(b"discarded\n")
    atomic.write_files({"/dev/null": "discarded\n"})
    after = os.lstat("/dev/null")
    assert (after.st_ino, after.st_rdev, after.st_mode) == (before.st_ino, before.st_rdev, before.st_mode)


def test_dev_stdout_as_a_pipe_receives_the_output(tmp_path):
    """`--out /dev/stdout | jq`: /dev/stdout names a pipe (through /proc/self/fd/1, whose link "pipe:[N]"
    resolves to no path); the temporary file was made in /proc and the write failed naming it."""
    script = textwrap.dedent("""
        from intentvcs.core import atomic
        with atomic.streamed("/dev/stdout") as handle:
            handle.write(b"streamed\\n")
        atomic.write_text("/dev/stdout", "staged\\n")
    """)
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, timeout=120)
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    assert done.stdout == b"streamed\nstaged\n"


def test_predict_out_dev_stdout_gives_the_answers_alone_on_stdout(bundle, data, tmp_path):
    """The answers on standard output, and the run's summary on standard error, so that the output is JSONL."""
    assert predict(bundle, data, tmp_path / "local.jsonl") == exit_codes.OK
    done = subprocess.run([sys.executable, "-m", "intentvcs.cli.main", "predict", "--bundle", str(bundle),
                           "--data", str(data), "--out", "/dev/stdout"], cwd=ROOT, capture_output=True, timeout=300)
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    assert done.stdout == (tmp_path / "local.jsonl").read_bytes()
    summary = json.loads(done.stderr.decode().strip().splitlines()[-1])
    assert summary["rows"] == len(ROWS)


def test_evaluate_out_dev_stdout_gives_the_figures_alone_on_stdout(bundle, tmp_path):
    """evaluate's headline followed its figures on standard output, two JSON documents where a reader of
    ``--out /dev/stdout`` takes one: the headline goes to standard error then, as predict's summary does."""
    from tests.helpers.bundle import DEFAULT_LABELS

    labelled = tmp_path / "labelled.jsonl"
    labelled.write_text("".join(json.dumps({"text": f"play song number {i}", "labels": [DEFAULT_LABELS[0]]}) + "\n"
                                for i in range(4)), encoding="utf-8")
    done = subprocess.run([sys.executable, "-m", "intentvcs.cli.main", "evaluate", "--bundle", str(bundle),
                           "--data", str(labelled), "--out", "/dev/stdout"], cwd=ROOT, capture_output=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    figures = json.loads(done.stdout)  # one document: the figures
    assert figures["n"] == 4 and "per_label" in figures
    assert '"accuracy"' in done.stderr.decode()


def test_a_character_device_may_be_several_outputs_and_an_input(tmp_path):
    """/dev/null for two outputs was refused as "two outputs name the same file", and /dev/stdin read beside
    /dev/stdout written on one terminal as "the output is the input": a device replaces nothing. Files and
    FIFOs stay checked."""
    assert atomic.check_targets(["/dev/null", "/dev/null"], inputs=["/dev/null"]) == [Path("/dev/null")] * 2
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(ValueError, match="two outputs name the same file"):
        atomic.check_targets([fifo, fifo])
    with pytest.raises(ValueError, match="is the input"):
        atomic.check_targets([fifo], inputs=[fifo])


# --------------------------------------------------------------------------- refused: block devices, sockets
def test_a_block_device_or_a_socket_is_refused_before_anything_is_written(bundle, data, tmp_path, capsys):
    short = Path(tempfile.mkdtemp(prefix="sock"))  # a socket's path must be short
    try:
        sock_path = short / "s.jsonl"
        with socket.socket(socket.AF_UNIX) as server:
            server.bind(str(sock_path))
            with pytest.raises(ValueError, match=f"{sock_path} is a socket"):
                atomic.check_targets([sock_path])
            with pytest.raises(ValueError, match="is a socket"):
                atomic.write_text(sock_path, "x")
            assert predict(bundle, data, sock_path) == exit_codes.BAD_INPUT
            assert f"{sock_path} is a socket" in capsys.readouterr().err
            assert stat.S_ISSOCK(os.lstat(sock_path).st_mode)
    finally:
        shutil.rmtree(short, ignore_errors=True)
    block = tmp_path / "disk"
    try:
        os.mknod(block, stat.S_IFBLK | 0o600, os.makedev(7, 200))  # a loop device number; never opened
    except (PermissionError, OSError) as exc:
        pytest.skip(f"mknod of a block device is not permitted here ({exc})")
    with pytest.raises(ValueError, match=f"{block} is a block device"):
        with atomic.streamed(block) as handle:
            handle.write(b"x")
    assert predict(bundle, data, block) == exit_codes.BAD_INPUT
    assert f"{block} is a block device" in capsys.readouterr().err
    assert stat.S_ISBLK(os.lstat(block).st_mode) and hidden(tmp_path) == []


# --------------------------------------------------------------------------- Ray: room for one actor
class Planned(Exception):
    """Raised by the stand-in for the pipeline: the checks before it are what is tested."""


def fake_cluster(monkeypatch, nodes: list[dict], seen: dict):
    """No cluster: ``ray`` answers with ``nodes`` (each node's resources; one dead node besides), and the
    pipeline records what it was asked for."""
    import ray

    from intentvcs.service import batch_predict

    total: dict[str, float] = {}
    for node in nodes:
        for key, value in node.items():
            total[key] = total.get(key, 0) + value

    def answers_dataset(ray, source, spans, chunk_rows, engine, workers, cpus_per_worker, gpu):
        seen.update(workers=workers, cpus_per_worker=cpus_per_worker, gpu=gpu)
        raise Planned

    monkeypatch.setattr(batch_predict, "_ray_init", lambda ray, address, num_cpus: seen.update(num_cpus=num_cpus))
    monkeypatch.setattr(ray, "is_initialized", lambda: "num_cpus" in seen)
    monkeypatch.setattr(ray, "shutdown", lambda: None)
    monkeypatch.setattr(ray, "cluster_resources", lambda: dict(total))
    monkeypatch.setattr(ray, "nodes", lambda: [{"Alive": True, "Resources": dict(n)} for n in nodes]
                        + [{"Alive": False, "Resources": {"CPU": 64.0, "GPU": 8.0}}])
    monkeypatch.setattr(batch_predict, "_answers_dataset", answers_dataset)


def test_no_node_with_the_cpus_of_one_actor_is_refused_naming_the_largest(bundle, data, tmp_path, monkeypatch):
    from intentvcs.service import batch_predict

    seen: dict = {}
    fake_cluster(monkeypatch, [{"CPU": 1.0}, {"CPU": 3.0}], seen)
    source = batch_predict.Source.open(data)
    with pytest.raises(ValueError) as caught:  # the dead node's 64 CPUs do not count
        batch_predict.predict_ray(source, tmp_path / "out.jsonl", bundle, cpus_per_worker=4)
    message = str(caught.value)
    assert "--cpus-per-worker 4" in message and "3 CPUs" in message, message
    assert "workers" not in seen and not (tmp_path / "out.jsonl").exists()


def test_cuda_needs_one_node_with_a_gpu_and_the_cpus_of_one_actor(bundle, data, tmp_path, monkeypatch):
    from intentvcs.service import batch_predict

    seen: dict = {}
    # GPUs and CPUs enough in the cluster, not on one node.
    fake_cluster(monkeypatch, [{"CPU": 8.0}, {"CPU": 1.0, "GPU": 1.0}], seen)
    source = batch_predict.Source.open(data)
    with pytest.raises(ValueError) as caught:
        batch_predict.predict_ray(source, tmp_path / "out.jsonl", bundle, provider="cuda", cpus_per_worker=2)
    message = str(caught.value)
    assert "--cpus-per-worker 2" in message and "GPU" in message and "1 CPU" in message, message
    assert "workers" not in seen


def test_the_pool_is_no_larger_than_the_nodes_can_host(bundle, data, tmp_path, monkeypatch):
    from intentvcs.service import batch_predict

    seen: dict = {}
    fake_cluster(monkeypatch, [{"CPU": 3.0}, {"CPU": 2.0}, {"CPU": 1.0}], seen)  # 6 CPUs, room for 2 actors of 2
    source = batch_predict.Source.open(data)
    with pytest.raises(Planned):
        batch_predict.predict_ray(source, tmp_path / "out.jsonl", bundle, cpus_per_worker=2, workers=5,
                                  chunk_rows=1)
    assert (seen["workers"], seen["cpus_per_worker"]) == (2, 2)
    seen.clear()
    fake_cluster(monkeypatch, [{"CPU": 4.0, "GPU": 2.0}, {"CPU": 1.0, "GPU": 1.0}], seen)
    with pytest.raises(Planned):  # the 1-CPU GPU node hosts none: one GPU per actor, 2 CPUs
        batch_predict.predict_ray(source, tmp_path / "out.jsonl", bundle, provider="cuda", cpus_per_worker=2,
                                  chunk_rows=1)
    assert (seen["workers"], seen["gpu"]) == (2, True)


def test_a_cluster_given_by_address_may_add_nodes_so_it_is_waited_for_uncapped(bundle, data, tmp_path, monkeypatch,
                                                                                caplog):
    """An autoscaling cluster (its head without CPUs for actors, workers added on demand) was refused, and the
    workers asked for cut to the nodes up now: a cluster given by address is warned of and waited for."""
    from intentvcs.service import batch_predict

    seen: dict = {}
    fake_cluster(monkeypatch, [{"CPU": 0.0}], seen)
    source = batch_predict.Source.open(data)
    with pytest.raises(Planned):
        batch_predict.predict_ray(source, tmp_path / "out.jsonl", bundle, cpus_per_worker=2, workers=3,
                                  chunk_rows=1, address="auto")
    assert seen["workers"] == 3
    assert "no node of the Ray cluster can host one actor" in caplog.text and "waiting for the cluster" in caplog.text


def test_a_local_cuda_cluster_gets_workers_times_cpus_per_worker_cpus(bundle, data, tmp_path, monkeypatch):
    from intentvcs.service import batch_predict

    seen: dict = {}
    fake_cluster(monkeypatch, [{"CPU": 6.0, "GPU": 2.0}], seen)
    source = batch_predict.Source.open(data)
    with pytest.raises(Planned):
        batch_predict.predict_ray(source, tmp_path / "out.jsonl", bundle, provider="cuda", workers=2,
                                  cpus_per_worker=3, chunk_rows=1)
    assert seen["num_cpus"] == 6 and seen["workers"] == 2


@pytest.fixture
def ray_one_cpu(monkeypatch):
    """A Ray session of this process, on a local cluster of one CPU (predict uses it as it is)."""
    import logging

    import ray

    monkeypatch.setenv("RAY_USAGE_STATS_ENABLED", "0")
    ray.init(address="local", num_cpus=1, include_dashboard=False, logging_level=logging.WARNING)
    try:
        yield ray
    finally:
        ray.shutdown()


def test_a_real_cluster_without_room_for_one_actor_fails_in_seconds(bundle, data, tmp_path, ray_one_cpu, capsys):
    result: dict = {}

    def run() -> None:
        result["code"] = predict(bundle, data, tmp_path / "out.jsonl", "--engine", "ray", "--cpus-per-worker", "2",
                                 "--chunk-rows", "2")

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(timeout=120)
    assert not thread.is_alive(), "the Ray run is still waiting for an actor that no node can host"
    err = capsys.readouterr().err
    assert result["code"] == exit_codes.BAD_INPUT, err[-2000:]
    assert "--cpus-per-worker 2" in err and "1 CPU" in err, err[-2000:]
    assert not (tmp_path / "out.jsonl").exists() and hidden(tmp_path) == []
    # Room for one actor of one CPU: two asked for, one runs, and the summary says one.
    assert predict(bundle, data, tmp_path / "local.jsonl", "--chunk-rows", "2") == exit_codes.OK
    capsys.readouterr()
    code = predict(bundle, data, tmp_path / "out.jsonl", "--engine", "ray", "--workers", "2", "--chunk-rows", "2")
    captured = capsys.readouterr()
    assert code == exit_codes.OK, captured.err[-2000:]
    assert json.loads(captured.out)["workers"] == 1
    assert (tmp_path / "out.jsonl").read_bytes() == (tmp_path / "local.jsonl").read_bytes()


# --------------------------------------------------------------------------- scripts/setup.sh and a half-made venv
FAKE_PYTHON = """#!/usr/bin/env bash
# A stand-in interpreter: logs its arguments; "-m venv [--clear] DIR" makes DIR a venv of stand-ins whose
# pip works (a "pip" file beside the interpreter says so); anything else succeeds.
echo "$0 $*" >> "$SETUP_LOG"
here=$(dirname "$0")
case "$*" in
  "-m venv "*)
    dir=${@: -1}
    [[ " $* " == *" --clear "* ]] && rm -rf "$dir"
    mkdir -p "$dir/bin"
    cp "$0" "$dir/bin/python"
    touch "$dir/bin/pip"
    printf 'PATH="%s/bin:$PATH"\\n' "$PWD/$dir" > "$dir/bin/activate" ;;
  "-m ensurepip"*) touch "$here/pip" ;;
  "-m pip --version") [ -f "$here/pip" ] || { echo "No module named pip" >&2; exit 1; } ;;
  "-m pip "*) [ -f "$here/pip" ] || { echo "No module named pip" >&2; exit 1; } ;;
  "--version") echo "Python 3.11.9" ;;
  "-c import torch"*) echo "2.13.0+cpu" ;;
esac
exit 0
"""


def run_setup(tmp_path: Path, venv: str) -> tuple[subprocess.CompletedProcess, list[str]]:
    """scripts/setup.sh in a copy of the project (scripts/ only: the stand-ins read nothing else), with
    ``venv`` one of "none", "no-activate", "no-pip", "healthy"; the interpreter calls it made."""
    project = tmp_path / "project"
    (project / "scripts").mkdir(parents=True)
    shutil.copy(ROOT / "scripts" / "setup.sh", project / "scripts" / "setup.sh")
    fake = tmp_path / "python3"
    fake.write_text(FAKE_PYTHON)
    fake.chmod(0o755)
    log = tmp_path / "calls.log"
    log.write_text("")
    bin_dir = project / ".venv" / "bin"
    if venv != "none":
        bin_dir.mkdir(parents=True)
        shutil.copy(fake, bin_dir / "python")
        (bin_dir / "stale").write_text("left by the first run")
    if venv in ("no-pip", "healthy"):
        (bin_dir / "activate").write_text(f'PATH="{bin_dir}:$PATH"\n')
    if venv == "healthy":
        (bin_dir / "pip").touch()
    env = {**os.environ, "PYTHON": str(fake), "SETUP_LOG": str(log), "PIP_EXTRA_INDEX_URL": ""}
    env.pop("VIRTUAL_ENV", None)
    done = subprocess.run(["bash", str(project / "scripts" / "setup.sh")], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=60)
    calls = [line.replace(str(project), "<project>").replace(str(fake), "<python>")
             for line in log.read_text().splitlines()]
    return done, calls


def test_setup_recreates_a_venv_left_without_activate(tmp_path):
    done, calls = run_setup(tmp_path, "no-activate")
    assert done.returncode == 0, (done.stderr, calls)
    assert "<python> -m venv --clear .venv" in calls, calls
    assert not (tmp_path / "project" / ".venv" / "bin" / "stale").exists()  # cleared, not patched
    installs = [c for c in calls if " -m pip install " in c]
    assert installs and all(c.startswith("<project>/.venv/bin/python ") for c in installs), calls
    assert any("torch==2.13.0+cpu" in c for c in installs) and any('-e .[all]' in c for c in installs), calls


def test_setup_gives_a_venv_without_pip_pip_and_keeps_what_it_holds(tmp_path):
    """A venv made without pip (venv --without-pip, uv) was remade with --clear: its packages were lost."""
    done, calls = run_setup(tmp_path, "no-pip")
    assert done.returncode == 0, (done.stderr, calls)
    assert ".venv/bin/python -m ensurepip -q" in calls and not [c for c in calls if "-m venv" in c], calls
    assert (tmp_path / "project" / ".venv" / "bin" / "stale").exists()


def test_setup_keeps_a_healthy_venv_and_makes_a_missing_one(tmp_path):
    done, calls = run_setup(tmp_path, "healthy")
    assert done.returncode == 0, (done.stderr, calls)
    assert not [c for c in calls if "-m venv" in c], calls
    assert (tmp_path / "project" / ".venv" / "bin" / "stale").exists()
    shutil.rmtree(tmp_path / "project")
    done, calls = run_setup(tmp_path, "none")
    assert done.returncode == 0, (done.stderr, calls)
    assert [c for c in calls if "-m venv" in c] == ["<python> -m venv --clear .venv"], calls
