"""The CLI contract: outputs, one-line errors, exit codes, nothing overwritten on failure."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from colopred.cli import main
from colopred.profile import JobProfile

from .conftest import DATA, FIXTURES, FULL_REPORT, ROOT, SAMPLE

P1 = DATA / "profiles" / "ncu" / "resnet18-b64-fp32.json"
P2 = DATA / "profiles" / "ncu" / "lstm_lm-b64-fp32.json"
P3 = DATA / "profiles" / "ncu" / "vgg16-b32-fp32.json"


def run(capsys, *args):
    code = main([str(a) for a in args])
    out, err = capsys.readouterr()
    return code, out, err


def test_profile_ncu_and_show(tmp_path, capsys):
    out = tmp_path / "p.json"
    code, _, err = run(capsys, "profile", "ncu", SAMPLE, "--name", "resnet18-b64-fp32", "--iter-ms", "16", "--mem-gib", "2.4", "-o", out)
    assert code == 0 and "M = 36." in err
    p = JobProfile.from_json(out)
    assert p.name == "resnet18-b64-fp32" and p.peak_memory_gib == 2.4 and p.iteration_ms == 16
    code, text, _ = run(capsys, "profile", "show", out)
    assert code == 0 and "DRAM bandwidth (M)" in text and "36." in text


@pytest.mark.parametrize("args, needle", [
    (["profile", "ncu", "/nope.csv", "--name", "x", "--iter-ms", "10", "-o", "{out}"], "/nope.csv: no such file"),
    (["profile", "ncu", str(FULL_REPORT), "--name", "x", "--iter-ms", "0.001", "-o", "{out}"], "milliseconds"),
    (["profile", "ncu", str(FULL_REPORT), "--name", "x", "--iter-ms", "-5", "-o", "{out}"], "positive number"),
    (["predict", str(P1), "--mode", "mps"], "at least two profiles"),
    (["predict", str(P1), "{bad}", "--mode", "mps"], "not valid JSON"),
    (["predict", str(P1), str(P2), "--mode", "mps", "--model", "{bad}"], "not a colopred model manifest"),
    (["measure", "--out", "{dir}", "--resume"], "nothing to resume"),
    (["measure", "--out", "{dir}", "--jobs", "densenet121-b32-fp32,resnet18-b64-fp32", "--sets", "pairs", "--mode", "mps"], "reserved"),
])
def test_errors_are_one_line_and_nonzero(tmp_path, capsys, args, needle):
    bad = tmp_path / "bad.json"
    bad.write_text("{oops")
    out = tmp_path / "existing.json"
    out.write_text("precious")
    args = [a.format(out=out, bad=bad, dir=tmp_path / "camp") for a in args]
    code, _stdout, err = run(capsys, *args)
    assert code != 0
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("colopred: error:") and needle in lines[0]
    assert "Traceback" not in err
    assert out.read_text() == "precious"  # nothing already written is lost


def test_predict_json_contract(capsys):
    code, out, _ = run(capsys, "predict", P1, P2, P3, "--mode", "timeslice", "--json")
    assert code == 0
    d = json.loads(out)
    assert set(d) == {"mode", "jobs", "delta", "throughput", "fits_memory", "memory_gib", "pays_off", "profile_source", "warnings"}
    assert d["profile_source"] == "ncu" and d["warnings"] == [] and d["pays_off"] == (d["throughput"] > 1 and d["fits_memory"])
    assert d["mode"] == "timeslice" and [j["name"] for j in d["jobs"]] == ["resnet18-b64-fp32", "lstm_lm-b64-fp32", "vgg16-b32-fp32"]
    for j in d["jobs"]:
        lo, hi = j["interval"]
        assert lo <= j["slowdown"] <= hi
        assert j["collocated_iteration_ms"] == pytest.approx(j["slowdown"] * j["solo_iteration_ms"])
    assert d["throughput"] == pytest.approx(sum(1 / j["slowdown"] for j in d["jobs"]))
    assert isinstance(d["fits_memory"], bool)


def test_predict_picks_the_model_of_the_profiles_source(capsys):
    """Without --model, GPM profiles get the model for GPM profiles (``profile_source`` in the JSON); a set mixing ncu and
    GPM profiles, or GPM profiles given to an ncu model, is refused in one line."""
    g1, g2 = (DATA / "profiles" / "nvml" / p.name for p in (P1, P2))
    code, out, _ = run(capsys, "predict", g1, g2, "--mode", "mps", "--json")
    d = json.loads(out)
    assert code == 0 and d["profile_source"] == "nvml" and [j["name"] for j in d["jobs"]] == ["resnet18-b64-fp32", "lstm_lm-b64-fp32"]
    code, out, _ = run(capsys, "predict", g1, g2, "--mode", "mps")
    assert code == 0 and "model for nvml GPM profiles" in out
    for args, needle in (([P1, g2], "resnet18-b64-fp32 is an ncu profile and lstm_lm-b64-fp32 an NVML GPM profile"),
                         ([g1, g2, "--model", ROOT / "colopred" / "runtime" / "models" / "h100-mps.json"],
                          "resnet18-b64-fp32 is an NVML GPM profile and this mps model was trained on ncu profiles")):
        code, out, err = run(capsys, "predict", *args, "--mode", "mps")
        lines = err.strip().splitlines()
        assert code != 0 and out == "" and len(lines) == 1 and needle in lines[0] and "Traceback" not in err


def test_table_command(capsys):
    code, out, _ = run(capsys, "table", DATA / "campaigns" / "h100-smoke")
    assert code == 0 and "slowdown" in out and "resnet18-b64-fp32" in out


@pytest.mark.slow
def test_train_and_use_own_model(tmp_path, capsys):
    code, _, err = run(capsys, "train", "--data", DATA, "--out", tmp_path / "mine", "--modes", "mps", "--no-metrics")
    assert code == 0
    man = json.loads((tmp_path / "mine-mps.json").read_text())
    assert man["mode"] == "mps" and man["gpu"] == "NVIDIA H100 80GB HBM3" and man["data_hash"]
    code, out, _ = run(capsys, "predict", P1, P2, "--mode", "mps", "--model", tmp_path / "mine-mps.json", "--json")
    assert code == 0 and len(json.loads(out)["jobs"]) == 2
    code, _, err = run(capsys, "predict", P1, P2, "--mode", "timeslice", "--model", tmp_path / "mine-mps.json")
    assert code != 0 and "not 'timeslice'" in err


def test_console_script_no_traceback(tmp_path):
    p = subprocess.run([sys.executable, "-m", "colopred", "profile", "show", str(tmp_path / "missing.json")],
                       capture_output=True, text=True)
    assert p.returncode == 2 and p.stderr.count("\n") == 1 and "Traceback" not in p.stderr


def test_a_closed_pipe_stops_the_cli_quietly():
    """``colopred predict ... | head``: the reader is gone before colopred writes, so its first write fails with
    EPIPE; it exits 1 without an error line or a traceback (stdout is a pipe whose read end is closed)."""
    import os

    r, w = os.pipe()
    os.close(r)
    try:
        p = subprocess.run([sys.executable, "-m", "colopred", "predict", str(P1), str(P2), "--mode", "mps", "--json"],
                           stdout=w, stderr=subprocess.PIPE, text=True, cwd=ROOT)
    finally:
        os.close(w)
    assert p.returncode == 1 and p.stderr == "", p.stderr


def test_profile_retime(tmp_path, capsys):
    out = tmp_path / "r.json"
    code, _, err = run(capsys, "profile", "retime", P1, "--iter-ms", "12.5", "-o", out)
    assert code == 0 and "re-timed" in err
    before, after = JobProfile.from_json(P1), JobProfile.from_json(out)
    assert after.iteration_ms == 12.5 and after.gpu_busy_ms == pytest.approx(before.gpu_busy_ms)
    out.write_text("kept")
    code, _, err = run(capsys, "profile", "retime", P1, "--iter-ms", "-2", "-o", out)
    assert code != 0 and str(P1) in err and "positive number" in err and len(err.strip().splitlines()) == 1
    assert out.read_text() == "kept"  # nothing written on bad input


def test_profile_overlap_from_a_torch_trace_or_a_timeline(tmp_path, capsys):
    """`colopred profile overlap` sets stream_overlap from a raw torch.profiler trace (recorded on our H100) or
    from a colopred timeline table, and refuses files that hold no kernel, keeping the output untouched."""
    import gzip as _gzip

    from colopred.measurement.profiling.timeline import read_timeline, stream_overlap

    timelines = DATA / "timelines"
    gin = str(Path(P1).parent / "gin-b1024-fp32.json")
    out = tmp_path / "gin.json"
    code, _, err = run(capsys, "profile", "overlap", gin, "--timeline", FIXTURES / "gin-b1024-fp32.trace.json.gz", "-o", out)
    assert code == 0 and "stream_overlap" in err
    expect = stream_overlap(read_timeline(timelines / "gin-b1024-fp32.timeline.csv.gz"))
    assert JobProfile.from_json(out).stream_overlap == pytest.approx(expect, abs=1e-6)
    lstm = str(Path(P1).parent / "lstm_lm-b512-bf16.json")
    code, _, _ = run(capsys, "profile", "overlap", lstm, "--timeline", timelines / "lstm_lm-b512-bf16.timeline.csv.gz", "-o", out)
    assert code == 0 and JobProfile.from_json(out).stream_overlap > 1.3
    out.write_text("kept")
    no_kernels = tmp_path / "cpu_only.json.gz"
    with _gzip.open(no_kernels, "wt") as f:
        json.dump({"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "aten::add", "ts": 0, "dur": 3}]}, f)
    broken = tmp_path / "broken.json"
    broken.write_text("{not json")
    for bad, msg in ((no_kernels, "no GPU kernel"), (broken, "not a readable Chrome trace"), (tmp_path / "x.txt", "no such file")):
        code, _, err = run(capsys, "profile", "overlap", gin, "--timeline", bad, "-o", out)
        assert code != 0 and str(bad) in err and msg in err and len(err.strip().splitlines()) == 1
    assert out.read_text() == "kept"


def test_every_option_has_help_and_shows_its_default():
    import argparse

    from colopred.cli import build_parser

    def parsers(p):
        yield p
        for a in p._actions:
            if isinstance(a, argparse._SubParsersAction):
                for sub in a.choices.values():
                    yield from parsers(sub)

    for p in parsers(build_parser()):
        for a in p._actions:
            if isinstance(a, (argparse._HelpAction, argparse._VersionAction, argparse._SubParsersAction)):
                continue
            assert a.help, f"{p.prog}: {a.option_strings or a.dest} has no help text"
            if a.help is argparse.SUPPRESS:
                continue
            shown = p.formatter_class(p.prog)._get_help_string(a)
            if a.default not in (None, False) and a.nargs != 0:
                assert "%(default)s" in shown or str(a.default) in shown, f"{p.prog} {a.option_strings}: default not shown"


@pytest.mark.parametrize("args", [["train", "--data", "x", "--out", "y", "--modes", "mps,gpu"],
                                  ["evaluate", "--modes", "fast"]])
def test_unknown_modes_are_refused_in_one_line(capsys, args):
    code, _out, err = run(capsys, *args)
    assert code == 2 and err.count("\n") == 1 and "--modes: unknown mode" in err and "timeslice, mps" in err


def test_python_dash_m_colopred_is_the_cli():
    import subprocess
    import sys

    r = subprocess.run([sys.executable, "-m", "colopred", "--help"], capture_output=True, text=True)
    assert r.returncode == 0 and "predict" in r.stdout and "profile" in r.stdout and "measure" in r.stdout


def test_add_timeline_completes_a_gpm_profile(tmp_path, capsys):
    """`colopred profile add-timeline` sets a GPM profile's kernel count, stream overlap and MPS wait from the job's
    solo timeline (recorded on our H100 with launch configurations), as timeline_fields computes them; it refuses,
    in one line naming the file and leaving the output untouched, a timeline without launch configurations, a raw
    trace without --iterations, and a table without its .json."""
    import shutil as _shutil

    from colopred.measurement.profiling.timeline import read_timeline, timeline_fields

    launch = DATA / "timelines" / "launch"
    gpm = JobProfile.from_json(DATA / "profiles" / "nvml" / "gin-b1024-fp32.json").with_(
        kernels_per_iteration=None, mps_wait_us=None, stream_overlap=None)
    src = tmp_path / "gin-gpm.json"
    gpm.to_json(src)
    out = tmp_path / "out.json"
    code, _, err = run(capsys, "profile", "add-timeline", src, "--timeline", launch / "gin-b1024-fp32.timeline.csv.gz", "-o", out)
    meta = json.loads((launch / "gin-b1024-fp32.timeline.json").read_text())
    expect = timeline_fields(read_timeline(launch / "gin-b1024-fp32.timeline.csv.gz"), meta["iterations"], meta["device_properties"])
    got = JobProfile.from_json(out)
    assert code == 0 and "mps_wait_us" in err
    assert got.kernels_per_iteration == expect["kernels_per_iteration"] == 302
    assert got.mps_wait_us == pytest.approx(expect["mps_wait_us"]) and got.stream_overlap == pytest.approx(1.0)
    assert got.launch_fill_pct is None and got.busy_fraction == gpm.busy_fraction and got.sm_fill_pct == gpm.sm_fill_pct
    assert got.meta["timeline_fields_from"] == "gin-b1024-fp32.timeline.csv.gz"
    out.write_text("kept")
    lone = tmp_path / "alone.timeline.csv.gz"
    _shutil.copy(launch / "gin-b1024-fp32.timeline.csv.gz", lone)
    for timeline, extra, msg in ((DATA / "timelines" / "gin-b1024-fp32.timeline.csv.gz", [], "no launch configuration"),
                                 (FIXTURES / "gin-b1024-fp32.trace.json.gz", [], "give --iterations N"),
                                 (lone, [], "alone.timeline.json: unreadable or missing")):
        code, _, err = run(capsys, "profile", "add-timeline", src, "--timeline", timeline, *extra, "-o", out)
        assert code != 0 and msg in err and len(err.strip().splitlines()) == 1, err
    assert out.read_text() == "kept"
    # the raw trace with the number of iterations it holds: the launch configurations CUPTI recorded are read
    code, _, err = run(capsys, "profile", "add-timeline", src, "--timeline", FIXTURES / "gin-b1024-fp32.trace.json.gz",
                       "--iterations", "6", "-o", out)
    assert code == 0 and JobProfile.from_json(out).kernels_per_iteration == 302
