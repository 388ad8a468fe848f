"""Model definitions of the workload zoo, in plain PyTorch.

Defined here rather than taken from torchvision/transformers so that the zoo is the
same code on every machine and version (the H100 image and the CPU test machine differ).
Random initialisation only: nothing is downloaded. Reserved for blind evaluation and
deliberately absent: DenseNet, ViT, BERT-family encoders, MobileNetV3, EfficientNet.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn


# --------------------------------------------------------------------------- CNNs
def _conv_bn(cin, cout, k=3, s=1, g=1, act=True):
    layers = [nn.Conv2d(cin, cout, k, s, k // 2, groups=g, bias=False), nn.BatchNorm2d(cout)]
    if act:
        layers.append(nn.ReLU(inplace=True))
    return nn.Sequential(*layers)


class SqueezeExcite(nn.Module):
    def __init__(self, c, r=16):
        super().__init__()
        self.fc1 = nn.Conv2d(c, max(c // r, 8), 1)
        self.fc2 = nn.Conv2d(max(c // r, 8), c, 1)

    def forward(self, x):
        s = F.adaptive_avg_pool2d(x, 1)
        return x * torch.sigmoid(self.fc2(F.relu(self.fc1(s))))


class BasicBlock(nn.Module):
    expansion = 1

    def __init__(self, cin, c, s=1, se=False, groups=1, width=None):
        super().__init__()
        self.c1 = _conv_bn(cin, c, 3, s)
        self.c2 = _conv_bn(c, c, 3, 1, act=False)
        self.se = SqueezeExcite(c) if se else nn.Identity()
        self.down = _conv_bn(cin, c, 1, s, act=False) if (s != 1 or cin != c) else nn.Identity()

    def forward(self, x):
        return F.relu(self.se(self.c2(self.c1(x))) + self.down(x))


class Bottleneck(nn.Module):
    expansion = 4

    def __init__(self, cin, c, s=1, se=False, groups=1, width=None):
        super().__init__()
        w = width or c
        out = c * self.expansion
        self.c1 = _conv_bn(cin, w, 1)
        self.c2 = _conv_bn(w, w, 3, s, g=groups)
        self.c3 = _conv_bn(w, out, 1, act=False)
        self.se = SqueezeExcite(out) if se else nn.Identity()
        self.down = _conv_bn(cin, out, 1, s, act=False) if (s != 1 or cin != out) else nn.Identity()

    def forward(self, x):
        return F.relu(self.se(self.c3(self.c2(self.c1(x)))) + self.down(x))


class _StagedClassifier(nn.Module):
    """stem -> body (stages of blocks) -> global average pool -> fc, the head ResNet and RegNetX share."""

    def forward(self, x):
        x = self.body(self.stem(x))
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


class ResNet(_StagedClassifier):
    def __init__(self, block, layers, num_classes=1000, se=False, widths=(64, 128, 256, 512)):
        super().__init__()
        self.stem = nn.Sequential(_conv_bn(3, 64, 7, 2), nn.MaxPool2d(3, 2, 1))
        blocks, cin = [], 64
        for i, (n, c) in enumerate(zip(layers, widths)):
            for j in range(n):
                blocks.append(block(cin, c, 2 if (j == 0 and i > 0) else 1, se=se))
                cin = c * block.expansion
        self.body = nn.Sequential(*blocks)
        self.fc = nn.Linear(cin, num_classes)


class RegNetX(_StagedClassifier):
    """RegNetX-style network: stages of grouped bottlenecks (group width ``gw``)."""

    def __init__(self, depths=(1, 2, 7, 12), widths=(32, 64, 160, 384), gw=16, num_classes=1000):
        super().__init__()
        self.stem = _conv_bn(3, 32, 3, 2)
        blocks, cin = [], 32
        for d, w in zip(depths, widths):
            for j in range(d):
                s = 2 if j == 0 else 1
                blocks.append(_RegBlock(cin, w, s, gw))
                cin = w
        self.body = nn.Sequential(*blocks)
        self.fc = nn.Linear(cin, num_classes)


class _RegBlock(nn.Module):
    def __init__(self, cin, w, s, gw):
        super().__init__()
        self.c1 = _conv_bn(cin, w, 1)
        self.c2 = _conv_bn(w, w, 3, s, g=max(w // gw, 1))
        self.c3 = _conv_bn(w, w, 1, act=False)
        self.down = _conv_bn(cin, w, 1, s, act=False) if (s != 1 or cin != w) else nn.Identity()

    def forward(self, x):
        return F.relu(self.c3(self.c2(self.c1(x))) + self.down(x))


def vgg(cfg=(64, 64, "M", 128, 128, "M", 256, 256, 256, "M", 512, 512, 512, "M", 512, 512, 512, "M"), num_classes=1000, hidden=4096, pool=7):
    layers, cin = [], 3
    for v in cfg:
        if v == "M":
            layers.append(nn.MaxPool2d(2))
        else:
            layers += [nn.Conv2d(cin, v, 3, padding=1), nn.ReLU(inplace=True)]
            cin = v
    return nn.Sequential(
        *layers,
        nn.AdaptiveAvgPool2d(pool),
        nn.Flatten(),
        nn.Linear(cin * pool * pool, hidden),
        nn.ReLU(inplace=True),
        nn.Dropout(),
        nn.Linear(hidden, hidden),
        nn.ReLU(inplace=True),
        nn.Dropout(),
        nn.Linear(hidden, num_classes),
    )


class InvertedResidual(nn.Module):
    def __init__(self, cin, cout, s, t):
        super().__init__()
        h = cin * t
        layers = [] if t == 1 else [_conv_bn(cin, h, 1)]
        layers += [_conv_bn(h, h, 3, s, g=h), _conv_bn(h, cout, 1, act=False)]
        self.conv = nn.Sequential(*layers)
        self.res = s == 1 and cin == cout

    def forward(self, x):
        return x + self.conv(x) if self.res else self.conv(x)


class MobileNetV2(nn.Module):
    CFG = ((1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1), (6, 160, 3, 2), (6, 320, 1, 1))

    def __init__(self, num_classes=1000):
        super().__init__()
        layers, cin = [_conv_bn(3, 32, 3, 2)], 32
        for t, c, n, s in self.CFG:
            for i in range(n):
                layers.append(InvertedResidual(cin, c, s if i == 0 else 1, t))
                cin = c
        layers.append(_conv_bn(cin, 1280, 1))
        self.features = nn.Sequential(*layers)
        self.fc = nn.Linear(1280, num_classes)

    def forward(self, x):
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(self.features(x), 1), 1))


class Fire(nn.Module):
    """SqueezeNet's fire module: a 1x1 squeeze convolution, then 1x1 and 3x3 expand convolutions side by side,
    concatenated along channels."""

    def __init__(self, cin, squeeze, expand1, expand3):
        super().__init__()
        self.squeeze = nn.Conv2d(cin, squeeze, 1)
        self.expand1 = nn.Conv2d(squeeze, expand1, 1)
        self.expand3 = nn.Conv2d(squeeze, expand3, 3, padding=1)

    def forward(self, x):
        x = F.relu(self.squeeze(x), inplace=True)
        return torch.cat([F.relu(self.expand1(x)), F.relu(self.expand3(x))], 1)


class SqueezeNet(nn.Module):
    """SqueezeNet 1.1 (Iandola et al., 2016): a 3x3 stem, eight fire modules between max pools, no batch norm, and a
    1x1 convolution to class scores averaged over the map. ``fires``: (squeeze, expand) widths of each fire module."""

    def __init__(self, num_classes=1000, stem=64, fires=((16, 64), (16, 64), (32, 128), (32, 128), (48, 192), (48, 192),
                                                          (64, 256), (64, 256))):
        super().__init__()
        layers, cin = [nn.Conv2d(3, stem, 3, 2), nn.ReLU(inplace=True), nn.MaxPool2d(3, 2, ceil_mode=True)], stem
        for i, (sq, ex) in enumerate(fires):
            layers.append(Fire(cin, sq, ex, ex))
            cin = 2 * ex
            if i in (1, 3):
                layers.append(nn.MaxPool2d(3, 2, ceil_mode=True))
        self.features = nn.Sequential(*layers)
        self.classifier = nn.Sequential(nn.Dropout(0.5), nn.Conv2d(cin, num_classes, 1), nn.ReLU(inplace=True))

    def forward(self, x):
        return torch.flatten(F.adaptive_avg_pool2d(self.classifier(self.features(x)), 1), 1)


class Inception(nn.Module):
    """GoogLeNet's inception module: 1x1, 1x1→3x3, 1x1→3x3 (the torchvision variant of the 5x5 branch) and
    3x3 max pool→1x1 branches side by side, concatenated along channels; convolutions with batch norm."""

    def __init__(self, cin, c1, c3r, c3, c5r, c5, pool):
        super().__init__()
        self.b1 = _conv_bn(cin, c1, 1)
        self.b2 = nn.Sequential(_conv_bn(cin, c3r, 1), _conv_bn(c3r, c3))
        self.b3 = nn.Sequential(_conv_bn(cin, c5r, 1), _conv_bn(c5r, c5))
        self.b4 = nn.Sequential(nn.MaxPool2d(3, 1, 1, ceil_mode=True), _conv_bn(cin, pool, 1))

    def forward(self, x):
        return torch.cat([self.b1(x), self.b2(x), self.b3(x), self.b4(x)], 1)


class GoogLeNet(nn.Module):
    """GoogLeNet (Szegedy et al., 2015) with batch norm, without the auxiliary classifiers: a 7x7 stem, nine
    inception modules in three stages between max pools, global average pooling, dropout and a linear classifier.
    ``stages``: the modules' (c1, c3r, c3, c5r, c5, pool) widths per stage."""

    V1 = (((64, 96, 128, 16, 32, 32), (128, 128, 192, 32, 96, 64)),
          ((192, 96, 208, 16, 48, 64), (160, 112, 224, 24, 64, 64), (128, 128, 256, 24, 64, 64),
           (112, 144, 288, 32, 64, 64), (256, 160, 320, 32, 128, 128)),
          ((256, 160, 320, 32, 128, 128), (384, 192, 384, 48, 128, 128)))

    def __init__(self, num_classes=1000, stem=(64, 64, 192), stages=V1):
        super().__init__()
        a, b, c = stem
        layers = [_conv_bn(3, a, 7, 2), nn.MaxPool2d(3, 2, ceil_mode=True), _conv_bn(a, b, 1), _conv_bn(b, c),
                  nn.MaxPool2d(3, 2, ceil_mode=True)]
        cin = c
        for i, stage in enumerate(stages):
            for w in stage:
                layers.append(Inception(cin, *w))
                cin = w[0] + w[2] + w[4] + w[5]
            if i < len(stages) - 1:
                layers.append(nn.MaxPool2d(3, 2, ceil_mode=True))
        self.features = nn.Sequential(*layers)
        self.drop = nn.Dropout(0.2)
        self.fc = nn.Linear(cin, num_classes)

    def forward(self, x):
        return self.fc(self.drop(torch.flatten(F.adaptive_avg_pool2d(self.features(x), 1), 1)))


