"""ResNet-18 (torchvision's layout: a 3x3 stem here for small images, four
stages of two basic blocks, batch norm, ReLU, max and global average
pooling) at a small width and image size, trained with SGD and momentum:
the convolutional loop."""

import torch
from torch import nn
from torch.nn import functional as F

PARAMS = {"batch": 16, "image": 32, "width": 16, "classes": 10}


class BasicBlock(nn.Module):
    def __init__(self, inputs, outputs, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(inputs, outputs, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(outputs)
        self.conv2 = nn.Conv2d(outputs, outputs, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(outputs)
        self.shortcut = None
        if stride != 1 or inputs != outputs:
            self.shortcut = nn.Sequential(nn.Conv2d(inputs, outputs, 1, stride, bias=False), nn.BatchNorm2d(outputs))

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return F.relu(out + (x if self.shortcut is None else self.shortcut(x)))


class ResNet18(nn.Module):
    def __init__(self, width, classes):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, width, 3, 1, 1, bias=False), nn.BatchNorm2d(width), nn.ReLU(),
                                  nn.MaxPool2d(3, 2, 1))
        stages, channels = [], width
        for index, multiple in enumerate((1, 2, 4, 8)):
            stride = 1 if index == 0 else 2
            stages += [BasicBlock(channels, width * multiple, stride), BasicBlock(width * multiple, width * multiple, 1)]
            channels = width * multiple
        self.stages = nn.Sequential(*stages)
        self.head = nn.Linear(channels, classes)

    def forward(self, x):
        x = self.stages(self.stem(x))
        return self.head(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


def model(params):
    return ResNet18(params["width"], params["classes"])


def optimizer(model, params, steps):
    return torch.optim.SGD(model.parameters(), lr=0.005, momentum=0.9, weight_decay=5e-4), None


def batch(generator, params, size):
    return (torch.randn(size, 3, params["image"], params["image"], generator=generator),
            torch.randint(0, params["classes"], (size,), generator=generator))


def step(model, optimizer, schedule, x, y):
    loss = F.cross_entropy(model(x), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    return loss
