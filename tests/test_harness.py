"""Window schedule, campaign runner, resume and reader, with fake workers (no GPU)."""

import json
import os
import platform

import pytest

from colopred.measurement.harness.campaign import Campaign
from colopred.measurement.harness.plan import CampaignConfig, expand_sets, make_plan
from colopred.measurement.harness.reader import (
    read_windows,
    repeat_noise,
    set_table,
    slowdown_table,
    solo_noise,
)
from colopred.measurement.harness.records import RecordWriter, iter_records

from .conftest import load_script

JOBS = ("a-b1-fp32", "b-b1-fp32", "c-b1-fp32", "d-b1-fp32")
SOLO_MS = {"a-b1-fp32": 10.0, "b-b1-fp32": 20.0, "c-b1-fp32": 5.0, "d-b1-fp32": 40.0}


class FakePool:
    """Deterministic 'GPU': a job's collocated time is solo x (1 + 0.5 x co-runners)."""

    gpu_name = "Fake GPU"
    driver = "0"
    gpu_uuid = "GPU-fake-0"
    memory_gib = 10.0
    opened = 0

    def __init__(self, mode, jobs, fail_after=None, mem=None, calls=None):
        self.mode = mode
        self.fail_after = fail_after
        self.mem = mem or {}
        self.calls = calls if calls is not None else []
        FakePool.opened += 1
        self.closed = False

    def run_window(self, jobs, duration_s, warmup_s):
        if self.fail_after is not None and len(self.calls) >= self.fail_after:
            raise KeyboardInterrupt  # the campaign is killed mid-window
        self.calls.append(tuple(jobs))
        f = 1.0 + 0.5 * (len(jobs) - 1) * (0.5 if self.mode == "mps" else 1.0)
        out = {}
        for j in jobs:
            t = SOLO_MS[j] * f
            out[j] = {"status": "ok", "iterations": 20, "mean_ms": t, "median_ms": t, "peak_memory_gib": self.mem.get(j, 1.0)}
        return out, {"dram_bw_util_pct": 10.0}

    def close(self):
        self.closed = True


def config(**kw):
    d = dict(jobs=JOBS, sets=tuple(expand_sets("pairs+triples", list(JOBS))), modes=("timeslice", "mps"), repeat_frac=0.25)
    d.update(kw)
    return CampaignConfig(**d)


def test_expand_sets_and_file(tmp_path):
    assert len(expand_sets("pairs", list(JOBS))) == 6
    assert len(expand_sets("triples", list(JOBS))) == 4
    assert len(expand_sets("pairs", list(JOBS), max_sets=3)) == 3
    f = tmp_path / "sets.txt"
    f.write_text("# comment\na-b1-fp32+b-b1-fp32\nc-b1-fp32, a-b1-fp32, d-b1-fp32\n")
    assert expand_sets(str(f), list(JOBS)) == [("a-b1-fp32", "b-b1-fp32"), ("a-b1-fp32", "c-b1-fp32", "d-b1-fp32")]


def test_plan_is_deterministic_and_interleaves_solos():
    cfg = config()
    p1, p2 = make_plan(cfg), make_plan(cfg)
    assert p1 == p2
    assert len({w.window_id for w in p1}) == len(p1)
    for mode in cfg.modes:
        ws = [w for w in p1 if w.mode == mode]
        colo = [w for w in ws if w.kind == "colo"]
        assert len(colo) == len(cfg.sets) + round(0.25 * len(cfg.sets))
        # every job has a solo window before the first collocation and after the last
        first_colo = next(i for i, w in enumerate(ws) if w.kind == "colo")
        assert {w.jobs[0] for w in ws[:first_colo]} == set(JOBS)
        assert {w.jobs[0] for w in ws[-len(JOBS):]} == set(JOBS)
        # solo windows are interleaved, not only at the ends
        inner = [w for w in ws[first_colo:-len(JOBS)] if w.kind == "solo"]
        assert len(inner) >= len(colo) // cfg.solo_every - 1


