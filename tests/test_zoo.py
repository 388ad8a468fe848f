"""Zoo models build and train on the CPU at tiny size; real worker processes run windows."""

import json
import os

import pytest

torch = pytest.importorskip("torch", reason="the workload zoo needs PyTorch (the README's test command installs a CPU build)")

from colopred.measurement.harness.campaign import Campaign  # noqa: E402
from colopred.measurement.harness.gpu_pool import GpuWorkerPool  # noqa: E402
from colopred.measurement.harness.plan import CampaignConfig  # noqa: E402
from colopred.measurement.harness.reader import read_windows, slowdown_table  # noqa: E402
from colopred.measurement.zoo.registry import ARCH_NAMES, JobSpec, architectures, parse_jobs  # noqa: E402
from colopred.measurement.zoo.training import build  # noqa: E402


@pytest.mark.parametrize("arch", ARCH_NAMES)
def test_every_architecture_takes_a_training_step(arch):
    job = build(JobSpec(arch, 2, "fp32"), "cpu", tiny=True)
    before = [p.detach().clone() for p in job.model.parameters()]
    loss = job.step()
    assert torch.isfinite(loss)
    changed = any(not torch.equal(b, p) for b, p in zip(before, job.model.parameters()))
    assert changed, "the optimizer step changed no parameter"


def test_the_torch_free_name_list_is_the_zoo():
    """ARCH_NAMES (checked without importing torch) lists exactly the built architectures, in the same order."""
    assert tuple(architectures()) == ARCH_NAMES


def test_bf16_and_loader_variants():
    assert torch.isfinite(build(JobSpec.parse("gpt2_small-b2-bf16"), "cpu", tiny=True).step())
    assert torch.isfinite(build(JobSpec.parse("gat-b2-bf16"), "cpu", tiny=True).step())  # float32 attention, bf16 features
    assert torch.isfinite(build(JobSpec.parse("resnet18-b2-fp32-loader"), "cpu", tiny=True, loader_workers=0).step())


@pytest.mark.parametrize("name", ["densenet121-b32-fp32", "vit_b16-b32-fp32", "bert_base-b8-fp32", "mobilenet_v3-b64-fp32",
                                  "efficientnet_b0-b64-fp32"])
def test_reserved_architectures_are_refused(name):
    with pytest.raises(ValueError, match=r"reserved|unknown"):
        JobSpec.parse(name)


def test_job_names_round_trip():
    for n in ["resnet18-b64-fp32", "gpt2_small-b8-bf16", "vgg16-b32-fp32-adamw", "resnet50-b32-bf16-loader"]:
        assert JobSpec.parse(n).name == n
    assert JobSpec.parse("gpt2_small-b8-bf16-adamw").name == "gpt2_small-b8-bf16"  # default optimizer
    with pytest.raises(ValueError, match="twice"):
        parse_jobs("resnet18-b64-fp32,resnet18-b64-fp32")
    with pytest.raises(ValueError, match="bad job name"):
        JobSpec.parse("resnet18")


@pytest.mark.slow
def test_real_worker_processes_run_windows(tmp_path):
    jobs = ("resnet18-b2-fp32", "dlrm-b8-fp32")
    cfg = CampaignConfig(jobs=jobs, sets=(jobs,), modes=("timeslice",), repeat_frac=0.0, min_iters=3,
                         min_window_s=2.5, max_window_s=6.0, warmup_s=0.3)  # roomy: CI machines may be busy
    camp = Campaign(tmp_path / "c", cfg)
    camp.run(lambda m, j: GpuWorkerPool(m, j, device="cpu", tiny=True, use_nvml=False))
    w = read_windows(tmp_path / "c")
    assert set(w["status"]) == {"ok"}, w[["window_id", "status", "reason"]].to_string()
    s = slowdown_table(w)
    assert len(s) == 2 and (s["slowdown"] > 0).all() and (s["iterations"] >= 2).all()


