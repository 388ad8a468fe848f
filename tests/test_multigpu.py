"""Issue 25: campaigns over several GPUs of a node (shards), merged records, resume and locks, cross-GPU agreement,
Slurm job arrays across nodes; with fake GPU pools of 4-8 devices (no GPU)."""

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter

import pytest

from colopred.errors import InputError
from colopred.measurement.harness.campaign import Campaign, CampaignLock
from colopred.measurement.harness.multigpu import ShardedCampaign, merge_campaigns, node_shards, parse_gpus, sbatch_script
from colopred.measurement.harness.plan import CampaignConfig, expand_sets, make_plan
from colopred.measurement.harness.reader import (
    cross_gpu_agreement,
    read_windows,
    slowdown_table,
    throughput_by_gpu,
)
from colopred.measurement.harness.records import iter_records
from colopred.measurement.harness.sharding import _set_cost_s, _solo_cost_s, assign_sets, full_plan, shard_plans

from .conftest import DATA, ROOT, load_script
from .fake_gpu_shard import FakeGpu, solo_ms
from .test_harness import JOBS

JOBS8 = tuple(f"{x}-b1-fp32" for x in "abcdefgh")
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}


def cfg(shards=4, cross=0.0, jobs=JOBS, **kw):
    d = dict(jobs=jobs, sets=tuple(expand_sets("pairs+triples", list(jobs))), modes=("timeslice", "mps"), repeat_frac=0.25,
             shards=shards, cross_gpu_frac=cross)
    d.update(kw)
    return CampaignConfig(**d)


def run_shards(out, config, bias=None, noise=0.0, gpus=None):
    """Every shard of a new campaign in ``out``, one after another in this process, shard k on fake GPU gpus[k]."""
    gpus = gpus or list(range(config.shards))
    ShardedCampaign(out, config)  # validates; the first shard writes campaign.json
    for k in range(config.shards):
        c = Campaign(out, config if k == 0 else None, resume=k > 0, shard=k)
        c.run(lambda m, j, k=k: FakeGpu(m, j, index=gpus[k], bias=(bias or {}).get(gpus[k], 1.0), noise=noise))


# ----------------------------------------------------------------------------------------------- the plan
@pytest.mark.parametrize("shards", [4, 8])
def test_shards_measure_every_set_once_with_their_own_solo_windows_and_balanced_loads(shards):
    c = cfg(shards=shards, cross=0.25, jobs=JOBS8)
    plans = shard_plans(c)
    assert shard_plans(c) == plans and len(plans) == shards  # a pure function of the settings
    everything = full_plan(c)
    assert len({w.window_id for w in everything}) == len(everything)
    assert all(w.window_id.startswith(f"s{k}/") for k, p in enumerate(plans) for w in p)
    for mode in c.modes:
        firsts = Counter(w.jobs for w in everything if w.mode == mode and w.kind == "colo" and w.repeat == 0)
        n_cross = round(0.25 * len(c.sets))
        assert set(firsts) == set(c.sets) and sorted(Counter(firsts.values()).items()) == [(1, len(c.sets) - n_cross), (2, n_cross)]
        for p in plans:
            ws = [w for w in p if w.mode == mode]
            used = {j for w in ws if w.kind == "colo" for j in w.jobs}
            assert {w.jobs[0] for w in ws if w.kind == "solo"} == used  # solo windows of exactly its jobs, on its GPU
            colo = [i for i, w in enumerate(ws) if w.kind == "colo"]
            assert {w.jobs[0] for w in ws[: colo[0]]} == used and {w.jobs[0] for w in ws[colo[-1] + 1:]} == used
    # a set measured twice is on two different GPUs
    where: dict = {}
    for k, sets in enumerate(assign_sets(c)):
        for s in sets:
            where.setdefault(s, []).append(k)
    assert all(len(set(v)) == len(v) for v in where.values())
    # LPT: the most and least loaded shards differ by at most the most one set can add to a shard
    loads = []
    for sets in assign_sets(c):
        jobs = {j for s in sets for j in s}
        loads.append(sum(_set_cost_s(c, s) for s in sets) + _solo_cost_s(c) * len(jobs))
    worst = max(_set_cost_s(c, s) + _solo_cost_s(c) * len(s) for s in c.sets)
    assert max(loads) - min(loads) <= worst