def test_repeat_fraction_above_one_measures_every_set_several_times_in_rounds():
    """--repeat-frac 2.5: every set three times (first windows, then two rounds each in its own order) and half of
    them a fourth time; the first windows are those of a plan without repeats, and fractions up to 1 keep their plan."""
    base = [w for w in make_plan(config(repeat_frac=0.0)) if w.kind == "colo"]
    for mode in ("timeslice", "mps"):
        colo = [w for w in make_plan(config(repeat_frac=2.5)) if w.kind == "colo" and w.mode == mode]
        n = len(config().sets)
        assert [w.jobs for w in colo[:n]] == [w.jobs for w in base if w.mode == mode]
        counts = {s: sum(w.jobs == s for w in colo) for s in config().sets}
        assert sorted(counts.values()) == sorted([3] * (n - round(0.5 * n)) + [4] * round(0.5 * n))
        for r in (1, 2):
            assert sorted(w.jobs for w in colo if w.repeat == r) == sorted(config().sets)
        assert [w.repeat for w in colo] == sorted(w.repeat for w in colo)  # rounds in order
    one = [w for w in make_plan(config(repeat_frac=1.0)) if w.kind == "colo" and w.mode == "mps"]
    assert sorted(w.jobs for w in one if w.repeat == 1) == sorted(config().sets)
    with pytest.raises(ValueError, match="repeat fraction"):
        config(repeat_frac=-0.5)


def test_bracketed_plan_measures_every_member_alone_right_before_and_after():
    cfg = config(bracket=True)
    plan = make_plan(cfg)
    assert plan == make_plan(cfg) and len({w.window_id for w in plan}) == len(plan)
    for mode in cfg.modes:
        ws = [w for w in plan if w.mode == mode]
        colo = [i for i, w in enumerate(ws) if w.kind == "colo"]
        assert len(colo) == len(cfg.sets) + round(0.25 * len(cfg.sets))
        for i in colo:
            members = set(ws[i].jobs)
            after = ws[i + 1 : i + 1 + len(members)]
            assert all(w.kind == "solo" for w in after) and {w.jobs[0] for w in after} == members
            before: set[str] = set()
            k = i - 1
            while k >= 0 and ws[k].kind == "solo":  # the solo windows since the previous collocated one
                before.add(ws[k].jobs[0])
                k -= 1
            assert members <= before, (ws[i].jobs, before)
        # no closing round: the last window is an after-bracket
        assert ws[-1].kind == "solo" and ws[-1].jobs[0] in ws[colo[-1]].jobs
    # a solo window shared by two neighbouring sets is not run twice in a row
    assert all(not (a.kind == b.kind == "solo" and a.jobs == b.jobs and a.mode == b.mode) for a, b in zip(plan, plan[1:]))


def test_bracketing_is_part_of_the_plan_and_old_settings_keep_their_form(tmp_path):
    assert "bracket" not in config().to_dict()  # a campaign.json written before bracketing reads the same
    assert CampaignConfig.from_dict(config(bracket=True).to_dict()).bracket is True
    Campaign(tmp_path / "c", config(bracket=True)).run(lambda mode, jobs: FakePool(mode, jobs))
    with pytest.raises(Exception, match=r"settings|plan|differ"):
        Campaign(tmp_path / "c", config(), resume=True)
    slow = slowdown_table(read_windows(tmp_path / "c"))
    assert len(slow) and (slow["solo_ms"] == slow["job"].map(SOLO_MS)).all()


def test_bracketed_campaigns_over_several_gpus_bracket_each_shard_and_cost_their_brackets():
    from colopred.measurement.harness.sharding import _set_cost_s, shard_plans

    plans = shard_plans(config(bracket=True, shards=2))
    assert len(plans) == 2 and all(plans)
    for plan in plans:
        for i, w in enumerate(plan):
            if w.kind == "colo":
                after = plan[i + 1 : i + 1 + len(w.jobs)]
                assert {a.jobs[0] for a in after} == set(w.jobs) and all(a.kind == "solo" for a in after)
    s = ("a-b1-fp32", "b-b1-fp32")
    assert _set_cost_s(config(bracket=True), s) > 2 * _set_cost_s(config(), s)  # a set's 4 solo windows count


