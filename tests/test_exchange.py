"""``colopred export`` / ``colopred import``: records of real H100 campaigns round-trip through the collocation table
to the same training rows and the same model, bit for bit; a hand-made table in another lab's format (its own
column names, Gavel-style normalised throughput, nvidia-smi and DCGM columns) becomes records and GPM-like
profiles that train reads, with the provenance kept."""

import hashlib
import json
import shutil

import pandas as pd
import pytest

from colopred.cli import main
from colopred.measurement.harness.reader import read_windows, slowdown_table
from colopred.profile import JobProfile
from colopred.research.dataset import load_dataset
from colopred.runtime.features import FEATURES

from .conftest import DATA, FIXTURES

LAB = FIXTURES / "import" / "lab_table.csv"
LAB_COLUMNS = ["--column", "set_id=experiment", "--column", "job=workload", "--column", "mode=sharing",
               "--column", "solo_ms=baseline_iter_ms", "--column", "speed=norm_tput"]
ROW_COLUMNS = ["mode", "set", "job", "n_jobs", "solo_ms", "colo_ms", "slowdown", "arch", *FEATURES]


def small_dataset(root, campaigns=("h100-c3", "h100-c12", "h100-c14")):
    (root / "campaigns").mkdir(parents=True)
    for c in campaigns:
        shutil.copytree(DATA / "campaigns" / c, root / "campaigns" / c)
    shutil.copytree(DATA / "profiles" / "ncu", root / "profiles" / "ncu")
    return root


@pytest.mark.slow
def test_export_import_round_trip_gives_the_same_training_set_and_model(tmp_path, capsys):
    orig = small_dataset(tmp_path / "orig")
    table = tmp_path / "table.csv"
    assert main(["export", str(orig / "campaigns"), "-o", str(table)]) == 0
    t = pd.read_csv(table)
    assert list(t.columns) == ["set_id", "job", "mode", "solo_ms", "colo_ms", "gpu", "started_at", "iterations"]
    assert main(["import", str(table), "--out", str(tmp_path / "imp"), "--profiles", str(orig / "profiles" / "ncu")]) == 0
    a, b = load_dataset(orig), load_dataset(tmp_path / "imp")
    assert len(a.rows) == len(t) > 100
    pd.testing.assert_frame_equal(a.rows[ROW_COLUMNS], b.rows[ROW_COLUMNS], check_exact=True)
    assert a.gpu == b.gpu == "NVIDIA H100 80GB HBM3"
    # exported again, the imported records give the same table but for the set ids
    assert main(["export", str(tmp_path / "imp" / "campaigns"), "-o", str(tmp_path / "again.csv")]) == 0
    again = pd.read_csv(tmp_path / "again.csv")
    pd.testing.assert_frame_equal(t.drop(columns="set_id"), again.drop(columns="set_id"), check_exact=True)
    # the same model: XGBoost's files byte for byte
    for name, data in (("a", orig), ("b", tmp_path / "imp")):
        (tmp_path / name).mkdir()
        assert main(["train", "--data", str(data), "--out", str(tmp_path / name / "m"), "--no-metrics", "-q"]) == 0
    for f in sorted((tmp_path / "a").glob("*.ubj")):
        assert f.read_bytes() == (tmp_path / "b" / f.name).read_bytes(), f.name
    # evaluate reads the imported dataset
    assert main(["evaluate", "--data", str(tmp_path / "imp"), "--out", str(tmp_path / "rep"), "--modes", "timeslice", "-q"]) == 0
    assert "timeslice" in (tmp_path / "rep" / "report.md").read_text()
    capsys.readouterr()