def _channel_shuffle(x, groups=2):
    b, c, h, w = x.shape
    return x.view(b, groups, c // groups, h, w).transpose(1, 2).reshape(b, c, h, w)


class ShuffleUnit(nn.Module):
    def __init__(self, cin, cout, s):
        super().__init__()
        self.s = s
        b = cout // 2
        if s > 1:
            self.branch1 = nn.Sequential(_conv_bn(cin, cin, 3, s, g=cin, act=False), _conv_bn(cin, b, 1))
            c2in = cin
        else:
            self.branch1 = None
            c2in = b
        self.branch2 = nn.Sequential(_conv_bn(c2in, b, 1), _conv_bn(b, b, 3, s, g=b, act=False), _conv_bn(b, b, 1))

    def forward(self, x):
        if self.s == 1:
            x1, x2 = x.chunk(2, dim=1)
            out = torch.cat((x1, self.branch2(x2)), 1)
        else:
            out = torch.cat((self.branch1(x), self.branch2(x)), 1)
        return _channel_shuffle(out)


class ShuffleNetV2(nn.Module):
    def __init__(self, widths=(116, 232, 464), repeats=(4, 8, 4), num_classes=1000):
        super().__init__()
        self.stem = nn.Sequential(_conv_bn(3, 24, 3, 2), nn.MaxPool2d(3, 2, 1))
        layers, cin = [], 24
        for w, r in zip(widths, repeats):
            for i in range(r):
                layers.append(ShuffleUnit(cin, w, 2 if i == 0 else 1))
                cin = w
        self.body = nn.Sequential(*layers, _conv_bn(cin, 1024, 1))
        self.fc = nn.Linear(1024, num_classes)

    def forward(self, x):
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(self.body(self.stem(x)), 1), 1))


class LayerNorm2d(nn.LayerNorm):
    def forward(self, x):
        return super().forward(x.permute(0, 2, 3, 1)).permute(0, 3, 1, 2)


