"""Transformer layers: ``TransformerEncoderLayer``, ``TransformerEncoder``,
``TransformerDecoderLayer``, ``TransformerDecoder`` and ``Transformer``, composed of
``MultiheadAttention``, ``Linear``, ``LayerNorm`` and ``Dropout`` with PyTorch's parameter
names, so a PyTorch ``state_dict`` loads as it is."""

from __future__ import annotations

import copy
import math
from typing import Any, Callable

from ..._grad_mode import is_grad_enabled
from ...dialects.tp import dtypes as dt
from ...dialects.tp.errors import ShapeError
from ...ops import creation
from ...ops import elementwise
from ...ops import indexing
from ...ops import reduction
from ...ops import shape as shape_ops
from .. import functional as F
from .. import init
from .activation import GELU, MultiheadAttention, ReLU
from .container import ModuleList
from .dropout import Dropout
from .linear import Linear
from .module import Module
from .normalization import LayerNorm

__all__ = [
    "Transformer", "TransformerEncoder", "TransformerDecoder", "TransformerEncoderLayer",
    "TransformerDecoderLayer",
]


def _generate_square_subsequent_mask(sz: int, device: Any = None, dtype: Any = None) -> Any:
    """A float (sz, sz) causal mask: 0 on and below the diagonal, -inf above it."""
    return indexing.triu(creation.full((sz, sz), -math.inf, dtype=dtype, device=device), 1)


def _get_clones(module: Module, n: int) -> ModuleList:
    return ModuleList([copy.deepcopy(module) for _ in range(n)])


def _activation_fn(activation: Any, where: str) -> Callable[[Any], Any]:
    if isinstance(activation, str):
        if activation == "relu":
            return F.relu
        if activation == "gelu":
            return F.gelu
        raise ValueError(f"{where}: activation should be relu/gelu, not {activation!r}")
    if not callable(activation):
        raise TypeError(f"{where}: activation must be 'relu', 'gelu' or a callable, got "
                        f"{type(activation).__name__}")
    return activation


def _relu_or_gelu(activation: Any) -> int:
    """1 for ReLU, 2 for exact GELU, 0 otherwise (PyTorch's ``activation_relu_or_gelu``)."""
    if activation is F.relu or isinstance(activation, ReLU):
        return 1
    if activation is F.gelu or isinstance(activation, GELU):
        return 2
    return 0


def _check_batch_first_encoder_layer(layer: Any) -> str:
    """Why PyTorch would not run ``layer`` stacks on nested tensors ('' when it would)."""
    if not isinstance(layer, TransformerEncoderLayer):
        return "encoder_layer was not TransformerEncoderLayer"
    if layer.norm_first:
        return "encoder_layer.norm_first was True"
    attn = layer.self_attn
    if not attn.batch_first:
        return "encoder_layer.self_attn.batch_first was not True"
    if not attn._qkv_same_embed_dim:
        return "encoder_layer.self_attn._qkv_same_embed_dim was not True"
    if attn.in_proj_bias is None:
        return "encoder_layer.self_attn was passed bias=False"
    if not layer.activation_relu_or_gelu:
        return "encoder_layer.activation_relu_or_gelu was not True"
    if layer.norm1.eps != layer.norm2.eps:
        return "encoder_layer.norm1.eps was not equal to encoder_layer.norm2.eps"
    if attn.num_heads % 2 == 1:
        return "encoder_layer.self_attn.num_heads is odd"
    return ""


