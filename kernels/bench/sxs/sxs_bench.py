#!/usr/bin/env python3
"""Side-by-side: FlashMLA's SM90 sparse fp8 decode against mla-plan's sparse decode kernels.

One process, one set of device buffers: the inputs are built once with torch (FlashMLA's own MODEL1
quantiser, tests/quant.py), FlashMLA runs through flash_mla.flash_mla_with_kvcache, mla-plan's
kernels run through the C-ABI shim libsxs_mlaplan.so (sxs_shim.cpp) on the very same data_ptr()s.
Both are timed by the same function: one call captured in a CUDA graph, a 256 MiB buffer zeroed
before every replay (cold L2, as triton.testing.do_bench does), CUDA events around each replay,
median of --replays replays after --warmup untimed ones; every (row, implementation) is timed twice
(pass 1 FlashMLA, split_kv, one_pass, cluster_split; pass 2 in the reverse order).
Correctness: every output (FlashMLA's and each of the three modes of ours) is compared with a
float64 reference computed from the dequantised cache over every request of the batch; the output
buffers of ours are filled with NaN before the checked call (every element must be written).

Shapes (DeepSeek V4 decode, README.md "What it measures"): s_q 1, d_qk 512,
MODEL1 fp8 rows of 584 B; main (window) cache page 64, 256 requests x 1024 tokens, topk 128;
extra (compressed) cache 256 requests x 4096 tokens, page 64 or 32, extra_topk 512; pages in random
order through a block table; indices distinct random positions of the request's tokens; batch b
takes the first b requests. Variable-length rows (the project's docs/perf.md definition): request
r's topk_length uniform in [0, 128], extra_topk_length uniform in [0, 512], both 0 where r % 9 == 4,
every index -1 with probability 1/17.
"""
import argparse
import ctypes
import json
import math
import os
import sys
import time

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
ap = argparse.ArgumentParser()
ap.add_argument("--flashmla", default=os.path.join(HERE, "..", "flashmla"),
                help="FlashMLA checkout with the built flash_mla/cuda*.so")
ap.add_argument("--lib", default=os.path.join(HERE, "bin", "libsxs_mlaplan.so"), help="the shim over mla-plan's kernels")
ap.add_argument("--out", default=os.environ.get("OUT", "."))
ap.add_argument("--replays", type=int, default=300)
ap.add_argument("--warmup", type=int, default=25)
ap.add_argument("--flush-mib", type=int, default=256)
ap.add_argument("--pages", default="64,32", help="extra-cache page sizes (one table each)")
ap.add_argument("--hq", default="64,128")
ap.add_argument("--batches", default="1,8,32,64,128,256")
ap.add_argument("--var", default="37,200", help="variable-length batch sizes")
ap.add_argument("--p32-hq", default="64,128", help="h_q values of the page-32 table")
ap.add_argument("--seed", type=int, default=2026)
ap.add_argument("--var-seeds", default="0", help="seed offsets of the variable-length rows (one row each)")
ap.add_argument("--methods", default="async",
                help="timing methods, the first is the table's: async (do_bench style: replays queued, 256 MiB "
                     "zero_ before each), sync (the project's bench.cpp: cudaMemsetAsync flush, event sync after "
                     "every replay), do_bench (triton.testing.do_bench(graph.replay, 25, 200, median))")
ap.add_argument("--label", default="", help="run label written into the tables")
ap.add_argument("--small", default="",
                help="head counts (8,16) that mla-plan runs unpadded on the small-head kernel against FlashMLA's "
                     "padded 64-head call: each row runs FlashMLA at h_q 64 and ours on the first N heads of the same "
                     "q (vLLM's per-rank shape at TP 8 / TP 4); errors of both over those N heads")
args = ap.parse_args()

fm_root = os.path.abspath(args.flashmla)
sys.path.insert(0, fm_root)
sys.path.insert(0, os.path.join(fm_root, "tests"))
import flash_mla  # noqa: E402
from quant import FP8KVCacheLayout, dequantize_k_cache, quantize_k_cache  # noqa: E402  (the quant module of FlashMLA's tests)