def test_parking_keeps_the_optimizer_bound_to_the_model():
    """park()/unpark() move weights and optimizer state in place: training goes on with the
    same parameter objects and state (on the CPU both are the host; the GPU path moves them)."""
    job = build(JobSpec.parse("resnet18-b2-fp32"), "cpu", tiny=True)
    job.timed_steps(2)
    params = list(job.model.parameters())
    state_before = {id(p): {k: v.clone() for k, v in job.optimizer.state[p].items() if torch.is_tensor(v)} for p in params}
    job.park().unpark()
    assert [id(p) for p in job.model.parameters()] == [id(p) for p in params]
    for p in params:
        for k, v in state_before[id(p)].items():
            assert torch.equal(job.optimizer.state[p][k], v)
    loss = job.step()
    assert torch.isfinite(loss)


@pytest.mark.slow
def test_parking_pool_runs_windows_and_records_it(tmp_path):
    jobs = ("resnet18-b2-fp32", "dlrm-b8-fp32")
    cfg = CampaignConfig(jobs=jobs, sets=(jobs,), modes=("timeslice",), repeat_frac=0.0, min_iters=3,
                         min_window_s=2.5, max_window_s=6.0, warmup_s=0.3)
    Campaign(tmp_path / "c", cfg).run(lambda m, j: GpuWorkerPool(m, j, device="cpu", tiny=True, use_nvml=False, park_idle=True))
    w = read_windows(tmp_path / "c")
    assert set(w["status"]) == {"ok"}, w[["window_id", "status", "reason"]].to_string()
    recs = [json.loads(l) for l in (tmp_path / "c" / "windows.jsonl").read_text().splitlines()]
    assert recs and all(r["park_idle"] is True for r in recs)


def test_refill_batch_restarts_evicted_jobs_oldest_first_while_they_fit():
    from colopred.constants import CONTEXT_OVERHEAD_GIB
    from colopred.measurement.harness.gpu_pool import NEW_WORKER_GIB, refill_batch

    peaks = {"big": 50.0, "mid": 9.4, "small": 1.4}
    assert refill_batch(["big", "mid", "small"], peaks, 12.0) == ["mid", "small"]  # big does not fit, the rest do
    assert refill_batch(["small", "mid"], peaks, 2.0 + CONTEXT_OVERHEAD_GIB) == ["small"]
    assert refill_batch(["unseen"], peaks, NEW_WORKER_GIB + CONTEXT_OVERHEAD_GIB) == ["unseen"]
    assert refill_batch(["unseen"], peaks, NEW_WORKER_GIB) == []
    assert refill_batch([], peaks, 100.0) == []


@pytest.mark.slow
def test_parking_pool_restarts_evicted_workers_with_the_next_window():
    """A parked pool brings back workers that were stopped to make room in the same parallel
    start-up as the next window's, instead of one window at a time."""
    jobs = ("resnet18-b2-fp32", "dlrm-b8-fp32")
    pool = GpuWorkerPool("timeslice", jobs, device="cpu", tiny=True, use_nvml=False, park_idle=True, prestart=0)
    try:
        pool.evicted = ["dlrm-b8-fp32"]  # as if _make_room had stopped it for a large window
        res, _ = pool.run_window(("resnet18-b2-fp32",), duration_s=1.0, warmup_s=0.2)
        assert res["resnet18-b2-fp32"]["status"] == "ok"
        assert set(pool.workers) == set(jobs) and pool.evicted == []
    finally:
        pool.close()
    plain = GpuWorkerPool("timeslice", jobs, device="cpu", tiny=True, use_nvml=False, park_idle=False, prestart=0)
    try:
        plain.evicted = ["dlrm-b8-fp32"]  # unparked workers hold their peak: no refill
        plain.run_window(("resnet18-b2-fp32",), duration_s=1.0, warmup_s=0.2)
        assert set(plain.workers) == {"resnet18-b2-fp32"} and plain.evicted == ["dlrm-b8-fp32"]
    finally:
        plain.close()


def test_cpu_blocks_split_the_cpus_into_disjoint_contiguous_blocks():
    from colopred.measurement.harness.gpu_pool import cpu_blocks

    b = cpu_blocks(("a", "b", "c"), {7, 0, 1, 2, 3, 4, 5, 6})
    assert b == {"a": (0, 1, 2), "b": (3, 4, 5), "c": (6, 7)}
    assert cpu_blocks(("a", "b", "c"), {4, 9}) == {"a": (4,), "b": (9,), "c": (4,)}  # fewer CPUs than jobs: shared
    assert cpu_blocks((), {0, 1}) == {}
    with pytest.raises(ValueError):
        cpu_blocks(("a",), set())