class TransformerEncoderLayer(Module):
    """Self-attention then a feed-forward network (``linear1`` → activation → ``linear2``),
    each with dropout, a residual connection and a ``LayerNorm``: after the residual
    (``norm_first=False``, the default) or on the block's input (``norm_first=True``).
    Inputs are ``(S, N, E)``, ``(N, S, E)`` with ``batch_first``, or unbatched ``(S, E)``."""

    def __init__(self, d_model: int, nhead: int, dim_feedforward: int = 2048, dropout: float = 0.1,
                 activation: str | Callable[[Any], Any] = F.relu, layer_norm_eps: float = 1e-5,
                 batch_first: bool = False, norm_first: bool = False, bias: bool = True,
                 device: Any = None, dtype: Any = None) -> None:
        super().__init__()
        kw = {"device": device, "dtype": dtype}
        self.self_attn = MultiheadAttention(d_model, nhead, dropout=dropout, bias=bias,
                                            batch_first=batch_first, **kw)
        self.linear1 = Linear(d_model, dim_feedforward, bias=bias, **kw)
        self.dropout = Dropout(dropout)
        self.linear2 = Linear(dim_feedforward, d_model, bias=bias, **kw)
        self.norm_first = norm_first
        self.norm1 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **kw)
        self.norm2 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **kw)
        self.dropout1 = Dropout(dropout)
        self.dropout2 = Dropout(dropout)
        activation = _activation_fn(activation, "TransformerEncoderLayer")
        self.activation_relu_or_gelu = _relu_or_gelu(activation)
        self.activation = activation

    def forward(self, src: Any, src_mask: Any = None, src_key_padding_mask: Any = None,
                is_causal: bool = False) -> Any:
        x = src
        if self.norm_first:
            x = elementwise.add(x, self._sa_block(self.norm1(x), src_mask, src_key_padding_mask, is_causal))
            x = elementwise.add(x, self._ff_block(self.norm2(x)))
        else:
            x = self.norm1(elementwise.add(x, self._sa_block(x, src_mask, src_key_padding_mask, is_causal)))
            x = self.norm2(elementwise.add(x, self._ff_block(x)))
        return x

    def _sa_block(self, x: Any, attn_mask: Any, key_padding_mask: Any, is_causal: bool) -> Any:
        x = self.self_attn(x, x, x, attn_mask=attn_mask, key_padding_mask=key_padding_mask,
                           need_weights=False, is_causal=is_causal)[0]
        return self.dropout1(x)

    def _ff_block(self, x: Any) -> Any:
        x = self.linear2(self.dropout(self.activation(self.linear1(x))))
        return self.dropout2(x)


class TransformerDecoderLayer(Module):
    """Self-attention over the target, attention from the target to ``memory`` (the encoder's
    output), then a feed-forward network; each block has dropout, a residual connection and a
    ``LayerNorm`` (``norm1``..``norm3``), placed as in :class:`TransformerEncoderLayer`."""

    def __init__(self, d_model: int, nhead: int, dim_feedforward: int = 2048, dropout: float = 0.1,
                 activation: str | Callable[[Any], Any] = F.relu, layer_norm_eps: float = 1e-5,
                 batch_first: bool = False, norm_first: bool = False, bias: bool = True,
                 device: Any = None, dtype: Any = None) -> None:
        super().__init__()
        kw = {"device": device, "dtype": dtype}
        self.self_attn = MultiheadAttention(d_model, nhead, dropout=dropout, bias=bias,
                                            batch_first=batch_first, **kw)
        self.multihead_attn = MultiheadAttention(d_model, nhead, dropout=dropout, bias=bias,
                                                 batch_first=batch_first, **kw)
        self.linear1 = Linear(d_model, dim_feedforward, bias=bias, **kw)
        self.dropout = Dropout(dropout)
        self.linear2 = Linear(dim_feedforward, d_model, bias=bias, **kw)
        self.norm_first = norm_first
        self.norm1 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **kw)
        self.norm2 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **kw)
        self.norm3 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **kw)
        self.dropout1 = Dropout(dropout)
        self.dropout2 = Dropout(dropout)
        self.dropout3 = Dropout(dropout)
        self.activation = _activation_fn(activation, "TransformerDecoderLayer")

    def forward(self, tgt: Any, memory: Any, tgt_mask: Any = None, memory_mask: Any = None,
                tgt_key_padding_mask: Any = None, memory_key_padding_mask: Any = None,
                tgt_is_causal: bool = False, memory_is_causal: bool = False) -> Any:
        x = tgt
        if self.norm_first:
            x = elementwise.add(x, self._sa_block(self.norm1(x), tgt_mask, tgt_key_padding_mask, tgt_is_causal))
            x = elementwise.add(x, self._mha_block(self.norm2(x), memory, memory_mask,
                                         memory_key_padding_mask, memory_is_causal))
            x = elementwise.add(x, self._ff_block(self.norm3(x)))
        else:
            x = self.norm1(elementwise.add(x, self._sa_block(x, tgt_mask, tgt_key_padding_mask, tgt_is_causal)))
            x = self.norm2(elementwise.add(x, self._mha_block(x, memory, memory_mask, memory_key_padding_mask,
                                                    memory_is_causal)))
            x = self.norm3(elementwise.add(x, self._ff_block(x)))
        return x

    def _sa_block(self, x: Any, attn_mask: Any, key_padding_mask: Any, is_causal: bool) -> Any:
        x = self.self_attn(x, x, x, attn_mask=attn_mask, key_padding_mask=key_padding_mask,
                           is_causal=is_causal, need_weights=False)[0]
        return self.dropout1(x)

    def _mha_block(self, x: Any, mem: Any, attn_mask: Any, key_padding_mask: Any,
                   is_causal: bool) -> Any:
        x = self.multihead_attn(x, mem, mem, attn_mask=attn_mask, key_padding_mask=key_padding_mask,
                                is_causal=is_causal, need_weights=False)[0]
        return self.dropout2(x)

    def _ff_block(self, x: Any) -> Any:
        x = self.linear2(self.dropout(self.activation(self.linear1(x))))
        return self.dropout3(x)