class ConvNeXtBlock(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.dw = nn.Conv2d(c, c, 7, padding=3, groups=c)
        self.norm = nn.LayerNorm(c)
        self.pw1 = nn.Linear(c, 4 * c)
        self.pw2 = nn.Linear(4 * c, c)
        self.gamma = nn.Parameter(torch.full((c,), 1e-6))

    def forward(self, x):
        y = self.dw(x).permute(0, 2, 3, 1)
        y = self.pw2(F.gelu(self.pw1(self.norm(y))))
        return x + (self.gamma * y).permute(0, 3, 1, 2)


class ConvNeXt(nn.Module):
    def __init__(self, depths=(3, 3, 9, 3), dims=(96, 192, 384, 768), num_classes=1000):
        super().__init__()
        stages = [nn.Sequential(nn.Conv2d(3, dims[0], 4, 4), LayerNorm2d(dims[0]))]
        for i, (d, c) in enumerate(zip(depths, dims)):
            if i > 0:
                stages.append(nn.Sequential(LayerNorm2d(dims[i - 1]), nn.Conv2d(dims[i - 1], c, 2, 2)))
            stages.append(nn.Sequential(*[ConvNeXtBlock(c) for _ in range(d)]))
        self.body = nn.Sequential(*stages)
        self.norm = nn.LayerNorm(dims[-1])
        self.fc = nn.Linear(dims[-1], num_classes)

    def forward(self, x):
        return self.fc(self.norm(self.body(x).mean((2, 3))))


class AlexNet(nn.Module):
    def __init__(self, num_classes=1000, hidden=4096, pool=6):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 64, 11, 4, 2), nn.ReLU(inplace=True), nn.MaxPool2d(3, 2),
            nn.Conv2d(64, 192, 5, padding=2), nn.ReLU(inplace=True), nn.MaxPool2d(3, 2),
            nn.Conv2d(192, 384, 3, padding=1), nn.ReLU(inplace=True),
            nn.Conv2d(384, 256, 3, padding=1), nn.ReLU(inplace=True),
            nn.Conv2d(256, 256, 3, padding=1), nn.ReLU(inplace=True), nn.MaxPool2d(3, 2),
        )
        self.classifier = nn.Sequential(
            nn.AdaptiveAvgPool2d(pool), nn.Flatten(), nn.Dropout(), nn.Linear(256 * pool * pool, hidden),
            nn.ReLU(inplace=True), nn.Dropout(), nn.Linear(hidden, hidden), nn.ReLU(inplace=True),
            nn.Linear(hidden, num_classes),
        )

    def forward(self, x):
        return self.classifier(self.features(x))


# ------------------------------------------------------------------- sequence models
class CausalSelfAttention(nn.Module):
    def __init__(self, d, h):
        super().__init__()
        self.h = h
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(x).view(b, t, 3, self.h, d // self.h).permute(2, 0, 3, 1, 4)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.proj(y.transpose(1, 2).reshape(b, t, d))


class GPTBlock(nn.Module):
    def __init__(self, d, h):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.attn = CausalSelfAttention(d, h)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(approximate="tanh"), nn.Linear(4 * d, d))

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class GPT(nn.Module):
    """GPT-2-style decoder-only language model (pre-norm, tied embeddings)."""

    def __init__(self, vocab=50257, seq=256, d=768, layers=12, heads=12):
        super().__init__()
        self.tok = nn.Embedding(vocab, d)
        self.pos = nn.Embedding(seq, d)
        self.blocks = nn.Sequential(*[GPTBlock(d, heads) for _ in range(layers)])
        self.ln = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab, bias=False)
        self.head.weight = self.tok.weight

    def forward(self, idx):
        pos = torch.arange(idx.shape[1], device=idx.device)
        return self.head(self.ln(self.blocks(self.tok(idx) + self.pos(pos))))


class Seq2SeqTransformer(nn.Module):
    """Encoder-decoder transformer (Vaswani et al.) for translation-style training."""

    def __init__(self, vocab=32000, d=512, layers=6, heads=8, ff=2048):
        super().__init__()
        self.emb = nn.Embedding(vocab, d)
        self.core = nn.Transformer(d, heads, layers, layers, ff, dropout=0.1, batch_first=True, norm_first=True)
        self.out = nn.Linear(d, vocab)
        self.d = d

    def forward(self, src, tgt):
        mask = nn.Transformer.generate_square_subsequent_mask(tgt.shape[1], device=tgt.device)
        y = self.core(self.emb(src) * math.sqrt(self.d), self.emb(tgt) * math.sqrt(self.d), tgt_mask=mask, tgt_is_causal=True)
        return self.out(y)


class TemporalBlock(nn.Module):
    """A residual block of a temporal convolutional network: two dilated causal 1-D convolutions (left padding only,
    so output t sees inputs up to t), each followed by ReLU and dropout, plus a 1x1 convolution on the skip path where
    the width changes."""

    def __init__(self, cin, cout, kernel, dilation, dropout):
        super().__init__()
        self.pad = (kernel - 1) * dilation
        self.conv1 = nn.Conv1d(cin, cout, kernel, dilation=dilation)
        self.conv2 = nn.Conv1d(cout, cout, kernel, dilation=dilation)
        self.drop = nn.Dropout(dropout)
        self.skip = nn.Conv1d(cin, cout, 1) if cin != cout else nn.Identity()

    def forward(self, x):
        y = self.drop(F.relu(self.conv1(F.pad(x, (self.pad, 0)))))
        y = self.drop(F.relu(self.conv2(F.pad(y, (self.pad, 0)))))
        return F.relu(y + self.skip(x))


class TCNLanguageModel(nn.Module):
    """Temporal convolutional network language model (Bai et al., 2018, word-level): embeddings, ``levels`` temporal
    blocks of dilation 1, 2, 4, ... (receptive field 1 + 2(k − 1)(2^levels − 1) tokens), a linear decoder to the
    vocabulary (output N x T x vocab)."""

    def __init__(self, vocab=10000, d=600, levels=4, kernel=3, dropout=0.2):
        super().__init__()
        self.emb = nn.Embedding(vocab, d)
        self.blocks = nn.Sequential(*[TemporalBlock(d, d, kernel, 2 ** i, dropout) for i in range(levels)])
        self.out = nn.Linear(d, vocab)

    def forward(self, idx):
        y = self.blocks(self.emb(idx).transpose(1, 2))
        return self.out(y.transpose(1, 2))


class _RecurrentLanguageModel(nn.Module):
    """Embedding, ``layers`` recurrent layers (``rnn``: ``nn.LSTM`` or ``nn.GRU``, cuDNN's fused kernels) of width ``d``
    with dropout between, a linear decoder over the vocabulary."""

    def __init__(self, rnn, vocab, d, layers, dropout):
        super().__init__()
        self.emb = nn.Embedding(vocab, d)
        self.rnn = rnn(d, d, layers, batch_first=True, dropout=dropout)
        self.out = nn.Linear(d, vocab)

    def forward(self, idx):
        y, _ = self.rnn(self.emb(idx))
        return self.out(y)


class GRULanguageModel(_RecurrentLanguageModel):
    """A word-level GRU language model (Cho et al., 2014 cells) over Penn Treebank's 10,000 words."""

    def __init__(self, vocab=10000, d=1024, layers=2):
        super().__init__(nn.GRU, vocab, d, layers, dropout=0.3)


class LSTMLanguageModel(_RecurrentLanguageModel):
    def __init__(self, vocab=10000, d=650, layers=2):
        super().__init__(nn.LSTM, vocab, d, layers, dropout=0.5)


