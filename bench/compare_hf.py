#!/usr/bin/env python3
"""xlnet-bench against HuggingFace's XLNetLMHeadModel, one invocation.

Runs `xlnet-bench` with the given config and overrides, reads the fully
resolved config from its JSON, then times the same training step in
PyTorch + transformers: same model sizes, dtype (autocast), device, thread
count, global batch, grad_accum_steps, seq_len, num_predict, memory
(mem_len/reuse_len, mems carried between steps), AdamW and clipping.
Prints both tokens/s and the ratio.

    python3 bench/compare_hf.py --config configs/small.yaml --steps 5 \\
        [--set train.attention=tiled ...] [--bench build/bin/xlnet-bench]

Needs torch, transformers and pyyaml (transformers depends on it). HF's
inputs are synthetic permutation-LM batches (random ids; P random targets
that no position may see, as a masked-LM perm_mask), not xlnet-bench's
sampler output: the shapes and so the FLOPs are the same, the data is not.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time


def _yaml_loader(yaml):
    """A SafeLoader that also reads exponent floats without a dot (1e-12)
    as numbers: PyYAML follows YAML 1.1, where they are strings, while
    yaml-cpp (which wrote the config) and YAML 1.2 read them as floats."""
    import re

    class Loader(yaml.SafeLoader):
        pass

    Loader.add_implicit_resolver(
        "tag:yaml.org,2002:float",
        re.compile(r"^[-+]?[0-9][0-9_]*(?:\.[0-9_]*)?[eE][-+]?[0-9]+$"),
        list("-+0123456789"))
    return Loader


def hf_step_seconds(ours, steps, warmup):
    import torch
    import transformers
    import yaml

    cfg = yaml.load(ours["config_yaml"], Loader=_yaml_loader(yaml))
    m, d, t = cfg["model"], cfg["data"], cfg["train"]
    device = torch.device(t["device"])
    if device.type == "cpu":
        torch.set_num_threads(ours["threads"])
    torch.manual_seed(t["seed"])
    keys = ["vocab_size", "d_model", "n_layer", "n_head", "d_inner",
            "ff_activation", "untie_r", "attn_type", "bi_data", "clamp_len",
            "same_length", "mem_len", "reuse_len", "dropout",
            "layer_norm_eps", "initializer_range"]
    model = transformers.XLNetLMHeadModel(
        transformers.XLNetConfig(**{k: m[k] for k in keys if k in m}))
    model.to(device).train()
    opt = torch.optim.AdamW(
        model.parameters(), lr=t["lr"], betas=(t["adam_beta1"], t["adam_beta2"]),
        eps=t["adam_epsilon"], weight_decay=t["weight_decay"])
    dtype = {"fp32": None, "bf16": torch.bfloat16, "fp16": torch.float16}[
        t["dtype"]]
    scaler = torch.cuda.amp.GradScaler() if t["dtype"] == "fp16" else None
    accum = t["grad_accum_steps"]
    b, l, p = t["batch_size"] // accum, d["seq_len"], d["num_predict"]
    use_mems = (m.get("mem_len") or 0) > 0

    def batch():
        ids = torch.randint(0, m["vocab_size"], (b, l), device=device)
        targets = torch.rand(b, l, device=device).argsort(1)[:, :p]  # [B, P]
        perm = torch.zeros(b, l, l, device=device)
        perm.scatter_(2, targets.unsqueeze(1).expand(b, l, p), 1.0)
        mapping = torch.zeros(b, p, l, device=device)
        mapping.scatter_(2, targets.unsqueeze(2), 1.0)
        return ids, perm, mapping, ids.gather(1, targets)

    def sync():
        if device.type == "cuda":
            torch.cuda.synchronize(device)

    mems, times = None, []
    for step in range(warmup + steps):
        sync()
        start = time.perf_counter()
        for _ in range(accum):
            ids, perm, mapping, labels = batch()
            with torch.autocast(device.type, dtype=dtype,
                                enabled=dtype is not None):
                out = model(input_ids=ids, perm_mask=perm,
                            target_mapping=mapping, labels=labels, mems=mems,
                            use_mems=use_mems)
            loss = out.loss / accum
            (scaler.scale(loss) if scaler else loss).backward()
            mems = out.mems if use_mems else None
        if scaler:
            scaler.unscale_(opt)
        if t["clip"] > 0:
            torch.nn.utils.clip_grad_norm_(model.parameters(), t["clip"])
        if scaler:
            scaler.step(opt)
            scaler.update()
        else:
            opt.step()
        opt.zero_grad(set_to_none=True)
        sync()
        if step >= warmup:
            times.append(time.perf_counter() - start)
    return statistics.median(times), transformers.__version__, torch.__version__


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", required=True)
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--set", action="append", default=[],
                    help="section.key=value, passed to xlnet-bench")
    ap.add_argument("--bench", default="build/bin/xlnet-bench")
    args = ap.parse_args()
    try:
        import torch  # noqa: F401
        import transformers  # noqa: F401
        import yaml  # noqa: F401
    except ImportError as e:
        sys.exit(f"compare_hf.py: needs torch, transformers and pyyaml ({e}); "
                 "pip install torch transformers pyyaml")

    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "ours.json")
        cmd = [args.bench, "--config", args.config, "--steps", str(args.steps),
               "--warmup", str(args.warmup), "--json", out]
        for s in args.set:
            cmd += ["--set", s]
        subprocess.run(cmd, check=True)
        with open(out) as f:
            ours = json.load(f)
    hf_seconds, tf_version, torch_version = hf_step_seconds(
        ours, args.steps, args.warmup)
    tokens = ours["config"]["batch_size"] * ours["config"]["seq_len"]
    hf_tps = tokens / hf_seconds
    print(f"config {args.config} {' '.join(args.set)}: device "
          f"{ours['device']}, dtype {ours['config']['dtype']}, "
          f"{ours['threads']} threads, global batch "
          f"{ours['config']['batch_size']} x {ours['config']['seq_len']}")
    print(f"xlnet.cpp ({ours['runtime']}): {ours['tokens_per_sec']:.1f} "
          f"tokens/s (median step {ours['step_seconds_median']:.3f} s)")
    print(f"HF transformers {tf_version}, torch {torch_version}: "
          f"{hf_tps:.1f} tokens/s (median step {hf_seconds:.3f} s)")
    print(f"ratio xlnet.cpp / HF: {ours['tokens_per_sec'] / hf_tps:.2f}x")


if __name__ == "__main__":
    main()