def test_a_hand_made_table_in_another_labs_format_imports_with_provenance(tmp_path, capsys):
    assert not [f for f in DATA.rglob("*") if "lab_" in f.name or "lab_table" in f.name]  # hand-made: never in datasets/
    out = tmp_path / "lab"
    assert main(["import", str(LAB), "--out", str(out), *LAB_COLUMNS]) == 0, capsys.readouterr().err
    prov = json.loads((out / "campaigns" / "lab_table" / "import.json").read_text())
    assert prov["source"] == "lab_table.csv" and prov["source_sha256"] == hashlib.sha256(LAB.read_bytes()).hexdigest()
    assert prov["tool"].startswith("colopred import") and prov["imported_at"]
    assert prov["columns"]["speed"] == "norm_tput" and prov["columns"]["gpu_util_pct"] == "utilization.gpu [%]"
    assert prov["columns"]["sm_occupancy_pct"] == "DCGM_FI_PROF_SM_OCCUPANCY" and prov["rows"] == 21 and prov["sets"] == 10
    # the coarse columns as a GPM-like profile (docs/formats.md): lab_lstm's row is 58 %, 19 %, 6144 MiB, 0.21, 0.47
    assert not (out / "profiles" / "ncu").exists()  # coarse profiles are GPM-like: profiles/nvml, for train --profiles nvml
    p = JobProfile.from_json(out / "profiles" / "nvml" / "lab_lstm.json")
    assert p.source == "nvml" and p.gpu.name == "NVIDIA A100-SXM4-80GB" and p.gpu.sm_count == 108
    assert p.iteration_ms == 24.0 and p.busy_fraction == pytest.approx(0.58)
    assert p.dram_util_pct == pytest.approx(19 / 0.58) and p.achieved_occupancy_pct == pytest.approx(21 / 0.47)
    assert p.peak_memory_gib == 6.0 and p.kernels_per_iteration is None and p.sm_fill_pct is None and p.mps_wait_us is None
    assert p.meta["source_sha256"] == prov["source_sha256"] and p.meta["columns"]["mem_util_pct"] == "utilization.memory [%]"
    # records: the slowdown of each row is 1 / its normalised throughput
    w = read_windows(out / "campaigns")
    assert set(w["gpu"]) == {"NVIDIA A100-SXM4-80GB"}
    s = slowdown_table(w).set_index(["mode", "set", "job"])
    assert s.loc[("timeslice", "lab_gpt2+lab_lstm+lab_resnet50", "lab_lstm"), "slowdown"] == pytest.approx(1 / 0.35)
    assert s.loc[("mps", "lab_lstm+lab_resnet50", "lab_lstm"), "slowdown"] == pytest.approx(1 / 0.81)
    assert s.loc[("timeslice", "lab_lstm+lab_resnet50", "lab_lstm"), "slowdown"] == pytest.approx(1 / 0.62)
    assert len(s) == 21
    rec = json.loads((out / "campaigns" / "lab_table" / "windows.jsonl").read_text().splitlines()[2])
    assert rec["kind"] == "colo" and rec["imported"] == {"set_id": "e01", "rows": [1, 2]}
    assert rec["provenance"]["source_sha256"] == prov["source_sha256"]
    # train reads it, and the model predicts the lab's jobs
    assert main(["train", "--data", str(out), "--out", str(tmp_path / "m"), "--profiles", "nvml", "--no-metrics", "-q"]) == 0
    # profiles from counters alone (no solo timeline): the model does not read the kernel count, so it takes them
    assert "t_log_kernels" not in json.loads((tmp_path / "m-timeslice-nvml.json").read_text())["model_features"]
    assert main(["predict", str(out / "profiles" / "nvml" / "lab_lstm.json"), str(out / "profiles" / "nvml" / "lab_unet.json"),
                 "--mode", "timeslice", "--model", str(tmp_path / "m-timeslice-nvml.json"), "--json"]) == 0
    pred = json.loads(capsys.readouterr().out)
    assert [j["name"] for j in pred["jobs"]] == ["lab_lstm", "lab_unet"]
    # importing the same table again under another name keeps the profiles (same measurement) and adds a campaign
    assert main(["import", str(LAB), "--out", str(out), "--name", "again", *LAB_COLUMNS]) == 0
    assert JobProfile.from_json(out / "profiles" / "nvml" / "lab_lstm.json") == p


def _smi_only(tmp_path):
    """The hand-made lab table with only what nvidia-smi gives (no DCGM occupancy or SM activity columns)."""
    t = pd.read_csv(LAB, dtype=str)
    t = t.drop(columns=["DCGM_FI_PROF_SM_OCCUPANCY", "DCGM_FI_PROF_SM_ACTIVE"])
    path = tmp_path / "smi_table.csv"
    t.to_csv(path, index=False)
    return path


def test_a_table_of_nvidia_smi_columns_imports_and_says_what_its_profiles_lack(tmp_path, capsys):
    """nvidia-smi gives no occupancy: the profiles are built from what the table has, without achieved occupancy,
    and say so (a warning, meta.lacks, import.json); train reads them and the model predicts the lab's jobs."""
    out = tmp_path / "smi"
    assert main(["import", str(_smi_only(tmp_path)), "--out", str(out), *LAB_COLUMNS]) == 0
    err = capsys.readouterr().err
    assert "colopred: warning:" in err and "smi_table.csv: 4 of 4 profiles" in err and "no achieved occupancy" in err
    p = JobProfile.from_json(out / "profiles" / "nvml" / "lab_lstm.json")
    assert p.achieved_occupancy_pct is None and p.busy_fraction == pytest.approx(0.58) and p.dram_util_pct == pytest.approx(19 / 0.58)
    assert "nvidia-smi gives none" in p.meta["lacks"]["achieved_occupancy_pct"]
    prov = json.loads((out / "campaigns" / "smi_table" / "import.json").read_text())
    assert prov["profiles_lack"] == {"achieved_occupancy_pct": sorted(prov["jobs"], key=prov["jobs"].index)}
    assert "occupancy" in p.summary() and "achieved occupancy    -" in p.summary()
    assert main(["train", "--data", str(out), "--out", str(tmp_path / "m"), "--profiles", "nvml", "--no-metrics", "-q"]) == 0
    assert main(["predict", str(out / "profiles" / "nvml" / "lab_lstm.json"), str(out / "profiles" / "nvml" / "lab_unet.json"),
                 "--mode", "timeslice", "--model", str(tmp_path / "m-timeslice-nvml.json"), "--json"]) == 0
    pred = json.loads(capsys.readouterr().out)
    assert all(j["slowdown"] >= 1 for j in pred["jobs"])


