"""Build a zoo job into a runnable training step (GPU side; needs torch)."""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Callable

import torch
import torch.nn.functional as F

from .registry import SEQ_LEN, JobSpec, architectures

IMAGE_SIZE = 224
TINY_IMAGE_SIZE = 64
# Graph jobs (gin, gat): molecule-sized graphs as in OGB's molhiv (about 26 atoms and 28 bonds each):
# a chain of NODES_PER_GRAPH nodes plus CHORDS_PER_GRAPH random extra bonds, both directions.
NODES_PER_GRAPH = 26
CHORDS_PER_GRAPH = 3
# Point-cloud jobs (pointnet, dgcnn): ModelNet40's usual 1,024 points per shape.
POINTS_PER_CLOUD = 1024
TINY_POINTS_PER_CLOUD = 64
# PointNet's weight on the feature transform's orthogonality penalty (Qi et al., 2017, section C).
POINTNET_ORTHO_WEIGHT = 1e-3
# Neural-field jobs (nerf): each ray's origin on a sphere of this radius around the scene, looking at its centre
# (the Blender scenes' 360° views sit ~4 units out; the network's near/far bounds are 2 and 6).
RAY_ORIGIN_RADIUS = 4.0
# Reinforcement-learning jobs (dqn): a replay buffer of this many transitions held on the GPU (uint8 frames, as DQN
# stores them), a fresh uniform minibatch drawn from it every step.
REPLAY_CAPACITY = 10_000
TINY_REPLAY_CAPACITY = 64
# Sampled-neighbourhood graph jobs (graphsage): ogbn-products' 2,449,029 nodes, whose feature table sits on the
# GPU; each step draws its target nodes and their neighbours uniformly (a random graph of the same size).
GRAPH_NODES = 2_449_029
TINY_GRAPH_NODES = 100
# Policy-gradient jobs (ppo_impala): one PPO rollout held on the GPU, Procgen's 64 environments x 256 steps of uint8
# frames, each step a uniform minibatch from it; PPO's clip range, value and entropy weights as in Procgen's
# baseline (Cobbe et al., 2020, table 3).
ROLLOUT_STEPS = 64 * 256
TINY_ROLLOUT_STEPS = 64
PPO_CLIP = 0.2
PPO_VALUE_WEIGHT = 0.5
PPO_ENTROPY_WEIGHT = 0.01
# Speech jobs (deepspeech2): 5 s utterances as 161-bin spectrograms (20 ms windows of 16 kHz audio every 10 ms, as
# in DeepSpeech 2) and LibriSpeech-like transcripts of ~15 characters a second.
SPEECH_FRAMES = 500
SPEECH_TRANSCRIPT_CHARS = 75
TINY_SPEECH_FRAMES = 40
TINY_SPEECH_TRANSCRIPT_CHARS = 6


def molecule_batch(n_graphs: int, features: int, device, generator: torch.Generator | None = None):
    """A batch of ``n_graphs`` synthetic molecule-like graphs: node features (N x ``features``),
    directed edges (2 x E, each bond both ways) and each node's graph index (N)."""
    n, c = NODES_PER_GRAPH, CHORDS_PER_GRAPH
    base = torch.arange(n_graphs).repeat_interleave(n) * n  # first node of each node's graph
    local = torch.arange(n).repeat(n_graphs)
    chain = torch.stack([base + local, base + local + 1])[:, local < n - 1]
    offs = torch.arange(n_graphs).repeat_interleave(c) * n
    a = torch.randint(0, n, (n_graphs * c,), generator=generator)
    b = (a + torch.randint(2, n - 1, (n_graphs * c,), generator=generator)) % n
    bonds = torch.cat([chain, torch.stack([offs + a, offs + b])], 1)
    edges = torch.cat([bonds, bonds.flip(0)], 1)
    x = torch.randn(n_graphs * n, features, generator=generator)
    graph_of = torch.arange(n_graphs).repeat_interleave(n)
    return x.to(device), edges.to(device), graph_of.to(device)


