"""Bad inputs a new user hit with ``colopred import`` and ``colopred profile ncu / add-timeline / retime``, each
made from real recorded files (an export of a real H100 campaign, the real ncu report of a failed application
replay, a real torch.profiler trace and colopred timeline) cut or misused as the user did: every one is refused in
one line naming the file (or argument) and the real problem, exit code 2, no traceback, nothing written."""

import gzip
import hashlib
import os
import subprocess
import sys

import pytest

from colopred.cli import main
from colopred.constants import MAX_BUSY_FRACTION_FROM_NCU
from colopred.errors import InputError
from colopred.measurement.profiling.ncu_csv import read_ncu_csv
from colopred.measurement.profiling.timeline import fields_for_profile
from colopred.profile import JobProfile

from .conftest import DATA, FIXTURES, ROOT, SAMPLE

NCU = DATA / "profiles" / "ncu"
NVML = DATA / "profiles" / "nvml"
TRACE = FIXTURES / "gin-b1024-fp32.trace.json.gz"
TIMELINE = DATA / "timelines" / "alexnet-b128-fp32.timeline.csv.gz"
APP_REPLAY = FIXTURES / "ncu_app_replay_error.csv.gz"
LAB = FIXTURES / "import" / "lab_table.csv"
LAB_COLUMNS = ["--column", "set_id=experiment", "--column", "job=workload", "--column", "mode=sharing",
               "--column", "solo_ms=baseline_iter_ms", "--column", "speed=norm_tput"]


def refused(capsys, argv) -> str:
    """The one error line of ``colopred ARGV``, after checking exit code 2 and no traceback."""
    code = main([str(a) for a in argv])
    _out, err = capsys.readouterr()
    assert "Traceback" not in err
    lines = err.strip().splitlines()
    assert code == 2, f"exit {code}: {err[:500]}"
    assert len(lines) == 1 and lines[0].startswith("colopred: error: "), err[:500]
    return lines[0]