def test_a_table_with_the_occupancy_column_gives_the_profiles_it_gave(tmp_path):
    """Where the table has sm_occupancy_pct nothing changes: no warning, no meta.lacks."""
    import warnings

    from colopred.research.exchange import import_table

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        import_table(LAB, tmp_path / "lab", columns=dict(c.split("=") for c in LAB_COLUMNS[1::2]))
    p = JobProfile.from_json(tmp_path / "lab" / "profiles" / "nvml" / "lab_lstm.json")
    assert p.achieved_occupancy_pct == pytest.approx(21 / 0.47) and "lacks" not in p.meta


def test_an_ncu_profile_without_occupancy_is_refused(tmp_path):
    """Only a source without occupancy may lack it: an ncu profile always has it (a required metric)."""
    from colopred.errors import SchemaError

    src = next((DATA / "profiles" / "ncu").glob("*.json"))
    doc = json.loads(src.read_text())
    doc["achieved_occupancy_pct"] = None
    (tmp_path / "p.json").write_text(json.dumps(doc))
    with pytest.raises(SchemaError, match="an ncu profile needs achieved_occupancy_pct"):
        JobProfile.from_json(tmp_path / "p.json")


COPIES = ("set_id,job,mode,solo_ms,colo_ms,gpu,gpu_util_pct,mem_util_pct,sm_occupancy_pct\n"
          "s1,a,mps,10,15,NVIDIA H100 80GB HBM3,90,40,30\n"
          "s1,a,mps,10.2,16,NVIDIA H100 80GB HBM3,90,40,30\n"
          "s1,b,mps,20,25,NVIDIA H100 80GB HBM3,80,30,20\n"
          "s2,a,mps,10,12,NVIDIA H100 80GB HBM3,90,40,30\n"
          "s2,b,mps,20,24,NVIDIA H100 80GB HBM3,80,30,20\n")


def test_a_set_holding_two_copies_of_one_job_imports_with_instance_names(tmp_path):
    """Two rows of one job in one set are two copies: the collocated record names them a#1, a#2 in the order of their
    rows (results keyed by instance), and they share the job's one solo window, of the mean of their solo_ms; a set
    without copies is written as before."""
    (tmp_path / "t.csv").write_text(COPIES)
    assert main(["import", str(tmp_path / "t.csv"), "--out", str(tmp_path / "ds"), "-q"]) == 0
    recs = [json.loads(line) for line in (tmp_path / "ds" / "campaigns" / "t" / "windows.jsonl").read_text().splitlines()]
    s1 = [r for r in recs if r["imported"]["set_id"] == "s1"]
    assert [(r["kind"], r["jobs"]) for r in s1] == [("solo", ["a"]), ("solo", ["b"]), ("colo", ["a#1", "a#2", "b"])]
    assert s1[0]["results"] == {"a": {"status": "ok", "mean_ms": pytest.approx(10.1)}} and s1[0]["imported"]["rows"] == [1, 2]
    assert {k: v["mean_ms"] for k, v in s1[2]["results"].items()} == {"a#1": 15.0, "a#2": 16.0, "b": 25.0}
    assert s1[2]["window_id"] == "mps:000002:colo:a#1+a#2+b:r0" and s1[2]["imported"]["rows"] == [1, 2, 3]
    s2 = [r for r in recs if r["imported"]["set_id"] == "s2"]
    assert [r["jobs"] for r in s2] == [["a"], ["b"], ["a", "b"]]
    assert sorted(p.name for p in (tmp_path / "ds" / "profiles" / "nvml").iterdir()) == ["a.json", "b.json"]
    read_windows(tmp_path / "ds" / "campaigns")  # the records validate


