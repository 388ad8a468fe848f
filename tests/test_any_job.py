"""A training command that is not in the zoo, end to end on the CPU: ``examples/my_train.py`` (the README's loop)
profiled by ``colopred profile run`` (through a stand-in ``ncu`` that runs the command as ncu does and prints a
real recorded H100 report), measured against a zoo job by ``colopred measure --jobs-file`` with the same persistent
worker protocol, windows, solo rounds, resume and records as zoo jobs, a model trained on it, and its collocation
predicted. The GPU run of the same sequence is the lead engineer's (README, "Your own training job")."""

import json
import os
import stat
import sys

import pytest

from colopred.cli import main
from colopred.measurement.harness.reader import read_windows, slowdown_table
from colopred.profile import JobProfile

from .conftest import ROOT, SAMPLE

torch = pytest.importorskip("torch", reason="the example loop and the CPU workers need PyTorch")

PY = sys.executable
ENV = {"OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
MY_TRAIN = [PY, str(ROOT / "examples" / "my_train.py"), "--device", "cpu", "--width", "1024", "--batch", "128"]
ZOO_TINY = [PY, "-m", "colopred.measurement.zoo.run", "resnet18-b2-fp32", "--device", "cpu", "--tiny"]


def stand_in_ncu(bin_dir):
    """``ncu ... --csv --page raw COMMAND``: runs COMMAND in ncu's environment (its ProfileWindow finishes the
    window and ends it), then prints the recorded report's CSV as ncu prints its own."""
    bin_dir.mkdir(exist_ok=True)
    exe = bin_dir / "ncu"
    exe.write_text(f"""#!{PY}
import gzip, subprocess, sys
a = sys.argv[1:]
cmd = a[a.index("raw") + 1:]
r = subprocess.run(cmd, stdout=subprocess.DEVNULL)
sys.stdout.write(gzip.open({str(SAMPLE)!r}, "rt").read())
sys.exit(r.returncode)
""")
    exe.chmod(exe.stat().st_mode | stat.S_IXUSR)


@pytest.fixture
def gpu_less(tmp_path, monkeypatch):
    stand_in_ncu(tmp_path / "bin")
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}")
    for k, v in ENV.items():
        monkeypatch.setenv(k, v)
    return tmp_path


def jobs_file(tmp_path, **extra):
    f = tmp_path / "jobs.json"
    f.write_text(json.dumps({"jobs": [{"name": "mytrain", "command": MY_TRAIN, "env": ENV, **extra}]}))
    return f