dev = torch.device("cuda")
props = torch.cuda.get_device_properties(dev)
NUM_SMS = props.multi_processor_count
NREQ, MAIN_TOK, EXTRA_TOK = 256, 1024, 4096
TOPK, ETOPK, MAIN_PAGE, D = 128, 512, 64, 512
SCALE = D ** -0.5
MODES = ("split_kv", "one_pass", "cluster_split")

# ------------------------------------------------------------------------------------------------
# The shim over mla-plan's kernels
lib = ctypes.CDLL(os.path.abspath(args.lib))
vp, ci, cll, cf = ctypes.c_void_p, ctypes.c_int, ctypes.c_longlong, ctypes.c_float
lib.sxs_last_error.restype = ctypes.c_char_p
lib.sxs_split_kv_fixed_overhead.restype = ci
lib.sxs_padded_page_stride.argtypes = [ci]
lib.sxs_padded_page_stride.restype = cll
lib.sxs_num_sm_parts.argtypes = [ci, ci, ci]
lib.sxs_num_sm_parts.restype = ci
lib.sxs_o_accum_elems.argtypes = [ci, ci, ci, ci]
lib.sxs_o_accum_elems.restype = cll
lib.sxs_lse_accum_elems.argtypes = [ci, ci, ci, ci]
lib.sxs_lse_accum_elems.restype = cll
lib.sxs_choose_mode.argtypes = [ci, ci, ci, ci, ci, vp, vp, ci, ctypes.POINTER(ci), ctypes.POINTER(ci), ctypes.c_char_p, ci]
lib.sxs_choose_mode.restype = ci
lib.sxs_schedule.argtypes = [ci, ci, vp, ci, vp, ci, ci, vp, vp, vp]
lib.sxs_schedule.restype = ci
lib.sxs_decode.argtypes = [ci, ci, ci, ci, vp,
                           vp, ci, cll, cll, vp, ci, vp,
                           vp, ci, cll, cll, vp, ci, vp, cf,
                           vp, vp, ci,
                           vp, vp, vp, vp, vp, ctypes.c_char_p, ci]
lib.sxs_decode.restype = ci
lib.sxs_memset_async.argtypes = [vp, ci, cll, vp]
lib.sxs_memset_async.restype = ci
METHODS = [m for m in args.methods.split(",") if m]
PRIMARY = METHODS[0]


def check(rc):
    if rc != 0:
        raise RuntimeError("mla-plan shim: " + lib.sxs_last_error().decode())


LOG = []


def log(s=""):
    print(s, flush=True)
    LOG.append(s)


# ------------------------------------------------------------------------------------------------
# Inputs