@dataclass
class TrainingJob:
    """A built job: ``step()`` runs one training iteration (forward, backward, optimizer)."""

    spec: JobSpec
    model: torch.nn.Module
    optimizer: torch.optim.Optimizer
    device: torch.device
    _next_batch: Callable[[], tuple]
    _loss: Callable
    _loader_iter: object = field(default=None, repr=False)

    def step(self) -> torch.Tensor:
        inputs, target = self._next_batch()
        self.optimizer.zero_grad(set_to_none=True)
        with torch.autocast(self.device.type, dtype=torch.bfloat16, enabled=self.spec.precision == "bf16"):
            out = self.model(*inputs)
            loss = self._loss(out, target)
        loss.backward()
        self.optimizer.step()
        return loss

    def park(self) -> "TrainingJob":
        """Move weights and optimizer state to host memory (an idle job then holds only its
        CUDA context on the GPU). ``unpark()`` brings them back before the next ``step()``."""
        return self._move(torch.device("cpu"))

    def unpark(self) -> "TrainingJob":
        return self._move(self.device)

    def _move(self, device: torch.device) -> "TrainingJob":
        self.model.to(device)  # in place: the optimizer keeps the same parameter objects
        for state in self.optimizer.state.values():
            for k, v in state.items():
                if torch.is_tensor(v) and v.device != device and v.dim() > 0:
                    state[k] = v.to(device)
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
            if device.type == "cpu":
                torch.cuda.empty_cache()
        return self

    def sync(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)

    def timed_steps(self, n: int) -> list[float]:
        """Run ``n`` iterations, synchronising after each; return their times in ms."""
        times = []
        for _ in range(n):
            t0 = time.perf_counter()
            self.step()
            self.sync()
            times.append((time.perf_counter() - t0) * 1e3)
        return times


def _optimizer(name: str, params):
    if name == "sgd":
        return torch.optim.SGD(params, lr=0.01, momentum=0.9)
    if name == "adamw":
        return torch.optim.AdamW(params, lr=1e-4)
    if name == "adagrad":
        return torch.optim.Adagrad(params, lr=0.01)
    raise ValueError(name)


class _SyntheticImages(torch.utils.data.Dataset):
    """Random uint8 images with the CPU work of a real pipeline (crop, flip, normalise)."""

    def __init__(self, n: int, size: int):
        self.n, self.size = n, size

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        g = torch.Generator().manual_seed(i)
        full = self.size + self.size // 7
        img = torch.randint(0, 256, (3, full, full), dtype=torch.uint8, generator=g)
        y0, x0 = torch.randint(0, full - self.size + 1, (2,), generator=g).tolist()
        img = img[:, y0 : y0 + self.size, x0 : x0 + self.size].float().div_(255)
        if torch.rand(1, generator=g).item() < 0.5:
            img = img.flip(2)
        mean = torch.tensor([0.485, 0.456, 0.406]).view(3, 1, 1)
        std = torch.tensor([0.229, 0.224, 0.225]).view(3, 1, 1)
        return (img - mean) / std, i % 1000


