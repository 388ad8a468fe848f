"""Messages for inputs and outputs a careless user gives: each names the file and says in words what is wrong (no
exception class names), and measured observations outside any plausible range are refused or flagged."""

import gzip
import json
import shutil
import warnings
from pathlib import Path

import pytest

from colopred import JobProfile
from colopred.cli import main
from colopred.errors import InputError
from colopred.io import atomic_file, check_output, read_text_input

DATA = Path(__file__).resolve().parents[1] / "datasets" / "h100" / "profiles" / "ncu"
A, B = DATA / "resnet18-b64-fp32.json", DATA / "gpt2_small-b8-bf16.json"


def test_an_output_below_a_file_says_the_file_is_not_a_folder(tmp_path):
    (tmp_path / "empty.json").write_text("{}")
    with pytest.raises(InputError, match=r"empty\.json' is a file, not a folder"):
        check_output(tmp_path / "empty.json" / "x.json")
    with pytest.raises(InputError, match=r"does not exist \(.*empty.json' is a file, not a folder\)"):
        check_output(tmp_path / "empty.json" / "deeper" / "x.json")
    with pytest.raises(InputError, match=r"'.*nowhere' does not exist$"):
        check_output(tmp_path / "nowhere" / "x.json")


def test_a_folder_that_refuses_new_files_is_not_called_missing(tmp_path, monkeypatch):
    """/proc exists but refuses new files with ENOENT: the message must not say the folder does not exist."""
    import tempfile

    def refuse(*args, **kwargs):
        raise FileNotFoundError(2, "No such file or directory")

    monkeypatch.setattr(tempfile, "mkstemp", refuse)
    with pytest.raises(InputError, match="cannot create a file in folder") as e:
        with atomic_file(tmp_path / "out.json") as f:
            f.write("x")
    assert "does not exist" not in str(e.value)
    assert not (tmp_path / "out.json").exists()


@pytest.mark.parametrize("content, words", [
    (None, "is a directory, not a profile"),
    (b"\xff\xfe\x00garbage", "is not a text profile (binary data)"),
    (gzip.compress(b'{"name": "x"}', mtime=0), "is not a text profile (it is gzip-compressed)"),
])
def test_unreadable_inputs_are_described_in_words(tmp_path, content, words):
    p = tmp_path / "in.json"
    if content is None:
        p.mkdir()
    else:
        p.write_bytes(content)
    with pytest.raises(InputError) as e:
        read_text_input(p, "profile")
    assert words in str(e.value) and str(p) in str(e.value)
    assert "Error" not in str(e.value)  # no exception class name