def test_a_one_gpu_campaign_plans_and_stores_as_before():
    c = cfg(shards=1)
    assert shard_plans(c) == [make_plan(c)] and full_plan(c) == make_plan(c)
    assert "shards" not in c.to_dict() and "cross_gpu_frac" not in c.to_dict()
    assert CampaignConfig.from_dict(cfg(shards=4, cross=0.5).to_dict()) == cfg(shards=4, cross=0.5)
    with pytest.raises(ValueError, match="at least two GPUs"):
        cfg(shards=1, cross=0.1)
    with pytest.raises(ValueError, match="positive integer"):
        cfg(shards=0)


def test_more_gpus_than_sets_leaves_shards_idle():
    c = CampaignConfig(jobs=JOBS[:2], sets=((JOBS[0], JOBS[1]),), modes=("mps",), shards=4)
    assert [len(p) > 0 for p in shard_plans(c)] == [True, False, False, False]


# ----------------------------------------------------------------------------------------------- records
def test_merged_records_keep_every_baseline_on_the_gpu_that_measured_the_set(tmp_path):
    """Four fake GPUs whose solo speeds differ by 10% each: a baseline taken from another GPU would change the
    slowdown, so recovering FakePool's exact physics shows every baseline came from the set's own GPU."""
    c = cfg(shards=4, cross=0.5)
    run_shards(tmp_path / "c", c)
    files = sorted(p.name for p in (tmp_path / "c").iterdir() if p.suffix == ".jsonl")
    assert files == [f"windows.shard{k}.jsonl" for k in range(4)]
    w = read_windows(tmp_path / "c")
    assert w["record_id"].is_unique and set(w["record_id"]) == {x.window_id for x in full_plan(c)}
    assert w["seq"].is_unique
    for r in w.itertuples():
        k = int(r.record_id[1:r.record_id.index("/")])
        assert r.shard == k and r.gpu_index == k and r.gpu_uuid == f"GPU-fake-{k}"
    assert w.groupby("shard")["segment"].nunique().eq(1).all() and w["segment"].nunique() == 4
    s = slowdown_table(w)
    assert s["solo_same_segment"].all()
    gpu = s["gpu_uuid"].str[-1].astype(int)
    assert (abs(s["solo_ms"] - [solo_ms(j, g) for j, g in zip(s["job"], gpu)]) < 1e-9).all()
    f = 1 + 0.5 * (s["n_jobs"] - 1) * s["mode"].map({"timeslice": 1.0, "mps": 0.5})
    assert (abs(s["slowdown"] - f) < 1e-9).all()
    a = cross_gpu_agreement(w)
    assert set(a["gpu_index"]) == {0, 1, 2, 3} and (a["abs_pct"] < 1e-9).all()


def test_a_fallback_baseline_never_comes_from_another_gpu(tmp_path):
    """A resumed shard whose new segment has no solo window of a job yet takes its baseline from that shard's
    earlier segment on the same GPU, never from another GPU's segment; with no solo window on its GPU, no row."""
    c = cfg(shards=2, modes=("timeslice",), repeat_frac=0.0, solo_every=0)
    run_shards(tmp_path / "c", c)
    lines = (tmp_path / "c" / "windows.shard1.jsonl").read_text().splitlines()
    recs = [json.loads(x) for x in lines]
    colo = next(i for i, r in enumerate(recs) if r["kind"] == "colo")
    for r in recs[colo:]:
        r["run_id"] = "second-run"  # the collocated windows as if measured by a resume: another segment
    kept = [r for r in recs[colo:] if r["kind"] == "colo"] + recs[:colo]  # solo windows only before them, in segment 1
    (tmp_path / "c" / "windows.shard1.jsonl").write_text("".join(json.dumps(r) + "\n" for r in kept))
    s = slowdown_table(read_windows(tmp_path / "c"))
    mine = s[s["gpu_uuid"] == "GPU-fake-1"]
    assert len(mine) and not mine["solo_same_segment"].any()
    assert (abs(mine["solo_ms"] - [solo_ms(j, 1) for j in mine["job"]]) < 1e-9).all()
    # with shard 1's solo windows gone, its sets have no baseline rather than one from GPU 0
    (tmp_path / "c" / "windows.shard1.jsonl").write_text("".join(json.dumps(r) + "\n" for r in kept if r["kind"] == "colo"))
    s = slowdown_table(read_windows(tmp_path / "c"))
    assert set(s["gpu_uuid"]) == {"GPU-fake-0"}


