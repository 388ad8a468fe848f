"""The workload zoo: training jobs named ``ARCH-bBATCH-PRECISION[-OPT][-loader]``.

A :class:`JobSpec` is architecture, batch size, precision (``fp32`` or ``bf16`` autocast),
optimizer and input kind (``synthetic`` tensors already on the GPU, or ``loader``: a real
DataLoader doing CPU work, an input-bound job). :func:`build` gives a ready
:class:`TrainingJob` whose ``step()`` runs forward, backward and optimizer step.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Callable

RESERVED_PATTERN = re.compile(r"densenet|vit|bert|mobilenet_?v3|efficientnet", re.IGNORECASE)


@dataclass(frozen=True)
class Arch:
    name: str
    # image | tokens | seq2seq | recsys | segmentation | graph | points | reconstruction | video | rays | replay | pixels
    # | speech | neighbourhoods | rollout: what training.build feeds the model
    input_kind: str
    build: Callable[[bool], Any]  # tiny -> nn.Module
    note: str = ""

    @property
    def family(self) -> str:
        """cnn | transformer | recsys | rnn | tcn | segmentation | gnn | pointcloud | generative | video | neural_field
        | ssm | rl | speech (``ARCH_FAMILY``)."""
        return ARCH_FAMILY.get(self.name, "cnn")

    @property
    def default_optimizer(self) -> str:
        return default_optimizer(self.name)


def _archs() -> dict[str, Arch]:
    from . import models as m

    def tiny_or(full, tiny):
        return lambda t: tiny() if t else full()

    archs = [
        Arch("resnet18", "image", tiny_or(lambda: m.ResNet(m.BasicBlock, (2, 2, 2, 2)), lambda: m.ResNet(m.BasicBlock, (1, 1, 1, 1), 10, widths=(8, 16, 32, 64)))),
        Arch("resnet50", "image", tiny_or(lambda: m.ResNet(m.Bottleneck, (3, 4, 6, 3)), lambda: m.ResNet(m.Bottleneck, (1, 1, 1, 1), 10, widths=(8, 16, 32, 64)))),
        Arch("se_resnet50", "image", tiny_or(lambda: m.ResNet(m.Bottleneck, (3, 4, 6, 3), se=True), lambda: m.ResNet(m.Bottleneck, (1, 1, 1, 1), 10, se=True, widths=(8, 16, 32, 64)))),
        Arch("vgg16", "image", tiny_or(lambda: m.vgg(), lambda: m.vgg((8, "M", 16, "M", 32, "M"), 10, hidden=32, pool=1))),
        Arch("vgg11", "image", tiny_or(lambda: m.vgg((64, "M", 128, "M", 256, 256, "M", 512, 512, "M", 512, 512, "M")), lambda: m.vgg((8, "M", 16, "M"), 10, hidden=32, pool=1))),
        Arch("alexnet", "image", tiny_or(lambda: m.AlexNet(), lambda: m.AlexNet(10, hidden=32, pool=1))),
        Arch("regnetx_400mf", "image", tiny_or(lambda: m.RegNetX(), lambda: m.RegNetX((1, 1, 1, 1), (16, 32, 32, 64), 16, 10))),
        Arch("convnext_tiny", "image", tiny_or(lambda: m.ConvNeXt(), lambda: m.ConvNeXt((1, 1, 1, 1), (16, 32, 64, 128), 10))),
        Arch("mobilenet_v2", "image", tiny_or(lambda: m.MobileNetV2(), lambda: m.MobileNetV2(10))),
        Arch("shufflenet_v2", "image", tiny_or(lambda: m.ShuffleNetV2(), lambda: m.ShuffleNetV2((16, 32, 64), (1, 1, 1), 10))),
        Arch("gpt2_small", "tokens", tiny_or(lambda: m.GPT(), lambda: m.GPT(vocab=128, seq=16, d=32, layers=2, heads=2))),
        Arch("transformer_seq2seq", "seq2seq", tiny_or(lambda: m.Seq2SeqTransformer(), lambda: m.Seq2SeqTransformer(vocab=128, d=32, layers=1, heads=2, ff=64))),
        Arch("lstm_lm", "tokens", tiny_or(lambda: m.LSTMLanguageModel(), lambda: m.LSTMLanguageModel(vocab=128, d=32))),
        Arch("dlrm", "recsys", tiny_or(lambda: m.DLRM(), lambda: m.DLRM(tables=4, rows=100, d=8, bottom=(16,), top=(16,)))),
        Arch("wide_deep", "recsys", tiny_or(lambda: m.WideAndDeep(), lambda: m.WideAndDeep(tables=4, rows=100, d=8, deep=(16,)))),
        Arch("unet", "segmentation", tiny_or(lambda: m.UNet(), lambda: m.UNet(classes=4, widths=(8, 16, 32, 64)))),
        Arch("gin", "graph", tiny_or(lambda: m.GIN(), lambda: m.GIN(node_features=8, hidden=16, layers=2))),
        Arch("squeezenet", "image", tiny_or(lambda: m.SqueezeNet(), lambda: m.SqueezeNet(10, 8, ((4, 8), (4, 8), (8, 16), (8, 16))))),
        Arch("tcn_lm", "tokens", tiny_or(lambda: m.TCNLanguageModel(), lambda: m.TCNLanguageModel(vocab=128, d=32, levels=2))),
        Arch("googlenet", "image", tiny_or(lambda: m.GoogLeNet(), lambda: m.GoogLeNet(10, (8, 8, 16), (((4, 4, 8, 2, 4, 4),), ((8, 4, 8, 2, 4, 4),))))),
        Arch("pointnet", "points", tiny_or(lambda: m.PointNet(), lambda: m.PointNet(4, (8, 16, 32), (16, 8)))),
        Arch("vae", "reconstruction", tiny_or(lambda: m.ConvVAE(), lambda: m.ConvVAE((8, 16), 8, 16))),
        Arch("r3d_18", "video", tiny_or(lambda: m.R3D(), lambda: m.R3D((1, 1), (8, 16), 10, frames=4, size=16))),
        Arch("nerf", "rays", tiny_or(lambda: m.NeRF(), lambda: m.NeRF(width=16, depth=4, skip=2, samples=8))),
        Arch("s4d_lm", "tokens", tiny_or(lambda: m.S4DLanguageModel(), lambda: m.S4DLanguageModel(vocab=128, d=16, layers=2, state=8))),
        Arch("dqn", "replay", tiny_or(lambda: m.DoubleDQN(), lambda: m.DoubleDQN(actions=4, frames=2, widths=(4, 8, 8), hidden=16, size=36))),
        Arch("pixelcnn", "pixels", tiny_or(lambda: m.PixelCNN(), lambda: m.PixelCNN(hidden=8, blocks=2, out_hidden=16, levels=16, size=8))),
        Arch("deepspeech2", "speech", tiny_or(lambda: m.DeepSpeech2(), lambda: m.DeepSpeech2(freq=41, hidden=16, layers=2, characters=8, conv=4))),
        Arch("graphsage", "neighbourhoods", tiny_or(lambda: m.GraphSAGE(), lambda: m.GraphSAGE(features=8, hidden=16, classes=4, fanouts=(3, 2)))),
        Arch("ppo_impala", "rollout", tiny_or(lambda: m.PPOImpala(), lambda: m.PPOImpala(actions=4, widths=(4, 8, 8), hidden=16, size=16))),
        Arch("gru_lm", "tokens", tiny_or(lambda: m.GRULanguageModel(), lambda: m.GRULanguageModel(vocab=128, d=32))),
        Arch("dgcnn", "points", tiny_or(lambda: m.DGCNN(), lambda: m.DGCNN(4, (8, 8), 16, 4, (16, 8)))),
        Arch("gat", "graph", tiny_or(lambda: m.GAT(), lambda: m.GAT(node_features=8, hidden=4, heads=2, layers=2))),
    ]
    return {a.name: a for a in archs}


_ARCHS: dict[str, Arch] | None = None


def architectures() -> dict[str, Arch]:
    """Name -> :class:`Arch` (imports torch lazily)."""
    global _ARCHS
    if _ARCHS is None:
        _ARCHS = _archs()
    return _ARCHS


# Names are checked without importing torch.
ARCH_NAMES = (
    "resnet18", "resnet50", "se_resnet50", "vgg16", "vgg11", "alexnet", "regnetx_400mf", "convnext_tiny",
    "mobilenet_v2", "shufflenet_v2", "gpt2_small", "transformer_seq2seq", "lstm_lm", "dlrm",
    "wide_deep", "unet", "gin", "squeezenet", "tcn_lm", "googlenet", "pointnet", "vae",
    "r3d_18", "nerf", "s4d_lm", "dqn", "pixelcnn", "deepspeech2", "graphsage", "ppo_impala", "gru_lm",
    "dgcnn", "gat",
)
ARCH_FAMILY = {
    "gpt2_small": "transformer", "transformer_seq2seq": "transformer", "lstm_lm": "rnn", "dlrm": "recsys",
    "wide_deep": "recsys", "unet": "segmentation", "gin": "gnn", "tcn_lm": "tcn",
    "pointnet": "pointcloud", "vae": "generative", "r3d_18": "video", "nerf": "neural_field", "s4d_lm": "ssm",
    "dqn": "rl", "pixelcnn": "generative", "deepspeech2": "speech", "graphsage": "gnn", "ppo_impala": "rl",
    "gru_lm": "rnn", "dgcnn": "pointcloud", "gat": "gnn",
}
SEQ_LEN = {"gpt2_small": 256, "transformer_seq2seq": 128, "lstm_lm": 35, "tcn_lm": 128, "s4d_lm": 1024, "gru_lm": 70}
PRECISIONS = ("fp32", "bf16")
OPTIMIZERS = ("sgd", "adamw", "adagrad")


def default_optimizer(arch: str) -> str:
    """AdamW for transformers, ConvNeXt, U-Net, graph, point-cloud, generative, neural-field and state-space
    networks, Adam(W) for the DQN and PPO learners (Rainbow's and Procgen's choice) and DeepSpeech 2, Adagrad for the recommenders, SGD with
    momentum otherwise (video included)."""
    family = ARCH_FAMILY.get(arch, "cnn")
    return {"transformer": "adamw", "recsys": "adagrad", "segmentation": "adamw", "gnn": "adamw",
            "pointcloud": "adamw", "generative": "adamw", "neural_field": "adamw", "ssm": "adamw",
            "rl": "adamw", "speech": "adamw"}.get(
        family, "adamw" if arch == "convnext_tiny" else "sgd")


_NAME = re.compile(r"^(?P<arch>[a-z0-9_]+)-b(?P<batch>\d+)-(?P<prec>fp32|bf16)(?:-(?P<opt>sgd|adamw|adagrad))?(?P<loader>-loader)?$")


@dataclass(frozen=True)
class JobSpec:
    """One zoo job. ``name`` round-trips through :meth:`parse`."""

    arch: str
    batch: int
    precision: str = "fp32"
    optimizer: str | None = None
    input: str = "synthetic"  # synthetic | loader

    def __post_init__(self):
        if RESERVED_PATTERN.search(self.arch):
            raise ValueError(f"{self.arch} is reserved for blind evaluation and is not in the zoo")
        if self.arch not in ARCH_NAMES:
            raise ValueError(f"unknown architecture {self.arch!r} (zoo: {', '.join(ARCH_NAMES)})")
        if self.batch < 1:
            raise ValueError("batch must be positive")
        if self.precision not in PRECISIONS:
            raise ValueError(f"precision must be one of {PRECISIONS}")
        if self.optimizer is not None and self.optimizer not in OPTIMIZERS:
            raise ValueError(f"optimizer must be one of {OPTIMIZERS}")
        if self.input not in ("synthetic", "loader"):
            raise ValueError("input must be 'synthetic' or 'loader'")
        if self.input == "loader" and self.family != "cnn":
            raise ValueError("the input-bound (loader) variant exists for image models only")

    @property
    def family(self) -> str:
        return ARCH_FAMILY.get(self.arch, "cnn")

    @property
    def effective_optimizer(self) -> str:
        return self.optimizer or default_optimizer(self.arch)

    @property
    def name(self) -> str:
        s = f"{self.arch}-b{self.batch}-{self.precision}"
        if self.optimizer and self.optimizer != default_optimizer(self.arch):
            s += f"-{self.optimizer}"
        if self.input == "loader":
            s += "-loader"
        return s

    @classmethod
    def parse(cls, name: str) -> "JobSpec":
        m = _NAME.match(name.strip())
        if not m:
            raise ValueError(f"bad job name {name!r}: expected ARCH-bBATCH-(fp32|bf16)[-OPT][-loader], e.g. resnet18-b64-fp32")
        return cls(m["arch"], int(m["batch"]), m["prec"], m["opt"], "loader" if m["loader"] else "synthetic")

    def to_dict(self) -> dict:
        return {"arch": self.arch, "family": self.family, "batch": self.batch, "precision": self.precision,
                "optimizer": self.effective_optimizer, "input": self.input}


def parse_jobs(text: str) -> list[JobSpec]:
    """Comma- or space-separated job names -> specs (duplicates rejected)."""
    names = [n for n in re.split(r"[,\s]+", text.strip()) if n]
    specs = [JobSpec.parse(n) for n in names]
    seen = set()
    for s in specs:
        if s.name in seen:
            raise ValueError(f"job {s.name} is listed twice")
        seen.add(s.name)
    return specs
