"""A small GPT (token and position embeddings, pre-norm blocks of causal
self-attention with a masked softmax and a GELU MLP, dropout, the head tied
to the token embedding) trained with AdamW, a cosine learning-rate schedule
and gradient clipping: the loop most language-model work runs."""

import math

import torch
from torch import nn
from torch.nn import functional as F

PARAMS = {"batch": 8, "tokens": 32, "vocab": 128, "channels": 64, "heads": 4, "layers": 2, "dropout_pct": 0}


class Block(nn.Module):
    def __init__(self, channels, heads, tokens, dropout):
        super().__init__()
        self.heads = heads
        self.norm1, self.norm2 = nn.LayerNorm(channels), nn.LayerNorm(channels)
        self.qkv, self.proj = nn.Linear(channels, 3 * channels), nn.Linear(channels, channels)
        self.up, self.down = nn.Linear(channels, 4 * channels), nn.Linear(4 * channels, channels)
        self.dropout = nn.Dropout(dropout)
        self.register_buffer("causal", torch.tril(torch.ones(tokens, tokens, dtype=torch.bool)))

    def attention(self, x):
        b, t, c = x.shape
        q, k, v = self.qkv(x).split(c, dim=2)
        q, k, v = (z.view(b, t, self.heads, c // self.heads).transpose(1, 2) for z in (q, k, v))
        scores = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(c // self.heads))
        scores = scores.masked_fill(~self.causal[:t, :t], float("-inf"))
        weights = self.dropout(F.softmax(scores, dim=-1))
        return self.dropout(self.proj((weights @ v).transpose(1, 2).reshape(b, t, c)))

    def forward(self, x):
        x = x + self.attention(self.norm1(x))
        return x + self.dropout(self.down(F.gelu(self.up(self.norm2(x)))))


class Gpt(nn.Module):
    def __init__(self, params):
        super().__init__()
        dropout = params["dropout_pct"] / 100
        self.token = nn.Embedding(params["vocab"], params["channels"])
        self.position = nn.Embedding(params["tokens"], params["channels"])
        self.dropout = nn.Dropout(dropout)
        self.blocks = nn.ModuleList(
            Block(params["channels"], params["heads"], params["tokens"], dropout) for _ in range(params["layers"]))
        self.norm = nn.LayerNorm(params["channels"])
        self.head = nn.Linear(params["channels"], params["vocab"], bias=False)
        self.head.weight = self.token.weight  # tied
        self.register_buffer("positions", torch.arange(params["tokens"]))
        for module in self.modules():  # GPT-2's initialization
            if isinstance(module, (nn.Linear, nn.Embedding)):
                nn.init.normal_(module.weight, std=0.02)
            if isinstance(module, nn.Linear) and module.bias is not None:
                nn.init.zeros_(module.bias)

    def forward(self, tokens):
        x = self.dropout(self.token(tokens) + self.position(self.positions[: tokens.shape[1]]))
        for block in self.blocks:
            x = block(x)
        return self.head(self.norm(x))


def model(params):
    return Gpt(params)


def optimizer(model, params, steps):
    adamw = torch.optim.AdamW(model.parameters(), lr=3e-3, betas=(0.9, 0.95), weight_decay=0.1)
    return adamw, torch.optim.lr_scheduler.CosineAnnealingLR(adamw, T_max=steps)


def batch(generator, params, size):
    tokens = torch.randint(0, params["vocab"], (size, params["tokens"] + 1), generator=generator)
    return tokens[:, :-1].contiguous(), tokens[:, 1:].contiguous()


def step(model, optimizer, schedule, x, y):
    logits = model(x)
    loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()
    schedule.step()
    return loss
