"""``colopred profile ncu REPORT.ncu-rep``: exported through ``ncu --import`` where ncu is on PATH (here a stand-in
``ncu`` that prints a real recorded report's CSV, as ncu does), else one line saying how to export it."""

import gzip
import json
import os
import stat
import sys

from colopred.cli import main
from colopred.profile import JobProfile

from .conftest import SAMPLE

ARGS = ["--name", "resnet18-b64-fp32", "--iter-ms", "16", "--mem-gib", "2.4"]


def fake_ncu(bin_dir, csv_gz, log, code=0):
    """An ``ncu`` that logs its argv and prints the recorded CSV for ``--import R --csv --page raw``."""
    bin_dir.mkdir(exist_ok=True)
    exe = bin_dir / "ncu"
    exe.write_text(f"""#!{sys.executable}
import gzip, json, sys
open({str(log)!r}, "w").write(json.dumps(sys.argv[1:]))
a = sys.argv[1:]
if {code} or a[:1] != ["--import"] or a[2:] != ["--csv", "--page", "raw"]:
    sys.stderr.write("==ERROR== cannot read the report\\n")
    sys.exit({code} or 1)
sys.stdout.write(gzip.open({str(csv_gz)!r}, "rt").read())
""")
    exe.chmod(exe.stat().st_mode | stat.S_IXUSR)
    return exe


def test_ncu_rep_is_exported_with_ncu_and_gives_the_csv_profile(tmp_path, monkeypatch, capsys):
    rep = tmp_path / "resnet.ncu-rep"
    rep.write_bytes(b"NVIDIA Nsight Compute report stand-in")
    log = tmp_path / "argv.json"
    fake_ncu(tmp_path / "bin", SAMPLE, log)
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}")
    assert main(["profile", "ncu", str(rep), *ARGS, "-o", str(tmp_path / "a.json")]) == 0, capsys.readouterr().err
    assert json.loads(log.read_text()) == ["--import", str(rep), "--csv", "--page", "raw"]
    csv = tmp_path / "r.csv"
    csv.write_text(gzip.open(SAMPLE, "rt").read())
    assert main(["profile", "ncu", str(csv), *ARGS, "-o", str(tmp_path / "b.json")]) == 0
    a, b = JobProfile.from_json(tmp_path / "a.json"), JobProfile.from_json(tmp_path / "b.json")
    assert a.meta.pop("ncu_report") == "resnet.ncu-rep" and b.meta.pop("ncu_report") == "r.csv"
    assert a == b


def test_ncu_rep_without_ncu_says_how_to_export(tmp_path, monkeypatch, capsys):
    rep = tmp_path / "job.ncu-rep"
    rep.write_bytes(b"x")
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    code = main(["profile", "ncu", str(rep), *ARGS, "-o", str(tmp_path / "a.json")])
    err = capsys.readouterr().err.strip().splitlines()
    assert code != 0 and len(err) == 1
    assert f"{rep}: an Nsight Compute report, and ncu is not on PATH" in err[0]
    assert "`ncu --import job.ncu-rep --csv --page raw > report.csv`" in err[0]
    assert not (tmp_path / "a.json").exists()


def test_ncu_rep_that_ncu_cannot_read_is_one_line(tmp_path, monkeypatch, capsys):
    rep = tmp_path / "bad.ncu-rep"
    rep.write_bytes(b"x")
    fake_ncu(tmp_path / "bin", SAMPLE, tmp_path / "argv.json", code=3)
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}")
    code = main(["profile", "ncu", str(rep), *ARGS, "-o", str(tmp_path / "a.json")])
    err = capsys.readouterr().err.strip().splitlines()
    assert code != 0 and len(err) == 1 and "failed (exit 3): ==ERROR== cannot read the report" in err[0], err
    assert not (tmp_path / "a.json").exists()