def test_config_rejects_bad_sets():
    with pytest.raises(ValueError, match="not in --jobs"):
        CampaignConfig(jobs=JOBS[:2], sets=(("a-b1-fp32", "z-b1-fp32"),), modes=("mps",))
    with pytest.raises(ValueError, match="unknown mode"):
        CampaignConfig(jobs=JOBS, sets=(), modes=("mig",))


def test_campaign_records_and_reader(tmp_path):
    camp = Campaign(tmp_path / "c", config())
    n = camp.run(lambda mode, jobs: FakePool(mode, jobs))
    assert n == len(camp.plan)
    recs = list(iter_records(camp.records_path))
    assert [r["window_id"] for r in recs] == [w.window_id for w in camp.plan]
    for r in recs:
        prov = r["provenance"]
        assert prov["gpu"] == "Fake GPU" and prov["harness_version"] and prov["date"] and prov["mode"] == r["mode"]
        assert prov["host"] == platform.node() and prov["gpu_uuid"] == "GPU-fake-0"
    w = read_windows(tmp_path / "c")
    s = slowdown_table(w)
    # slowdown recovered exactly from the fake physics
    ts = s[s["mode"] == "timeslice"]
    assert (abs(ts["slowdown"] - (1 + 0.5 * (ts["n_jobs"] - 1))) < 1e-9).all()
    one = s[(s["mode"] == "timeslice") & (s["set"] == "a-b1-fp32+b-b1-fp32")].iloc[0]
    assert one["delta"] == pytest.approx((10 + 20) / (20 * 1.5))
    assert one["throughput"] == pytest.approx(2 / 1.5)
    assert (solo_noise(w)["cv"] == 0).all()
    assert len(repeat_noise(s)) > 0 and (repeat_noise(s)["abs_diff"] < 1e-9).all()
    assert set(set_table(w)["status"]) == {"ok"}


def test_kill_and_resume_loses_and_duplicates_nothing(tmp_path):
    out = tmp_path / "c"
    calls = []
    camp = Campaign(out, config())
    with pytest.raises(KeyboardInterrupt):
        camp.run(lambda mode, jobs: FakePool(mode, jobs, fail_after=17, calls=calls))
    done_before = [r["window_id"] for r in iter_records(out / "windows.jsonl")]
    assert len(done_before) == 17
    # a half-written line, as a kill during write leaves it
    with open(out / "windows.jsonl", "a") as f:
        f.write('{"window_id": "partial", "mode":')
    with pytest.raises(Exception, match="already exists"):
        Campaign(out, config())
    resumed = Campaign(out, None, resume=True)
    resumed.run(lambda mode, jobs: FakePool(mode, jobs))
    ids = [r["window_id"] for r in iter_records(out / "windows.jsonl")]
    assert ids[:17] == done_before
    assert sorted(ids) == sorted(w.window_id for w in resumed.plan)
    assert len(ids) == len(set(ids))
    assert open(out / "windows.jsonl").read().count("partial") == 0
    # harness 1.3: each invocation has its own run id, and the resume starts a new segment
    runs = [r["run_id"] for r in iter_records(out / "windows.jsonl")]
    assert len(set(runs[:17])) == 1 and len(set(runs[17:])) == 1 and runs[0] != runs[17] and all(runs)
    w = read_windows(out).sort_values("seq")
    assert w["segment"].tolist() == [0] * 17 + [1] * (len(ids) - 17)


def test_resume_with_other_settings_is_refused(tmp_path):
    Campaign(tmp_path / "c", config()).run(lambda m, j: FakePool(m, j))
    with pytest.raises(Exception, match="differ"):
        Campaign(tmp_path / "c", config(seed=5), resume=True)


def test_infeasible_sets_are_recorded_not_run(tmp_path):
    calls = []
    mem = {"a-b1-fp32": 6.0, "b-b1-fp32": 6.0, "c-b1-fp32": 0.5, "d-b1-fp32": 0.5}
    cfg = config(modes=("mps",), repeat_frac=0.0)
    Campaign(tmp_path / "c", cfg).run(lambda m, j: FakePool(m, j, mem=mem, calls=calls))
    recs = list(iter_records(tmp_path / "c" / "windows.jsonl"))
    inf = [r for r in recs if r["status"] == "infeasible"]
    assert inf and all({"a-b1-fp32", "b-b1-fp32"} <= set(r["jobs"]) for r in inf)
    assert all("GiB" in r["reason"] for r in inf)
    assert not any({"a-b1-fp32", "b-b1-fp32"} <= set(c) for c in calls)


