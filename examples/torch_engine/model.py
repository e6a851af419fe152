"""A small decoder-only transformer in PyTorch, with random weights from a fixed seed.

Per layer: RMSNorm, a causal-attention mixer (in-projection to q, k, v; out-projection), and an
FFN (up, GELU, down); then a final RMSNorm and an lm_head. Nothing is downloaded: every weight
comes from torch.Generator(seed), so two runs of the example build the same model bit for bit.

The module holds the weights only; the decode loop, KV cache and packed path live in engine.py,
as they would in an inference engine that runs a model's layers itself.
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass

import torch
from torch import nn


@dataclass(frozen=True)
class ModelConfig:
    vocab: int
    hidden: int
    layers: int
    heads: int
    ffn: int
    max_positions: int
    # Scales the lm_head so that logits spread like a trained model's (standard deviation about
    # 3 rather than the 0.6 of PyTorch's default init): with flat rows almost every greedy step
    # would be a coin toss between two tokens and the forks would say little.
    logit_scale: float = 4.0

    @property
    def head_dim(self) -> int:
        return self.hidden // self.heads


# Full size: 3 layers of 192 (mixer in-projection 192 -> 576, out-projection 192 -> 192),
# vocabulary 2048. Small: what the test suite runs (2 layers of 128, vocabulary 512).
FULL = ModelConfig(vocab=2048, hidden=192, layers=3, heads=3, ffn=768, max_positions=64)
SMALL = ModelConfig(vocab=512, hidden=128, layers=2, heads=4, ffn=512, max_positions=64)


class RmsNorm(nn.Module):
    """RMSNorm computed in f32 and returned in the input's type (as bf16 engines do)."""

    def __init__(self, hidden: int, eps: float = 1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden))
        self.eps = eps

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        x = h.float()
        x = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)
        return (x * self.weight.float()).to(h.dtype)


class Layer(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.mixer_norm = RmsNorm(cfg.hidden)
        self.mixer_in = nn.Linear(cfg.hidden, 3 * cfg.hidden, bias=False)   # q, k, v
        self.mixer_out = nn.Linear(cfg.hidden, cfg.hidden, bias=False)
        self.ffn_norm = RmsNorm(cfg.hidden)
        self.ffn_up = nn.Linear(cfg.hidden, cfg.ffn, bias=False)
        self.ffn_down = nn.Linear(cfg.ffn, cfg.hidden, bias=False)


class TinyTransformer(nn.Module):
    def __init__(self, cfg: ModelConfig, seed: int):
        super().__init__()
        self.cfg = cfg
        self.embed = nn.Embedding(cfg.vocab, cfg.hidden)
        self.positions = nn.Embedding(cfg.max_positions, cfg.hidden)
        self.layers = nn.ModuleList(Layer(cfg) for _ in range(cfg.layers))
        self.final_norm = RmsNorm(cfg.hidden)
        self.lm_head = nn.Linear(cfg.hidden, cfg.vocab, bias=False)
        self._init_weights(seed)

    @torch.no_grad()
    def _init_weights(self, seed: int) -> None:
        # One generator walked in a fixed order: the weights depend on the seed alone, not on
        # torch's global RNG state or on the order nn.Module registered its parameters.
        gen = torch.Generator().manual_seed(seed)

        def normal_(t: torch.Tensor, std: float) -> None:
            t.copy_(torch.randn(t.shape, generator=gen) * std)

        cfg = self.cfg
        normal_(self.embed.weight, 1.0)
        normal_(self.positions.weight, 0.5)
        for layer in self.layers:
            normal_(layer.mixer_in.weight, 1 / math.sqrt(cfg.hidden))
            # Residual branches scaled by 1/sqrt(2 * layers) keep the stream's size steady.
            branch = 1 / math.sqrt(2 * cfg.layers)
            normal_(layer.mixer_out.weight, branch / math.sqrt(cfg.hidden))
            normal_(layer.ffn_up.weight, 1 / math.sqrt(cfg.hidden))
            normal_(layer.ffn_down.weight, branch / math.sqrt(cfg.ffn))
        normal_(self.lm_head.weight, cfg.logit_scale / math.sqrt(cfg.hidden))

    def build(self, dtype: torch.dtype) -> "TinyTransformer":
        """A copy of the model in `dtype`: the bf16 build rounds every weight to nearest even
        (torch's float -> bfloat16 conversion), as loading a bf16 checkpoint would."""
        return copy.deepcopy(self).to(dtype)