@pytest.mark.slow
def test_pinned_pool_runs_each_worker_on_its_own_cpus_and_records_it(tmp_path):
    from colopred.measurement.harness.gpu_pool import cpu_blocks

    jobs = ("resnet18-b2-fp32", "dlrm-b8-fp32")
    want = cpu_blocks(jobs, os.sched_getaffinity(0))
    seen = {}

    def factory(mode, js):
        pool = GpuWorkerPool(mode, js, device="cpu", tiny=True, use_nvml=False, pin_cpus=True)
        seen.update({j: tuple(sorted(os.sched_getaffinity(w.proc.pid))) for j, w in pool.workers.items()})
        return pool

    cfg = CampaignConfig(jobs=jobs, sets=(jobs,), modes=("timeslice",), repeat_frac=0.0, min_iters=3,
                         min_window_s=1.0, max_window_s=4.0, warmup_s=0.2)
    Campaign(tmp_path / "c", cfg).run(factory)
    assert seen == want
    w = read_windows(tmp_path / "c")
    assert set(w["status"]) == {"ok"} and w["pin_cpus"].all()


def test_pointnet_and_vae_outputs_feed_their_losses():
    """PointNet's alignment networks start as the identity (zero-initialised last layer), so its orthogonality
    penalty starts at 0 and the loss is the classification loss alone; the VAE reconstructs an image of the input's
    shape, and its loss (reconstruction + KL) is positive."""
    import torch.nn.functional as F

    pn = build(JobSpec.parse("pointnet-b4-fp32"), "cpu", tiny=True)
    pts, y = pn._next_batch()
    scores, a = pn.model(*pts)
    assert torch.allclose(a, torch.eye(a.shape[1]).expand_as(a))
    assert torch.isclose(pn._loss((scores, a), y), F.cross_entropy(scores, y))
    vae = build(JobSpec.parse("vae-b4-fp32"), "cpu", tiny=True)
    (x,), target = vae._next_batch()
    recon, mean, logvar = vae.model(x)
    assert recon.shape == x.shape and mean.shape == logvar.shape
    assert vae._loss((recon, mean, logvar), target) > 0


@pytest.mark.parametrize("job_name", ["s4d_lm-b2-fp32", "gru_lm-b2-fp32"])
def test_language_models_are_causal(job_name):
    """Output t sees tokens up to t only: changing the last token leaves every earlier position's output unchanged.
    S4D's FFT convolution is zero-padded to twice the length for this (a circular convolution would leak it to all);
    the GRU runs forward in time."""
    job = build(JobSpec.parse(job_name), "cpu", tiny=True)
    job.model.eval()
    (idx,), _ = job._next_batch()
    other = idx.clone()
    other[:, -1] = (other[:, -1] + 1) % job.model.out.out_features
    a, b = job.model(idx), job.model(other)
    assert torch.allclose(a[:, :-1], b[:, :-1], atol=1e-5)
    assert not torch.allclose(a[:, -1], b[:, -1])


def test_nerf_composites_each_ray_from_its_samples_and_r3d_classifies_clips():
    """NeRF's compositing weights of a ray sum to at most 1, so a rendered colour (sigmoid colours) stays in [0, 1];
    R3D maps a clip (N x 3 x frames x H x W) to class scores."""
    nerf = build(JobSpec.parse("nerf-b8-fp32"), "cpu", tiny=True)
    (origins, directions), colours = nerf._next_batch()
    assert torch.allclose(directions.norm(dim=1), torch.ones(8))
    rgb = nerf.model(origins, directions).detach()
    assert rgb.shape == colours.shape and float(rgb.min()) >= 0 and float(rgb.max()) <= 1
    r3d = build(JobSpec.parse("r3d_18-b2-fp32"), "cpu", tiny=True)
    (clip,), _y = r3d._next_batch()
    assert clip.shape == (2, 3, r3d.model.frames, r3d.model.size, r3d.model.size)
    assert r3d.model(clip).shape == (2, r3d.model.classes)