def test_train_on_an_imported_folder_of_gpm_like_profiles_finds_them(tmp_path, capsys):
    """An imported folder holds profiles/nvml only: train without --profiles reads them (and says so); --profiles ncu
    is refused pointing at --profiles nvml, not with a bare 'no such folder'."""
    out = tmp_path / "lab"
    assert main(["import", str(LAB), "--out", str(out), *LAB_COLUMNS, "-q"]) == 0
    assert main(["train", "--data", str(out), "--out", str(tmp_path / "m"), "--modes", "timeslice", "--no-metrics"]) == 0
    assert "the dataset has no profiles/ncu; --profiles nvml" in capsys.readouterr().err
    assert json.loads((tmp_path / "m-timeslice-nvml.json").read_text())["profile_source"] == "nvml"
    assert main(["train", "--data", str(out), "--out", str(tmp_path / "n"), "--modes", "timeslice", "--profiles", "ncu"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == (f"colopred: error: {out / 'profiles' / 'ncu'}: no such folder of profiles: this dataset's profiles are in "
                   "profiles/nvml (give --profiles nvml, or leave --profiles out)")
    assert main(["evaluate", "--data", str(out), "--profiles", "ncu", "--modes", "timeslice"]) == 2
    assert "give --profiles nvml" in capsys.readouterr().err


def _pairs_only(tmp_path):
    t = pd.read_csv(LAB, dtype=str)
    t = t[t.groupby("experiment")["workload"].transform("size") == 2]
    path = tmp_path / "pairs.csv"
    t.to_csv(path, index=False)
    return path


def test_evaluate_on_a_dataset_of_pairs_writes_its_report_noting_the_splits_it_cannot_test(tmp_path, capsys, few_trees):
    """A dataset of pairs only has no pairs->triples or quads split: evaluate skips them saying so (the log and the
    report) and writes the report, instead of ending in an IndexError."""
    out = tmp_path / "ds"
    assert main(["import", str(_pairs_only(tmp_path)), "--out", str(out), *LAB_COLUMNS, "-q"]) == 0
    assert main(["evaluate", "--data", str(out), "--out", str(tmp_path / "rep"), "--modes", "timeslice"]) == 0
    err = capsys.readouterr().err
    assert "timeslice pairs->triples: skipped, no rows to test (it needs both pairs and triples)" in err
    report = (tmp_path / "rep" / "report.md").read_text()
    assert "Splits not evaluated, having no rows to test: timeslice pairs->triples (it needs both pairs and triples)" in report
    assert "## timeslice, split: leave-arch" in report and "## timeslice, split: pairs->triples" not in report


def test_architectures_come_from_groups_then_meta_arch_then_the_name(tmp_path, capsys):
    """Leave-architecture-out groups jobs by the name before -b unless told: a profile's meta.arch, or --groups FILE
    (which wins); the log says how the jobs were grouped; a --groups entry for no job of the dataset is refused."""
    from colopred.research.arch_groups import regrouped

    out = tmp_path / "lab"
    assert main(["import", str(LAB), "--out", str(out), *LAB_COLUMNS, "-q"]) == 0
    ds = load_dataset(out, profile_source="nvml")
    assert set(ds.rows["arch"]) == {"lab_resnet50", "lab_gpt2", "lab_lstm", "lab_unet"}  # no -b: each job its own
    said = []
    assert regrouped(ds, None, log=said.append) is ds and "4 by name" in said[0] and "--groups FILE" in said[0]
    f = out / "profiles" / "nvml" / "lab_gpt2.json"
    p = JobProfile.from_json(f)
    p.with_(meta={**p.meta, "arch": "transformer"}).to_json(f)
    ds = load_dataset(out, profile_source="nvml")
    g = regrouped(ds, {"lab_lstm": "rnn", "lab_unet": "cnn", "lab_resnet50": "cnn"}, log=said.append)
    assert dict(zip(g.rows["job"], g.rows["arch"])) == {"lab_resnet50": "cnn", "lab_gpt2": "transformer", "lab_lstm": "rnn",
                                                         "lab_unet": "cnn"}
    assert "3 by --groups, 1 by meta.arch" in said[-1]
    triple = g.rows[g.rows["n_jobs"] == 3].iloc[0]
    assert triple["set_archs"] == tuple(sorted({g.rows.set_index("job")["arch"].to_dict()[j] for j in triple["set"].split("+")}))
    (tmp_path / "groups.json").write_text(json.dumps({"lab_lstm": "rnn", "nobody": "x"}))
    assert main(["evaluate", "--data", str(out), "--groups", str(tmp_path / "groups.json"), "--modes", "timeslice"]) == 2
    assert "--groups names job 'nobody', which the dataset's profiles do not hold" in capsys.readouterr().err
    (tmp_path / "groups.json").write_text(json.dumps({"lab_lstm": "rnn", "lab_unet": "rnn"}))
    assert main(["train", "--data", str(out), "--groups", str(tmp_path / "groups.json"), "--out", str(tmp_path / "m"),
                 "--modes", "timeslice", "--no-metrics"]) == 0
    assert "architectures (the groups leave-architecture-out holds out): 3 over 4 jobs (2 by --groups, 1 by meta.arch, 1 by name" \
        in capsys.readouterr().err
