#!/usr/bin/env python3
"""Checks a causal (attn_type "uni") XLNetLMHeadModel export against transformers.

  check_hf_lm.py MODEL_DIR --xlnet_run BIN [--segments 3] [--seq_len 12]
                 [--batch 2] [--seed 0] [--max_diff 1e-5]

Feeds random token ids, segment after segment, to xlnet.cpp (`xlnet-run`,
fp32 on the CPU) and to transformers' XLNetLMHeadModel loaded from
MODEL_DIR, each carrying its own memory from one segment to the next
(`mems.i` out of one xlnet-run call into the next; `mems=` / `use_mems=True`
in transformers). Every segment's logits [B, L, V] and new memory must agree
within --max_diff (absolute), so the two compute the same causal language
model with the same cache: what `xlnet-lm` and a Transformer-XL-style
evaluation rely on. Exits 1 when a check fails. Needs torch, transformers
and safetensors.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

import torch
import transformers
from safetensors.torch import load_file, save_file


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("model_dir")
    p.add_argument("--xlnet_run", required=True, help="the xlnet-run binary")
    p.add_argument("--segments", type=int, default=3)
    p.add_argument("--seq_len", type=int, default=12)
    p.add_argument("--batch", type=int, default=2)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--max_diff", type=float, default=1e-5)
    args = p.parse_args()

    with open(os.path.join(args.model_dir, "config.json")) as f:
        config = json.load(f)
    if config.get("attn_type") != "uni":
        print(f"check_hf_lm: {args.model_dir}/config.json has attn_type "
              f"{config.get('attn_type')!r}, not 'uni' (a causal LM)")
        return 1
    model = transformers.XLNetLMHeadModel.from_pretrained(args.model_dir)
    model.eval()
    n_layer = model.config.n_layer

    gen = torch.Generator().manual_seed(args.seed)
    ours_mems, hf_mems = None, None
    worst = 0.0
    failures = 0
    with tempfile.TemporaryDirectory() as tmp:
        for seg in range(args.segments):
            # Ids above the special pieces (0..8), as text would give.
            ids = torch.randint(9, model.config.vocab_size,
                                (args.batch, args.seq_len), generator=gen)
            inputs = {"input_ids": ids}
            if ours_mems is not None:
                for i, m in enumerate(ours_mems):
                    inputs[f"mems.{i}"] = m.contiguous()
            in_path = os.path.join(tmp, f"in{seg}.safetensors")
            out_path = os.path.join(tmp, f"out{seg}.safetensors")
            save_file(inputs, in_path)
            r = subprocess.run(
                [args.xlnet_run, "--model", args.model_dir, "--inputs",
                 in_path, "--outputs", out_path, "--threads", "1"],
                capture_output=True, text=True)
            if r.returncode != 0:
                print(f"check_hf_lm: xlnet-run failed:\n{r.stdout}{r.stderr}")
                return 1
            out = load_file(out_path)
            ours_mems = [out[f"mems.{i}"] for i in range(n_layer)]
            with torch.no_grad():
                hf = model(input_ids=ids, mems=hf_mems, use_mems=True)
            hf_mems = hf.mems
            checks = [("logits", out["logits"], hf.logits)]
            checks += [(f"mems.{i}", ours_mems[i], hf_mems[i])
                       for i in range(n_layer)]
            for name, a, b in checks:
                if a.shape != b.shape:
                    print(f"check_hf_lm: segment {seg} {name}: shape "
                          f"{list(a.shape)} vs transformers' {list(b.shape)}")
                    failures += 1
                    continue
                diff = (a.double() - b.double()).abs().max().item()
                worst = max(worst, diff)
                if diff > args.max_diff:
                    print(f"check_hf_lm: segment {seg} {name}: max |diff| "
                          f"{diff:.3g} > {args.max_diff:g}")
                    failures += 1
    mem = ours_mems[0].shape[0]
    print(f"check_hf_lm: {args.model_dir}: {args.segments} segments of "
          f"{args.seq_len} (batch {args.batch}, memory {mem}), logits and "
          f"memory within {worst:.3g} of transformers "
          f"{transformers.__version__}: {'FAILED' if failures else 'ok'}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
