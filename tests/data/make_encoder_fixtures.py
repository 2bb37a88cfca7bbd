#!/usr/bin/python3
"""make_encoder_fixtures.py: PyTorch's own numbers for the encoder tests (tests/data/encoder/).

Run with Debian's PyTorch 1.13 (apt-get install -y python3-torch), from the repository root:
    /usr/bin/python3 tests/data/make_encoder_fixtures.py
The tests read the JSON files this writes; they never need PyTorch.

Each case file is a valid `qkv encode` input (x, config, layers: state_dict names of one
layer) plus "expected": PyTorch's results. Inputs and weights are drawn in float32 (so float32
and float64 runs start from the same numbers, exactly); expected values are the float64 run
(float64 section) and the float32 run (float32 section), every layer's intermediates included:
  attention_weights (nhead, T, T), attention_output (T, d), hidden (T, d) (after the first
  sublayer), feed_forward_output (T, d), output (T, d).
The layers run in training mode with dropout 0: PyTorch's math path (in eval mode under no_grad
it takes the fused "fast path", torch._transformer_encoder_layer_fwd, which rounds differently
and, inside nn.TransformerEncoder with a padding mask, goes through a nested tensor and returns
only the first rows, up to the longest unpadded length: measured, a (1, 5, 8) input with 2
padding tokens gives a (1, 3, 8) output there, the same 3 rows as the math path to the bit).

Also writes positional.json: the sinusoidal encoding of 100 positions x 8 dimensions, float64,
computed as the PyTorch tutorial does (div_term = exp(arange(0, d, 2) * -(log(10000) / d))),
and example_08.json: the small case of examples/08_encoder_layer.cpp (seeded weights).
"""
import json
import math
import os
import sys

import torch
from torch import nn

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, 'encoder')


def number(v, dtype):
    if math.isinf(v) and v < 0:
        return None
    if dtype == torch.float32:
        # shortest decimal of the double equal to the float: reads back to the same float bits
        return float(repr(float(v)))
    return float(v)


def nested(t):
    if t.dim() == 0:
        return number(t.item(), t.dtype)
    return [nested(e) for e in t]


def tensor(t):
    t = t.detach()
    name = {torch.float32: 'float32', torch.float64: 'float64', torch.bool: 'bool'}[t.dtype]
    if t.dtype == torch.bool:
        data = t.tolist()
    else:
        data = nested(t)
    return {'dtype': name, 'shape': list(t.shape), 'data': data}


def layer_state(layer):
    return {k: tensor(v) for k, v in layer.state_dict().items()}


def steps(layer, x, causal_mask, padding):
    """the layer's forward pass split into its steps, with the layer's own modules; checked
    against layer(x) below"""
    a = layer.norm1(x) if layer.norm_first else x
    sa, w = layer.self_attn(a, a, a, attn_mask=causal_mask, key_padding_mask=padding,
                            need_weights=True, average_attn_weights=False)
    if layer.norm_first:
        h = x + sa
        f_in = layer.norm2(h)
    else:
        h = layer.norm1(x + sa)
        f_in = h
    ff = layer.linear2(layer.activation(layer.linear1(f_in)))
    out = h + ff if layer.norm_first else layer.norm2(h + ff)
    return {'attention_weights': w[0], 'attention_output': sa[0], 'hidden': h[0],
            'feed_forward_output': ff[0], 'output': out[0]}


def run(layers, x, causal, padding):
    """every layer's steps, for a (T, d) input; the layers must already be in x's dtype"""
    T = x.shape[0]
    mask = nn.Transformer.generate_square_subsequent_mask(T).to(x.dtype) if causal else None
    pad = torch.tensor([padding]) if padding is not None else None
    h = x[None]
    per_layer = []
    for layer in layers:
        s = steps(layer, h, mask, pad)
        direct = layer(h, src_mask=mask, src_key_padding_mask=pad)
        assert torch.equal(direct[0], s['output']), 'the split steps differ from layer(x)'
        per_layer.append(s)
        h = s['output'][None]
    # the same through nn.TransformerEncoder (no final norm)
    enc = nn.TransformerEncoder(layers[0], num_layers=len(layers), enable_nested_tensor=False)
    for l, layer in enumerate(layers):
        enc.layers[l].load_state_dict(layer.state_dict())
    enc.train()
    whole = enc(x[None], mask=mask, src_key_padding_mask=pad)
    assert torch.equal(whole[0], per_layer[-1]['output']), 'nn.TransformerEncoder differs'
    return per_layer