class DLRM(nn.Module):
    """DLRM-like recommender: embedding bags, bottom/top MLPs, dot-product interaction."""

    def __init__(self, dense=13, tables=26, rows=200_000, d=64, bottom=(512, 256), top=(512, 256)):
        super().__init__()
        self.dense_features = dense
        self.tables = nn.ModuleList([nn.EmbeddingBag(rows, d, mode="sum") for _ in range(tables)])
        dims = (dense, *bottom, d)
        self.bottom = nn.Sequential(*[m for a, b in zip(dims, dims[1:]) for m in (nn.Linear(a, b), nn.ReLU())])
        n = tables + 1
        tdims = (d + n * (n - 1) // 2, *top, 1)
        self.top = nn.Sequential(*[m for a, b in zip(tdims, tdims[1:]) for m in (nn.Linear(a, b), nn.ReLU())][:-1])

    def forward(self, dense, sparse):
        x = self.bottom(dense)
        feats = [x] + [t(sparse[:, i, :]) for i, t in enumerate(self.tables)]
        z = torch.stack(feats, 1)
        inter = torch.bmm(z, z.transpose(1, 2))
        iu = torch.triu_indices(z.shape[1], z.shape[1], 1, device=z.device)
        return self.top(torch.cat([x, inter[:, iu[0], iu[1]]], 1)).squeeze(1)


class WideAndDeep(nn.Module):
    """Wide & Deep recommender (Cheng et al., 2016) on Criteo-like inputs: a wide part (one learned
    weight per category of each sparse feature, an EmbeddingBag of dimension 1) plus a deep MLP over
    the dense features concatenated with one embedding per sparse feature. Unlike :class:`DLRM`,
    no pairwise interaction: the embeddings enter the MLP directly."""

    def __init__(self, dense=13, tables=26, rows=300_000, d=32, deep=(1024, 512, 256)):
        super().__init__()
        self.tables = nn.ModuleList([nn.EmbeddingBag(rows, d, mode="sum") for _ in range(tables)])
        self.wide = nn.ModuleList([nn.EmbeddingBag(rows, 1, mode="sum") for _ in range(tables)])
        self.wide_dense = nn.Linear(dense, 1)
        dims = (dense + tables * d, *deep)
        self.deep = nn.Sequential(*[m for a, b in zip(dims, dims[1:]) for m in (nn.Linear(a, b), nn.ReLU())], nn.Linear(dims[-1], 1))
        self.dense_features = dense

    def forward(self, dense, sparse):
        emb = [t(sparse[:, i, :]) for i, t in enumerate(self.tables)]
        wide = self.wide_dense(dense) + sum(t(sparse[:, i, :]) for i, t in enumerate(self.wide))
        return (wide + self.deep(torch.cat([dense, *emb], 1))).squeeze(1)


# --------------------------------------------------------------------------- dense prediction
def _double_conv(cin, cout):
    return nn.Sequential(_conv_bn(cin, cout), _conv_bn(cout, cout))


class UNet(nn.Module):
    """U-Net (Ronneberger et al., 2015) for semantic segmentation, with batch norm and padded
    convolutions: an encoder of double 3x3 convolutions and 2x2 max pools, a decoder of 2x2
    transposed convolutions concatenated with the encoder's maps at the same scale, and a 1x1
    convolution to per-pixel class scores (output N x classes x H x W)."""

    def __init__(self, classes=21, widths=(64, 128, 256, 512, 1024), in_ch=3):
        super().__init__()
        self.down = nn.ModuleList([_double_conv(a, b) for a, b in zip((in_ch, *widths[:-2]), widths[:-1])])
        self.bottom = _double_conv(widths[-2], widths[-1])
        self.upconv = nn.ModuleList([nn.ConvTranspose2d(b, a, 2, 2) for a, b in zip(widths[-2::-1], widths[:0:-1])])
        self.up = nn.ModuleList([_double_conv(2 * a, a) for a in widths[-2::-1]])
        self.head = nn.Conv2d(widths[0], classes, 1)
        self.classes = classes

    def forward(self, x):
        skips = []
        for block in self.down:
            x = block(x)
            skips.append(x)
            x = F.max_pool2d(x, 2)
        x = self.bottom(x)
        for upconv, block, skip in zip(self.upconv, self.up, reversed(skips)):
            x = block(torch.cat([upconv(x), skip], 1))
        return self.head(x)


# --------------------------------------------------------------------------- graph networks
class GIN(nn.Module):
    """Graph Isomorphism Network (Xu et al., 2019) for graph classification, as in the OGB
    molecule baselines: node features projected to ``hidden``, ``layers`` rounds of
    h ← MLP((1 + ε) · h + Σ_{neighbours} h) with batch norm, sum aggregation by ``index_add_``
    over a directed edge list, mean pooling per graph, one logit per graph."""

    def __init__(self, node_features=64, hidden=300, layers=5):
        super().__init__()
        self.inp = nn.Linear(node_features, hidden)
        self.eps = nn.Parameter(torch.zeros(layers))
        self.mlps = nn.ModuleList([nn.Sequential(nn.Linear(hidden, 2 * hidden), nn.BatchNorm1d(2 * hidden), nn.ReLU(),
                                                 nn.Linear(2 * hidden, hidden)) for _ in range(layers)])
        self.norms = nn.ModuleList([nn.BatchNorm1d(hidden) for _ in range(layers)])
        self.head = nn.Linear(hidden, 1)
        self.node_features = node_features

    def forward(self, x, edges, graph_of, n_graphs: int):
        h = self.inp(x)
        src, dst = edges
        for i, (mlp, norm) in enumerate(zip(self.mlps, self.norms)):
            agg = torch.zeros_like(h).index_add_(0, dst, h[src])
            h = F.relu(norm(mlp((1 + self.eps[i]) * h + agg)))
        pooled = torch.zeros(n_graphs, h.shape[1], dtype=h.dtype, device=h.device).index_add_(0, graph_of, h)
        counts = torch.bincount(graph_of, minlength=n_graphs).clamp_(min=1).unsqueeze(1)
        return self.head(pooled / counts).squeeze(1)


class GraphSAGE(nn.Module):
    """GraphSAGE with mean aggregators (Hamilton et al., 2017, algorithm 2) for node classification, as its minibatch
    training runs it: two layers h_v ← W·[h_v ‖ mean_{u ∈ N(v)} h_u] (ReLU after the first), over each target node's
    ``fanouts[0]`` sampled neighbours and each of those's ``fanouts[1]`` (the paper's S1 = 25, S2 = 10), their input
    features gathered from the graph's node-feature table. Sizes default to ogbn-products (100 features, 47 classes)
    with the OGB baseline's 256 hidden units. Input: the feature table (nodes x features), target ids (B), hop-1 ids
    (B x S1) and hop-2 ids (B x S1 x S2); output B x classes logits."""

    def __init__(self, features=100, hidden=256, classes=47, fanouts=(25, 10)):
        super().__init__()
        self.layer1 = nn.Linear(2 * features, hidden)
        self.layer2 = nn.Linear(2 * hidden, classes)
        self.features, self.classes, self.fanouts = features, classes, fanouts

    def forward(self, table, ids, hop1, hop2):
        x0, x1, x2 = table[ids], table[hop1], table[hop2]
        h0 = F.relu(self.layer1(torch.cat([x0, x1.mean(1)], -1)))
        h1 = F.relu(self.layer1(torch.cat([x1, x2.mean(2)], -1)))
        return self.layer2(torch.cat([h0, h1.mean(1)], -1))


class GAT(nn.Module):
    """Graph attention network (Veličković et al., 2018) for graph classification: node features projected to
    ``heads`` x ``hidden``, ``layers`` rounds of multi-head attention over each node's in-edges and itself,
    α_ij = softmax_j LeakyReLU(aᵀ[W h_i ‖ W h_j]) (slope 0.2), h_i ← ELU(Σ_j α_ij W h_j) with the heads concatenated,
    the softmax per destination node by scatter (``scatter_reduce`` max, ``index_add_`` sums) over a directed edge
    list, mean pooling per graph, one logit per graph. Same input as :class:`GIN`."""

    def __init__(self, node_features=64, hidden=64, heads=4, layers=3):
        super().__init__()
        width = heads * hidden
        self.inp = nn.Linear(node_features, width)
        self.proj = nn.ModuleList([nn.Linear(width, width, bias=False) for _ in range(layers)])
        self.att_src = nn.ParameterList([nn.Parameter(torch.randn(heads, hidden) * hidden ** -0.5) for _ in range(layers)])
        self.att_dst = nn.ParameterList([nn.Parameter(torch.randn(heads, hidden) * hidden ** -0.5) for _ in range(layers)])
        self.head = nn.Linear(width, 1)
        self.node_features, self.heads, self.hidden = node_features, heads, hidden

    def forward(self, x, edges, graph_of, n_graphs: int):
        n = x.shape[0]
        loops = torch.arange(n, device=x.device)
        src, dst = torch.cat([edges[0], loops]), torch.cat([edges[1], loops])
        h = self.inp(x)
        for proj, a_src, a_dst in zip(self.proj, self.att_src, self.att_dst):
            z = proj(h).view(n, self.heads, self.hidden)
            logits = F.leaky_relu((z * a_src).sum(-1)[src] + (z * a_dst).sum(-1)[dst], 0.2)  # E x heads
            peak = torch.full((n, self.heads), float("-inf"), dtype=logits.dtype, device=x.device)
            peak = peak.scatter_reduce(0, dst.unsqueeze(1).expand_as(logits), logits, "amax")
            w = (logits - peak[dst]).exp()
            total = torch.zeros_like(peak).index_add_(0, dst, w)
            msg = (w / total[dst]).unsqueeze(-1) * z[src]  # float32 under bf16 autocast (the attention vectors are)
            h = F.elu(torch.zeros(n, self.heads, self.hidden, dtype=msg.dtype, device=x.device).index_add_(0, dst, msg).reshape(n, -1))
        pooled = torch.zeros(n_graphs, h.shape[1], dtype=h.dtype, device=h.device).index_add_(0, graph_of, h)
        counts = torch.bincount(graph_of, minlength=n_graphs).clamp_(min=1).unsqueeze(1)
        return self.head(pooled / counts).squeeze(1)


# --------------------------------------------------------------------------- point clouds
def _conv1d_bn(cin, cout):
    return nn.Sequential(nn.Conv1d(cin, cout, 1, bias=False), nn.BatchNorm1d(cout), nn.ReLU(inplace=True))


def _fc_bn(cin, cout):
    return nn.Sequential(nn.Linear(cin, cout, bias=False), nn.BatchNorm1d(cout), nn.ReLU(inplace=True))


class TNet(nn.Module):
    """PointNet's alignment network: a shared per-point MLP, max over points, an MLP to a k x k matrix added to
    the identity (so it starts as the identity transform)."""

    def __init__(self, k, widths=(64, 128, 1024), fc=(512, 256)):
        super().__init__()
        dims = (k, *widths)
        self.point_mlp = nn.Sequential(*[_conv1d_bn(a, b) for a, b in zip(dims, dims[1:])])
        fdims = (widths[-1], *fc)
        self.fc = nn.Sequential(*[_fc_bn(a, b) for a, b in zip(fdims, fdims[1:])], nn.Linear(fc[-1], k * k))
        nn.init.zeros_(self.fc[-1].weight)
        nn.init.zeros_(self.fc[-1].bias)
        self.k = k

    def forward(self, x):
        m = self.fc(self.point_mlp(x).amax(2)).view(-1, self.k, self.k)
        return m + torch.eye(self.k, dtype=m.dtype, device=m.device)


class PointNet(nn.Module):
    """PointNet classifier (Qi et al., 2017) on N x 3 x P point clouds: input and feature alignment networks
    (:class:`TNet`, applied by batched matrix products), shared per-point MLPs as 1x1 1-D convolutions with batch
    norm, a symmetric max over points, and an MLP with dropout to class scores. Returns (scores, feature transform):
    training adds the feature transform's orthogonality penalty ‖I − AAᵀ‖² to the loss."""

    def __init__(self, num_classes=40, widths=(64, 128, 1024), fc=(512, 256)):
        super().__init__()
        self.input_tnet = TNet(3, widths, fc)
        self.mlp1 = nn.Sequential(_conv1d_bn(3, widths[0]), _conv1d_bn(widths[0], widths[0]))
        self.feature_tnet = TNet(widths[0], widths, fc)
        self.mlp2 = nn.Sequential(_conv1d_bn(widths[0], widths[0]), _conv1d_bn(widths[0], widths[1]),
                                  nn.Conv1d(widths[1], widths[2], 1, bias=False), nn.BatchNorm1d(widths[2]))
        self.head = nn.Sequential(_fc_bn(widths[2], fc[0]), _fc_bn(fc[0], fc[1]), nn.Dropout(0.3),
                                  nn.Linear(fc[1], num_classes))
        self.classes = num_classes

    def forward(self, points):
        x = torch.bmm(self.input_tnet(points).transpose(1, 2), points)
        x = self.mlp1(x)
        a = self.feature_tnet(x)
        x = torch.bmm(a.transpose(1, 2), x)
        return self.head(self.mlp2(x).amax(2)), a


def knn_edge_features(x, k: int):
    """EdgeConv's input (Wang et al., 2019, eq. 8): for each of the P points of x (N x C x P), its ``k`` nearest
    neighbours in feature space (itself included) by pairwise squared distance, as [x_i ‖ x_j − x_i], N x 2C x P x k."""
    inner = torch.bmm(x.transpose(1, 2), x)  # N x P x P
    sq = x.pow(2).sum(1)
    idx = (2 * inner - sq.unsqueeze(2) - sq.unsqueeze(1)).topk(k, dim=-1).indices  # −distance: the nearest first
    n, c, p = x.shape
    flat = x.transpose(1, 2).reshape(n * p, c)
    neighbours = flat[(idx + torch.arange(n, device=x.device).view(n, 1, 1) * p).reshape(-1)].view(n, p, k, c)
    centre = x.transpose(1, 2).unsqueeze(2).expand(n, p, k, c)
    return torch.cat([centre, neighbours - centre], dim=3).permute(0, 3, 1, 2).contiguous()


class DGCNN(nn.Module):
    """Dynamic graph CNN (Wang et al., 2019) classifier on N x 3 x P point clouds: four EdgeConv layers, each
    rebuilding the k-nearest-neighbour graph in its input's feature space (:func:`knn_edge_features`), a shared
    1x1 2-D convolution with batch norm and LeakyReLU (slope 0.2) on every edge and a max over the k neighbours; the
    four layers' outputs concatenated into a 1x1 1-D convolution to ``embed`` channels, max and mean pooled over
    points, and an MLP with dropout to class scores."""

    def __init__(self, num_classes=40, widths=(64, 64, 128, 256), embed=1024, k=20, fc=(512, 256)):
        super().__init__()
        cin, convs = 3, []
        for w in widths:
            convs.append(nn.Sequential(nn.Conv2d(2 * cin, w, 1, bias=False), nn.BatchNorm2d(w), nn.LeakyReLU(0.2)))
            cin = w
        self.edge_convs = nn.ModuleList(convs)
        self.embed = nn.Sequential(nn.Conv1d(sum(widths), embed, 1, bias=False), nn.BatchNorm1d(embed), nn.LeakyReLU(0.2))
        self.head = nn.Sequential(nn.Linear(2 * embed, fc[0], bias=False), nn.BatchNorm1d(fc[0]), nn.LeakyReLU(0.2), nn.Dropout(0.5),
                                  nn.Linear(fc[0], fc[1], bias=False), nn.BatchNorm1d(fc[1]), nn.LeakyReLU(0.2), nn.Dropout(0.5),
                                  nn.Linear(fc[1], num_classes))
        self.k, self.classes = k, num_classes

    def forward(self, points):
        x, outs = points, []
        for conv in self.edge_convs:
            x = conv(knn_edge_features(x, min(self.k, x.shape[2]))).amax(-1)
            outs.append(x)
        x = self.embed(torch.cat(outs, 1))
        return self.head(torch.cat([x.amax(2), x.mean(2)], 1))


# --------------------------------------------------------------------------- generative models
class ConvVAE(nn.Module):
    """Convolutional variational autoencoder (Kingma & Welling, 2014) for 64x64 images: four stride-2 4x4
    convolutions with batch norm and leaky ReLU down to 4x4, linear maps to the latent mean and log-variance, a
    reparameterised sample, and the mirror decoder of transposed convolutions to a sigmoid image. Returns
    (reconstruction, mean, log-variance)."""

    def __init__(self, widths=(32, 64, 128, 256), latent=128, size=64):
        super().__init__()
        enc, cin = [], 3
        for w in widths:
            enc += [nn.Conv2d(cin, w, 4, 2, 1, bias=False), nn.BatchNorm2d(w), nn.LeakyReLU(0.2, inplace=True)]
            cin = w
        self.encoder = nn.Sequential(*enc)
        self.side = size // 2 ** len(widths)
        flat = widths[-1] * self.side * self.side
        self.mean = nn.Linear(flat, latent)
        self.logvar = nn.Linear(flat, latent)
        self.expand = nn.Linear(latent, flat)
        dec, rev = [], widths[::-1]
        for a, b in zip(rev, rev[1:]):
            dec += [nn.ConvTranspose2d(a, b, 4, 2, 1, bias=False), nn.BatchNorm2d(b), nn.ReLU(inplace=True)]
        dec += [nn.ConvTranspose2d(rev[-1], 3, 4, 2, 1), nn.Sigmoid()]
        self.decoder = nn.Sequential(*dec)
        self.widths, self.size = widths, size

    def forward(self, x):
        h = torch.flatten(self.encoder(x), 1)
        mean, logvar = self.mean(h), self.logvar(h)
        z = mean + torch.randn_like(mean) * torch.exp(0.5 * logvar)
        y = self.expand(z).view(-1, self.widths[-1], self.side, self.side)
        return self.decoder(y), mean, logvar


# --------------------------------------------------------------------------- video
class BasicBlock3d(nn.Module):
    """ResNet's basic block with 3x3x3 convolutions (stride ``s`` in time and space)."""

    def __init__(self, cin, c, s=1):
        super().__init__()
        self.c1 = nn.Sequential(nn.Conv3d(cin, c, 3, s, 1, bias=False), nn.BatchNorm3d(c), nn.ReLU(inplace=True))
        self.c2 = nn.Sequential(nn.Conv3d(c, c, 3, 1, 1, bias=False), nn.BatchNorm3d(c))
        self.down = (nn.Sequential(nn.Conv3d(cin, c, 1, s, bias=False), nn.BatchNorm3d(c))
                     if (s != 1 or cin != c) else nn.Identity())

    def forward(self, x):
        return F.relu(self.c2(self.c1(x)) + self.down(x))


class R3D(nn.Module):
    """R3D-18 video classifier (Tran et al., 2018, "A Closer Look at Spatiotemporal Convolutions"): a 3x7x7 stem of
    spatial stride 2, four stages of 3-D basic blocks (stride 2 in time and space from the second), global average
    pool, a linear layer to Kinetics-400's classes. Input N x 3 x frames x H x W."""

    def __init__(self, layers=(2, 2, 2, 2), widths=(64, 128, 256, 512), num_classes=400, frames=16, size=112):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv3d(3, widths[0], (3, 7, 7), (1, 2, 2), (1, 3, 3), bias=False),
                                  nn.BatchNorm3d(widths[0]), nn.ReLU(inplace=True))
        blocks, cin = [], widths[0]
        for i, (n, c) in enumerate(zip(layers, widths)):
            for j in range(n):
                blocks.append(BasicBlock3d(cin, c, 2 if (j == 0 and i > 0) else 1))
                cin = c
        self.body = nn.Sequential(*blocks)
        self.fc = nn.Linear(cin, num_classes)
        self.classes, self.frames, self.size = num_classes, frames, size

    def forward(self, x):
        return self.fc(torch.flatten(F.adaptive_avg_pool3d(self.body(self.stem(x)), 1), 1))