class TransformerEncoder(Module):
    """``num_layers`` deep copies of ``encoder_layer`` (``layers.0`` ... ``layers.{n-1}``)
    applied in turn, then ``norm`` if given.

    ``enable_nested_tensor`` and ``mask_check`` are kept as PyTorch keeps them. Where PyTorch
    runs the stack on nested tensors (eval mode, no gradient recorded, a batch-first post-norm
    ReLU/GELU layer with an even number of heads, a ``src_key_padding_mask`` whose padding is
    at the end of each row, no ``mask``), the padded positions come out as zeros before
    ``norm``, as there; the other positions are the same either way."""

    def __init__(self, encoder_layer: Module, num_layers: int, norm: Module | None = None,
                 enable_nested_tensor: bool = True, mask_check: bool = True) -> None:
        super().__init__()
        self.layers = _get_clones(encoder_layer, num_layers)
        self.num_layers = num_layers
        self.norm = norm
        self.enable_nested_tensor = enable_nested_tensor
        self.use_nested_tensor = enable_nested_tensor and not _check_batch_first_encoder_layer(
            encoder_layer)
        self.mask_check = mask_check

    def forward(self, src: Any, mask: Any = None, src_key_padding_mask: Any = None,
                is_causal: bool | None = None) -> Any:
        output = src
        for mod in self.layers:
            output = mod(output, src_mask=mask, is_causal=bool(is_causal),
                         src_key_padding_mask=src_key_padding_mask)
        if self._zeroes_padding(src, mask, src_key_padding_mask):
            output = self._zero_padding(output, src_key_padding_mask)
        if self.norm is not None:
            output = self.norm(output)
        return output

    def _zeroes_padding(self, src: Any, mask: Any, padding: Any) -> bool:
        if not self.use_nested_tensor or padding is None or mask is not None or src.ndim != 3:
            return False
        first = self.layers[0]
        if first.training:
            return False
        layer_tensors = [src] + [p for p in first.parameters()]
        return not (is_grad_enabled() and any(getattr(t, "requires_grad", False) for t in layer_tensors))

    def _zero_padding(self, output: Any, padding: Any) -> Any:
        pad = padding if padding.dtype is dt.bool_ else elementwise.ne(padding, 0)
        if self.mask_check and pad.shape[1] > 1:  # padding only at the end of each row
            kept = elementwise.logical_not(pad)
            aligned = elementwise.logical_not(reduction.any(elementwise.logical_and(
                shape_ops.narrow(kept, 1, 1, kept.shape[1] - 1),
                elementwise.logical_not(shape_ops.narrow(kept, 1, 0, kept.shape[1] - 1)))))
            pad = elementwise.logical_and(pad, aligned)
        return indexing.masked_fill(output, shape_ops.unsqueeze(pad, -1), 0.0)


class TransformerDecoder(Module):
    """``num_layers`` deep copies of ``decoder_layer`` applied in turn to the target, each
    attending to ``memory``, then ``norm`` if given."""

    def __init__(self, decoder_layer: Module, num_layers: int, norm: Module | None = None) -> None:
        super().__init__()
        self.layers = _get_clones(decoder_layer, num_layers)
        self.num_layers = num_layers
        self.norm = norm

    def forward(self, tgt: Any, memory: Any, tgt_mask: Any = None, memory_mask: Any = None,
                tgt_key_padding_mask: Any = None, memory_key_padding_mask: Any = None,
                tgt_is_causal: bool | None = None, memory_is_causal: bool = False) -> Any:
        output = tgt
        for mod in self.layers:
            output = mod(output, memory, tgt_mask=tgt_mask, memory_mask=memory_mask,
                         tgt_key_padding_mask=tgt_key_padding_mask,
                         memory_key_padding_mask=memory_key_padding_mask,
                         tgt_is_causal=bool(tgt_is_causal), memory_is_causal=memory_is_causal)
        if self.norm is not None:
            output = self.norm(output)
        return output