def digest(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture(scope="module")
def export_csv(tmp_path_factory):
    """``colopred export`` of the real campaign h100-c1 (309 rows), as the user's table came."""
    d = tmp_path_factory.mktemp("export")
    assert main(["export", str(DATA / "campaigns" / "h100-c1"), "-o", str(d / "exp.csv"), "-q"]) == 0
    return d / "exp.csv"


# ------------------------------------------------------------------------------- 1, 2: import of a cut table
def test_import_of_a_truncated_gzip_export_is_one_line_exit_2(export_csv, tmp_path):
    """The first 3,000 bytes of a gzipped export: was a 42-line pandas/gzip EOFError traceback, exit 1."""
    cut = tmp_path / "exptrunc.csv.gz"
    cut.write_bytes(gzip.compress(export_csv.read_bytes())[:3000])
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    r = subprocess.run([sys.executable, "-m", "colopred", "import", str(cut), "--out", str(tmp_path / "ds2"), "--profiles", str(NCU)],
                       capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300)
    assert r.returncode == 2, r.stderr[-2000:]
    assert "Traceback" not in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr[-2000:]
    assert f"{cut}: truncated or corrupt gzip file (Compressed file ended before the end-of-stream marker" in r.stderr
    assert not (tmp_path / "ds2").exists()


def test_import_of_a_plain_export_cut_mid_row_says_its_last_row_is_cut_off(export_csv, tmp_path, capsys):
    """The first 5,000 bytes of a plain export: was blamed on mixed GPUs ('NVI', the cut gpu cell)."""
    cut = tmp_path / "exptrunc.csv"
    cut.write_bytes(export_csv.read_bytes()[:5000])
    line = refused(capsys, ["import", cut, "--out", tmp_path / "ds2", "--profiles", NCU])
    assert f"{cut}: its last row (row 25) is cut off after 6 of the header's 8 cells: the file is truncated" in line
    assert "mixes GPUs" not in line
    assert not (tmp_path / "ds2").exists()


def test_import_of_an_export_cut_inside_its_last_cell_is_refused(export_csv, tmp_path, capsys):
    """Cut inside a row's last cell (iterations): every cell is there, but an export ends each line with a line break."""
    text = export_csv.read_text()
    end = text.index("\n", 4000)
    cut = tmp_path / "cutcell.csv"
    cut.write_text(text[: end - 1])
    line = refused(capsys, ["import", cut, "--out", tmp_path / "ds2", "--profiles", NCU])
    assert f"{cut}: its last row (row 21) is cut off: the file does not end with a line break" in line
    cut.write_text(text[: text.index(",", end + 5) + 1])  # cut right after a separator: one cell and an empty one
    line = refused(capsys, ["import", cut, "--out", tmp_path / "ds2", "--profiles", NCU])
    assert "its last row (row 22) is cut off after 2 of the header's 8 cells: the file is truncated" in line
    assert not (tmp_path / "ds2").exists()


def test_whole_tables_still_import(export_csv, tmp_path, capsys):
    """The whole export (gzipped too) imports; a hand-made table in another format may lack the final line break."""
    gz = tmp_path / "exp.csv.gz"
    gz.write_bytes(gzip.compress(export_csv.read_bytes()))
    assert main(["import", str(gz), "--out", str(tmp_path / "ds"), "--profiles", str(NCU), "-q"]) == 0, capsys.readouterr().err
    assert main(["import", str(export_csv), "--out", str(tmp_path / "ds"), "--name", "plain", "--profiles", str(NCU), "-q"]) == 0
    lab = tmp_path / "lab_table.csv"
    lab.write_text(LAB.read_text().rstrip("\n"))
    assert main(["import", str(lab), "--out", str(tmp_path / "lab"), *LAB_COLUMNS, "-q"]) == 0, capsys.readouterr().err


# ------------------------------------------------------------------------------- 3: ncu's own error
def test_a_failed_application_replay_quotes_ncus_own_error(tmp_path, capsys):
    with pytest.raises(InputError) as e:
        read_ncu_csv(APP_REPLAY)
    msg = str(e.value)
    assert msg.startswith(f"{APP_REPLAY}: no ncu CSV header found: ncu reported an error: ")
    assert ('"==ERROR== Unexpected number of profiled kernels. Application replay requires that the execution, combined '
            'with selected filters, guarantees a consistent set of kernels in all passes."') in msg
    assert "--page raw" not in msg and "\n" not in msg
    line = refused(capsys, ["profile", "ncu", APP_REPLAY, "--name", "x", "--iter-ms", "16.3", "-o", tmp_path / "x.json"])
    assert "ncu reported an error" in line and "Unexpected number of profiled kernels" in line
    assert not (tmp_path / "x.json").exists()


def test_ncus_error_line_is_trimmed_and_a_report_without_one_keeps_the_hint(tmp_path):
    lines = gzip.open(APP_REPLAY, "rt").read().splitlines()
    preamble = [l for l in lines if not l.startswith("==ERROR==")]
    assert preamble and len(preamble) < len(lines)
    long = tmp_path / "long.csv"
    long.write_text("\n".join(preamble + ["==ERROR== " + "x" * 1000, "==ERROR== second"]) + "\n")
    with pytest.raises(InputError) as e:
        read_ncu_csv(long)
    assert '"==ERROR== xxx' in str(e.value) and 'xxx..."' in str(e.value) and "second" not in str(e.value)
    assert len(str(e.value)) < len(str(long)) + 300
    plain = tmp_path / "plain.csv"
    plain.write_text("\n".join(preamble) + "\n")
    with pytest.raises(InputError, match="was the report written with `ncu --csv --page raw`"):
        read_ncu_csv(plain)


# ------------------------------------------------------------------------------- 4, 5: add-timeline
@pytest.mark.parametrize("n", [0, -3])
def test_add_timeline_refuses_a_non_positive_iteration_count_as_such(tmp_path, capsys, n):
    out = tmp_path / "out.json"
    line = refused(capsys, ["profile", "add-timeline", NVML / "gin-b1024-fp32.json", "--timeline", TRACE, "--iterations", str(n),
                            "-o", out])
    assert line == f"colopred: error: --iterations must be a positive integer, not {n}"
    assert not out.exists()
    with pytest.raises(InputError, match=f"--iterations must be a positive integer, not {n}"):
        fields_for_profile(TRACE, "nvml", n)
    # a positive count is taken
    assert main(["profile", "add-timeline", str(NVML / "gin-b1024-fp32.json"), "--timeline", str(TRACE), "--iterations", "5",
                 "-o", str(out), "-q"]) == 0
    assert JobProfile.from_json(out).kernels_per_iteration > 0


def test_a_timeline_that_is_a_directory_says_so(tmp_path, capsys):
    (tmp_path / "adir").mkdir()
    line = refused(capsys, ["profile", "add-timeline", NCU / "alexnet-b128-fp32.json", "--timeline", tmp_path / "adir",
                            "-o", tmp_path / "out.json"])
    assert line.endswith(f"{tmp_path / 'adir'}: is a directory, not a timeline file")


def unreadable_timelines(tmp_path):
    """(file, what its message must say) for each way a real trace or timeline was cut or damaged."""
    trace = gzip.decompress(TRACE.read_bytes())
    table = gzip.decompress(TIMELINE.read_bytes()).decode().splitlines()
    cases = {
        "tr.json.gz": (TRACE.read_bytes()[:3000],
                       "not a readable Chrome trace: truncated or corrupt gzip file (Compressed file ended before the end-of-stream"),
        "tr.json": (trace[:100_000], "not a readable Chrome trace: not valid JSON (Expecting value at line "),
        "bad.json": (b'{"traceEvents": [1, 2,, 3]}\n', "not a readable Chrome trace: not valid JSON (Expecting value at line 1 column 23)"),
        "tl.csv.gz": (TIMELINE.read_bytes()[:3000],
                      "not a readable timeline table: truncated or corrupt gzip file (Compressed file ended before"),
        "tl.csv": (("\n".join(table[:20] + ["kernel,k,1.0,2.0,3,7,8,9,10"]) + "\n").encode(),
                   "not a readable timeline table: its rows do not parse as CSV (Expected 6 fields in line 21, saw 9)"),
        "empty.csv": (b"", "not a readable timeline table: the file is empty"),
    }
    for name, (data, _) in cases.items():
        (tmp_path / name).write_bytes(data)
    return {tmp_path / name: needle for name, (_, needle) in cases.items()}


def test_unreadable_timelines_say_what_is_wrong_in_words(tmp_path, capsys):
    for path, needle in unreadable_timelines(tmp_path).items():
        line = refused(capsys, ["profile", "add-timeline", NCU / "alexnet-b128-fp32.json", "--timeline", path,
                                "-o", tmp_path / "out.json"])
        assert f"{path}: {needle}" in line, line
        assert not any(c in line for c in ("EOFError", "JSONDecodeError", "ParserError", "EmptyDataError", "BadGzipFile"))
    assert "the file ends there: truncated?" in refused(capsys, ["profile", "add-timeline", NCU / "alexnet-b128-fp32.json",
                                                                 "--timeline", tmp_path / "tr.json", "-o", tmp_path / "out.json"])
    assert not (tmp_path / "out.json").exists()


# ------------------------------------------------------------------------------- 6: retime
@pytest.fixture
def resnet18(tmp_path, capsys):
    """``profile ncu`` of the real H100 resnet18 report at 16.3 ms: 16.06 ms of kernels per iteration, busy 0.985."""
    p = tmp_path / "P.json"
    assert main(["profile", "ncu", str(SAMPLE), "--name", "r18", "--iter-ms", "16.3", "-o", str(p), "-q"]) == 0
    capsys.readouterr()
    return p


def test_retime_refuses_an_iteration_time_profile_ncu_would_refuse(resnet18, tmp_path, capsys):
    out = tmp_path / "r.json"
    out.write_text("precious")
    line = refused(capsys, ["profile", "retime", resnet18, "--iter-ms", "8.5", "-o", out])
    assert line == (f"colopred: error: {resnet18}: --iter-ms 8.5: kernel time per iteration (16.06 ms) is 1.9x the iteration "
                    f"time (8.5 ms), a busy_fraction above {MAX_BUSY_FRACTION_FROM_NCU:g}: a wrong iteration time (it is in "
                    "milliseconds)?")
    assert out.read_text() == "precious"
    # the same rule as profile ncu's: refused at 10 ms there, and by retime
    ncu = refused(capsys, ["profile", "ncu", SAMPLE, "--name", "r18", "--iter-ms", "10", "-o", tmp_path / "n.json"])
    assert "kernel time per iteration (16.06 ms) is 1.6x the iteration time (10.0 ms)" in ncu
    assert "kernel time per iteration (16.06 ms) is 1.6x the iteration time (10.0 ms)" in refused(
        capsys, ["profile", "retime", resnet18, "--iter-ms", "10", "-o", out])
    # within the bound: re-timed, the kernel time kept
    before = digest(resnet18)
    assert main(["profile", "retime", str(resnet18), "--iter-ms", "12", "-o", str(out), "-q"]) == 0
    r = JobProfile.from_json(out)
    assert r.iteration_ms == 12.0 and r.busy_fraction == pytest.approx(16.06 / 12, rel=1e-3)
    assert digest(resnet18) == before


def test_research_retiming_keeps_only_the_profiles_own_bound(resnet18):
    """Research code re-times profiles to measured solo times without the CLI's bound (none of the committed windows
    exceeds it; the largest busy fraction they give is 1.15); the library refuses only when asked."""
    p = JobProfile.from_json(resnet18)
    assert p.retimed(8.5).busy_fraction == pytest.approx(p.kernel_ms_per_iteration / 8.5)
    with pytest.raises(ValueError, match=r"is 1\.9x the iteration time \(8\.5 ms\)"):
        p.retimed(8.5, max_busy_fraction=MAX_BUSY_FRACTION_FROM_NCU)
