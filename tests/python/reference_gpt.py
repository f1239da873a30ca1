"""A reference GPT-2 in plain PyTorch, with the module names and layout of
worker/model.h, for checking GreenShard's exports from Python.

    from reference_gpt import load_card, load_export
    card = load_card("model.pt.json")
    model = load_export("model.pt", card)      # torch.load + load_state_dict(strict=True)
    logits = model(torch.tensor([[1, 2, 3]]))  # (B, T, vocab)

Layout (docs/worker-controller.md, "Export layout"): every Linear weight is
(out_features, in_features) as in torch.nn.Linear (not HF GPT-2's Conv1D
(in, out)); c_attn's output is q, k, v, each n_embd wide, in that order;
heads split n_embd into n_head contiguous slices; the lm_head is wte.weight
itself (tied; there is no lm_head entry). GELU is the tanh approximation;
LayerNorm eps is 1e-5 (LibTorch's default, as model.cpp uses).
"""
import json
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

CARD_FORMAT = "greenshard-gpt/1"
LAYER_NORM_EPS = 1e-5


class CausalSelfAttention(nn.Module):
    def __init__(self, embd, heads):
        super().__init__()
        self.heads = heads
        self.c_attn = nn.Linear(embd, 3 * embd)
        self.c_proj = nn.Linear(embd, embd)

    def forward(self, x):
        B, T, C = x.shape
        hs = C // self.heads
        q, k, v = self.c_attn(x).split(C, dim=2)
        q = q.view(B, T, self.heads, hs).transpose(1, 2)
        k = k.view(B, T, self.heads, hs).transpose(1, 2)
        v = v.view(B, T, self.heads, hs).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hs))
        future = torch.ones(T, T, dtype=torch.bool, device=x.device).triu(1)
        att = att.masked_fill(future, float("-inf")).softmax(dim=-1)
        y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
        return self.c_proj(y)


class MLP(nn.Module):
    def __init__(self, embd):
        super().__init__()
        self.c_fc = nn.Linear(embd, 4 * embd)
        self.c_proj = nn.Linear(4 * embd, embd)

    def forward(self, x):
        return self.c_proj(F.gelu(self.c_fc(x), approximate="tanh"))


class Block(nn.Module):
    def __init__(self, embd, heads):
        super().__init__()
        self.ln_1 = nn.LayerNorm(embd, eps=LAYER_NORM_EPS)
        self.attn = CausalSelfAttention(embd, heads)
        self.ln_2 = nn.LayerNorm(embd, eps=LAYER_NORM_EPS)
        self.mlp = MLP(embd)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    def __init__(self, layers, heads, embd, context, vocab):
        super().__init__()
        self.context = context
        self.wte = nn.Embedding(vocab, embd)
        self.wpe = nn.Embedding(context, embd)
        self.h = nn.ModuleList([Block(embd, heads) for _ in range(layers)])
        self.ln_f = nn.LayerNorm(embd, eps=LAYER_NORM_EPS)

    def forward(self, idx):
        B, T = idx.shape
        if T > self.context:
            raise ValueError(f"sequence of {T} tokens exceeds the context {self.context}")
        pos = torch.arange(T, dtype=torch.long, device=idx.device)
        x = self.wte(idx) + self.wpe(pos)
        for block in self.h:
            x = block(x)
        return F.linear(self.ln_f(x), self.wte.weight)  # lm_head tied to wte


def load_card(path):
    with open(path) as f:
        card = json.load(f)
    if card.get("format") != CARD_FORMAT:
        raise ValueError(f"{path}: format is {card.get('format')!r}, not {CARD_FORMAT!r}")
    return card


def model_from_card(card):
    m = card["model"]
    return GPT(m["layers"], m["heads"], m["embd"], m["context"], m["vocab"])


def load_export(path, card):
    """The torch_save export at `path` in a GPT shaped by `card` (strict: every
    name and shape must match, nothing missing, nothing extra)."""
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except TypeError:  # a torch without weights_only
        state = torch.load(path, map_location="cpu")
    if not isinstance(state, dict):
        raise ValueError(f"{path}: holds a {type(state).__name__}, not a state dict")
    for name, t in state.items():
        if not isinstance(t, torch.Tensor) or t.dtype != torch.float32:
            raise ValueError(f"{path}: entry {name!r} is not a float32 tensor")
    model = model_from_card(card)
    model.load_state_dict(state, strict=True)
    return model.eval()