class Transformer(Module):
    """An encoder-decoder transformer: ``encoder`` (a :class:`TransformerEncoder` of
    ``num_encoder_layers`` layers and a final ``LayerNorm``) reads ``src``; ``decoder`` (a
    :class:`TransformerDecoder` of ``num_decoder_layers`` layers and a final ``LayerNorm``)
    reads ``tgt`` and attends to the encoder's output. Every parameter with more than one dim
    starts Xavier-uniform. ``custom_encoder``/``custom_decoder`` replace the stacks."""

    def __init__(self, d_model: int = 512, nhead: int = 8, num_encoder_layers: int = 6,
                 num_decoder_layers: int = 6, dim_feedforward: int = 2048, dropout: float = 0.1,
                 activation: str | Callable[[Any], Any] = F.relu, custom_encoder: Any = None,
                 custom_decoder: Any = None, layer_norm_eps: float = 1e-5, batch_first: bool = False,
                 norm_first: bool = False, bias: bool = True, device: Any = None,
                 dtype: Any = None) -> None:
        super().__init__()
        kw = {"device": device, "dtype": dtype}
        if custom_encoder is not None:
            self.encoder = custom_encoder
        else:
            layer = TransformerEncoderLayer(d_model, nhead, dim_feedforward, dropout, activation,
                                            layer_norm_eps, batch_first, norm_first, bias, **kw)
            self.encoder = TransformerEncoder(layer, num_encoder_layers,
                                              LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **kw))
        if custom_decoder is not None:
            self.decoder = custom_decoder
        else:
            layer = TransformerDecoderLayer(d_model, nhead, dim_feedforward, dropout, activation,
                                            layer_norm_eps, batch_first, norm_first, bias, **kw)
            self.decoder = TransformerDecoder(layer, num_decoder_layers,
                                              LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **kw))
        self._reset_parameters()
        self.d_model = d_model
        self.nhead = nhead
        self.batch_first = batch_first

    def forward(self, src: Any, tgt: Any, src_mask: Any = None, tgt_mask: Any = None,
                memory_mask: Any = None, src_key_padding_mask: Any = None,
                tgt_key_padding_mask: Any = None, memory_key_padding_mask: Any = None,
                src_is_causal: bool | None = None, tgt_is_causal: bool | None = None,
                memory_is_causal: bool = False) -> Any:
        if src.ndim == 3:
            batch = 0 if self.batch_first else 1
            if src.shape[batch] != tgt.shape[batch]:
                raise ShapeError(f"Transformer: the batch number of src and tgt must be equal, got "
                                 f"{src.shape[batch]} and {tgt.shape[batch]}")
        if src.shape[-1] != self.d_model or tgt.shape[-1] != self.d_model:
            raise ShapeError(f"Transformer: the feature number of src and tgt must be equal to "
                             f"d_model ({self.d_model}), got {src.shape[-1]} and {tgt.shape[-1]}")
        memory = self.encoder(src, mask=src_mask, src_key_padding_mask=src_key_padding_mask,
                              is_causal=src_is_causal)
        return self.decoder(tgt, memory, tgt_mask=tgt_mask, memory_mask=memory_mask,
                            tgt_key_padding_mask=tgt_key_padding_mask,
                            memory_key_padding_mask=memory_key_padding_mask,
                            tgt_is_causal=tgt_is_causal, memory_is_causal=memory_is_causal)

    @staticmethod
    def generate_square_subsequent_mask(sz: int, device: Any = None, dtype: Any = None) -> Any:
        """A float (sz, sz) causal mask for ``tgt_mask``: 0 where position i may attend to
        position j (j <= i), -inf above the diagonal."""
        return _generate_square_subsequent_mask(sz, device=device, dtype=dtype)

    def _reset_parameters(self) -> None:
        for p in self.parameters():
            if p.ndim > 1:
                init.xavier_uniform_(p)