# --------------------------------------------------------------------------- neural fields
def positional_encoding(x, frequencies):
    """NeRF's γ(p): p and sin/cos(2^k·π·p) for k < ``frequencies`` (Mildenhall et al., 2020, eq. 4)."""
    scaled = x.unsqueeze(-2) * (math.pi * 2.0 ** torch.arange(frequencies, device=x.device, dtype=x.dtype)).unsqueeze(-1)
    return torch.cat([x, torch.sin(scaled).flatten(-2), torch.cos(scaled).flatten(-2)], -1)


class NeRF(nn.Module):
    """NeRF's coarse network and volume rendering (Mildenhall et al., 2020): ``samples`` stratified points per ray
    between ``near`` and ``far``, positions encoded with 10 frequencies and directions with 4, eight ReLU layers of
    ``width`` with the encoded position concatenated again after the fourth, density from the last, colour from a
    128-wide layer that also sees the direction; each ray's colour is the alpha-composited sum over its samples (eq. 3).
    Input: ray origins and unit directions (N x 3 each); output the rendered colours (N x 3)."""

    def __init__(self, width=256, depth=8, skip=4, samples=64, pos_freq=10, dir_freq=4, near=2.0, far=6.0):
        super().__init__()
        pos_dim, dir_dim = 3 + 6 * pos_freq, 3 + 6 * dir_freq
        self.layers = nn.ModuleList(
            nn.Linear(pos_dim if i == 0 else width + (pos_dim if i == skip else 0), width) for i in range(depth))
        self.skip, self.pos_freq, self.dir_freq = skip, pos_freq, dir_freq
        self.sigma = nn.Linear(width, 1)
        self.feature = nn.Linear(width, width)
        self.colour = nn.Sequential(nn.Linear(width + dir_dim, width // 2), nn.ReLU(inplace=True),
                                    nn.Linear(width // 2, 3))
        self.samples, self.near, self.far = samples, near, far

    def forward(self, origins, directions):
        n, s = origins.shape[0], self.samples
        edges = torch.linspace(self.near, self.far, s + 1, device=origins.device)
        t = edges[:-1] + (edges[1:] - edges[:-1]) * torch.rand(n, s, device=origins.device)  # stratified (eq. 2)
        points = origins.unsqueeze(1) + t.unsqueeze(-1) * directions.unsqueeze(1)
        p = positional_encoding(points, self.pos_freq)
        h = p
        for i, layer in enumerate(self.layers):
            h = F.relu(layer(torch.cat([h, p], -1) if i == self.skip else h))
        sigma = F.relu(self.sigma(h)).squeeze(-1)
        d = positional_encoding(directions, self.dir_freq).unsqueeze(1).expand(n, s, -1)
        rgb = torch.sigmoid(self.colour(torch.cat([self.feature(h), d], -1)))
        delta = torch.cat([t[:, 1:] - t[:, :-1], torch.full_like(t[:, :1], 1e10)], 1)
        alpha = 1.0 - torch.exp(-sigma.float() * delta)
        transmittance = torch.cumprod(torch.cat([torch.ones_like(alpha[:, :1]), 1.0 - alpha + 1e-10], 1), 1)[:, :-1]
        return ((alpha * transmittance).unsqueeze(-1) * rgb.float()).sum(1)


# --------------------------------------------------------------------------- state-space models
class S4DKernel(nn.Module):
    """The convolution kernel of a diagonal state-space layer, S4D-Lin (Gu et al., 2022, "On the Parameterization
    and Initialization of Diagonal State Space Models"): per channel, ``state`` / 2 complex modes with A = −1/2 + iπn,
    a learnt step Δ in [1e-3, 1e-1], zero-order-hold discretisation, K[l] = 2·Re Σₙ Cₙ (e^{ΔAₙ} − 1)/Aₙ · e^{ΔAₙ l}."""

    def __init__(self, d, state=64, dt_min=1e-3, dt_max=1e-1):
        super().__init__()
        n = state // 2
        self.log_dt = nn.Parameter(torch.rand(d) * (math.log(dt_max) - math.log(dt_min)) + math.log(dt_min))
        self.c = nn.Parameter(torch.view_as_real(torch.randn(d, n, dtype=torch.cfloat) * 0.5 ** 0.5))
        self.log_a_real = nn.Parameter(torch.log(0.5 * torch.ones(d, n)))
        self.a_imag = nn.Parameter(math.pi * torch.arange(n).float().repeat(d, 1))

    def forward(self, length):
        dt = torch.exp(self.log_dt).unsqueeze(-1)
        a = torch.complex(-torch.exp(self.log_a_real), self.a_imag)
        dta = a * dt
        c = torch.view_as_complex(self.c) * (torch.exp(dta) - 1.0) / a
        vandermonde = torch.exp(dta.unsqueeze(-1) * torch.arange(length, device=a.device))
        return 2 * torch.einsum("dn,dnl->dl", c, vandermonde).real


class S4DBlock(nn.Module):
    """Pre-norm residual block: layer norm, the S4D convolution over the sequence (an FFT of twice the length, so
    the convolution is causal and not circular) plus a skip term D·u, GELU, dropout, a 1x1 convolution to 2d and a
    GLU. The FFT convolution runs in float32, as the reference implementation does."""

    def __init__(self, d, state, dropout):
        super().__init__()
        self.norm = nn.LayerNorm(d)
        self.kernel = S4DKernel(d, state)
        self.skip = nn.Parameter(torch.randn(d))
        self.drop = nn.Dropout(dropout)
        self.out = nn.Conv1d(d, 2 * d, 1)

    def forward(self, x):  # x: N x L x d
        length = x.shape[1]
        u = self.norm(x).transpose(1, 2).float()  # N x d x L
        k = self.kernel(length)
        y = torch.fft.irfft(torch.fft.rfft(u, n=2 * length) * torch.fft.rfft(k, n=2 * length), n=2 * length)
        y = y[..., :length] + u * self.skip.unsqueeze(-1)
        y = F.glu(self.out(self.drop(F.gelu(y))), dim=1)
        return x + y.transpose(1, 2).to(x.dtype)


class S4DLanguageModel(nn.Module):
    """A diagonal state-space language model: embeddings, ``layers`` S4D blocks, a final layer norm and a linear
    decoder to the vocabulary (output N x T x vocab)."""

    def __init__(self, vocab=10000, d=512, layers=4, state=64, dropout=0.1):
        super().__init__()
        self.emb = nn.Embedding(vocab, d)
        self.blocks = nn.Sequential(*[S4DBlock(d, state, dropout) for _ in range(layers)])
        self.norm = nn.LayerNorm(d)
        self.out = nn.Linear(d, vocab)

    def forward(self, idx):
        return self.out(self.norm(self.blocks(self.emb(idx))))


# --------------------------------------------------------------------------- reinforcement learning
class NatureDQN(nn.Module):
    """The Atari Q-network of Mnih et al. (2015): 8x8/4, 4x4/2 and 3x3/1 convolutions (32, 64, 64) on four stacked
    84x84 frames, a 512-wide layer and one value per action."""

    def __init__(self, actions=18, frames=4, widths=(32, 64, 64), hidden=512, size=84):
        super().__init__()
        self.net = nn.Sequential(
            nn.Conv2d(frames, widths[0], 8, 4), nn.ReLU(inplace=True), nn.Conv2d(widths[0], widths[1], 4, 2),
            nn.ReLU(inplace=True), nn.Conv2d(widths[1], widths[2], 3, 1), nn.ReLU(inplace=True), nn.Flatten())
        with torch.no_grad():
            flat = self.net(torch.zeros(1, frames, size, size)).shape[1]
        self.head = nn.Sequential(nn.Linear(flat, hidden), nn.ReLU(inplace=True), nn.Linear(hidden, actions))
        self.frames, self.size, self.actions = frames, size, actions

    def forward(self, frames_u8):
        return self.head(self.net(frames_u8.float() / 255.0))


class DoubleDQN(nn.Module):
    """A Double DQN learner step (van Hasselt et al., 2016): the online network's value of the action taken, and the
    target r + γ(1 − done)·Q_target(s′, argmax Q_online(s′)), computed without gradient. The target network is a
    frozen copy (its parameters take no gradient, so the optimizer leaves them alone). Returns (value, target)."""

    def __init__(self, gamma=0.99, **kw):
        super().__init__()
        self.online = NatureDQN(**kw)
        self.target = NatureDQN(**kw)
        self.target.load_state_dict(self.online.state_dict())
        self.target.requires_grad_(False)
        self.gamma = gamma

    def forward(self, states, actions, rewards, next_states, done):
        value = self.online(states).gather(1, actions.unsqueeze(1)).squeeze(1)
        with torch.no_grad():
            best = self.online(next_states).argmax(1, keepdim=True)
            target = rewards + self.gamma * (1.0 - done) * self.target(next_states).gather(1, best).squeeze(1)
        return value, target


class ImpalaResidual(nn.Module):
    """The IMPALA network's residual block: x + conv(relu(conv(relu(x)))), 3x3 convolutions."""

    def __init__(self, c):
        super().__init__()
        self.c1 = nn.Conv2d(c, c, 3, 1, 1)
        self.c2 = nn.Conv2d(c, c, 3, 1, 1)

    def forward(self, x):
        return x + self.c2(F.relu(self.c1(F.relu(x))))


class PPOImpala(nn.Module):
    """PPO's actor-critic (Schulman et al., 2017) on IMPALA's deep network (Espeholt et al., 2018, fig. 3) as in
    Procgen's baseline (Cobbe et al., 2020): three stacks of a 3x3 convolution, a 3x3 max-pool of stride 2 and two
    residual blocks (16, 32, 32 channels) on 64x64 RGB frames, a 256-wide layer, then policy logits over 15 actions
    and a value from one trunk. Given frames and the actions taken, returns the actions' log-probabilities, the
    policy's entropy and the value (float32)."""

    def __init__(self, actions=15, widths=(16, 32, 32), hidden=256, size=64):
        super().__init__()
        layers, cin = [], 3
        for c in widths:
            layers += [nn.Conv2d(cin, c, 3, 1, 1), nn.MaxPool2d(3, 2, 1), ImpalaResidual(c), ImpalaResidual(c)]
            cin = c
        self.trunk = nn.Sequential(*layers, nn.ReLU(), nn.Flatten())
        with torch.no_grad():
            flat = self.trunk(torch.zeros(1, 3, size, size)).shape[1]
        self.fc = nn.Sequential(nn.Linear(flat, hidden), nn.ReLU())
        self.policy = nn.Linear(hidden, actions)
        self.value = nn.Linear(hidden, 1)
        self.actions, self.size = actions, size

    def forward(self, frames_u8, actions):
        h = self.fc(self.trunk(frames_u8.float() / 255.0))
        log_probs = F.log_softmax(self.policy(h).float(), -1)
        entropy = -(log_probs.exp() * log_probs).sum(1)
        return log_probs.gather(1, actions.unsqueeze(1)).squeeze(1), entropy, self.value(h).squeeze(1).float()


# --------------------------------------------------------------------------- autoregressive image models
class MaskedConv2d(nn.Conv2d):
    """PixelCNN's masked convolution (van den Oord et al., 2016, "Pixel Recurrent Neural Networks", §3.4): the kernel
    sees only the pixels above and to the left; mask A (the first layer) hides the centre too, mask B keeps it."""

    def __init__(self, mask_type, cin, cout, k):
        super().__init__(cin, cout, k, 1, k // 2)
        mask = torch.ones_like(self.weight)
        mask[:, :, k // 2, k // 2 + (mask_type == "B"):] = 0
        mask[:, :, k // 2 + 1:] = 0
        self.register_buffer("mask", mask)

    def forward(self, x):
        return F.conv2d(x, self.weight * self.mask, self.bias, self.stride, self.padding)


class PixelCNN(nn.Module):
    """PixelCNN (van den Oord et al., 2016): a 7x7 mask-A convolution, residual blocks of 1x1 → 3x3 mask B → 1x1
    (2h → h → h → 2h), two 1x1 layers, and a 256-way distribution over each sub-pixel's value. Channels are not
    masked against each other (the paper's R→G→B ordering is left out). Input N x 3 x H x W in [0, 1]; output
    N x 256 x 3 x H x W logits."""

    def __init__(self, hidden=128, blocks=15, out_hidden=1024, levels=256, size=32):
        super().__init__()
        h2 = 2 * hidden
        self.first = MaskedConv2d("A", 3, h2, 7)
        self.blocks = nn.ModuleList(nn.Sequential(
            nn.ReLU(), nn.Conv2d(h2, hidden, 1), nn.ReLU(), MaskedConv2d("B", hidden, hidden, 3), nn.ReLU(),
            nn.Conv2d(hidden, h2, 1)) for _ in range(blocks))
        self.out = nn.Sequential(nn.ReLU(), nn.Conv2d(h2, out_hidden, 1), nn.ReLU(), nn.Conv2d(out_hidden, 3 * levels, 1))
        self.levels, self.size = levels, size

    def forward(self, x):
        h = self.first(x)
        for block in self.blocks:
            h = h + block(h)
        n, _, hh, ww = x.shape
        return self.out(h).view(n, self.levels, 3, hh, ww)


# --------------------------------------------------------------------------- speech
class DeepSpeech2(nn.Module):
    """DeepSpeech 2 (Amodei et al., 2016): two 2-D convolutions over the spectrogram (41x11 stride 2x2, 21x11 stride
    2x1, batch norm, hardtanh), bidirectional GRU layers (the two directions summed), and a linear layer to the
    characters (blank first) for CTC. Input N x 1 x frequency x time; output time x N x characters log-probabilities."""

    CONVS = (((41, 11), (2, 2), (20, 5)), ((21, 11), (2, 1), (10, 5)))
    """(kernel, stride, padding) of the two convolutions, (frequency, time) each."""

    def __init__(self, freq=161, hidden=768, layers=5, characters=29, conv=32):
        super().__init__()
        convs, cin = [], 1
        for k, s, p in self.CONVS:
            convs += [nn.Conv2d(cin, conv, k, s, p, bias=False), nn.BatchNorm2d(conv), nn.Hardtanh(0, 20, inplace=True)]
            cin = conv
        self.conv = nn.Sequential(*convs)
        f = self._conv_out(freq, 0)
        self.rnns = nn.ModuleList(nn.GRU(conv * f if i == 0 else hidden, hidden, bidirectional=True) for i in range(layers))
        self.norms = nn.ModuleList(nn.LayerNorm(hidden) for _ in range(layers))
        self.fc = nn.Linear(hidden, characters)
        self.freq, self.characters = freq, characters

    def _conv_out(self, n: int, axis: int) -> int:
        """Length along ``axis`` (0 frequency, 1 time) after the two convolutions."""
        for k, s, p in self.CONVS:
            n = (n + 2 * p[axis] - k[axis]) // s[axis] + 1
        return n

    def output_frames(self, frames: int) -> int:
        return self._conv_out(frames, 1)

    def forward(self, spec):
        x = self.conv(spec)  # N x C x F' x T'
        n, c, f, t = x.shape
        x = x.reshape(n, c * f, t).permute(2, 0, 1).contiguous()  # T' x N x C·F'
        for rnn, norm in zip(self.rnns, self.norms):
            y, _ = rnn(x)
            x = norm(y[..., : y.shape[-1] // 2] + y[..., y.shape[-1] // 2:])
        return F.log_softmax(self.fc(x).float(), -1)