def test_failed_worker_is_recorded_and_campaign_goes_on(tmp_path):
    class Flaky(FakePool):
        def run_window(self, jobs, d, w):
            res, gpm = super().run_window(jobs, d, w)
            if "d-b1-fp32" in jobs and len(jobs) > 1:
                res["d-b1-fp32"] = {"status": "oom", "error": "CUDA out of memory", "iterations": 0}
            return res, gpm

    Campaign(tmp_path / "c", config(modes=("timeslice",))).run(lambda m, j: Flaky(m, j))
    w = read_windows(tmp_path / "c")
    colo = w[w["kind"] == "colo"]
    assert set(colo[colo["set"].str.contains("d-b1")]["status"]) == {"oom"}
    assert set(colo[~colo["set"].str.contains("d-b1")]["status"]) == {"ok"}
    assert "d-b1-fp32" not in set(slowdown_table(w)["job"])


def test_records_writer_repairs_partial_tail(tmp_path):
    f = tmp_path / "w.jsonl"
    with RecordWriter(f) as w:
        w.append({"window_id": "1"})
    with open(f, "a") as fh:
        fh.write('{"window_id": "2"')
    assert [r["window_id"] for r in iter_records(f)] == ["1"]
    with RecordWriter(f) as w:
        assert w.removed_bytes > 0
        w.append({"window_id": "3"})
    assert [r["window_id"] for r in iter_records(f)] == ["1", "3"]


def test_window_length_adapts(tmp_path):
    camp = Campaign(tmp_path / "c", config(min_iters=10, min_window_s=1.0, max_window_s=30))
    w = next(w for w in camp.plan if w.kind == "colo" and "d-b1-fp32" in w.jobs and len(w.jobs) == 3)
    short, _ = camp.window_seconds(w, {(w.mode, j): 1.0 for j in JOBS})
    long, _ = camp.window_seconds(w, {(w.mode, j): 200.0 for j in JOBS})
    assert long > short and long >= 11 * 0.6


def test_resumed_pools_get_the_solo_peaks_already_measured(tmp_path):
    """A pool that sizes memory (has ``peak_seen_gib``) learns every job's measured solo peak
    when a campaign resumes, so it can make room before starting a large job's worker."""
    mem = {"a-b1-fp32": 1.5, "b-b1-fp32": 2.5, "c-b1-fp32": 0.5, "d-b1-fp32": 6.0}
    cfg = config(modes=("timeslice",))
    calls: list = []
    with pytest.raises(KeyboardInterrupt):
        Campaign(tmp_path, cfg).run(lambda m, j: FakePool(m, j, fail_after=6, mem=mem, calls=calls))
    seen = []

    class SizingPool(FakePool):
        def __init__(self, *a, **k):
            super().__init__(*a, **k)
            self.peak_seen_gib = {}
            seen.append(self.peak_seen_gib)

    Campaign(tmp_path, resume=True).run(lambda m, j: SizingPool(m, j, mem=mem))
    assert seen[0] == mem  # the four opening solo windows were recorded before the interrupt


def test_gpu_session_campaigns_take_their_jobs_from_the_sets_files(tmp_path):
    """scripts/gpu_session.py --campaigns DIR=SETS,...: one campaign per entry, in order, each with the jobs
    its sets file names (first appearance order, comments ignored) and packed under its own name."""
    import argparse
    from pathlib import Path

    gs = load_script("gpu_session")
    (tmp_path / "a.txt").write_text("# header\nj1+j2\nj2+j3+j1  # triple\n")
    (tmp_path / "b.txt").write_text("j4+j5\n")
    a = argparse.Namespace(campaigns=f"{tmp_path}/ca={tmp_path}/a.txt,{tmp_path}/cb={tmp_path}/b.txt",
                           campaign_dir="unused", sets="pairs", jobs=["x"])
    got = gs._campaigns(a)
    assert [(d.name, jobs) for d, _, jobs in got] == [("ca", ["j1", "j2", "j3"]), ("cb", ["j4", "j5"])]
    a.campaigns = ""
    assert gs._campaigns(a) == [(Path("unused"), "pairs", ["x"])]


