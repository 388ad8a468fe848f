"""A training loop that is not in colopred's zoo, written so that colopred can profile and measure it.

Two lines make it so: ``win = ProfileWindow()`` and ``with win.step():`` around one training iteration
(``win.epochs(n)`` lets the profiler or ``colopred measure`` run it as long as they need; outside colopred it
is ``range(n)`` and ProfileWindow does nothing). A small MLP regressor on synthetic data:

    python examples/my_train.py --device cuda --epochs 3
"""

from __future__ import annotations

import argparse

import torch
from torch import nn

from colopred.window import ProfileWindow


def main(argv=None) -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--width", type=int, default=2048)
    ap.add_argument("--epochs", type=int, default=3)
    a = ap.parse_args(argv)
    torch.manual_seed(0)
    device = torch.device(a.device)
    model = nn.Sequential(nn.Linear(512, a.width), nn.ReLU(), nn.Linear(a.width, a.width), nn.ReLU(), nn.Linear(a.width, 1)).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3, momentum=0.9)
    data = [(torch.randn(a.batch, 512, device=device), torch.randn(a.batch, 1, device=device)) for _ in range(8)]

    win = ProfileWindow()
    for _ in win.epochs(a.epochs):
        for x, y in data:
            with win.step():
                opt.zero_grad(set_to_none=True)
                loss = nn.functional.mse_loss(model(x), y)
                loss.backward()
                opt.step()


if __name__ == "__main__":
    main()
