#!/usr/bin/env python3
"""One layer's relative attention core, two ways, on a CUDA device.

  unfused: the ops of model/relative_attention.cc (RelativeAttentionCore):
           content and position products, rel shift, segment term, fp32
           mask + softmax + dropout, probs x values.
  sdpa:    the position and segment terms (shifted, scaled, masked) as an
           additive bias of torch's scaled_dot_product_attention, which
           fuses q.k, softmax, dropout and probs x values (memory-efficient
           backend; it returns the bias gradient).

Prints forward and backward agreement (fp32 and bf16, dropout 0), which SDPA
backend accepts the bias, and forward+backward time and peak memory of each
way at the base preset's sizes for the content (Lq = L) and query (Lq = P)
streams. A probe to decide whether `train.attention: sdpa` is worth building;
the model-level figures come from xlnet-bench.

    python3 bench/sdpa_probe.py [--batch 32] [--steps 20]

Needs torch >= 2.1 with CUDA.
"""
import argparse
import math

import torch
import torch.nn.functional as F


def rel_shift(x, klen):
    b, h, lq, r = x.shape
    y = x.reshape(b, h, r, lq)[:, :, 1:, :].reshape(b, h, lq, r - 1)
    return y[..., :klen]


def rel_shift_at(x, pos, qlen, klen):
    b, h, p, r = x.shape
    j = torch.arange(klen, device=x.device)
    index = (j.view(1, 1, klen) + qlen - pos.unsqueeze(2))  # [B, P, K]
    return x.gather(3, index.unsqueeze(1).expand(b, h, p, klen))


def position_and_segment(q, k_r, r_r, r_s, seg_embed, seg_diff, pos, qlen,
                         klen):
    h, dh = r_r.shape
    hd = lambda t: t.view(1, h, 1, dh)
    bd = torch.matmul(q + hd(r_r), k_r.transpose(2, 3))
    bd = rel_shift_at(bd, pos, qlen, klen) if pos is not None else rel_shift(
        bd, klen)
    e = torch.matmul(q + hd(r_s), seg_embed.permute(1, 2, 0))  # [B,H,Lq,2]
    return bd + torch.where(seg_diff, e[..., 1:2], e[..., 0:1])


def unfused(q, k, v, k_r, r_w, r_r, r_s, seg_embed, seg_diff, mask, pos, qlen,
            p):
    h, dh = r_w.shape
    ac = torch.matmul(q + r_w.view(1, h, 1, dh), k.transpose(2, 3))
    score = ac + position_and_segment(q, k_r, r_r, r_s, seg_embed, seg_diff,
                                      pos, qlen, k.shape[2])
    score = score.float() * (1.0 / math.sqrt(dh))
    score = score.masked_fill(mask, -1e30)
    prob = F.dropout(torch.softmax(score, 3), p)
    return torch.matmul(prob.to(v.dtype), v)


def sdpa(q, k, v, k_r, r_w, r_r, r_s, seg_embed, seg_diff, mask, pos, qlen, p):
    h, dh = r_w.shape
    scale = 1.0 / math.sqrt(dh)
    bias = position_and_segment(q, k_r, r_r, r_s, seg_embed, seg_diff, pos,
                                qlen, k.shape[2]) * scale
    bias = bias.masked_fill(mask, -1e30 if q.dtype != torch.half else -6.5e4)
    return F.scaled_dot_product_attention(q + r_w.view(1, h, 1, dh), k, v,
                                          attn_mask=bias, dropout_p=p,
                                          scale=scale)


def make(b, h, lq, klen, dh, dtype, query_stream, seed=0):
    g = torch.Generator(device="cuda").manual_seed(seed)
    dev = "cuda"
    qlen = 512 if query_stream else lq
    r = klen + qlen
    t = lambda *s: (torch.randn(*s, generator=g, device=dev) * 0.5).to(dtype)
    args = dict(q=t(b, h, lq, dh), k=t(b, h, klen, dh), v=t(b, h, klen, dh),
                k_r=t(b, h, r, dh), r_w=t(h, dh), r_r=t(h, dh), r_s=t(h, dh),
                seg_embed=t(2, h, dh))
    for a in args.values():
        a.requires_grad_(True)
    seg_diff = torch.rand(b, 1, lq, klen, generator=g, device=dev) < 0.3
    mask = torch.rand(b, 1, lq, klen, generator=g, device=dev) < 0.2
    pos = (torch.randint(0, qlen, (b, lq), generator=g, device=dev).sort(1)[0]
           if query_stream else None)
    return args, dict(seg_diff=seg_diff, mask=mask, pos=pos, qlen=qlen)