def test_gpu_session_does_not_start_a_campaign_it_has_no_time_for(tmp_path, monkeypatch):
    """The measure step starts a campaign only while MIN_CAMPAIGN_S of the budget are left (a 16-job campaign's
    workers take over a minute to start); the campaigns after it are skipped too, and say so."""
    import argparse

    gs = load_script("gpu_session")
    now = {"t": 0.0}
    started, said = [], []

    def fake_measure(work, a, d, plan, park, about, log_path):
        started.append(d.name)
        now["t"] += 200  # the campaign took 200 s
        return 0

    monkeypatch.setattr(gs, "elapsed", lambda: now["t"])
    monkeypatch.setattr(gs, "run_measure", fake_measure)
    monkeypatch.setattr(gs, "log", said.append)
    for spare_s, want in ((1, ["c1", "c2"]), (-1, ["c1"])):  # c2 starts with MIN_CAMPAIGN_S + spare_s left
        now["t"] = 0.0
        started.clear()
        said.clear()
        a = argparse.Namespace(campaign_list=[(tmp_path / n, "s.txt", ["j1"]) for n in ("c1", "c2", "c3")],
                               budget_s=200 + gs.MIN_CAMPAIGN_S + spare_s, measure_mode="timeslice", max_sets=0,
                               repeat_frac=2, min_iters=12, bracket=False, park_idle=False)
        gs.step_measure(tmp_path, a)
        assert started == want
        skipped = [n for n in ("c1", "c2", "c3") if n not in want]
        assert [m.split(":")[0] for m in said] == [f"measure {n}" for n in skipped]
        assert all("not started" in m for m in said)


def test_park_effect_compares_parked_and_resident_solo_windows_of_shipped_data():
    """h100-c4c's timeslice part was measured partly with --park-idle: park_effect pairs the two
    kinds of solo windows per job, with the means recomputed here from the records."""
    from pathlib import Path

    from colopred.measurement.harness.reader import park_effect, solo_table

    w = read_windows(Path(__file__).parents[1] / "datasets" / "h100" / "campaigns" / "h100-c4c")
    eff = park_effect(w).set_index(["mode", "job"])
    s = solo_table(w)
    both = s.groupby(["mode", "job"])["park_idle"].nunique()
    assert set(eff.index) == set(both[both == 2].index) and len(eff) >= 10
    g = s[(s["job"] == "gpt2_small-b8-bf16") & (s["mode"] == "timeslice")]
    row = eff.loc[("timeslice", "gpt2_small-b8-bf16")]
    assert row["parked_ms"] == pytest.approx(g[g["park_idle"]]["iteration_ms"].mean())
    assert row["resident_ms"] == pytest.approx(g[~g["park_idle"]]["iteration_ms"].mean())
    assert row["n_parked"] + row["n_resident"] == len(g)
    assert row["parked_vs_resident_pct"] == pytest.approx(100 * (row["parked_ms"] / row["resident_ms"] - 1))


@pytest.mark.slow
def test_gpu_session_parkcheck_runs_parked_and_resident_campaigns(tmp_path):
    """The parkcheck step on the CPU with tiny models: one parked and one resident campaign of the
    same jobs, and a table with both timings for every job."""
    pytest.importorskip("torch", reason="the tiny CPU workers need PyTorch")
    import subprocess
    import sys
    from pathlib import Path

    import pandas as pd

    root = Path(__file__).parents[1]
    r = subprocess.run([sys.executable, str(root / "scripts" / "gpu_session.py"), "--steps", "parkcheck",
                        "--parkcheck-jobs", "resnet18-b2-fp32,dlrm-b8-fp32", "--parkcheck-rounds", "1",
                        "--measure-extra", "--device cpu --tiny --no-nvml", "--work", str(tmp_path / "work"),
                        "--out", str(tmp_path / "out"), "--budget-s", "300"],
                       capture_output=True, text=True, cwd=root, env={**os.environ, "PYTHONPATH": str(root)})
    assert r.returncode == 0, r.stdout + r.stderr
    table = pd.read_csv(tmp_path / "work" / "parkcheck.csv")
    assert set(table["job"]) == {"resnet18-b2-fp32", "dlrm-b8-fp32"}
    assert (table["n_parked"] >= 2).all() and (table["n_resident"] >= 2).all()
    for d, park in (("r0-parked", True), ("r0-resident", False)):
        recs = [json.loads(l) for l in (tmp_path / "work" / "parkcheck" / d / "windows.jsonl").read_text().splitlines()]
        assert recs and all(x["park_idle"] is park for x in recs)
    assert (tmp_path / "out" / "results.tar.gz").exists()