def test_pixelcnn_sees_only_pixels_above_and_to_the_left():
    """The masked convolutions make the logits of pixel (i, j) independent of pixel (i, j) itself and of every pixel
    after it in raster order: changing the centre pixel changes nothing before it, and its own logits stay equal."""
    job = build(JobSpec.parse("pixelcnn-b1-fp32"), "cpu", tiny=True)
    (x,), _ = job._next_batch()
    other = x.clone()
    i = j = job.model.size // 2
    other[:, :, i, j] = 1.0 - other[:, :, i, j]
    a, b = job.model(x).detach(), job.model(other).detach()
    flat_a, flat_b = a.flatten(3), b.flatten(3)
    k = i * job.model.size + j
    assert torch.allclose(flat_a[..., : k + 1], flat_b[..., : k + 1], atol=1e-6)
    assert not torch.allclose(flat_a[..., k + 1:], flat_b[..., k + 1:])


def test_dqn_learns_through_the_online_network_only_and_deepspeech_feeds_ctc():
    """The Double-DQN target is computed without gradient and the target network's weights never change; DeepSpeech 2
    emits one log-distribution over characters per output frame, as many frames as ``output_frames`` says."""
    dqn = build(JobSpec.parse("dqn-b8-fp32"), "cpu", tiny=True)
    before = {k: v.clone() for k, v in dqn.model.target.state_dict().items()}
    online_before = [p.clone() for p in dqn.model.online.parameters()]
    dqn.step()
    assert all(torch.equal(v, dqn.model.target.state_dict()[k]) for k, v in before.items())
    assert any(not torch.equal(a, b) for a, b in zip(online_before, dqn.model.online.parameters()))
    inputs, _ = dqn._next_batch()
    value, target = dqn.model(*inputs)
    assert value.requires_grad and not target.requires_grad
    ds = build(JobSpec.parse("deepspeech2-b2-fp32"), "cpu", tiny=True)
    (spec,), _text = ds._next_batch()
    out = ds.model(spec).detach()
    assert out.shape == (ds.model.output_frames(spec.shape[-1]), 2, ds.model.characters)
    assert torch.allclose(out.exp().sum(-1), torch.ones(out.shape[:2]), atol=1e-5)


def test_graphsage_reads_only_its_sampled_neighbourhood():
    """Changing the features of a node outside a target's sampled neighbourhood leaves its logits unchanged;
    changing a hop-2 neighbour's changes them."""
    torch.manual_seed(0)
    job = build(JobSpec.parse("graphsage-b2-fp32"), "cpu", tiny=True)
    model = job.model.eval()
    table = torch.randn(20, model.features)
    ids, hop1, hop2 = torch.tensor([0]), torch.tensor([[1, 2, 3]]), torch.tensor([[[4, 5], [6, 7], [8, 9]]])
    base = model(table, ids, hop1, hop2)
    outside = table.clone()
    outside[15] += 10.0
    assert torch.equal(model(outside, ids, hop1, hop2), base)
    inside = table.clone()
    inside[9] += 10.0
    assert not torch.allclose(model(inside, ids, hop1, hop2), base)


def test_ppo_log_probs_are_a_distribution_and_the_clip_stops_the_gradient():
    """The policy's log-probabilities sum to one over actions; once an action's probability ratio is past 1 + clip
    with a positive advantage, the surrogate gives its policy no gradient."""
    from colopred.measurement.zoo.training import PPO_CLIP

    torch.manual_seed(0)
    job = build(JobSpec.parse("ppo_impala-b4-fp32"), "cpu", tiny=True)
    model = job.model
    frames = torch.randint(0, 256, (4, 3, model.size, model.size), dtype=torch.uint8)
    every_action = torch.arange(model.actions).repeat(4, 1)
    log_probs = torch.stack([model(frames, every_action[:, a])[0] for a in range(model.actions)], 1)
    assert torch.allclose(log_probs.exp().sum(1), torch.ones(4), atol=1e-5)
    actions = torch.zeros(4, dtype=torch.long)
    log_prob = model(frames, actions)[0].detach()
    old = log_prob - 2 * PPO_CLIP  # ratio e^(2·clip) > 1 + clip
    adv = torch.ones(4)
    model.zero_grad()
    out = model(frames, actions)
    job._loss((out[0], out[1] * 0, out[2] * 0), (old, adv, out[2].detach())).backward()
    assert model.policy.weight.grad is None or torch.count_nonzero(model.policy.weight.grad) == 0
    model.zero_grad()
    out = model(frames, actions)
    job._loss((out[0], out[1] * 0, out[2] * 0), (log_prob, adv, out[2].detach())).backward()
    assert torch.count_nonzero(model.policy.weight.grad) > 0



