"""The four reference networks of experiments/models.yaml, built in PyTorch
with seeded random weights (no downloads): ResNet-18 and MobileNetV2 from
torchvision's constructors, a BERT-base encoder and GPT-2 small from
torch.nn. The ONNX export (export_models.py) and the PyTorch peer
(bench/peers/torch_models.py) both build them from here, so the peer times
the very model lazylab imported.

Each configuration is a name and a size: "full" is the published model
(batch 1, 224x224 images, 128 tokens for BERT, 128 for GPT-2); "small" is the
one CI runs: the same layer shapes, fewer layers and smaller inputs.
"""
import math

import torch
from torch import nn
from torch.nn import functional as F

MODELS = ("resnet18", "mobilenetv2", "bert", "gpt2")

SIZES = {
    "full": {"batch": 1, "image": 224, "layers": 12, "tokens": 128},
    "small": {"batch": 1, "image": 64, "layers": 2, "tokens": 16},
}


class BertLayer(nn.Module):
    def __init__(self, hidden=768, heads=12, ffn=3072):
        super().__init__()
        self.heads = heads
        self.q, self.k, self.v = nn.Linear(hidden, hidden), nn.Linear(hidden, hidden), nn.Linear(hidden, hidden)
        self.out = nn.Linear(hidden, hidden)
        self.norm1, self.norm2 = nn.LayerNorm(hidden, eps=1e-12), nn.LayerNorm(hidden, eps=1e-12)
        self.up, self.down = nn.Linear(hidden, ffn), nn.Linear(ffn, hidden)

    def split(self, x):
        b, t, c = x.shape
        return x.reshape(b, t, self.heads, c // self.heads).transpose(1, 2)

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.split(self.q(x)), self.split(self.k(x)), self.split(self.v(x))
        scores = q @ k.transpose(-1, -2) / math.sqrt(c // self.heads)
        context = (F.softmax(scores, dim=-1) @ v).transpose(1, 2).reshape(b, t, c)
        x = self.norm1(x + self.out(context))
        return self.norm2(x + self.down(F.gelu(self.up(x))))  # exact (erf) GELU, as BERT


class Bert(nn.Module):
    """BERT-base's encoder: token, position and segment embeddings, then
    `layers` post-norm transformer layers; the last hidden states out."""

    def __init__(self, layers, vocab=30522, hidden=768, positions=512):
        super().__init__()
        self.words, self.positions, self.segments = nn.Embedding(vocab, hidden), nn.Embedding(positions, hidden), \
            nn.Embedding(2, hidden)
        self.norm = nn.LayerNorm(hidden, eps=1e-12)
        self.layers = nn.ModuleList(BertLayer(hidden) for _ in range(layers))

    def forward(self, ids):
        t = ids.shape[1]
        position = torch.arange(t, dtype=torch.long, device=ids.device).unsqueeze(0)
        x = self.words(ids) + self.positions(position) + self.segments(torch.zeros_like(ids))
        x = self.norm(x)
        for layer in self.layers:
            x = layer(x)
        return x


class Gpt2Block(nn.Module):
    def __init__(self, hidden=768, heads=12, context=1024):
        super().__init__()
        self.heads = heads
        self.ln_1, self.ln_2 = nn.LayerNorm(hidden), nn.LayerNorm(hidden)
        self.c_attn, self.c_proj = nn.Linear(hidden, 3 * hidden), nn.Linear(hidden, hidden)
        self.c_fc, self.mlp_proj = nn.Linear(hidden, 4 * hidden), nn.Linear(4 * hidden, hidden)
        self.register_buffer("causal", torch.tril(torch.ones(context, context, dtype=torch.bool)), persistent=False)

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.c_attn(self.ln_1(x)).split(c, dim=2)
        q, k, v = (y.reshape(b, t, self.heads, c // self.heads).transpose(1, 2) for y in (q, k, v))
        scores = q @ k.transpose(-1, -2) / math.sqrt(c // self.heads)
        scores = scores.masked_fill(~self.causal[:t, :t], float("-inf"))
        context = (F.softmax(scores, dim=-1) @ v).transpose(1, 2).reshape(b, t, c)
        x = x + self.c_proj(context)
        return x + self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh"))


class Gpt2(nn.Module):
    """GPT-2 small: token and position embeddings, `layers` pre-norm blocks
    with causal attention, a final norm and the logits through the token
    embedding (tied, as GPT-2's)."""

    def __init__(self, layers, vocab=50257, hidden=768, context=1024):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(vocab, hidden), nn.Embedding(context, hidden)
        self.blocks = nn.ModuleList(Gpt2Block(hidden, context=context) for _ in range(layers))
        self.ln_f = nn.LayerNorm(hidden)

    def forward(self, ids):
        t = ids.shape[1]
        x = self.wte(ids) + self.wpe(torch.arange(t, dtype=torch.long, device=ids.device).unsqueeze(0))
        for block in self.blocks:
            x = block(x)
        return self.ln_f(x) @ self.wte.weight.t()


def build(name, size, seed=0):
    """(model in eval mode, example inputs) for `name` at `size`; the weights
    and inputs follow from the seed alone."""
    import torchvision  # only the convolutional models need it

    config = SIZES[size]
    torch.manual_seed(seed)
    if name == "resnet18":
        model = torchvision.models.resnet18(weights=None)
    elif name == "mobilenetv2":
        model = torchvision.models.mobilenet_v2(weights=None)
    elif name == "bert":
        model = Bert(config["layers"])
    elif name == "gpt2":
        model = Gpt2(config["layers"])
    else:
        raise ValueError(f"unknown model '{name}' (models: {', '.join(MODELS)})")
    model.eval()
    if name in ("resnet18", "mobilenetv2"):
        inputs = (torch.rand(config["batch"], 3, config["image"], config["image"]) * 2 - 1,)
    else:
        vocab = model.words.num_embeddings if name == "bert" else model.wte.num_embeddings
        inputs = (torch.randint(0, vocab, (config["batch"], config["tokens"]), dtype=torch.long),)
    return model, inputs
