"""An MLP classifier trained with SGD (momentum 0.9, weight decay) on random
data: the smallest of experiments/training.yaml's loops."""

import torch
from torch import nn
from torch.nn import functional as F

PARAMS = {"batch": 64, "features": 64, "hidden": 256, "classes": 10}


def model(params):
    return nn.Sequential(
        nn.Linear(params["features"], params["hidden"]), nn.ReLU(),
        nn.Linear(params["hidden"], params["hidden"]), nn.ReLU(),
        nn.Linear(params["hidden"], params["classes"]),
    )


def optimizer(model, params, steps):
    return torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, weight_decay=1e-4), None


def batch(generator, params, size):
    return (torch.randn(size, params["features"], generator=generator),
            torch.randint(0, params["classes"], (size,), generator=generator))


def step(model, optimizer, schedule, x, y):
    loss = F.cross_entropy(model(x), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    return loss
