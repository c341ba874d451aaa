"""Model definitions written once against a library module: ``build_gpt(lib, cfg)`` and
``build_cnn(lib)`` return classes built from ``lib.nn`` so the same source runs as
``import tensorplay as torch`` and as PyTorch itself."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

__all__ = ["GPTConfig", "build_gpt", "build_cnn", "build_attention_classifier"]


@dataclass
class GPTConfig:
    block_size: int = 16
    vocab_size: int = 61
    n_layer: int = 2
    n_head: int = 4
    n_embd: int = 32
    dropout: float = 0.0
    bias: bool = True
    use_sdpa: bool = False  # F.scaled_dot_product_attention(is_causal=True) instead of a tril mask


def build_gpt(torch: Any, config: GPTConfig) -> Any:
    """A nanoGPT-style decoder built from ``torch.nn`` (either library); returns an instance."""
    nn = torch.nn
    F = torch.nn.functional

    class CausalSelfAttention(nn.Module):
        def __init__(self, config):
            super().__init__()
            assert config.n_embd % config.n_head == 0
            self.c_attn = nn.Linear(config.n_embd, 3 * config.n_embd, bias=config.bias)
            self.c_proj = nn.Linear(config.n_embd, config.n_embd, bias=config.bias)
            self.attn_dropout = nn.Dropout(config.dropout)
            self.resid_dropout = nn.Dropout(config.dropout)
            self.n_head = config.n_head
            self.n_embd = config.n_embd
            self.dropout = config.dropout
            self.flash = config.use_sdpa
            if not self.flash:
                self.register_buffer("bias", torch.tril(torch.ones(config.block_size, config.block_size))
                                     .view(1, 1, config.block_size, config.block_size))

        def forward(self, x):
            B, T, C = x.size()
            q, k, v = self.c_attn(x).split(self.n_embd, dim=2)
            k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
            q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
            v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
            if self.flash:
                y = F.scaled_dot_product_attention(
                    q, k, v, attn_mask=None, dropout_p=self.dropout if self.training else 0,
                    is_causal=True)
            else:
                att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
                att = att.masked_fill(self.bias[:, :, :T, :T] == 0, float("-inf"))
                att = F.softmax(att, dim=-1)
                att = self.attn_dropout(att)
                y = att @ v
            y = y.transpose(1, 2).contiguous().view(B, T, C)
            return self.resid_dropout(self.c_proj(y))

    class MLP(nn.Module):
        def __init__(self, config):
            super().__init__()
            self.c_fc = nn.Linear(config.n_embd, 4 * config.n_embd, bias=config.bias)
            self.gelu = nn.GELU()
            self.c_proj = nn.Linear(4 * config.n_embd, config.n_embd, bias=config.bias)
            self.dropout = nn.Dropout(config.dropout)

        def forward(self, x):
            return self.dropout(self.c_proj(self.gelu(self.c_fc(x))))

    class Block(nn.Module):
        def __init__(self, config):
            super().__init__()
            self.ln_1 = nn.LayerNorm(config.n_embd, bias=config.bias)
            self.attn = CausalSelfAttention(config)
            self.ln_2 = nn.LayerNorm(config.n_embd, bias=config.bias)
            self.mlp = MLP(config)

        def forward(self, x):
            x = x + self.attn(self.ln_1(x))
            return x + self.mlp(self.ln_2(x))

    class GPT(nn.Module):
        def __init__(self, config):
            super().__init__()
            self.config = config
            self.transformer = nn.ModuleDict(dict(
                wte=nn.Embedding(config.vocab_size, config.n_embd),
                wpe=nn.Embedding(config.block_size, config.n_embd),
                drop=nn.Dropout(config.dropout),
                h=nn.ModuleList([Block(config) for _ in range(config.n_layer)]),
                ln_f=nn.LayerNorm(config.n_embd, bias=config.bias),
            ))
            self.lm_head = nn.Linear(config.n_embd, config.vocab_size, bias=False)
            self.transformer.wte.weight = self.lm_head.weight  # weight tying
            self.apply(self._init_weights)
            for pn, p in self.named_parameters():
                if pn.endswith("c_proj.weight"):
                    torch.nn.init.normal_(p, mean=0.0, std=0.02 / math.sqrt(2 * config.n_layer))

        def _init_weights(self, module):
            if isinstance(module, nn.Linear):
                torch.nn.init.normal_(module.weight, mean=0.0, std=0.02)
                if module.bias is not None:
                    torch.nn.init.zeros_(module.bias)
            elif isinstance(module, nn.Embedding):
                torch.nn.init.normal_(module.weight, mean=0.0, std=0.02)

        def get_num_params(self, non_embedding=True):
            n = sum(p.numel() for p in self.parameters())
            if non_embedding:
                n -= self.transformer.wpe.weight.numel()
            return n

        def forward(self, idx, targets=None):
            b, t = idx.size()
            assert t <= self.config.block_size, f"sequence of length {t} exceeds {self.config.block_size}"
            pos = torch.arange(0, t, dtype=torch.long, device=idx.device)
            tok_emb = self.transformer.wte(idx)
            pos_emb = self.transformer.wpe(pos)
            x = self.transformer.drop(tok_emb + pos_emb)
            for block in self.transformer.h:
                x = block(x)
            x = self.transformer.ln_f(x)
            if targets is not None:
                logits = self.lm_head(x)
                loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1),
                                       ignore_index=-1)
            else:
                logits = self.lm_head(x[:, [-1], :])
                loss = None
            return logits, loss

        def generate(self, idx, max_new_tokens):
            """Greedy decoding: append the most likely next token ``max_new_tokens`` times."""
            for _ in range(max_new_tokens):
                idx_cond = idx if idx.size(1) <= self.config.block_size \
                    else idx[:, -self.config.block_size:]
                logits, _ = self(idx_cond)
                idx_next = logits[:, -1, :].argmax(dim=-1, keepdim=True)
                idx = torch.cat((idx, idx_next), dim=1)
            return idx

    return GPT(config)


def build_cnn(torch: Any) -> Any:
    """A small MNIST-style CNN built from ``torch.nn`` (either library); returns an instance
    taking ``(N, 1, 12, 12)`` images to log-probabilities over 10 classes."""
    nn = torch.nn
    F = torch.nn.functional

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.features = nn.Sequential(
                nn.Conv2d(1, 8, kernel_size=3, padding=1),
                nn.ReLU(),
                nn.MaxPool2d(2),
                nn.Conv2d(8, 16, 3, stride=1),
                nn.ReLU(),
                nn.AvgPool2d(2),
            )
            self.flatten = nn.Flatten()
            self.fc1 = nn.Linear(16 * 2 * 2, 32)
            self.dropout = nn.Dropout(0.25)
            self.fc2 = nn.Linear(32, 10)

        def forward(self, x):
            x = self.features(x)
            x = self.flatten(x)
            x = F.relu(self.fc1(x))
            x = self.dropout(x)
            return F.log_softmax(self.fc2(x), dim=1)

    return Net()


def build_attention_classifier(torch: Any, vocab: int = 30, dim: int = 16, heads: int = 4,
                               classes: int = 3) -> Any:
    """Token classifier around ``nn.MultiheadAttention`` (batch first, key padding mask):
    returns an instance taking ``(tokens, padding_mask)`` to class logits."""
    nn = torch.nn

    class AttentionClassifier(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = nn.Embedding(vocab, dim, padding_idx=0)
            self.attn = nn.MultiheadAttention(dim, heads, batch_first=True)
            self.norm = nn.LayerNorm(dim)
            self.head = nn.Sequential(nn.Linear(dim, dim), nn.SiLU(), nn.Linear(dim, classes))

        def forward(self, tokens, padding_mask):
            x = self.embed(tokens)
            attended, weights = self.attn(x, x, x, key_padding_mask=padding_mask)
            x = self.norm(x + attended)
            keep = (~padding_mask).unsqueeze(-1).to(x.dtype)
            pooled = (x * keep).sum(dim=1) / keep.sum(dim=1)
            return self.head(pooled), weights

    return AttentionClassifier()