def test_a_command_outside_colopred_runs_its_epochs_untouched():
    """Outside colopred ProfileWindow does nothing and ``win.epochs(n)`` is range(n): the script ends by itself."""
    import subprocess

    env = {k: v for k, v in os.environ.items() if not k.startswith("COLOPRED_")} | ENV
    r = subprocess.run([*MY_TRAIN, "--epochs", "2"], env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr


@pytest.mark.slow
def test_profile_measure_train_predict_a_command(gpu_less, capsys):
    d = gpu_less
    data = d / "mydata"
    (data / "profiles" / "ncu").mkdir(parents=True)
    # 1. profile the command (and a tiny zoo job, the co-runner) alone: timed run, traced run, ncu run. The stand-in's
    # report holds 16 ms of kernels, said to cover 4 iterations: 4 ms of kernels per iteration of ~10-30 ms on a CPU
    for name, cmd in (("mytrain", MY_TRAIN), ("resnet18-b2-fp32", ZOO_TINY)):
        code = main(["profile", "run", "--name", name, "--iterations", "4", "-o", str(data / "profiles" / "ncu" / f"{name}.json"),
                     "--", *cmd])
        assert code == 0, capsys.readouterr().err
    p = JobProfile.from_json(data / "profiles" / "ncu" / "mytrain.json")
    assert p.name == "mytrain" and p.source == "ncu" and p.meta["command"] == MY_TRAIN
    assert p.iterations_profiled == 4 and p.kernel_ms_per_iteration == pytest.approx(16.06 / 4, abs=0.01) and p.meta["timing_iterations"] == 30
    assert p.stream_overlap is None  # no GPU kernel in a CPU run's timeline
    assert "no GPU kernel in the solo timeline" in capsys.readouterr().err

    # 2. measure it against the zoo job: the command is a persistent worker of the pool
    out = data / "campaigns" / "c1"
    args = ["measure", "--jobs-file", str(jobs_file(d)), "--jobs", "mytrain,resnet18-b2-fp32", "--sets", "pairs",
            "--mode", "timeslice", "--out", str(out), "--device", "cpu", "--tiny", "--no-nvml", "--no-progress",
            "--min-iters", "3", "--max-window-s", "4", "--repeat-frac", "0"]
    assert main(args) == 0, capsys.readouterr().err
    recs = [json.loads(l) for l in (out / "windows.jsonl").read_text().splitlines()]
    assert [r["status"] for r in recs] == ["ok"] * 5 and [r["kind"] for r in recs] == ["solo", "solo", "colo", "solo", "solo"]
    for r in recs:  # every window the command ran in says what it ran
        assert ("commands" in r) == ("mytrain" in r["jobs"])
        if "mytrain" in r["jobs"]:
            assert r["commands"] == [{"name": "mytrain", "command": MY_TRAIN, "env": ENV}]
            assert r["results"]["mytrain"]["iterations"] >= 3
    cfg = json.loads((out / "campaign.json").read_text())
    assert cfg["commands"][0]["command"] == MY_TRAIN and "plan_sha256" in cfg
    slow = slowdown_table(read_windows(out))
    assert set(slow["job"]) == {"mytrain", "resnet18-b2-fp32"} and (slow["slowdown"] > 0).all()
    # resume (no --jobs-file: the commands come from campaign.json): nothing left to run, nothing rewritten
    before = (out / "windows.jsonl").read_bytes()
    assert main(["measure", "--out", str(out), "--resume", "--device", "cpu", "--tiny", "--no-nvml"]) == 0
    assert (out / "windows.jsonl").read_bytes() == before
    # 3. train a model on the dataset holding it, 4. predict its collocation with that model
    assert main(["train", "--data", str(data), "--out", str(d / "models" / "mine"), "--modes", "timeslice", "--no-metrics"]) == 0
    capsys.readouterr()
    assert main(["predict", str(data / "profiles" / "ncu" / "mytrain.json"), str(data / "profiles" / "ncu" / "resnet18-b2-fp32.json"),
                 "--mode", "timeslice", "--model", str(d / "models" / "mine-timeslice.json"), "--json"]) == 0
    pred = json.loads(capsys.readouterr().out)
    assert [j["name"] for j in pred["jobs"]] == ["mytrain", "resnet18-b2-fp32"] and all(j["slowdown"] > 0 for j in pred["jobs"])
    man = json.loads((d / "models" / "mine-timeslice.json").read_text())
    assert "mytrain" in man["jobs"] and man["n_sets"] == 1


def test_a_command_that_dies_before_ready_is_a_failed_window_naming_why(gpu_less, capsys):
    d = gpu_less
    f = d / "jobs.json"
    f.write_text(json.dumps({"jobs": [{"name": "broken", "command": [PY, "-c", "import sys; sys.exit('no data here')"]},
                                      {"name": "mytrain", "command": MY_TRAIN, "env": ENV}]}))
    out = d / "c"
    assert main(["measure", "--jobs-file", str(f), "--sets", "pairs", "--mode", "timeslice", "--out", str(out), "--device", "cpu",
                 "--no-nvml", "--no-progress", "--min-iters", "3", "--max-window-s", "3", "--repeat-frac", "0"]) == 0
    recs = [json.loads(l) for l in (out / "windows.jsonl").read_text().splitlines()]
    bad = [r for r in recs if "broken" in r["jobs"]]
    assert bad and all(r["status"] == "failed" and "no data here" in r["reason"] for r in bad)
    assert all(r["status"] == "ok" for r in recs if r["jobs"] == ["mytrain"])


def test_a_timed_window_lasts_its_minimum_time(gpu_less):
    """GPM sampling needs several counter intervals: `run_timed(..., min_seconds=S)` times the command's iterations
    until the window has lasted S seconds, beyond the iterations asked for; without it the window is the iterations."""
    from colopred.measurement.profiling.runner import run_timed

    short = run_timed(MY_TRAIN, warmup=2, iters=3)
    assert len(short.iter_ms) == 3
    long = run_timed(MY_TRAIN, warmup=2, iters=3, min_seconds=1.0)
    assert long.window_end - long.window_start >= 1.0
    assert len(long.iter_ms) > 3 and sum(long.iter_ms) / 1e3 <= long.window_end - long.window_start + 0.05


def zoo_profile_as(name: str, like: str, folder):
    """A copy of the zoo job ``like``'s ncu profile named ``name``, written to ``folder/NAME.json``."""
    import dataclasses

    from .conftest import DATA

    dataclasses.replace(JobProfile.from_json(DATA / "profiles" / "ncu" / f"{like}.json"), name=name).to_json(folder / f"{name}.json")


def test_calibrate_measures_the_job_beside_the_reference_and_writes_what_predict_reads(gpu_less, capsys):
    """``colopred calibrate``: the pair measured CALIBRATION_WINDOWS times, bracketed by solo windows; observed.json
    holds one observation per mode with each job's mean slowdown, naming the profiles; predict reads it and moves
    the job by the factor calibrate printed."""
    from colopred.constants import CALIBRATION_WINDOWS

    d = gpu_less
    profiles = d / "profiles"
    profiles.mkdir()
    for name, like in (("mytrain", "dqn-b512-bf16"), ("resnet18-b2-fp32", "resnet50-b64-fp32")):
        zoo_profile_as(name, like, profiles)
    out = d / "calib"
    args = ["calibrate", "mytrain", "--reference", "resnet18-b2-fp32", "--jobs-file", str(jobs_file(d)), "--mode", "timeslice",
            "--out", str(out), "--profiles", str(profiles), "--device", "cpu", "--tiny", "--no-nvml", "--no-progress",
            "--min-iters", "3", "--max-window-s", "4"]
    assert main(args) == 0
    err = capsys.readouterr().err
    recs = [json.loads(l) for l in (out / "windows.jsonl").read_text().splitlines()]
    colo = [r for r in recs if r["kind"] == "colo"]
    assert len(colo) == CALIBRATION_WINDOWS and all(r["status"] == "ok" and r["jobs"] == ["mytrain", "resnet18-b2-fp32"] for r in colo)
    assert sum(r["kind"] == "solo" for r in recs) >= 2 * CALIBRATION_WINDOWS  # bracketed: solo rounds around each window
    doc = json.loads((out / "observed.json").read_text())
    (obs,) = doc["observations"]
    slow = slowdown_table(read_windows(out)).groupby("job")["slowdown"].mean()
    assert obs["mode"] == "timeslice" and [JobProfile.from_json(out / j).name for j in obs["jobs"]] == ["mytrain", "resnet18-b2-fp32"]
    assert obs["slowdowns"] == pytest.approx([slow["mytrain"], slow["resnet18-b2-fp32"]], rel=1e-5)
    line = next(l for l in err.splitlines() if l.startswith("timeslice: mytrain measured"))
    factor = float(line.rsplit("x ", 1)[1])
    mine = [str(profiles / "mytrain.json"), str(profiles / "resnet18-b2-fp32.json")]
    assert main(["predict", *mine, "--mode", "timeslice", "--json"]) == 0
    before = json.loads(capsys.readouterr().out)["jobs"][0]["slowdown"]
    assert main(["predict", *mine, "--mode", "timeslice", "--json", "--observed", str(out / "observed.json")]) == 0
    after = json.loads(capsys.readouterr().out)["jobs"][0]
    assert after["observations"] == 1 and after["slowdown"] == pytest.approx(before * factor, rel=2e-3)


@pytest.mark.slow  # a second real calibration campaign; the first is in the fast tier
def test_calibrate_needs_only_the_jobs_own_profile_the_reference_ships(gpu_less, capsys):
    """A folder holding only JOB.json: calibrate measures beside the default reference, copies the package's profile
    of it (of the job's profile source) beside observed.json, and predict reads the file from another folder."""
    import shutil

    from colopred.constants import CALIBRATION_REFERENCE_JOB
    from colopred.runtime.reference import shipped_reference_profile


    d = gpu_less
    profiles = d / "mine"
    profiles.mkdir()
    zoo_profile_as("mytrain", "dqn-b512-bf16", profiles)
    out = d / "calib"
    assert main(["calibrate", "mytrain", "--jobs-file", str(jobs_file(d)), "--mode", "timeslice", "--out", str(out),
                 "--profiles", str(profiles), "--device", "cpu", "--tiny", "--no-nvml", "--no-progress", "--min-iters", "3",
                 "--max-window-s", "4"]) == 0
    err = capsys.readouterr().err
    assert "timeslice: mytrain measured" in err and "its later predictions x" in err
    copy = out / f"{CALIBRATION_REFERENCE_JOB}.json"
    assert copy.read_bytes() == shipped_reference_profile(CALIBRATION_REFERENCE_JOB, "ncu").read_bytes()
    assert sorted(p.name for p in profiles.iterdir()) == ["mytrain.json"]  # the user's folder is left as it was
    (obs,) = json.loads((out / "observed.json").read_text())["observations"]
    assert obs["jobs"] == ["../mine/mytrain.json", f"{CALIBRATION_REFERENCE_JOB}.json"]
    moved = d / "elsewhere"
    shutil.copytree(d, moved, ignore=shutil.ignore_patterns("elsewhere"))  # the pair of folders travels together
    pair = [str(moved / "mine" / "mytrain.json"), str(copy)]
    assert main(["predict", *pair, "--mode", "timeslice", "--json", "--observed", str(moved / "calib" / "observed.json")]) == 0
    assert json.loads(capsys.readouterr().out)["jobs"][0]["observations"] == 1


def test_calibrate_refuses_a_reference_without_a_profile(gpu_less, capsys):
    """A reference other than the shipped one needs its profile in --profiles: refused before any window."""


    (gpu_less / "mine").mkdir()
    zoo_profile_as("mytrain", "dqn-b512-bf16", gpu_less / "mine")
    out = gpu_less / "calib"
    code = main(["calibrate", "mytrain", "--reference", "resnet18-b2-fp32", "--jobs-file", str(jobs_file(gpu_less)),
                 "--out", str(out), "--profiles", str(gpu_less / "mine"), "--device", "cpu", "--tiny"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "no profile of the reference job resnet18-b2-fp32" in err[0] and not out.exists()


def test_calibrate_refuses_a_missing_profile_before_measuring(gpu_less, capsys):
    out = gpu_less / "calib"
    code = main(["calibrate", "mytrain", "--jobs-file", str(jobs_file(gpu_less)), "--out", str(out), "--profiles", str(gpu_less),
                 "--device", "cpu", "--tiny"])
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1 and "no profile of job mytrain" in err and not out.exists()
    assert main(["calibrate", "resnet50-b64-fp32", "--out", str(out)]) != 0
    assert "is the job to calibrate" in capsys.readouterr().err and not out.exists()


def test_calibrate_names_the_first_failure_when_no_window_succeeds(gpu_less, capsys):
    f = gpu_less / "jobs.json"
    f.write_text(json.dumps({"jobs": [{"name": "broken", "command": [PY, "-c", "import sys; sys.exit('no data here')"]}]}))
    code = main(["calibrate", "broken", "--reference", "resnet18-b2-fp32", "--jobs-file", str(f), "--mode", "timeslice",
                 "--out", str(gpu_less / "calib"), "--device", "cpu", "--tiny", "--no-nvml", "--no-progress", "--min-iters", "3",
                 "--max-window-s", "3"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and "no calibration window succeeded" in err[-1] and "no data here" in err[-1]
    assert not (gpu_less / "calib" / "observed.json").exists()