def make_pool(tok_per_req, page, seed):
    """MODEL1 fp8 cache of NREQ requests x tok_per_req tokens, pages in random order (block table)."""
    g = torch.Generator(device=dev).manual_seed(seed)
    nblocks = NREQ * tok_per_req // page
    src = torch.randn(nblocks, page, 1, D, generator=g, device=dev, dtype=torch.bfloat16) / 10
    kc = quantize_k_cache(src, FP8KVCacheLayout.MODEL1_FP8Sparse)  # (nblocks, page, 1, 584), block stride padded
    del src
    # The 8th byte of each row's scale group is padding (docs/layouts.md of the project: written 0).
    flat = torch.as_strided(kc, (nblocks, kc.stride(0)), (kc.stride(0), 1)).view(torch.uint8)
    flat[:, page * 576: page * 584].view(nblocks, page, 8)[:, :, 7] = 0
    deq = dequantize_k_cache(kc, FP8KVCacheLayout.MODEL1_FP8Sparse).view(-1, D)  # bf16 (exact dequantisation)
    perm = torch.randperm(nblocks, generator=g, device=dev).to(torch.int32)
    block_table = perm.view(NREQ, tok_per_req // page)
    return kc, deq, block_table


def make_indices(block_table, tok_per_req, page, topk, seed):
    """(NREQ, 1, topk) int32: topk distinct random positions of each request, as page*page_size+offset."""
    g = torch.Generator(device=dev).manual_seed(seed)
    pos = torch.rand(NREQ, tok_per_req, generator=g, device=dev).argsort(dim=1)[:, :topk]
    blk = block_table.long().gather(1, pos // page)
    return (blk * page + pos % page).to(torch.int32).view(NREQ, 1, topk).contiguous()


def reference(q, kc_idx, ke_idx, length, elength, deq_main, deq_extra):
    """float64 reference over every request: out (b, 1, h, 512), lse (b, 1, h); empty requests 0 / +inf."""
    b = q.shape[0]
    vm = (kc_idx[:, 0, :] >= 0) & (torch.arange(TOPK, device=dev)[None, :] < length[:, None])
    ve = (ke_idx[:, 0, :] >= 0) & (torch.arange(ETOPK, device=dev)[None, :] < elength[:, None])
    K = torch.cat([deq_main[kc_idx[:, 0, :].clamp_min(0).long()], deq_extra[ke_idx[:, 0, :].clamp_min(0).long()]],
                  dim=1).double()  # (b, 640, 512)
    valid = torch.cat([vm, ve], dim=1)
    s = torch.einsum("bhd,bnd->bhn", q[:, 0].double(), K) * SCALE
    s.masked_fill_(~valid[:, None, :], float("-inf"))
    lse = torch.logsumexp(s, dim=-1)
    empty = ~valid.any(dim=1)
    p = torch.exp(s - lse[..., None])
    p[empty] = 0.0
    o = torch.einsum("bhn,bnd->bhd", p, K)
    lse[empty] = float("inf")
    return o[:, None], lse[:, None], empty


def errors(x, ref):
    x = x.double()
    d = (x - ref).flatten()
    r = ref.flatten()
    xf = x.flatten()
    rel = (d.norm() / r.norm()).item()
    one_minus_cos = (1.0 - (xf @ r) / (xf.norm() * r.norm())).item()
    return {"rel_l2": rel, "one_minus_cos": one_minus_cos, "max_abs": d.abs().max().item(),
            "nan": int(torch.isnan(x).sum().item())}


# ------------------------------------------------------------------------------------------------
# Timing: identical for both implementations

flush = torch.empty(args.flush_mib << 20, dtype=torch.uint8, device=dev)


def capture(fn):
    """One call captured in a CUDA graph (after one eager call: kernel attributes, lazy loading)."""
    fn()
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g, capture_error_mode="relaxed"):
        ret = fn()
    torch.cuda.synchronize()
    return g, ret


def time_graph(g, method="async"):
    if method == "do_bench":
        import triton.testing
        return {"median_us": 1e3 * triton.testing.do_bench(g.replay, warmup=25, rep=200, return_mode="median")}
    if method == "sync":  # kernels/src/runtime/bench.cpp's loop: memset, event, replay, event, wait
        ts = []
        st, en = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        stream = torch.cuda.current_stream().cuda_stream
        for i in range(args.warmup + args.replays):
            check(lib.sxs_memset_async(flush.data_ptr(), i & 0xFF, flush.numel(), stream))
            st.record()
            g.replay()
            en.record()
            en.synchronize()
            if i >= args.warmup:
                ts.append(1e3 * st.elapsed_time(en))
        ts.sort()
        return {"median_us": ts[len(ts) // 2], "min_us": ts[0], "p90_us": ts[int(0.9 * len(ts))]}
    st = [torch.cuda.Event(enable_timing=True) for _ in range(args.replays)]
    en = [torch.cuda.Event(enable_timing=True) for _ in range(args.replays)]
    for _ in range(args.warmup):
        flush.zero_()
        g.replay()
    for i in range(args.replays):
        flush.zero_()
        st[i].record()
        g.replay()
        en[i].record()
    torch.cuda.synchronize()
    t = sorted(1e3 * a.elapsed_time(b) for a, b in zip(st, en))
    return {"median_us": t[len(t) // 2], "min_us": t[0], "p90_us": t[int(0.9 * len(t))]}


def copy_gbps(nbytes=2 << 30, reps=20):
    a = torch.empty(nbytes, dtype=torch.uint8, device=dev).fill_(0x5A)
    b = torch.empty_like(a)
    ts = []
    for i in range(reps + 3):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        b.copy_(a)
        e.record()
        torch.cuda.synchronize()
        if i >= 3:
            ts.append(s.elapsed_time(e))
    ts.sort()
    del a, b
    return 2 * nbytes / (ts[len(ts) // 2] * 1e-3) / 1e9


# ------------------------------------------------------------------------------------------------
# One row


def run_row(h_q, b, var, page, main, extra, row_seed, lens_label, ours_h=None):
    """One row: FlashMLA at h_q heads; ours at ours_h (default h_q) heads: the first ours_h of the same q."""
    ours_h = h_q if ours_h is None else ours_h
    kc_main, deq_main, idx_main_all = main
    kc_extra, deq_extra, idx_extra_all = extra
    gq = torch.Generator(device=dev).manual_seed(row_seed)
    q = torch.randn(b, 1, h_q, D, generator=gq, device=dev, dtype=torch.float32).clamp_(-1, 1).to(torch.bfloat16)
    q_ours = q[:, :, :ours_h].contiguous()
    idx = idx_main_all[:b].clone()
    eidx = idx_extra_all[:b].clone()
    if var:
        gc = torch.Generator().manual_seed(row_seed + 1)
        length = torch.randint(0, TOPK + 1, (b,), generator=gc, dtype=torch.int32)
        elength = torch.randint(0, ETOPK + 1, (b,), generator=gc, dtype=torch.int32)
        empty_rows = torch.arange(b) % 9 == 4
        length[empty_rows] = 0
        elength[empty_rows] = 0
        m1 = (torch.rand(b, 1, TOPK, generator=gc) < 1 / 17).to(dev)
        m2 = (torch.rand(b, 1, ETOPK, generator=gc) < 1 / 17).to(dev)
        idx[m1] = -1
        eidx[m2] = -1
    else:
        length = torch.full((b,), TOPK, dtype=torch.int32)
        elength = torch.full((b,), ETOPK, dtype=torch.int32)
    len_host = length.clone().contiguous()
    elen_host = elength.clone().contiguous()
    len_t = length.to(dev)
    elen_t = elength.to(dev)

    # --- FlashMLA
    sched, _ = flash_mla.get_mla_metadata()

    def fmla():
        return flash_mla.flash_mla_with_kvcache(
            q, kc_main, None, None, D, sched, None, softmax_scale=SCALE, causal=False, is_fp8_kvcache=True,
            indices=idx, attn_sink=None, extra_k_cache=kc_extra, extra_indices_in_kvcache=eidx,
            topk_length=len_t, extra_topk_length=elen_t)

    out_f, lse_f = fmla()  # first call: builds FlashMLA's scheduler metadata (not timed afterwards)
    torch.cuda.synchronize()
    out_f = out_f[:, :, :ours_h].clone()
    lse_f = lse_f.transpose(1, 2)[:, :, :ours_h].clone()  # (b, s_q, ours_h): the heads both compute

    # --- ours: the planner's mode, the split_kv plan (project's scheduler, overhead O), buffers
    mode_c, cl_c = ci(0), ci(0)
    reason = ctypes.create_string_buffer(1024)
    check(lib.sxs_choose_mode(b, 1, ours_h, TOPK, ETOPK, len_host.data_ptr(), elen_host.data_ptr(), NUM_SMS,
                              ctypes.byref(mode_c), ctypes.byref(cl_c), reason, 1024))
    planned = MODES[mode_c.value]
    parts = lib.sxs_num_sm_parts(NUM_SMS, 1, ours_h)
    records = torch.empty(parts, 8, dtype=torch.int32, device=dev)
    num_splits = torch.empty(b + 1, dtype=torch.int32, device=dev)
    check(lib.sxs_schedule(b, TOPK, len_t.data_ptr(), ETOPK, elen_t.data_ptr(), parts,
                           lib.sxs_split_kv_fixed_overhead(), records.data_ptr(), num_splits.data_ptr(),
                           torch.cuda.current_stream().cuda_stream))
    torch.cuda.synchronize()
    splits_h = num_splits.cpu()
    split_requests = int(((splits_h[1:] - splits_h[:-1]) > 1).sum())
    o_acc = torch.empty(lib.sxs_o_accum_elems(b, 1, ours_h, parts), dtype=torch.float32, device=dev)  # fp32 partials
    l_acc = torch.empty(lib.sxs_lse_accum_elems(b, 1, ours_h, parts), dtype=torch.float32, device=dev)
    outs = {m: torch.empty(b, 1, ours_h, D, dtype=torch.bfloat16, device=dev) for m in MODES}
    lses = {m: torch.empty(b, 1, ours_h, dtype=torch.float32, device=dev) for m in MODES}
    desc = {m: ctypes.create_string_buffer(512) for m in MODES}
    main_stride, extra_stride = kc_main.stride(0), kc_extra.stride(0)
    assert main_stride == lib.sxs_padded_page_stride(MAIN_PAGE) and extra_stride == lib.sxs_padded_page_stride(page)

    def ours(m):
        mi = MODES.index(m)

        def call():
            check(lib.sxs_decode(
                mi, b, 1, ours_h, q_ours.data_ptr(),
                kc_main.data_ptr(), MAIN_PAGE, main_stride, kc_main.shape[0], idx.data_ptr(), TOPK, len_t.data_ptr(),
                kc_extra.data_ptr(), page, extra_stride, kc_extra.shape[0], eidx.data_ptr(), ETOPK, elen_t.data_ptr(),
                SCALE, records.data_ptr(), num_splits.data_ptr(), parts,
                outs[m].data_ptr(), lses[m].data_ptr(), o_acc.data_ptr(), l_acc.data_ptr(),
                torch.cuda.current_stream().cuda_stream, desc[m], 512))
        return call

    # --- correctness (eager): outputs of ours poisoned with NaN first
    ref_o, ref_lse, empty = reference(q_ours, idx, eidx, len_t, elen_t, deq_main, deq_extra)
    nonempty = ~empty
    res = {"h_q": h_q, "ours_h": ours_h, "h_label": str(h_q) if ours_h == h_q else f"{ours_h}/{h_q}", "b": b, "lengths": lens_label, "extra_page": page, "planned": planned, "row_seed": row_seed,
           "planned_cluster_ctas": cl_c.value, "plan_reason": reason.value.decode(), "num_sm_parts": parts,
           "split_requests_O1": split_requests, "empty_requests": int(empty.sum().item()),
           "attended_rows_max": int(len_host.clamp(max=TOPK).sum()) + int(elen_host.clamp(max=ETOPK).sum()),
           "kv_bytes": 584 * (int(len_host.clamp(max=TOPK).sum()) + int(elen_host.clamp(max=ETOPK).sum())),
           "err": {}, "lse_maxdiff": {}, "describe": {}, "time": {}}
    res["err"]["flashmla"] = errors(out_f, ref_o)
    res["lse_maxdiff"]["flashmla"] = (lse_f[nonempty] - ref_lse[nonempty]).abs().max().item()
    for m in MODES:
        outs[m].view(torch.int16).fill_(-1)  # 0xFFFF: bf16 NaN
        lses[m].fill_(float("nan"))
        ours(m)()
        torch.cuda.synchronize()
        res["describe"][m] = desc[m].value.decode()
        res["err"][m] = errors(outs[m], ref_o)
        res["err"][m + "_vs_flashmla"] = errors(outs[m], out_f.double())
        res["lse_maxdiff"][m] = (lses[m][nonempty] - ref_lse[nonempty]).abs().max().item()
    del ref_o, ref_lse

    # --- timing: capture each, then two passes in opposite orders
    eager = {m: outs[m].clone() for m in MODES}
    g_f, ret_f = capture(fmla)
    graphs = {"flashmla": g_f}
    for m in MODES:
        graphs[m] = capture(ours(m))[0]
    order = ["flashmla"] + list(MODES)
    for meth in METHODS:
        for rep, seq in ((1, order), (2, order[::-1])):
            if meth == "do_bench" and rep == 2:
                continue
            for name in seq:
                key = f"rep{rep}" if meth == PRIMARY else f"{meth}_rep{rep}"
                res["time"].setdefault(name, {})[key] = time_graph(graphs[name], meth)
    # The graph replays' outputs against the eager calls' (bitwise; max abs difference if not equal).
    res["replay_vs_eager_maxabs"] = {"flashmla": (ret_f[0][:, :, :ours_h].float() - out_f.float()).abs().max().item()}
    for m in MODES:
        res["replay_vs_eager_maxabs"][m] = (outs[m].float() - eager[m].float()).abs().max().item()
    for name in order:
        t = res["time"][name]
        t["us"] = 0.5 * (t["rep1"]["median_us"] + t["rep2"]["median_us"])
        t["spread_pct"] = 100 * abs(t["rep1"]["median_us"] - t["rep2"]["median_us"]) / t["us"]
        for meth in METHODS[1:]:
            reps = [t[k]["median_us"] for k in (f"{meth}_rep1", f"{meth}_rep2") if k in t]
            t[f"{meth}_us"] = sum(reps) / len(reps)
    del graphs, ret_f, g_f
    torch.cuda.synchronize()
    return res


# ------------------------------------------------------------------------------------------------


def fmt_row(r):
    t = r["time"]
    f = t["flashmla"]["us"]
    ours = t[r["planned"]]["us"]
    plan = r["planned"] + (f"x{r['planned_cluster_ctas']}" if r["planned"] == "cluster_split" else "")
    ef, eo, ex = r["err"]["flashmla"], r["err"][r["planned"]], r["err"][r["planned"] + "_vs_flashmla"]
    spread = max(t[n]["spread_pct"] for n in t)
    fastest = min(MODES, key=lambda m: t[m]["us"])
    flag = "" if t[r["planned"]]["us"] <= 1.02 * t[fastest]["us"] else f" fastest={fastest}"
    return (f"{r['h_label']:<5} {r['b']:<5} {r['lengths']:<6} | {f:9.2f} | {ours:9.2f} {plan:<16} | "
            f"{t['split_kv']['us']:9.2f} {t['one_pass']['us']:9.2f} {t['cluster_split']['us']:9.2f} | "
            f"{ours / f:7.3f} | {ef['rel_l2']:.2e}/{ef['one_minus_cos']:.1e}  {eo['rel_l2']:.2e}/{eo['one_minus_cos']:.1e}  "
            f"{ex['rel_l2']:.2e} | {spread:4.1f}% | {r['kv_bytes'] / (ours * 1e-6) / 1e9 / COPY_GBPS * 100:5.1f}%{flag}")


def fmt_method_row(r):
    t = r["time"]
    p = r["planned"]
    def us(name, meth):
        return t[name]["us"] if meth == PRIMARY else t[name][f"{meth}_us"]
    cells = " | ".join(f"{us('flashmla', m):8.2f} {us(p, m):8.2f} {us(p, m) / us('flashmla', m):6.3f}" for m in METHODS)
    return f"{r['h_label']:<5} {r['b']:<5} {r['lengths']:<6} {p:<14} | {cells}"


HEADER = ("h_q   b     lens   | fmla_us   | ours_us   plan             | split_us  onepass   cluster   | "
          "ratio   | fmla err(relL2/1-cos)   ours err(relL2/1-cos)   ours-fmla | spread | KV read / copy rate")
COPY_GBPS = 1.0  # set by main()


def main():
    t0 = time.time()
    facts = {"device": props.name, "sms": NUM_SMS, "cc": f"{props.major}.{props.minor}",
             "l2_bytes": getattr(props, "L2_cache_size", None), "mem_bytes": props.total_memory,
             "torch": torch.__version__, "cuda": torch.version.cuda, "flashmla": "9241ae3 (sm_90a build)",
             "replays": args.replays, "warmup": args.warmup, "flush_mib": args.flush_mib,
             "split_kv_fixed_overhead": lib.sxs_split_kv_fixed_overhead()}
    facts["copy_gbps"] = copy_gbps()
    global COPY_GBPS
    COPY_GBPS = facts["copy_gbps"]
    log(f"device {props.name}, {NUM_SMS} SMs, cc {props.major}.{props.minor}; torch {torch.__version__}; "
        f"copy {facts['copy_gbps']:.0f} GB/s (2 GiB d2d, read+write, median of 20)")
    log(f"timing: CUDA graph of one call, {args.flush_mib} MiB zeroed before each replay, median of "
        f"{args.replays} replays after {args.warmup}; each row timed twice (orders F,S,O,C then C,O,S,F), us = mean of the two medians")

    main = make_pool(MAIN_TOK, MAIN_PAGE, args.seed)
    main_idx = make_indices(main[2], MAIN_TOK, MAIN_PAGE, TOPK, args.seed + 1)
    main_t = (main[0], main[1], main_idx)
    log(f"main pool: {main[0].shape[0]} pages x {main[0].stride(0)} B (page {MAIN_PAGE}) [{time.time() - t0:.1f}s]")
    all_rows = []
    for page in [int(x) for x in args.pages.split(",") if x]:
        extra = make_pool(EXTRA_TOK, page, args.seed + 10 + page)
        extra_idx = make_indices(extra[2], EXTRA_TOK, page, ETOPK, args.seed + 11 + page)
        extra_t = (extra[0], extra[1], extra_idx)
        hqs = [int(x) for x in (args.hq if page == 64 else args.p32_hq).split(",") if x]
        lines = [f"device {props.name}, {NUM_SMS} SMs, cc {props.major}.{props.minor}",
                 f"pools: main {main[0].shape[0]} pages x {main[0].stride(0)} B, extra {extra[0].shape[0]} pages x "
                 f"{extra[0].stride(0)} B (page {page})" + (f"; run {args.label}" if args.label else ""),
                 "", HEADER]
        log("")
        log(f"== extra page {page} [{time.time() - t0:.1f}s]")
        log(HEADER)
        smalls = [int(x) for x in args.small.split(",") if x]
        # (FlashMLA's h_q, ours' h_q): the small head counts run against FlashMLA's padded 64 heads.
        pairs = [(h, h) for h in hqs] + [(64, s) for s in smalls]
        rows = [(h, oh, b, -1) for h, oh in pairs for b in [int(x) for x in args.batches.split(",") if x]]
        rows += [(h, oh, b, int(v)) for v in args.var_seeds.split(",") if v
                 for b in [int(x) for x in args.var.split(",") if x] for h, oh in pairs]
        for k, (h, oh, b, vs) in enumerate(rows):
            var = vs >= 0
            seed = args.seed + 1000 * (h // 64) + 7 * b + (500 + 100 * vs if var else 0)
            r = run_row(h, b, var, page, main_t, extra_t, seed, ("var" + (str(vs) if vs > 0 else "")) if var else "full",
                        ours_h=oh)
            all_rows.append(r)
            line = fmt_row(r)
            lines.append(line)
            log(line)
        lines.append("done")
        with open(os.path.join(args.out, f"sxs_p{page}.txt"), "w") as f:
            f.write("\n".join(lines) + "\n")
        if len(METHODS) > 1:
            mh = (f"{'h_q':<4} {'b':<5} {'lens':<6} {'planned':<14} | " +
                  " | ".join(f"{m + ': fmla':>8} {'ours':>8} {'ratio':>6}" for m in METHODS))
            mlines = [f"timing-method comparison, extra page {page} (us; ours = the planned mode)", mh]
            mlines += [fmt_method_row(r) for r in all_rows if r["extra_page"] == page]
            with open(os.path.join(args.out, f"sxs_methods_p{page}.txt"), "w") as f:
                f.write("\n".join(mlines) + "\n")
            for x in mlines:
                log(x)
        del extra, extra_t, extra_idx
        torch.cuda.empty_cache()
    facts["seconds"] = time.time() - t0
    with open(os.path.join(args.out, "sxs.json"), "w") as f:
        json.dump({"facts": facts, "rows": all_rows}, f, indent=1)
    # Plan choices and launches, for the record
    log("")
    log("launches (as the shim reported them, first row of each shape):")
    for r in all_rows:
        log(f"  h{r['h_label']} b{r['b']} {r['lengths']} p{r['extra_page']}: planned {r['planned']} "
            f"({r['plan_reason']}); " + " | ".join(f"{m}: {r['describe'][m]}" for m in MODES))
    rmax = max(max(r["replay_vs_eager_maxabs"].values()) for r in all_rows)
    log(f"graph replay outputs vs eager outputs, max abs difference over all rows and implementations: {rmax}")
    worst = {k: max(r["err"][k]["rel_l2"] for r in all_rows) for k in ["flashmla"] + list(MODES)}
    nans = sum(r["err"][k]["nan"] for r in all_rows for k in ["flashmla"] + list(MODES))
    log(f"worst rel L2 vs float64 reference: {worst}; NaNs in outputs: {nans}; "
        f"worst lse diff: { {k: max(r['lse_maxdiff'][k] for r in all_rows) for k in ['flashmla'] + list(MODES)} }")
    log(f"total {time.time() - t0:.1f}s")


if __name__ == "__main__":
    main()