class CopyPool(FakePool):
    """FakePool whose members may be copies JOB#k of a job (the job's solo time)."""

    def run_window(self, jobs, duration_s, warmup_s):
        from colopred.profile import job_of

        self.calls.append(tuple(jobs))
        f = 1.0 + 0.5 * (len(jobs) - 1)
        return {j: {"status": "ok", "iterations": 20, "mean_ms": SOLO_MS[job_of(j)] * f, "median_ms": SOLO_MS[job_of(j)] * f,
                    "peak_memory_gib": 1.0} for j in jobs}, None


def test_sets_file_lists_copies_of_one_job_as_instances(tmp_path):
    """A job given n times in a set is n copies, named JOB#1..JOB#n; a '#' inside a name is not a comment."""
    f = tmp_path / "s.txt"
    f.write_text("# header\na-b1-fp32+a-b1-fp32  # two copies\nb-b1-fp32+a-b1-fp32+a-b1-fp32+a-b1-fp32\nc-b1-fp32+d-b1-fp32\n")
    sets = expand_sets(str(f), [])
    assert sets == [("a-b1-fp32#1", "a-b1-fp32#2"), ("a-b1-fp32#1", "a-b1-fp32#2", "a-b1-fp32#3", "b-b1-fp32"),
                    ("c-b1-fp32", "d-b1-fp32")]
    assert expand_sets(str(f), []) == sets  # instance names read back as the same set (a resumed campaign's)
    cfg = CampaignConfig(jobs=JOBS, sets=tuple(sets), modes=("timeslice",))
    assert CampaignConfig.from_dict(json.loads(json.dumps(cfg.to_dict()))) == cfg
    with pytest.raises(ValueError, match="not in --jobs"):
        CampaignConfig(jobs=JOBS[1:], sets=(("a-b1-fp32#1", "a-b1-fp32#2"),), modes=("mps",))


def test_campaign_of_copies_measures_each_copy_against_its_jobs_solo_windows(tmp_path):
    sets = (("a-b1-fp32#1", "a-b1-fp32#2"), ("a-b1-fp32#1", "a-b1-fp32#2", "b-b1-fp32"), ("b-b1-fp32", "c-b1-fp32"))
    cfg = CampaignConfig(jobs=("a-b1-fp32", "b-b1-fp32", "c-b1-fp32"), sets=sets, modes=("timeslice",), repeat_frac=0.0)
    camp = Campaign(tmp_path / "c", cfg)
    calls = []
    camp.run(lambda m, j: CopyPool(m, j, calls=calls))
    solo_members = {c[0] for c in calls if len(c) == 1}
    assert solo_members == {"a-b1-fp32", "b-b1-fp32", "c-b1-fp32"}  # copies are never measured alone: the job is
    s = slowdown_table(read_windows(tmp_path / "c"))
    two = s[s["set"] == "a-b1-fp32#1+a-b1-fp32#2"]
    assert list(two["instance"]) == ["a-b1-fp32#1", "a-b1-fp32#2"] and set(two["job"]) == {"a-b1-fp32"}
    assert two["solo_ms"].tolist() == [10.0, 10.0] and two["slowdown"].tolist() == pytest.approx([1.5, 1.5])
    three = s[s["n_jobs"] == 3]
    assert sorted(three["job"]) == ["a-b1-fp32", "a-b1-fp32", "b-b1-fp32"] and (three["slowdown"] - 2.0).abs().max() < 1e-9
    assert three["throughput"].iloc[0] == pytest.approx(1.5)