def test_a_window_in_two_shard_files_is_refused(tmp_path):
    run_shards(tmp_path / "c", cfg(shards=2))
    line = (tmp_path / "c" / "windows.shard0.jsonl").read_text().splitlines()[2]
    with open(tmp_path / "c" / "windows.shard1.jsonl", "a") as f:
        f.write(line + "\n")
    with pytest.raises(InputError, match="recorded twice"):
        read_windows(tmp_path / "c")


def test_shards_of_a_campaign_are_checked_against_the_stored_plan(tmp_path):
    run_shards(tmp_path / "c", cfg(shards=2))
    with pytest.raises(InputError, match="differ"):
        ShardedCampaign(tmp_path / "c", cfg(shards=3), resume=True)
    with pytest.raises(InputError, match="no shard 5"):
        Campaign(tmp_path / "c", None, resume=True, shard=5)
    with pytest.raises(Exception, match="one shard per GPU"):
        Campaign(tmp_path / "c", None, resume=True).run(lambda m, j: FakeGpu(m, j))
    d = json.loads((tmp_path / "c" / "campaign.json").read_text())
    d["plan_sha256"] = "0" * 16
    (tmp_path / "c" / "campaign.json").write_text(json.dumps(d))
    with pytest.raises(InputError, match="plan rebuilt"):
        Campaign(tmp_path / "c", None, resume=True, shard=1)


