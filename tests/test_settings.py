"""The service's settings (``INTENTVCS_*``): read from any environment, checked by ``intentvcs serve`` first."""

from __future__ import annotations

import subprocess
import sys

import pytest

from intentvcs.service.settings import Limits, Settings
from tests.helpers.bundle import make_tiny_bundle


def test_gpus_ask_the_platform_for_resources():
    assert "resources" not in Settings.from_env({}).service_config(["/predict"])
    config = Settings.from_env({"INTENTVCS_GPUS": "1", "INTENTVCS_PROVIDER": "cpu"}).service_config(["/predict"])
    assert config["resources"] == {"gpu": 1}


def test_audit_overrides_and_limits_come_from_the_given_environment():
    settings = Settings.from_env({"INTENTVCS_AUDIT_CONFIG": '{"max_new_pairs": 5}', "INTENTVCS_PROVIDER": "cpu"})
    assert settings.audit_config == {"max_new_pairs": 5}
    assert Limits.from_env({"INTENTVCS_MAX_TEXTS": "7"}).max_texts == 7
    with pytest.raises(ValueError, match="INTENTVCS_AUDIT_CONFIG must be a JSON object"):
        Settings.from_env({"INTENTVCS_AUDIT_CONFIG": "[1]"})


def test_chained_requests_are_answered_part_by_part_unless_turned_off():
    assert Settings.from_env({"INTENTVCS_PROVIDER": "cpu"}).segment is True
    assert Settings.from_env({"INTENTVCS_SEGMENT": "0", "INTENTVCS_PROVIDER": "cpu"}).segment is False


@pytest.mark.parametrize("variable, value, message", [
    ("INTENTVCS_SEGMENT", "maybe", "INTENTVCS_SEGMENT='maybe' is not a boolean"),
    ("INTENTVCS_AUDIT_CONFIG", '{"nope": 1}', "INTENTVCS_AUDIT_CONFIG: unknown audit config key(s) ['nope']"),
    ("INTENTVCS_AUDIT_CONFIG", "{oops", "INTENTVCS_AUDIT_CONFIG is not JSON"),
    ("INTENTVCS_MAX_TEXTS", "zero", "INTENTVCS_MAX_TEXTS='zero' is not an integer"),
    ("INTENTVCS_METRICS_TOKEN_REQUIRED", "1", "INTENTVCS_API_TOKEN is not"),
    ("INTENTVCS_FALLBACK_INTENT", " nlu_fallback", "INTENTVCS_FALLBACK_INTENT=' nlu_fallback' is not an intent name"),
    ("INTENTVCS_PROVIDER", "CUDA", "INTENTVCS_PROVIDER='CUDA' is not one of ['auto', 'cpu', 'cuda']"),
])
def test_serve_refuses_a_bad_setting_before_starting(tmp_path, variable, value, message):
    """A bad value would otherwise crash every worker at import, and BentoML restart them forever."""
    bundle = make_tiny_bundle(tmp_path)
    result = subprocess.run([sys.executable, "-m", "intentvcs.cli.main", "serve", "--bundle", str(bundle),
                             "--port", "1"], capture_output=True, text=True, timeout=60,
                            env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), variable: value})
    assert result.returncode == 2 and message in result.stderr, result.stderr[-2000:]


@pytest.mark.skipif("CUDAExecutionProvider" in __import__("onnxruntime").get_available_providers(),
                    reason="this onnxruntime offers CUDA: 'cuda' is a valid choice here")
def test_serve_refuses_cuda_where_onnxruntime_has_none(tmp_path):
    """Every worker would fail to start and BentoML restart it forever (10 times in 45 s, never exiting)."""
    bundle = make_tiny_bundle(tmp_path)
    result = subprocess.run([sys.executable, "-m", "intentvcs.cli.main", "serve", "--bundle", str(bundle),
                             "--port", "1", "--provider", "cuda"], capture_output=True, text=True, timeout=60,
                            env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)})
    assert result.returncode == 2 and "provider 'cuda' requested but onnxruntime" in result.stderr, \
        result.stderr[-2000:]


def test_every_setting_is_documented_in_the_readme():
    """Each INTENTVCS_* variable the service reads has a line in the README (six had none)."""
    import dataclasses
    import re
    from pathlib import Path

    from intentvcs.service import settings

    source = Path(settings.__file__).read_text(encoding="utf-8")
    read = set(re.findall(r'_env_\w+\("([A-Z_]+)"', source)) | set(re.findall(r'ENV_PREFIX \+ "([A-Z_]+)"', source))
    read |= {field.name.upper() for field in dataclasses.fields(settings.Limits)}
    assert len(read) > 25, read  # the patterns still find what the module reads
    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")
    assert sorted(name for name in read if not re.search(rf"`{settings.ENV_PREFIX}{name}\b", readme)) == []