def test_dgcnn_edges_join_each_point_to_its_nearest_neighbours_and_gat_attends_over_in_edges():
    """knn_edge_features: a point's first neighbour is itself (edge feature [x_i, 0]) and the next its nearest
    other point; DGCNN's scores do not depend on the order of the points. GAT: a node's output is untouched by a
    node of another graph, and its attention over its in-edges (and itself) sums to one."""
    from colopred.measurement.zoo.models import DGCNN, GAT, knn_edge_features

    x = torch.tensor([[[0.0, 1.0, 5.0, 1.2]]])  # one cloud, one channel, four points
    e = knn_edge_features(x, 2)
    assert e.shape == (1, 2, 4, 2)
    assert torch.equal(e[0, 1, :, 0], torch.zeros(4))  # x_j − x_i of the nearest (itself) is 0
    assert torch.allclose(e[0, 0, 1] + e[0, 1, 1], torch.tensor([1.0, 1.2]))  # point 1's neighbours: itself, point 3
    torch.manual_seed(0)
    net = DGCNN(4, (8, 8), 16, 4, (16, 8)).eval()
    pts = torch.randn(2, 3, 32)
    perm = torch.randperm(32)
    assert torch.allclose(net(pts), net(pts[:, :, perm]), atol=1e-5)

    gat = GAT(node_features=3, hidden=4, heads=2, layers=2).eval()
    feats = torch.randn(5, 3)
    edges = torch.tensor([[0, 1, 1, 2, 3, 4], [1, 0, 2, 1, 4, 3]])  # graph 0: nodes 0-2 (a path), graph 1: nodes 3-4
    graph_of = torch.tensor([0, 0, 0, 1, 1])
    base = gat(feats, edges, graph_of, 2)
    moved = feats.clone()
    moved[4] += 10.0
    out = gat(moved, edges, graph_of, 2)
    assert torch.equal(out[0], base[0]) and not torch.allclose(out[1], base[1])


@pytest.mark.slow
def test_copies_of_one_job_run_as_separate_worker_processes(tmp_path):
    """Two copies of one zoo job in a window are two worker processes training side by side; the job's solo window
    runs on the first copy's worker."""
    from colopred.measurement.harness.gpu_pool import worker_key

    assert [worker_key(m) for m in ("resnet18-b2-fp32", "resnet18-b2-fp32#1", "resnet18-b2-fp32#2")] == \
        ["resnet18-b2-fp32", "resnet18-b2-fp32", "resnet18-b2-fp32#2"]
    cfg = CampaignConfig(jobs=("resnet18-b2-fp32",), sets=(("resnet18-b2-fp32#1", "resnet18-b2-fp32#2"),), modes=("timeslice",),
                         repeat_frac=0.0, min_iters=3, min_window_s=2.5, max_window_s=6.0, warmup_s=0.3)
    lines = []
    Campaign(tmp_path / "c", cfg).run(lambda m, j: GpuWorkerPool(m, j, device="cpu", tiny=True, use_nvml=False, log=lines.append))
    w = read_windows(tmp_path / "c")
    assert set(w["status"]) == {"ok"}, w[["window_id", "status", "reason"]].to_string()
    s = slowdown_table(w)
    assert list(s["instance"]) == ["resnet18-b2-fp32#1", "resnet18-b2-fp32#2"] and (s["slowdown"] > 0).all()
    ready = sorted(x.split(" ready")[0] for x in lines if x.startswith("worker ") and " ready " in x)
    assert ready == ["worker resnet18-b2-fp32", "worker resnet18-b2-fp32#2"]  # one process per copy