# ----------------------------------------------------------------------------------------------- coordinator
def _launcher(out, started, delay_s=0.05):
    def launch(shard, gpu):
        p = subprocess.Popen([sys.executable, "-m", "tests.fake_gpu_shard", str(out), str(shard), str(gpu), str(delay_s)],
                             cwd=ROOT, env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        started.append((shard, p.pid))
        return p

    return launch


def test_a_killed_shard_is_restarted_and_the_plan_completes_exactly_once(tmp_path):
    """Four fake GPUs, shard 2 SIGKILLed mid-campaign: the coordinator starts it again, it resumes from its own
    file, and the merged records hold every window of the plan once. While the campaign runs, a second
    coordinator and a second writer of a running shard are refused by the locks."""
    out = tmp_path / "c"
    c = cfg(shards=4, cross=0.25, modes=("timeslice",))
    camp = ShardedCampaign(out, c)
    started: list = []
    refused: list = []
    plan2 = len(Campaign(out, c, shard=2).plan)

    def kill_shard_2():
        f = out / "windows.shard2.jsonl"
        while not (f.exists() and sum(1 for _ in iter_records(f)) >= 3):
            time.sleep(0.02)
        try:
            ShardedCampaign(out, None, resume=True).run([0, 1, 2, 3], _launcher(out, []))
        except InputError as e:
            refused.append(str(e))
        try:
            Campaign(out, None, resume=True, shard=2).run(lambda m, j: FakeGpu(m, j))
        except InputError as e:
            refused.append(str(e))
        os.kill(next(pid for k, pid in started if k == 2), signal.SIGKILL)

    t = threading.Thread(target=kill_shard_2)
    t.start()
    codes = camp.run([0, 1, 2, 3], _launcher(out, started), poll_s=0.05)
    t.join()
    assert codes == {0: 0, 1: 0, 2: 0, 3: 0}
    assert [k for k, _ in started].count(2) == 2 and len(started) == 5
    assert len(refused) == 2 and all("another colopred measure is writing" in r for r in refused)
    w = read_windows(out)
    assert w["record_id"].is_unique and set(w["record_id"]) == {x.window_id for x in full_plan(c)}
    runs = [r["run_id"] for r in iter_records(out / "windows.shard2.jsonl")]
    assert len(set(runs)) == 2 and 3 <= runs.index(runs[-1]) < plan2  # killed after >= 3 windows, resumed
    assert set(slowdown_table(w)["gpu_uuid"]) == {f"GPU-fake-{k}" for k in range(4)}
    assert camp.run([0, 1, 2, 3], _launcher(out, started)) == dict.fromkeys(range(4), 0) and len(started) == 5  # nothing left


def test_a_shard_that_keeps_dying_is_left_for_resume(tmp_path):
    out = tmp_path / "c"
    c = cfg(shards=4, modes=("mps",))
    camp = ShardedCampaign(out, c)

    class Dead:
        pid = 0

        def poll(self):
            return -9

    launched = []

    def launch(shard, gpu):
        launched.append(shard)
        return Dead() if shard == 1 else _launcher(out, [], 0.0)(shard, gpu)

    codes = camp.run([0, 1, 2, 3], launch, poll_s=0.02)
    assert codes[1] == -9 and launched.count(1) == 3 and all(codes[k] == 0 for k in (0, 2, 3))
    assert not (out / "windows.shard1.jsonl").exists()
    codes = ShardedCampaign(out, None, resume=True).run([4, 5, 6, 7], _launcher(out, [], 0.0), poll_s=0.02)  # other GPUs
    assert codes == dict.fromkeys(range(4), 0)
    w = read_windows(out)
    assert set(w["record_id"]) == {x.window_id for x in full_plan(c)}
    assert set(w[w["shard"] == 1]["gpu_uuid"]) == {"GPU-fake-5"}


# ----------------------------------------------------------------------------------------------- agreement, rate
def test_cross_gpu_agreement_flags_the_gpu_that_measures_differently(tmp_path):
    """Eight fake GPUs with 2% repeat noise, GPU 5's collocated times 10% slower: GPU 5 alone disagrees."""
    c = cfg(shards=8, cross=0.5, jobs=JOBS8, modes=("mps",), repeat_frac=0.5)
    run_shards(tmp_path / "c", c, bias={5: 1.10}, noise=0.02)
    a = cross_gpu_agreement(read_windows(tmp_path / "c")).set_index("gpu_index")
    assert set(a.index) == set(range(8)) and (a["n_noise"] > 0).all()
    assert a.loc[5, "bias_pct"] > 5 and not a.loc[5, "agrees"]
    assert a.drop(5)["agrees"].all() and a["bias_pct"].idxmax() == 5


@pytest.mark.parametrize("first, again, key", [("h100-c1", "h100-c1r", "h100-c1r#0"),  # no GPU UUID: machines by segment
                                               ("h100-c14", "h100-c14r", "GPU-986680b6-9eae-7e22-d60b-57912c608688")])
def test_cross_machine_agreement_of_shipped_campaigns_is_recomputed_by_hand(first, again, key):
    """Sets measured again on another machine (h100-c1r: another lease, before GPU UUIDs were recorded; h100-c14r: the
    same plan on another GPU): per (mode, machine), the mean difference and the repeat noise are those computed here
    from the slowdown table."""
    w = read_windows([DATA / "campaigns" / first, DATA / "campaigns" / again])
    a = cross_gpu_agreement(w).set_index(["mode", "gpu_key"])
    assert len(set(a.index.get_level_values("gpu_key"))) == 2 and key in set(a.index.get_level_values("gpu_key"))
    s = slowdown_table(w)
    for mode in sorted(set(s["mode"])):
        m = s[s["mode"] == mode].groupby(["set", "job", "campaign"])["slowdown"].mean().unstack("campaign").dropna()
        d = 100 * (m[again] / m[first] - 1)
        if (mode, key) not in a.index:  # the machine measured first is the reference; the other carries the difference
            continue
        row = a.loc[(mode, key)]
        assert row["n"] == len(d) and row["bias_pct"] == pytest.approx(d.mean()) and row["abs_pct"] == pytest.approx(d.abs().mean())
        reps = s[s["mode"] == mode].groupby(["set", "job", "campaign"])["slowdown"].agg(list)
        pairs = [200 * abs(x[0] - x[1]) / (x[0] + x[1]) for x in reps if len(x) >= 2]
        assert row["n_noise"] == len(pairs) > 0 and row["noise_pct"] == pytest.approx(sum(pairs) / len(pairs))
        assert row["agrees"] == (row["abs_pct"] <= row["noise_pct"] + 2 * row["abs_se"])


def test_windows_per_minute_per_gpu_and_per_campaign(tmp_path):
    run_shards(tmp_path / "c", cfg(shards=4))
    w = read_windows(tmp_path / "c")
    w["wall_s"] = 30.0
    w["started_at"] = [f"2026-01-01T00:{m:02d}:00+00:00" for m in w.groupby("shard").cumcount()]  # the four in parallel
    r = throughput_by_gpu(w).set_index("gpu_key")
    per = r.drop("all")
    assert set(per["gpu_index"]) == {0, 1, 2, 3}
    for key, row in per.iterrows():
        n = int((w["gpu_uuid"] == key).sum())
        assert row["windows"] == n and row["minutes"] == pytest.approx(n - 0.5) and row["windows_per_min"] == pytest.approx(n / (n - 0.5))
    assert r.loc["all", "windows"] == len(w) and r.loc["all", "minutes"] == pytest.approx(per["minutes"].max())


# ----------------------------------------------------------------------------------------------- across nodes
def test_per_node_folders_merge_into_one_campaign_without_loss_or_duplicates(tmp_path):
    """Two nodes of two GPUs each (a Slurm array of two tasks): each measures its shards into its own folder; the
    merge is the whole plan; merging again after more records adds them; conflicts are refused."""
    c = cfg(shards=4, cross=0.25)
    assert node_shards(c, 2, 0, 2) == [0, 1] and node_shards(c, 2, 1, 2) == [2, 3]
    nodes = [tmp_path / "nodes" / f"node-{i}" for i in range(2)]
    for i, d in enumerate(nodes):
        ShardedCampaign(d, c)
        for k in node_shards(c, 2, i, 2):
            Campaign(d, c if not (d / "campaign.json").exists() else None, resume=(d / "campaign.json").exists(), shard=k).run(
                lambda m, j, k=k: FakeGpu(m, j, index=k % 2 + 10 * i))
    # node 1's last shard was cut short: merge what is there, then the rest after it finishes
    last = nodes[1] / "windows.shard3.jsonl"
    full = last.read_text()
    last.write_text("".join(full.splitlines(keepends=True)[:5]))
    merged = tmp_path / "merged"
    assert merge_campaigns(nodes, merged) == {0: len(Campaign(nodes[0], shard=0, resume=True).plan),
                                              1: len(Campaign(nodes[0], shard=1, resume=True).plan),
                                              2: len(Campaign(nodes[0], shard=2, resume=True).plan), 3: 5}
    last.write_text(full)
    merge_campaigns(nodes, merged)
    merge_campaigns(nodes, merged)  # again: nothing changes
    w = read_windows(merged)
    assert w["record_id"].is_unique and set(w["record_id"]) == {x.window_id for x in full_plan(c)}
    assert sorted(w["gpu_uuid"].unique()) == ["GPU-fake-0", "GPU-fake-1", "GPU-fake-10", "GPU-fake-11"]
    assert (merged / "campaign.json").read_text() == (nodes[0] / "campaign.json").read_text()
    # a record file that does not extend the merged one is refused, and the merged file is kept
    before = (merged / "windows.shard3.jsonl").read_bytes()
    last.write_text("".join(full.splitlines(keepends=True)[1:]))
    with pytest.raises(InputError, match="does not extend"):
        merge_campaigns(nodes, merged)
    assert (merged / "windows.shard3.jsonl").read_bytes() == before
    last.write_text(full)
    # one shard in two node folders, or parts of another campaign, are refused
    (nodes[0] / "windows.shard3.jsonl").write_text(full)
    with pytest.raises(InputError, match="also in"):
        merge_campaigns(nodes, merged)
    (nodes[0] / "windows.shard3.jsonl").unlink()
    other = tmp_path / "other"
    run_shards(other, cfg(shards=4, seed=9))
    with pytest.raises(InputError, match="settings differ"):
        merge_campaigns([nodes[0], other], merged)
    with CampaignLock(merged):
        with pytest.raises(InputError, match="another colopred measure"):
            merge_campaigns(nodes, merged)


def test_sbatch_script_runs_one_array_task_per_node_and_resumes():
    text = sbatch_script(ROOT / "runs x", nodes=3, gpus=8, plan_args=["--jobs", "a,b", "--sets", "/s/sets.txt", "--mode", "mps"],
                         pool_args=["--park-idle"], setup="source venv/bin/activate", python="/opt/py")
    assert "#SBATCH --array=0-2" in text and "#SBATCH --gres=gpu:8" in text
    assert f"'{ROOT / 'runs x'}'/nodes/node-$SLURM_ARRAY_TASK_ID" in text
    assert '--resume --gpus all --nodes 3 --node "$SLURM_ARRAY_TASK_ID" --park-idle' in text
    assert "--jobs a,b --sets /s/sets.txt --mode mps --park-idle" in text and "source venv/bin/activate" in text
    assert "colopred campaign merge" in text
    assert subprocess.run(["bash", "-n"], input=text, text=True).returncode == 0


def test_parse_gpus():
    assert parse_gpus("0,1, 3") == [0, 1, 3]
    assert parse_gpus("all", count=lambda: 4) == [0, 1, 2, 3] or os.environ.get("CUDA_VISIBLE_DEVICES")
    for bad, msg in (("0,x", "not a GPU index"), ("1,1", "listed twice"), ("", "not a GPU index")):
        with pytest.raises(Exception, match=msg):
            parse_gpus(bad)


@pytest.mark.parametrize("args, needle", [
    (["--gpus", "0,a"], "--gpus: 'a' is not a GPU index"),
    (["--gpus", "0,0"], "listed twice"),
    (["--gpus", "0", "--cross-gpu-frac", "0.2"], "needs a campaign over at least two GPUs"),
    (["--gpus", "0,1", "--cross-gpu-frac", "1.5"], "--cross-gpu-frac must lie in [0, 1]"),
    (["--nodes", "2"], "--nodes needs --gpus"),
    (["--gpus", "0,1", "--nodes", "2", "--node", "2"], "--node must be one of 0..1"),
])
def test_bad_multi_gpu_arguments_are_one_line(tmp_path, capsys, args, needle):
    from colopred.cli import main

    code = main(["measure", "--jobs", "resnet18-b2-fp32,dlrm-b8-fp32", "--sets", "pairs", "--mode", "mps", "--out", str(tmp_path / "c"),
                 "--device", "cpu", "--no-nvml", *args])
    err = capsys.readouterr().err
    assert code == 2 and needle in err and err.count("\n") == 1 and "Traceback" not in err


def test_merge_of_a_folder_that_is_no_campaign_is_one_line(tmp_path, capsys):
    from colopred.cli import main

    (tmp_path / "x").mkdir()
    assert main(["campaign", "merge", str(tmp_path / "x"), "--out", str(tmp_path / "m")]) == 2
    err = capsys.readouterr().err
    assert "x: no campaign.json" in err and err.count("\n") == 1 and not (tmp_path / "m").exists()


# ----------------------------------------------------------------------------------------------- the real CLI
@pytest.mark.slow
def test_measure_over_four_fake_gpus_killed_and_resumed(tmp_path):
    """`colopred measure --gpus 0,1,2,3` with tiny CPU workers standing for four GPUs: the whole campaign is
    SIGKILLed mid-way, `--resume` completes every window exactly once, and `table --by-gpu` reports it."""
    pytest.importorskip("torch")
    out = tmp_path / "camp"
    base = [sys.executable, "-m", "colopred", "measure", "--out", str(out), "--device", "cpu", "--tiny", "--no-nvml", "--fake-gpus", "-q",
            "--no-progress", "--min-iters", "3", "--max-window-s", "3", "--gpus", "0,1,2,3"]
    start = base + ["--jobs", "resnet18-b2-fp32,dlrm-b8-fp32,lstm_lm-b2-fp32", "--sets", "pairs", "--mode", "timeslice",
                    "--repeat-frac", "0", "--cross-gpu-frac", "0.5"]
    p = subprocess.Popen(start, cwd=ROOT, env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline and p.poll() is None:
        files = list(out.glob("windows.shard*.jsonl"))
        if sum(sum(1 for _ in iter_records(f)) for f in files) >= 4:
            break
        time.sleep(0.2)
    assert p.poll() is None, "the campaign ended before it could be killed"
    os.killpg(p.pid, signal.SIGKILL)
    p.wait()
    seen = {f.name: [r["window_id"] for r in iter_records(f)] for f in out.glob("windows.shard*.jsonl")}
    assert sum(map(len, seen.values())) >= 4
    r = subprocess.run(base + ["--resume"], cwd=ROOT, env=ENV, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    for name, ids in seen.items():
        assert [x["window_id"] for x in iter_records(out / name)][: len(ids)] == ids  # nothing recorded is lost or changed
    w = read_windows(out)
    assert w["record_id"].is_unique and set(w["record_id"]) == {x.window_id for x in full_plan(Campaign(out, resume=True).config)}
    assert set(w["gpu_uuid"]) == {f"GPU-fake-{k}" for k in range(4)} and set(w["gpu_index"]) == {0, 1, 2, 3}
    assert (out / "logs" / "shard0.log").exists()
    t = subprocess.run([sys.executable, "-m", "colopred", "table", "--by-gpu", str(out)], cwd=ROOT, env=ENV, capture_output=True, text=True)
    assert t.returncode == 0 and "windows per minute" in t.stdout and "GPU-fake-3" in t.stdout and "cross-GPU agreement" in t.stdout


def test_gpu_session_spreads_campaigns_over_the_gpus_and_keeps_the_one_gpu_baseline(tmp_path):
    """scripts/gpu_session.py --gpus all: new campaigns get --gpus all and --cross-gpu-frac, resumed ones --gpus
    all, those in --one-gpu-campaigns --gpus 0 (the scaling baseline), each at most --campaign-budget-s long."""
    import argparse
    gs = load_script("gpu_session")
    calls = []
    gs.sh = lambda cmd, timeout, log_path=None, env=None: (calls.append((cmd, timeout)) or (0, 1.0))
    a = argparse.Namespace(measure_extra="", gpus="all", cross_gpu_frac=0.25, one_gpu_campaigns=["one"], campaign_budget_s=200.0,
                           budget_s=540.0)
    (tmp_path / "old").mkdir()
    (tmp_path / "old" / "campaign.json").write_text("{}")
    for name in ("multi", "one", "old"):
        gs.run_measure(tmp_path, a, tmp_path / name, ["--jobs", "x,y"], False, "", tmp_path / "log")
    (multi, t1), (one, _), (old, _) = calls
    assert multi[multi.index("--gpus") + 1] == "all" and multi[multi.index("--cross-gpu-frac") + 1] == "0.25" and t1 == 200.0
    assert one[one.index("--gpus") + 1] == "0" and "--cross-gpu-frac" not in one
    assert old[old.index("--gpus") + 1] == "all" and "--resume" in old and "--jobs" not in old


def test_resuming_on_another_number_of_gpus_is_one_line(tmp_path, capsys):
    from colopred.cli import main

    run_shards(tmp_path / "c", cfg(shards=4))
    one = tmp_path / "one"
    Campaign(one, cfg(shards=1)).run(lambda m, j: FakeGpu(m, j))
    for out, gpus, needle in ((tmp_path / "c", "0,1", "spread over 4 GPUs; --gpus names 2"),
                              (one, "0,1", "planned for one GPU; --gpus names 2")):
        assert main(["measure", "--out", str(out), "--resume", "--gpus", gpus, "--device", "cpu", "--no-nvml"]) == 2
        err = capsys.readouterr().err
        assert needle in err and err.count("\n") == 1
    assert not (tmp_path / "c" / "logs").exists()


@pytest.mark.parametrize("visible, clients_keep", [("2", False), ("GPU-3b1c", True)])
def test_each_gpus_mps_daemon_sees_its_gpu_and_its_clients_keep_only_a_uuid(tmp_path, monkeypatch, visible, clients_keep):
    """A shard's MPS daemon starts with the shard's CUDA_VISIBLE_DEVICES and its own pipe and log folders; the MPS
    server remaps the GPU to the clients' device 0, so workers keep a UUID there but not an index (NVIDIA's MPS
    docs). Run with a stand-in nvidia-cuda-mps-control that records its environment."""
    from colopred.measurement.harness.mps import MpsDaemon
    from colopred.measurement.harness.multigpu import shard_command, shard_env

    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    seen = tmp_path / "seen"
    (bin_dir / "nvidia-cuda-mps-control").write_text(
        f'#!/bin/sh\necho "$* visible=$CUDA_VISIBLE_DEVICES pipe=$CUDA_MPS_PIPE_DIRECTORY log=$CUDA_MPS_LOG_DIRECTORY" >> {seen}\ncat > /dev/null\n')
    (bin_dir / "nvidia-cuda-mps-control").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", visible)
    cmd = shard_command(tmp_path / "c", 1, 2, [], mps_base=str(tmp_path / "mps"))
    d = MpsDaemon(cmd[cmd.index("--mps-dir") + 1])
    d.start()
    assert (os.environ.get("CUDA_VISIBLE_DEVICES") == visible) is clients_keep
    assert os.environ["CUDA_MPS_PIPE_DIRECTORY"] == str(tmp_path / "mps" / "gpu2" / "pipe")
    d.stop()
    assert os.environ["CUDA_VISIBLE_DEVICES"] == visible and "CUDA_MPS_PIPE_DIRECTORY" not in os.environ
    start, quit_ = seen.read_text().splitlines()
    assert start == f"-d visible={visible} pipe={tmp_path}/mps/gpu2/pipe log={tmp_path}/mps/gpu2/log" and quit_.startswith(" visible=")
    assert shard_env(2, {}, uuid="GPU-3b1c") == {"CUDA_VISIBLE_DEVICES": "GPU-3b1c", "CUDA_DEVICE_ORDER": "PCI_BUS_ID"}
    assert shard_env(2, {})["CUDA_VISIBLE_DEVICES"] == "2"


def test_campaign_sbatch_writes_the_script_and_refuses_what_the_script_sets(tmp_path, capsys):
    from colopred.cli import main

    out = tmp_path / "c1.sbatch"
    assert main(["campaign", "sbatch", "--root", str(tmp_path / "runs"), "--nodes", "2", "--gpus-per-node", "4", "-q", "-o", str(out),
                 "--sbatch=--partition=gpu", "--", "--jobs", "resnet18-b64-fp32,dlrm-b512-fp32", "--sets", "pairs", "--mode", "mps",
                 "--park-idle"]) == 0
    text = out.read_text()
    assert "#SBATCH --array=0-1" in text and "#SBATCH --gres=gpu:4" in text and "#SBATCH --partition=gpu" in text
    assert "--jobs resnet18-b64-fp32,dlrm-b512-fp32 --sets pairs --mode mps --park-idle --no-progress" in text
    assert (tmp_path / "runs" / "logs").is_dir()
    assert subprocess.run(["bash", "-n", str(out)]).returncode == 0
    assert main(["campaign", "sbatch", "--root", "r", "--nodes", "2", "--gpus-per-node", "4", "--", "--out", "x"]) == 2
    assert "--out is set by the script" in capsys.readouterr().err


@pytest.mark.parametrize("extra, plan, needle", [
    ([], ["--jobs", "nosuch,bogus", "--sets", "pairs", "--mode", "mps"], "--jobs: bad job name 'nosuch'"),
    ([], ["--jobs", "resnet18-b64-fp32,dlrm-b512-fp32", "--sets", "pairs", "--mode", "MPS"], "argument --mode: invalid choice: 'MPS'"),
    ([], [], "need --jobs (or --jobs-file), --sets and --mode"),
    ([], ["--jobs", "resnet18-b64-fp32", "--sets", "pairs", "--mode", "mps"], "makes no set to measure"),
    ([], ["--jobs", "resnet18-b64-fp32,dlrm-b512-fp32", "--sets", "pairs", "--mode", "mps", "--no-such-option"], "unrecognized arguments"),
    (["--time", "forever"], ["--jobs", "resnet18-b64-fp32,dlrm-b512-fp32", "--sets", "pairs", "--mode", "mps"], "'forever' is not a Slurm time limit"),
])
def test_campaign_sbatch_refuses_what_measure_would_refuse_on_the_nodes(tmp_path, capsys, extra, plan, needle):
    """The script is checked before it is written: a plan that ``colopred measure`` would refuse fails here, in one
    line, and writes nothing (not hours later on the cluster)."""
    from colopred.cli import main

    out = tmp_path / "c.sbatch"
    code = main(["campaign", "sbatch", "--root", str(tmp_path / "runs"), "--nodes", "2", "--gpus-per-node", "4", *extra,
                 "-o", str(out), "--", *plan])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and needle in err[0], err
    assert not out.exists()


@pytest.mark.parametrize("limit", ["90", "30:00", "12:00:00", "2-00", "1-12:30", "1-12:30:00", "UNLIMITED"])
def test_campaign_sbatch_takes_every_slurm_time_format(tmp_path, limit):
    from colopred.cli import main

    assert main(["campaign", "sbatch", "--root", str(tmp_path), "--nodes", "1", "--gpus-per-node", "1", "--time", limit, "-q",
                 "-o", str(tmp_path / "c.sbatch"), "--", "--jobs", "resnet18-b64-fp32,dlrm-b512-fp32", "--sets", "pairs",
                 "--mode", "both"]) == 0
    assert f"#SBATCH --time={limit}" in (tmp_path / "c.sbatch").read_text()