def test_a_profile_that_is_a_directory_names_it_in_the_cli(tmp_path, capsys):
    (tmp_path / "adir").mkdir()
    assert main(["predict", str(A), str(tmp_path / "adir"), "--mode", "mps"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "adir: is a directory, not a profile" in err[0] and "IsADirectoryError" not in err[0]


def test_predict_names_both_files_of_two_profiles_of_one_name(tmp_path, capsys):
    """A file holding the same profile again is a copy of the job (JOB#1, JOB#2); one holding another profile under the
    same name is refused naming both files; renamed, it is a job of its own."""
    copy = tmp_path / "copy_of_a.json"
    shutil.copy(A, copy)
    assert main(["predict", str(A), str(B), str(copy), "--mode", "mps", "--json"]) == 0
    jobs = json.loads(capsys.readouterr().out)["jobs"]
    assert [j["name"] for j in jobs] == ["resnet18-b64-fp32#1", "gpt2_small-b8-bf16", "resnet18-b64-fp32#2"]
    doc = json.loads(copy.read_text())
    doc["iteration_ms"] *= 1.5
    copy.write_text(json.dumps(doc))
    assert main(["predict", str(A), str(B), str(copy), "--mode", "mps"]) == 2
    err = capsys.readouterr().err.strip()
    assert f"{copy}: holds another profile of job 'resnet18-b64-fp32' than {A} does" in err and "\n" not in err
    doc["name"] = "resnet18-copy"
    copy.write_text(json.dumps(doc))
    assert main(["predict", str(A), str(copy), "--mode", "mps", "--json"]) == 0
    jobs = json.loads(capsys.readouterr().out)["jobs"]
    assert [j["name"] for j in jobs] == ["resnet18-b64-fp32", "resnet18-copy"]


def _observations(tmp_path, slowdowns):
    p = tmp_path / "obs.json"
    p.write_text(json.dumps({"schema": "colopred.observations", "observations": [
        {"mode": "mps", "jobs": ["resnet18-b64-fp32", "gpt2_small-b8-bf16"], "slowdowns": slowdowns}]}))
    return p


def test_an_impossible_speed_up_is_refused_with_the_job_named(tmp_path, capsys):
    from colopred.runtime.observed import Observation

    a, b = JobProfile.from_json(A), JobProfile.from_json(B)
    with pytest.raises(ValueError, match=r"job 'gpt2_small-b8-bf16': a measured slowdown of 0.01 would mean it ran 100x faster"):
        Observation((a, b), (1.5, 0.01))
    Observation((a, b), (1.5, 0.9))  # a little under 1 is solo-time noise, accepted
    obs = _observations(tmp_path, [100, 0.01])
    before = obs.read_bytes()
    assert main(["predict", str(A), str(B), "--mode", "mps", "--observed", str(obs)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "obs.json" in err[0] and "100x faster" in err[0]
    assert obs.read_bytes() == before


def test_a_slowdown_beyond_any_measured_is_flagged_but_used(tmp_path, capsys):
    from colopred.runtime.observed import Observation

    a, b = JobProfile.from_json(A), JobProfile.from_json(B)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        Observation((a, b), (30.0, 1.2))
    assert len(caught) == 1 and "resnet18-b64-fp32" in str(caught[0].message) and "beyond any measured" in str(caught[0].message)
    assert main(["predict", str(A), str(B), "--mode", "mps", "--observed", str(_observations(tmp_path, [30.0, 1.2])), "--json"]) == 0
    out, err = capsys.readouterr()
    assert err.count("colopred: warning:") == 1 and "beyond any measured" in err and "Traceback" not in err
    doc = json.loads(out)
    assert any("beyond any measured" in w for w in doc["warnings"])
    assert doc["jobs"][0]["slowdown"] > 1.63  # the observation still moved resnet18 up from its unobserved 1.63


def test_a_predictor_prints_in_one_short_line():
    from colopred import Predictor

    r = repr(Predictor.default("mps"))
    assert "\n" not in r and len(r) < 200
    assert "mode='mps'" in r and "H100" in r and "sets of 73 jobs" in r


def test_copies_of_one_job_in_one_observation_are_observations_of_it(tmp_path, capsys):
    """An observation naming one job twice is of two copies of it: each slowdown counts for the job."""
    p = tmp_path / "o8.json"
    p.write_text(json.dumps({"schema": "colopred.observations", "observations": [
        {"mode": "mps", "jobs": ["resnet18-b64-fp32", "gpt2_small-b8-bf16"], "slowdowns": [1.5, 1.3]},
        {"mode": "mps", "jobs": ["resnet18-b64-fp32", "resnet18-b64-fp32#2"], "slowdowns": [1.5, 1.4]}]}))
    assert main(["predict", str(A), str(B), "--mode", "mps", "--observed", str(p), "--json"]) == 0
    jobs = json.loads(capsys.readouterr().out)["jobs"]
    assert [(j["name"], j["observations"]) for j in jobs] == [("resnet18-b64-fp32", 3), ("gpt2_small-b8-bf16", 1)]


def test_a_request_that_retimes_a_job_to_an_impossible_time_names_the_field(tmp_path, capsys):
    req = tmp_path / "req.json"
    req.write_text(json.dumps({"schema": "colopred.placement_request", "mode": "mps", "gpus": [{"name": "a"}],
                               "jobs": [{"profile": str(A), "iteration_ms": 1.0}, {"profile": str(B)}]}))
    assert main(["pack", str(req)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "req.json: jobs[0].iteration_ms 1: kernel time per iteration" in err[0] and "Traceback" not in err[0]
    # a machine a little faster than the profile's is a re-timing, not a mistake
    req.write_text(req.read_text().replace('"iteration_ms": 1.0', '"iteration_ms": 14.0'))
    assert main(["pack", str(req)]) == 0


@pytest.mark.parametrize("cmd", [["pack", "{req}"], ["table", "{camp}"], ["profile", "retime", str(A), "--iter-ms", "20"]])
def test_an_empty_output_name_is_refused_not_ignored(tmp_path, capsys, cmd):
    req = tmp_path / "req.json"
    req.write_text(json.dumps({"schema": "colopred.placement_request", "mode": "mps", "gpus": [{"name": "a"}],
                               "jobs": [{"profile": str(A)}, {"profile": str(B)}]}))
    camp = Path(__file__).resolve().parents[1] / "datasets" / "h100" / "campaigns" / "h100-c1"
    assert main([c.format(req=req, camp=camp) for c in cmd] + ["-o", ""]) == 2
    assert capsys.readouterr().err.strip() == "colopred: error: the output path is empty: give a file name"


def test_profile_show_reads_every_file_before_printing(tmp_path, capsys):
    assert main(["profile", "show", str(A), str(tmp_path / "missing.json")]) == 2
    out, err = capsys.readouterr()
    assert out == "" and "missing.json: no such file" in err


def test_a_profile_without_a_schema_version_says_so(tmp_path, capsys):
    doc = json.loads(A.read_text())
    del doc["schema_version"]
    p = tmp_path / "old.json"
    p.write_text(json.dumps(doc))
    assert main(["profile", "show", str(p)]) == 2
    assert "old.json: has no schema_version" in capsys.readouterr().err


def test_simulate_away_from_the_checkout_says_where_its_default_trace_lives(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["simulate"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "0e4a51.trace: not found: the default ships with colopred's source checkout" in err[0]
    assert "give --trace FILE" in err[0]


def test_a_field_of_the_other_kind_of_request_is_named_not_ignored(tmp_path, capsys):
    req = tmp_path / "rank.json"
    req.write_text(json.dumps({"schema": "colopred.placement_request", "mode": "mps", "job": {"profile": str(A)},
                               "candidates": [{"profile": str(B)}], "jobs": [{"profile": str(A)}]}))
    assert main(["rank", str(req)]) == 2
    err = capsys.readouterr().err
    assert "rank.json: jobs: not a field of a rank request" in err and "given twice" not in err
    assert main(["pack", str(req)]) == 2
    assert "candidates, job: not a field of a pack request" in capsys.readouterr().err