def build(spec: JobSpec, device: str | torch.device = "cuda", *, tiny: bool = False, loader_workers: int = 2) -> TrainingJob:
    """Build ``spec`` on ``device``. ``tiny`` shrinks models and inputs for CPU tests."""
    device = torch.device(device)
    torch.manual_seed(0)
    arch = architectures()[spec.arch]
    model = arch.build(tiny).to(device)
    model.train()
    if device.type == "cuda":
        torch.backends.cudnn.benchmark = True
    opt = _optimizer(spec.effective_optimizer, model.parameters())
    b = spec.batch
    ce = lambda out, y: F.cross_entropy(out.reshape(-1, out.shape[-1]).float(), y.reshape(-1))  # noqa: E731
    loader_iter = None

    if arch.input_kind == "image":
        size = TINY_IMAGE_SIZE if tiny else IMAGE_SIZE
        classes = 10 if tiny else 1000
        if spec.input == "loader":
            ds = _SyntheticImages(n=1_000_000, size=size)
            dl = torch.utils.data.DataLoader(
                ds, batch_size=b, shuffle=True, num_workers=loader_workers, pin_memory=device.type == "cuda",
                drop_last=True, persistent_workers=loader_workers > 0,
            )
            state = {"it": iter(dl)}

            def next_batch():
                try:
                    x, y = next(state["it"])
                except StopIteration:
                    state["it"] = iter(dl)
                    x, y = next(state["it"])
                return (x.to(device, non_blocking=True),), (y % classes).to(device, non_blocking=True)

            loader_iter = state
        else:
            x = torch.randn(b, 3, size, size, device=device)
            y = torch.randint(0, classes, (b,), device=device)
            next_batch = lambda: ((x,), y)  # noqa: E731
        loss = ce
    elif arch.input_kind == "tokens":
        vocab = model.head.out_features if hasattr(model, "head") else model.out.out_features
        seq = 16 if tiny else SEQ_LEN[spec.arch]
        idx = torch.randint(0, vocab, (b, seq), device=device)
        tgt = torch.randint(0, vocab, (b, seq), device=device)
        next_batch = lambda: ((idx,), tgt)  # noqa: E731
        loss = ce
    elif arch.input_kind == "seq2seq":
        vocab = model.out.out_features
        seq = 16 if tiny else SEQ_LEN[spec.arch]
        src = torch.randint(0, vocab, (b, seq), device=device)
        tgt = torch.randint(0, vocab, (b, seq), device=device)
        lbl = torch.randint(0, vocab, (b, seq), device=device)
        next_batch = lambda: ((src, tgt), lbl)  # noqa: E731
        loss = ce
    elif arch.input_kind == "recsys":
        n_tables = len(model.tables)
        rows = model.tables[0].num_embeddings
        dense = torch.randn(b, model.dense_features, device=device)
        sparse = torch.randint(0, rows, (b, n_tables, 1), device=device)
        y = torch.randint(0, 2, (b,), device=device).float()
        next_batch = lambda: ((dense, sparse), y)  # noqa: E731
        loss = lambda out, t: F.binary_cross_entropy_with_logits(out.float(), t)  # noqa: E731
    elif arch.input_kind == "segmentation":
        size = TINY_IMAGE_SIZE if tiny else IMAGE_SIZE
        x = torch.randn(b, 3, size, size, device=device)
        y = torch.randint(0, model.classes, (b, size, size), device=device)
        next_batch = lambda: ((x,), y)  # noqa: E731
        loss = lambda out, t: F.cross_entropy(out.float(), t)  # noqa: E731
    elif arch.input_kind == "graph":
        x, edges, graph_of = molecule_batch(b, model.node_features, device, torch.Generator().manual_seed(0))
        y = torch.randint(0, 2, (b,), device=device).float()
        next_batch = lambda: ((x, edges, graph_of, b), y)  # noqa: E731
        loss = lambda out, t: F.binary_cross_entropy_with_logits(out.float(), t)  # noqa: E731
    elif arch.input_kind == "points":
        n = TINY_POINTS_PER_CLOUD if tiny else POINTS_PER_CLOUD
        pts = torch.randn(b, 3, n, device=device)
        y = torch.randint(0, model.classes, (b,), device=device)
        next_batch = lambda: ((pts,), y)  # noqa: E731

        def loss(out, t):
            if not isinstance(out, tuple):  # DGCNN: class scores alone
                return F.cross_entropy(out.float(), t)
            scores, a = out
            eye = torch.eye(a.shape[1], device=a.device)
            ortho = (eye - torch.bmm(a, a.transpose(1, 2))).float().pow(2).sum((1, 2)).mean()
            return F.cross_entropy(scores.float(), t) + POINTNET_ORTHO_WEIGHT * ortho
    elif arch.input_kind == "reconstruction":
        x = torch.rand(b, 3, model.size, model.size, device=device)
        next_batch = lambda: ((x,), x)  # noqa: E731

        def loss(out, t):
            recon, mean, logvar = (o.float() for o in out)
            kl = -0.5 * (1 + logvar - mean.pow(2) - logvar.exp()).sum(1)
            return (F.mse_loss(recon, t, reduction="none").sum((1, 2, 3)) + kl).mean()
    elif arch.input_kind == "video":
        x = torch.randn(b, 3, model.frames, model.size, model.size, device=device)
        y = torch.randint(0, model.classes, (b,), device=device)
        next_batch = lambda: ((x,), y)  # noqa: E731
        loss = ce
    elif arch.input_kind == "rays":
        g = torch.Generator().manual_seed(0)
        origins = F.normalize(torch.randn(b, 3, generator=g), dim=1) * RAY_ORIGIN_RADIUS
        directions = F.normalize(-origins + 0.5 * torch.randn(b, 3, generator=g), dim=1)
        colours = torch.rand(b, 3, generator=g)
        origins, directions, colours = origins.to(device), directions.to(device), colours.to(device)
        next_batch = lambda: ((origins, directions), colours)  # noqa: E731
        loss = lambda out, t: F.mse_loss(out.float(), t)  # noqa: E731
    elif arch.input_kind == "replay":
        online = model.online
        cap = TINY_REPLAY_CAPACITY if tiny else REPLAY_CAPACITY
        frames = torch.randint(0, 256, (cap, online.frames, online.size, online.size), dtype=torch.uint8, device=device)
        actions = torch.randint(0, online.actions, (cap,), device=device)
        rewards = torch.randn(cap, device=device).clamp_(-1, 1)
        done = (torch.rand(cap, device=device) < 0.01).float()

        def next_batch():
            i = torch.randint(0, cap - 1, (b,), device=device)
            return (frames[i], actions[i], rewards[i], frames[i + 1], done[i]), None

        loss = lambda out, _: F.smooth_l1_loss(out[0].float(), out[1].float())  # noqa: E731
    elif arch.input_kind == "pixels":
        x = torch.rand(b, 3, model.size, model.size, device=device)
        y = (x * (model.levels - 1)).round().long()
        next_batch = lambda: ((x,), y)  # noqa: E731
        loss = lambda out, t: F.cross_entropy(out.float(), t)  # noqa: E731
    elif arch.input_kind == "speech":
        frames = TINY_SPEECH_FRAMES if tiny else SPEECH_FRAMES
        chars = TINY_SPEECH_TRANSCRIPT_CHARS if tiny else SPEECH_TRANSCRIPT_CHARS
        spectrogram = torch.randn(b, 1, model.freq, frames, device=device)
        text = torch.randint(1, model.characters, (b, chars), device=device)
        out_len = torch.full((b,), model.output_frames(frames), dtype=torch.long, device=device)
        text_len = torch.full((b,), chars, dtype=torch.long, device=device)
        next_batch = lambda: ((spectrogram,), text)  # noqa: E731
        loss = lambda out, t: F.ctc_loss(out.float(), t, out_len, text_len, zero_infinity=True)  # noqa: E731
    elif arch.input_kind == "neighbourhoods":
        nodes = TINY_GRAPH_NODES if tiny else GRAPH_NODES
        s1, s2 = model.fanouts
        table = torch.randn(nodes, model.features, device=device)
        labels = torch.randint(0, model.classes, (nodes,), device=device)

        def next_batch():
            ids = torch.randint(0, nodes, (b,), device=device)
            hop1 = torch.randint(0, nodes, (b, s1), device=device)
            hop2 = torch.randint(0, nodes, (b, s1, s2), device=device)
            return (table, ids, hop1, hop2), labels[ids]

        loss = lambda out, t: F.cross_entropy(out.float(), t)  # noqa: E731
    elif arch.input_kind == "rollout":
        steps = TINY_ROLLOUT_STEPS if tiny else ROLLOUT_STEPS
        frames = torch.randint(0, 256, (steps, 3, model.size, model.size), dtype=torch.uint8, device=device)
        actions = torch.randint(0, model.actions, (steps,), device=device)
        old_log_probs = -torch.rand(steps, device=device) * math.log(model.actions)
        advantages = torch.randn(steps, device=device)
        returns = torch.randn(steps, device=device)

        def next_batch():
            i = torch.randint(0, steps, (b,), device=device)
            return (frames[i], actions[i]), (old_log_probs[i], advantages[i], returns[i])

        def loss(out, t):
            log_probs, entropy, value = out
            old, adv, ret = t
            ratio = (log_probs - old).exp()
            surrogate = torch.min(ratio * adv, ratio.clamp(1 - PPO_CLIP, 1 + PPO_CLIP) * adv)
            return (-surrogate.mean() + PPO_VALUE_WEIGHT * F.mse_loss(value, ret)
                    - PPO_ENTROPY_WEIGHT * entropy.mean())
    else:  # pragma: no cover - registry guards this
        raise ValueError(arch.input_kind)
    return TrainingJob(spec, model, opt, device, next_batch, loss, loader_iter)
