import re
import subprocess
import sys

import pytest

from inferscope.config import load_config
from inferscope.errors import ConfigError


def test_defaults(tmp_path):
    c = load_config(env={}, cwd=tmp_path)
    assert c.enabled and c.trace_size_mb == 100 and c.sync_error_margin_us == 1000
    assert c.report_path == "report.md" and c.cpu_sampling_frequency_hz == 200 and c.log_level == "info"


def test_precedence_flags_env_file(tmp_path):
    (tmp_path / ".inferscope.yaml").write_text(
        "enabled: true\nlog_level: debug\ntrace_size_mb: 50\nsync_error_margin_us: 10\nreport_format: html\n"
        "report_path: ./from_file.html\ncuda_version: 12.0\ncpu_sampling_frequency_hz: 200\n")
    c = load_config(env={}, cwd=tmp_path)
    assert (c.trace_size_mb, c.report_format, c.cpu_sampling_frequency_hz, c.cuda_version) == (50, "html", 200, "12.0")
    assert c.sources["trace_size_mb"] == "file"
    c = load_config(env={"INFERSCOPE_TRACE_SIZE_MB": "7", "INFERSCOPE_REPORT_PATH": "env.md"}, cwd=tmp_path)
    assert c.trace_size_mb == 7 and c.report_path == "env.md" and c.sources["report_path"] == "env"
    c = load_config(flags={"report_path": "flag.md", "report_format": None},
                    env={"INFERSCOPE_REPORT_PATH": "env.md"}, cwd=tmp_path)
    assert c.report_path == "flag.md" and c.report_format == "html"


@pytest.mark.parametrize("var,val", [("INFERSCOPE_TRACE_SIZE_MB", "lots"), ("INFERSCOPE_TRACE_SIZE_MB", "-1"),
                                     ("INFERSCOPE_ENABLED", "maybe"), ("INFERSCOPE_LOG_LEVEL", "loud"),
                                     ("INFERSCOPE_REPORT_FORMAT", "pdf"), ("INFERSCOPE_SYNC_ERROR_MARGIN_US", "x")])
def test_bad_env(tmp_path, var, val):
    with pytest.raises(ConfigError, match=var):
        load_config(env={var: val}, cwd=tmp_path)


@pytest.mark.parametrize("text,msg", [("trace_size_mb: [1\n", "not valid YAML"), ("- a\n- b\n", "mapping"),
                                      ("trace_size_mb: big\n", "trace_size_mb"), ("colour: red\n", "unknown key")])
def test_bad_yaml(tmp_path, text, msg):
    (tmp_path / ".inferscope.yaml").write_text(text)
    with pytest.raises(ConfigError, match=msg):
        load_config(env={}, cwd=tmp_path)


def test_log_format(capsys):
    from inferscope import log
    log.set_level("info")
    log.info("Trace collection started (buffer_size_mb=100)")
    log.debug("hidden")
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1
    assert re.fullmatch(r"\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3}\] INFO     Trace collection started \(buffer_size_mb=100\)", err[0])


def test_import_is_light():
    code = "import inferscope, sys; from inferscope import scope; assert 'torch' not in sys.modules and 'numpy' not in sys.modules, sorted(sys.modules)"
    subprocess.run([sys.executable, "-c", code], check=True)


def test_cuda_version_mismatch_warns_only_on_a_different_release():
    from inferscope.collect.session import cuda_version_mismatch
    assert cuda_version_mismatch(None, "13.0") is None
    assert cuda_version_mismatch("13.0", "13.0") is None
    assert cuda_version_mismatch("12", "12.4") is None              # major only: compared as given
    assert cuda_version_mismatch("12", "13.0") is not None
    assert cuda_version_mismatch("12.4", "12.4.1") is None
    assert "13.0" in cuda_version_mismatch("12.4", "13.0")
    assert "without CUDA" in cuda_version_mismatch("12.4", None)