def grads(fn, args, fixed, p=0.0, seed=1):
    for a in args.values():
        a.grad = None
    out = fn(**args, **fixed, p=p)
    g = torch.Generator(device="cuda").manual_seed(seed)
    dout = torch.randn(out.shape, generator=g, device="cuda").to(out.dtype)
    out.backward(dout)
    return out.detach().float(), {n: a.grad.float() for n, a in args.items()}


def agreement(dtype, query_stream):
    args, fixed = make(2, 4, 24 if query_stream else 40, 56, 64, dtype,
                       query_stream)
    o1, g1 = grads(unfused, args, fixed)
    o2, g2 = grads(sdpa, args, fixed)
    rel = lambda a, b: ((a - b).abs().max() / b.abs().max().clamp_min(1e-12)
                        ).item()
    worst = max(rel(g2[n], g1[n]) for n in g1)
    print(f"  {str(dtype):15s} {'query' if query_stream else 'content'}: "
          f"output max rel diff {rel(o2, o1):.2e}, worst gradient {worst:.2e}")


def backends(dtype):
    from torch.nn.attention import SDPBackend, sdpa_kernel
    args, fixed = make(2, 4, 64, 128, 64, dtype, False)
    for be in (SDPBackend.CUDNN_ATTENTION, SDPBackend.EFFICIENT_ATTENTION,
               SDPBackend.FLASH_ATTENTION):
        try:
            with sdpa_kernel([be]):
                grads(sdpa, args, fixed, p=0.1)
            print(f"  {str(dtype):15s} {be.name}: forward+backward ok")
        except RuntimeError as e:
            print(f"  {str(dtype):15s} {be.name}: refused "
                  f"({str(e).splitlines()[0][:90]})")


def timing(fn, b, lq, query_stream, dtype, steps, p):
    args, fixed = make(b, 12, lq, 896, 64, dtype, query_stream)
    torch.cuda.synchronize()
    for _ in range(3):
        grads(fn, args, fixed, p=p)
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    base = torch.cuda.memory_allocated()
    start, end = (torch.cuda.Event(enable_timing=True) for _ in range(2))
    start.record()
    for _ in range(steps):
        grads(fn, args, fixed, p=p)
    end.record()
    torch.cuda.synchronize()
    ms = start.elapsed_time(end) / steps
    peak = (torch.cuda.max_memory_allocated() - base) / 2**20
    return ms, peak


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--profile", action="store_true",
                    help="only print the kernels of each way (bf16 content)")
    a = ap.parse_args()
    if a.profile:
        for name, fn in (("unfused", unfused), ("sdpa", sdpa)):
            args, fixed = make(a.batch, 12, 512, 896, 64, torch.bfloat16,
                               False)
            for _ in range(3):
                grads(fn, args, fixed, p=0.1)
            torch.cuda.synchronize()
            with torch.profiler.profile(activities=[
                    torch.profiler.ProfilerActivity.CUDA]) as prof:
                for _ in range(5):
                    grads(fn, args, fixed, p=0.1)
                torch.cuda.synchronize()
            print(f"== {name} (5 forward+backward)")
            print(prof.key_averages().table(sort_by="cuda_time_total",
                                            row_limit=25, max_name_column_width=70))
        return
    print(f"torch {torch.__version__}, {torch.cuda.get_device_name()}")
    print("agreement, sdpa vs unfused, dropout 0:")
    for dtype in (torch.float32, torch.bfloat16):
        for qs in (False, True):
            agreement(dtype, qs)
    print("backends that take a bias with gradient, dropout 0.1:")
    for dtype in (torch.float32, torch.bfloat16):
        backends(dtype)
    print(f"one layer's core, forward+backward, batch {a.batch}, H 12, K 896,"
          f" Dh 64, dropout 0.1:")
    for dtype in (torch.bfloat16, torch.float32):
        for qs, lq in ((False, 512), (True, 85)):
            res = {}
            for name, fn in (("unfused", unfused), ("sdpa", sdpa)):
                res[name] = timing(fn, a.batch, lq, qs, dtype, a.steps, 0.1)
            (t1, m1), (t2, m2) = res["unfused"], res["sdpa"]
            print(f"  {str(dtype):15s} {'query' if qs else 'content'} Lq {lq}:"
                  f" unfused {t1:7.2f} ms {m1:7.0f} MiB | sdpa {t2:7.2f} ms "
                  f"{m2:7.0f} MiB | {t1 / t2:.2f}x")


if __name__ == "__main__":
    main()
