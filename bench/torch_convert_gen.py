#!/usr/bin/python3
"""torch_convert_gen.py OUT [GB] - a llama-shaped fp32 state dict of about GB
gigabytes (default 1.3) saved with torch.save, for bench/torch_convert.sh."""
import sys

import torch

gb = float(sys.argv[2]) if len(sys.argv) > 2 else 1.3
d, ff, vocab = 1024, 2816, 32000
per_layer = 4 * d * d + 3 * d * ff + 2 * d
n_layers = max(1, int((gb * 1e9 / 4 - 2 * vocab * d - d) / per_layer))
g = torch.Generator().manual_seed(0)
sd = {"model.embed_tokens.weight": torch.randn(vocab, d, generator=g)}
for i in range(n_layers):
    p = f"model.layers.{i}."
    for n in ("q_proj", "k_proj", "v_proj", "o_proj"):
        sd[p + f"self_attn.{n}.weight"] = torch.randn(d, d, generator=g)
    sd[p + "mlp.gate_proj.weight"] = torch.randn(ff, d, generator=g)
    sd[p + "mlp.up_proj.weight"] = torch.randn(ff, d, generator=g)
    sd[p + "mlp.down_proj.weight"] = torch.randn(d, ff, generator=g)
    sd[p + "input_layernorm.weight"] = torch.ones(d)
    sd[p + "post_attention_layernorm.weight"] = torch.ones(d)
sd["model.norm.weight"] = torch.ones(d)
sd["lm_head.weight"] = torch.randn(vocab, d, generator=g)
torch.save(sd, sys.argv[1])
print(f"{sys.argv[1]}: {n_layers} layers, {sum(t.numel() * 4 for t in sd.values()) / 1e9:.2f} GB of tensors")