def make_case(name, seed, d_model, nhead, dim_ff, T, activation, norm_first, causal, padding,
              num_layers=1, eps=1e-5, x_scale=1.0):
    torch.manual_seed(seed)
    layers = []
    for _ in range(num_layers):
        layer = nn.TransformerEncoderLayer(d_model, nhead, dim_ff, dropout=0.0, activation=activation,
                                           layer_norm_eps=eps, batch_first=True, norm_first=norm_first)
        # LayerNorm starts at weight 1, bias 0; give them values so that the affine part is tested
        with torch.no_grad():
            for norm in (layer.norm1, layer.norm2):
                norm.weight.copy_(1 + 0.1 * torch.randn(d_model))
                norm.bias.copy_(0.1 * torch.randn(d_model))
            # nn.MultiheadAttention starts its biases at 0; make them count
            layer.self_attn.in_proj_bias.copy_(0.1 * torch.randn(3 * d_model))
            layer.self_attn.out_proj.bias.copy_(0.1 * torch.randn(d_model))
        layer.train()  # the math path (dropout is 0, so training mode changes nothing else)
        layers.append(layer)
    x = x_scale * torch.randn(T, d_model)
    case = {
        'config': {'d_model': d_model, 'nhead': nhead, 'dim_feedforward': dim_ff, 'activation': activation,
                   'norm_first': norm_first, 'layer_norm_eps': eps, 'causal': causal},
        'x': tensor(x),
        'layers': [layer_state(layer) for layer in layers],
        'expected': {},
    }
    if padding is not None:
        case['config']['key_padding'] = padding
    for dtype, section in ((torch.float64, 'float64'), (torch.float32, 'float32')):
        ls = [nn.TransformerEncoderLayer(d_model, nhead, dim_ff, dropout=0.0, activation=activation,
                                         layer_norm_eps=eps, batch_first=True, norm_first=norm_first)
              for _ in layers]
        for l, layer in zip(ls, layers):
            l.load_state_dict(layer.state_dict())
            l.to(dtype)
            l.train()
        with torch.no_grad():
            per_layer = run(ls, x.to(dtype), causal, padding)
        case['expected'][section] = {
            'layers': [{k: tensor(v) for k, v in s.items()} for s in per_layer],
            'output': tensor(per_layer[-1]['output']),
        }
    path = os.path.join(OUT, name + '.json')
    with open(path, 'w') as f:
        json.dump(case, f, separators=(',', ':'))
        f.write('\n')
    print(f'{path}: {os.path.getsize(path)} bytes')


def positional():
    d, n = 8, 100
    pe = torch.zeros(n, d, dtype=torch.float64)
    position = torch.arange(0, n, dtype=torch.float64).unsqueeze(1)
    div_term = torch.exp(torch.arange(0, d, 2, dtype=torch.float64) * (-math.log(10000.0) / d))
    pe[:, 0::2] = torch.sin(position * div_term)
    pe[:, 1::2] = torch.cos(position * div_term)
    path = os.path.join(OUT, 'positional.json')
    with open(path, 'w') as f:
        json.dump({'positional_encoding': tensor(pe)}, f, separators=(',', ':'))
        f.write('\n')
    print(f'{path}: {os.path.getsize(path)} bytes')


def example_08():
    """examples/08_encoder_layer.cpp: torch.manual_seed(0), one nn.TransformerEncoderLayer as
    PyTorch draws it (LayerNorms 1 and 0), then x = torch.randn(1, T, d_model); the layer and a
    2-layer nn.TransformerEncoder of copies of it, float64 from the same float32 numbers"""
    out = {}
    for name, (d, h, f, t) in {'small': (4, 2, 8, 3), 'realistic': (512, 8, 2048, 64)}.items():
        torch.manual_seed(0)
        layer = nn.TransformerEncoderLayer(d, h, f, dropout=0.0, batch_first=True)
        x = torch.randn(1, t, d)
        layer.train()
        case = {}
        if name == 'small':
            case['x'] = tensor(x[0])
            case['layer'] = layer_state(layer)
        for dtype, section in ((torch.float64, 'float64'), (torch.float32, 'float32')):
            l = nn.TransformerEncoderLayer(d, h, f, dropout=0.0, batch_first=True)
            l.load_state_dict(layer.state_dict())
            l.to(dtype).train()
            enc = nn.TransformerEncoder(l, num_layers=2, enable_nested_tensor=False).to(dtype).train()
            with torch.no_grad():
                one = l(x.to(dtype))[0]
                two = enc(x.to(dtype))[0]
            if name == 'small':
                case[section] = {'layer_output': tensor(one), 'stack_output': tensor(two)}
            else:
                case[section] = {'layer_output_first_rows': tensor(one[:2, :8]),
                                 'layer_output_last_row': tensor(one[-1:, :8]),
                                 'stack_output_first_rows': tensor(two[:2, :8])}
        out[name] = case
    path = os.path.join(OUT, 'example_08.json')
    with open(path, 'w') as fh:
        json.dump(out, fh, indent=1)
        fh.write('\n')
    print(f'{path}: {os.path.getsize(path)} bytes')


def main():
    assert torch.__version__.startswith('1.13'), 'the fixtures are PyTorch 1.13\'s numbers'
    torch.set_num_threads(1)
    os.makedirs(OUT, exist_ok=True)
    #          name                      seed d  H  f   T  act     norm_first causal padding
    make_case('post_norm_relu',          1,   8, 2, 16, 5, 'relu', False, False, None)
    make_case('post_norm_gelu_causal',   2,   8, 2, 16, 5, 'gelu', False, True, None)
    make_case('pre_norm_relu_padding',   3,   8, 2, 16, 5, 'relu', True, False, [False, False, False, True, True])
    make_case('pre_norm_gelu_causal_padding', 4, 8, 4, 16, 5, 'gelu', True, True, [False, False, False, False, True])
    make_case('post_norm_gelu_padding_two_layers', 5, 8, 2, 16, 6, 'gelu', False, False,
              [False, False, False, False, True, True], num_layers=2)
    make_case('pre_norm_relu_causal_two_layers', 6, 8, 2, 16, 6, 'relu', True, True, None, num_layers=2)
    positional()
    example_08()
    return 0


if __name__ == '__main__':
    sys.exit(main())
