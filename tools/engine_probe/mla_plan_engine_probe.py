#!/usr/bin/env python3
"""mla-plan's engine probe: run an engine's own sparse-MLA decode op on a case bundle.

`mla-plan verify CONFIG --engine-kernels [PYTHON]` writes one case bundle per cell (a directory
with manifest.json and raw little-endian .bin files: docs/verify.md, "The case bundle") and runs
this file under PYTHON:

    PYTHON mla_plan_engine_probe.py --bundle DIR [--engine-path DIR ...] [--route vllm|flash_mla]

The probe imports PyTorch and the engine's op library (vLLM's FlashMLA ops, torch.ops._flashmla_C,
else the `flash_mla` package), reads the op's schema and adapts the call to it, runs the op once on
exactly the bundle's bytes, times it as `mla-plan bench` times its own kernels (one call captured
in a CUDA graph, the L2 flushed by a memset before every replay, median of the replays), and
writes into DIR:

    result.json                  status, message, what was looked for and where, engine, timing
    out.bin, lse.bin             the engine's output [b, s_q, h_q, d_v] bf16 and lse [b, s_q, h_q] fp32
    tile_scheduler_metadata.bin  the engine's scheduler plan [num_sm_parts, 8] int32 (when returned)
    num_splits.bin               [b + 1] int32 (when returned)

It does not judge the numbers: mla-plan compares them with its host reference and its plan.
status is one of ok, no_torch, no_engine, schema_mismatch, unsupported_gpu, bad_bundle, error.
The exit code is 0 when result.json was written (whatever the status), 2 when it could not be.

It never downloads or installs anything, and it imports nothing but the standard library until
it needs PyTorch (so that its tests run without it). For tests, MLAPLAN_ENGINE_PROBE_FAKE names a
Python file that stands in for the engine and PyTorch (tests/engine_probe/fake_engine.py).
"""

import argparse
import ctypes
import glob
import importlib
import importlib.util
import inspect
import json
import math
import os
import platform
import sys
import traceback
from array import array

BUNDLE_SCHEMA = "mla-plan/engine-bundle/1"
RESULT_SCHEMA = "mla-plan/engine-result/1"
STATUSES = ("ok", "no_torch", "no_engine", "schema_mismatch", "unsupported_gpu", "bad_bundle", "error")
DTYPE_BYTES = {"bfloat16": 2, "float32": 4, "int32": 4, "uint8": 1}

# The bundle's tensors under the names the engines' ops give them (vLLM's _flashmla_C schema first,
# then the flash_mla package's Python wrapper).
ALIASES = {
    "q": ("q",),
    "kv": ("kv", "k_cache", "kcache"),
    "indices": ("indices", "indices_in_kvcache"),
    "topk_length": ("topk_length",),
    "attn_sink": ("attn_sink",),
    "tile_scheduler_metadata": ("tile_scheduler_metadata", "sched_meta"),
    "num_splits": ("num_splits",),
    "extra_kv": ("extra_kv", "extra_k_cache"),
    "extra_indices": ("extra_indices", "extra_indices_in_kvcache"),
    "extra_topk_length": ("extra_topk_length",),
    "d_v": ("d_v", "head_dim_v", "head_size_v", "dv"),
    "sm_scale": ("sm_scale", "softmax_scale"),
    # flash_mla_with_kvcache only
    "block_table": ("block_table",),
    "cache_seqlens": ("cache_seqlens",),
    "causal": ("causal", "is_causal"),
    "is_fp8_kvcache": ("is_fp8_kvcache",),
    "out": ("out",),
}
NAME_OF = {alias: key for key, names in ALIASES.items() for alias in names}


class Stop(Exception):
    """Ends the probe with a status other than ok."""

    def __init__(self, status, message, looked_for=None, where=None):
        super().__init__(message)
        self.status = status
        self.message = message
        self.looked_for = looked_for or []
        self.where = where or []


# ------------------------------------------------------------------------------------------------
# The bundle


class HostTensor:
    """Raw little-endian bytes with a dtype and a shape (the bundle's tensors, before PyTorch)."""

    def __init__(self, data, dtype, shape):
        self.data = bytes(data)
        self.dtype = dtype
        self.shape = [int(x) for x in shape]

    def numel(self):
        n = 1
        for x in self.shape:
            n *= x
        return n

    def transpose(self, d0, d1):
        """The tensor with dims d0 and d1 swapped, its bytes reordered (3-d only: lse)."""
        if len(self.shape) != 3 or sorted((d0, d1)) != [1, 2]:
            raise ValueError("HostTensor.transpose: 3-d tensors, dims 1 and 2 only")
        a, b, c = self.shape
        size = DTYPE_BYTES[self.dtype]
        out = bytearray(len(self.data))
        for i in range(a):
            for j in range(b):
                for k in range(c):
                    src = ((i * b + j) * c + k) * size
                    dst = ((i * c + k) * b + j) * size
                    out[dst:dst + size] = self.data[src:src + size]
        return HostTensor(out, self.dtype, [a, c, b])


def _int32s(data):
    a = array("i")
    a.frombytes(data)
    if sys.byteorder != "little":
        a.byteswap()
    return a


def read_bundle(bundle):
    """The manifest and the tensors of a bundle, checked: Stop(bad_bundle) naming what is wrong."""
    path = os.path.join(bundle, "manifest.json")
    try:
        with open(path, encoding="utf-8") as f:
            m = json.load(f)
    except (OSError, ValueError) as e:
        raise Stop("bad_bundle", "cannot read %s: %s" % (path, e), ["manifest.json"], [bundle])
    if m.get("schema") != BUNDLE_SCHEMA:
        raise Stop("bad_bundle", "%s: schema %r, this probe reads %r" % (path, m.get("schema"), BUNDLE_SCHEMA),
                   ["manifest.json"], [bundle])
    tensors = {}
    for name, spec in m.get("files", {}).items():
        fpath = os.path.join(bundle, spec["file"])
        size = DTYPE_BYTES.get(spec["dtype"])
        if size is None:
            raise Stop("bad_bundle", "%s: dtype %r is not one of %s" % (name, spec["dtype"], sorted(DTYPE_BYTES)))
        want = size
        for x in spec["shape"]:
            want *= int(x)
        if want != int(spec["bytes"]):
            raise Stop("bad_bundle", "%s: shape %s of %s is %d bytes, the manifest says %d" %
                       (name, spec["shape"], spec["dtype"], want, spec["bytes"]))
        try:
            with open(fpath, "rb") as f:
                f.seek(int(spec.get("offset", 0)))
                data = f.read(want)
        except OSError as e:
            raise Stop("bad_bundle", "cannot read %s: %s" % (fpath, e), [spec["file"]], [bundle])
        if len(data) != want:
            raise Stop("bad_bundle", "%s holds %d bytes from offset %d, the manifest says %d" %
                       (fpath, len(data), int(spec.get("offset", 0)), want))
        tensors[name] = HostTensor(data, spec["dtype"], spec["shape"])
    for need in ("q", "kv", "indices", "topk_length"):
        if need not in tensors:
            raise Stop("bad_bundle", "the manifest lists no %r file" % need)
    # The engines' decode kernels do not bounds-check indices: an index past the cache would fault
    # the process's CUDA context. Every index is -1 or a row of its cache.
    for cache, idx in (("main", "indices"), ("extra", "extra_indices")):
        if idx not in tensors:
            continue
        c = m[cache]
        rows = int(c["num_pages"]) * int(c["page_block_size"])
        vals = _int32s(tensors[idx].data)
        bad = [v for v in (min(vals, default=-1), max(vals, default=-1)) if v < -1 or v >= rows]
        if bad:
            raise Stop("bad_bundle", "%s holds %d, outside -1..%d (%s cache of %d rows)" % (idx, bad[0], rows - 1,
                                                                                              cache, rows))
    return m, tensors


# ------------------------------------------------------------------------------------------------
# Schemas: what the op takes, and the call built for it


class Param:
    def __init__(self, name, required, type_text=""):
        self.name = name
        self.required = required
        self.type_text = type_text


def _split_top(text):
    """Splits at commas outside brackets."""
    parts, depth, cur = [], 0, ""
    for ch in text:
        if ch in "([":
            depth += 1
        elif ch in ")]":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
        else:
            cur += ch
    if cur.strip():
        parts.append(cur)
    return [p.strip() for p in parts if p.strip()]


def parse_op_schema(schema):
    """The parameters and the number of returns of a PyTorch op schema string
    ("ns::op(Tensor q, Tensor? x=None, int d_v, ...) -> (Tensor, Tensor, ...)")."""
    try:
        head, rets = schema.split("->", 1) if "->" in schema else (schema, "")
        args = head[head.index("(") + 1:head.rindex(")")]
    except ValueError:
        raise Stop("schema_mismatch", "cannot read the op's schema: %r" % schema)
    params = []
    for a in _split_top(args):
        if a == "*":
            continue
        decl, _, default = a.partition("=")
        bits = decl.split()
        if len(bits) < 2:
            raise Stop("schema_mismatch", "cannot read the argument %r of the op's schema: %r" % (a, schema))
        type_text, name = " ".join(bits[:-1]), bits[-1]
        required = not default and "?" not in type_text
        params.append(Param(name, required, type_text))
    rets = rets.strip()
    if rets.startswith("(") and rets.endswith(")"):
        n_returns = len(_split_top(rets[1:-1]))
    elif rets:
        n_returns = 1
    else:
        n_returns = 0
    return params, n_returns


def signature_params(fn):
    """The parameters of a Python function (the flash_mla package's wrapper)."""
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError) as e:
        raise Stop("schema_mismatch", "cannot read the signature of %r: %s" % (fn, e))
    out = []
    for p in sig.parameters.values():
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            continue
        out.append(Param(p.name, p.default is inspect.Parameter.empty, str(p.annotation)))
    return out


def build_call(params, values, what):
    """The positional arguments of a call of `params` with the bundle's `values` (logical names):
    Stop(schema_mismatch) for a required parameter the bundle has nothing for, or a value the
    bundle has (an extra cache) that the op takes no parameter for."""
    args, used = [], set()
    for p in params:
        key = NAME_OF.get(p.name)
        if key is not None and key in values:
            args.append(values[key])
            used.add(key)
        elif p.required:
            raise Stop("schema_mismatch", "%s takes a required argument %r (%s) that mla-plan's bundle has no value for"
                       % (what, p.name, p.type_text))
        else:
            args.append(None)
    # Trailing Nones may be dropped: an op of an older build may end before them.
    missing = [k for k, v in values.items() if v is not None and k not in used and k not in OPTIONAL_INPUTS]
    if missing:
        raise Stop("schema_mismatch", "%s takes no argument for %s, which this case needs" % (what, ", ".join(missing)))
    return args


# Inputs a schema may lack without changing what the op computes.
OPTIONAL_INPUTS = {"tile_scheduler_metadata", "num_splits", "out", "block_table", "cache_seqlens", "causal",
                   "is_fp8_kvcache"}


# ------------------------------------------------------------------------------------------------
# Finding the engine


class Engine:
    """An op library found: its route, where it is, its version and the schema read from it."""

    def __init__(self):
        self.route = ""
        self.module = ""
        self.file = ""
        self.version = ""
        self.op = ""
        self.schema = ""
        self.params = []
        self.n_returns = 0
        self.call = None  # (values) -> (out, lse, tile_scheduler_metadata or None, num_splits or None)

    def describe(self):
        return {"route": self.route, "module": self.module, "file": self.file, "version": self.version,
                "op": self.op, "schema": self.schema}


def _ops_call(engine, op):
    def call(values):
        args = build_call(engine.params, values, engine.op)
        rets = op(*args)
        if not isinstance(rets, (tuple, list)) or len(rets) < 2:
            raise Stop("schema_mismatch", "%s returned %r, not (out, lse, ...)" % (engine.op, type(rets).__name__))
        rets = list(rets) + [None, None]
        return rets[0], rets[1], rets[2], rets[3]

    return call


def find_vllm(torch, looked_for, where):
    """vLLM's FlashMLA ops: torch.ops._flashmla_C.sparse_decode_fwd from vllm/_flashmla_C*.so."""
    looked_for.append("vllm._flashmla_C (torch.ops._flashmla_C.sparse_decode_fwd)")
    spec = importlib.util.find_spec("vllm")
    if spec is None or not spec.submodule_search_locations:
        where.append("vllm: not importable by %s (sys.path: %s)" % (sys.executable, ", ".join(sys.path)))
        return None
    pkg = list(spec.submodule_search_locations)[0]
    libs = sorted(glob.glob(os.path.join(pkg, "_flashmla_C*.so")))
    if not libs:
        where.append("vllm at %s: no _flashmla_C*.so (this vLLM build has no FlashMLA ops)" % pkg)
        return None
    e = Engine()
    e.route = "vllm"
    e.module = "vllm._flashmla_C"
    e.file = libs[0]
    try:
        e.version = importlib.import_module("importlib.metadata").version("vllm")
    except Exception:  # noqa: BLE001 - the version is informative only
        e.version = ""
    # The op registration alone (the library's static registration), without vLLM's initialisation;
    # if PyTorch's loader refuses it, the module import, which runs vllm/__init__.py first.
    try:
        torch.ops.load_library(libs[0])
    except Exception as first:  # noqa: BLE001
        try:
            importlib.import_module("vllm._flashmla_C")
        except Exception as second:  # noqa: BLE001
            where.append("%s: torch.ops.load_library: %s; import vllm._flashmla_C: %s" % (libs[0], first, second))
            return None
    try:
        op = torch.ops._flashmla_C.sparse_decode_fwd
    except (AttributeError, RuntimeError) as err:
        where.append("%s: loaded, but torch.ops._flashmla_C has no sparse_decode_fwd (%s)" % (libs[0], err))
        return None
    e.op = "torch.ops._flashmla_C.sparse_decode_fwd"
    try:
        e.schema = str(op.default._schema)
    except Exception as err:  # noqa: BLE001
        raise Stop("schema_mismatch", "cannot read the schema of %s: %s" % (e.op, err), looked_for, where)
    e.params, e.n_returns = parse_op_schema(e.schema)
    if e.n_returns < 2:
        raise Stop("schema_mismatch", "%s returns %d values, not (out, lse, ...): %s" % (e.op, e.n_returns, e.schema),
                   looked_for, where)
    e.call = _ops_call(e, op)
    where.append("vllm at %s: %s" % (pkg, libs[0]))
    return e


def find_flash_mla(looked_for, where):
    """The flash_mla package (deepseek-ai/FlashMLA): flash_mla_with_kvcache and get_mla_metadata."""
    looked_for.append("flash_mla (flash_mla.flash_mla_with_kvcache, flash_mla.get_mla_metadata)")
    if importlib.util.find_spec("flash_mla") is None:
        where.append("flash_mla: not importable by %s (sys.path: %s)" % (sys.executable, ", ".join(sys.path)))
        return None
    try:
        fm = importlib.import_module("flash_mla")
    except Exception as err:  # noqa: BLE001 - a broken build: say why
        where.append("flash_mla: import failed: %s" % err)
        return None
    fn = getattr(fm, "flash_mla_with_kvcache", None)
    meta = getattr(fm, "get_mla_metadata", None)
    if fn is None or meta is None:
        where.append("flash_mla at %s: no flash_mla_with_kvcache / get_mla_metadata" % getattr(fm, "__file__", "?"))
        return None
    e = Engine()
    e.route = "flash_mla"
    e.module = "flash_mla"
    e.file = getattr(fm, "__file__", "") or ""
    e.version = str(getattr(fm, "__version__", ""))
    e.op = "flash_mla.flash_mla_with_kvcache"
    e.params = signature_params(fn)
    e.schema = "flash_mla_with_kvcache(%s)" % ", ".join(p.name for p in e.params)
    names = {p.name for p in e.params}
    if "indices" not in names and "indices_in_kvcache" not in names:
        raise Stop("schema_mismatch", "%s takes no sparse indices (an older FlashMLA without sparse decode): %s" %
                   (e.op, e.schema), looked_for, where)
    meta_required = [p.name for p in signature_params(meta) if p.required]
    if meta_required:
        raise Stop("schema_mismatch", "flash_mla.get_mla_metadata requires %s (the interface before the lazy "
                   "FlashMLASchedMeta, which mla-plan's probe does not drive)" % ", ".join(meta_required),
                   looked_for, where)

    def call(values):
        # A fresh FlashMLASchedMeta for the first call (it plans for these lengths then); the
        # timed calls reuse the one it filled, so that they run the decode (+ combine) alone.
        sched = values.get("tile_scheduler_metadata")
        if sched is None:
            sched = meta()
            sched = sched[0] if isinstance(sched, tuple) else sched
        v = dict(values)
        v["tile_scheduler_metadata"] = sched
        v["num_splits"] = None
        v["block_table"] = None  # sparse: the indices are global rows; no block table, no lengths
        v["cache_seqlens"] = None
        args = build_call(e.params, v, e.op)
        rets = fn(*args)
        if not isinstance(rets, (tuple, list)) or len(rets) < 2:
            raise Stop("schema_mismatch", "%s returned %r, not (out, lse)" % (e.op, type(rets).__name__))
        e.sched = sched
        return (rets[0], rets[1], getattr(sched, "tile_scheduler_metadata", None), getattr(sched, "num_splits", None))

    e.call = call
    where.append("flash_mla at %s" % e.file)
    return e


# ------------------------------------------------------------------------------------------------
# Running it


def _torch_tensors(torch, m, tensors, device):
    """The bundle's tensors on the GPU, shaped as the op takes them."""
    dt = {"bfloat16": torch.bfloat16, "float32": torch.float32, "int32": torch.int32, "uint8": torch.uint8}

    def up(name):
        t = tensors[name]
        host = torch.frombuffer(bytearray(t.data), dtype=torch.uint8)
        return host.view(dt[t.dtype]).reshape(t.shape).to(device)

    def cache(name, c):
        flat = up(name)  # [num_pages, page_stride_bytes] uint8
        rows = int(c["page_block_size"])
        row_bytes = int(c["row_bytes"])
        stride = int(c["page_stride_bytes"])
        view = flat.as_strided((int(c["num_pages"]), rows, 1, row_bytes), (stride, row_bytes, row_bytes, 1))
        fp8 = getattr(torch, "float8_e4m3fn", None)
        return view.view(fp8) if fp8 is not None else view

    v = {"q": up("q"), "kv": cache("kv", m["main"]), "indices": up("indices"), "topk_length": up("topk_length"),
         "d_v": int(m["d_v"]), "sm_scale": float(m["softmax_scale"]), "causal": False, "is_fp8_kvcache": True}
    v["attn_sink"] = up("attn_sink") if "attn_sink" in tensors else None
    if m.get("extra"):
        v["extra_kv"] = cache("extra_kv", m["extra"])
        v["extra_indices"] = up("extra_indices")
        v["extra_topk_length"] = up("extra_topk_length")
    else:
        v["extra_kv"] = v["extra_indices"] = v["extra_topk_length"] = None
    v["tile_scheduler_metadata"] = None
    v["num_splits"] = None
    return v


def _bytes_of(torch, t):
    t = t.detach().contiguous().cpu()
    u = t.view(torch.uint8) if t.element_size() > 0 else t
    return ctypes.string_at(u.data_ptr(), u.numel()) if u.numel() else b""


def _lse_bsh(lse, b, s_q, h_q):
    """lse as [b, s_q, h_q]: FlashMLA returns [b, h_q, s_q] (a transposed view of [b, s_q, h_q])."""
    shape = list(lse.shape)
    if shape == [b, s_q, h_q]:
        return lse, "b,s_q,h_q"
    if shape == [b, h_q, s_q]:
        return lse.transpose(1, 2), "b,h_q,s_q"
    raise Stop("schema_mismatch", "the op returned lse of shape %s, neither [b, s_q, h_q] nor [b, h_q, s_q] of "
               "b %d, s_q %d, h_q %d" % (shape, b, s_q, h_q))


def time_engine(torch, fn, timing):
    """As `mla-plan bench` times its kernels: one call (the plan passed back in) captured in a CUDA
    graph, a memset of flush_bytes before every replay (cold L2), CUDA events around each replay,
    the median of the replays after the warm-up; then eager calls with events (as verify times its
    own kernels), median."""
    replays = int(timing.get("replays", 100))
    warmup = int(timing.get("warmup", 10))
    flush = torch.empty(int(timing.get("flush_bytes", 256 << 20)), dtype=torch.uint8, device="cuda")
    fn()
    torch.cuda.synchronize()
    out = {"method": "cuda_graph_cold_l2", "replays": replays, "warmup": warmup, "flush_bytes": flush.numel()}
    st, en = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    try:
        g = torch.cuda.CUDAGraph()
        try:  # relaxed: a wrapper's host-side checks during capture are not errors (as sxs_bench.py)
            ctx = torch.cuda.graph(g, capture_error_mode="relaxed")
        except TypeError:  # a PyTorch without capture_error_mode
            ctx = torch.cuda.graph(g)
        with ctx:
            fn()
        torch.cuda.synchronize()
        ts = []
        for i in range(warmup + replays):
            flush.fill_(i & 0xFF)
            st.record()
            g.replay()
            en.record()
            en.synchronize()
            if i >= warmup:
                ts.append(1e3 * st.elapsed_time(en))
        ts.sort()
        out.update(median_us=ts[len(ts) // 2], min_us=ts[0], p90_us=ts[int(0.9 * (len(ts) - 1))])
        del g
    except Exception as err:  # noqa: BLE001 - an op that cannot be captured still ran
        out.update(median_us=None, min_us=None, p90_us=None, graph_error=str(err))
    iters = int(timing.get("eager_iterations", 20))
    ts = []
    for _ in range(iters):
        st.record()
        fn()
        en.record()
        en.synchronize()
        ts.append(1e3 * st.elapsed_time(en))
    ts.sort()
    out.update(eager_iterations=iters, eager_median_us=ts[len(ts) // 2] if ts else None)
    return out


def run_torch(args, m, tensors, result):
    looked_for, where = result["looked_for"], result["where"]
    looked_for.append("torch (PyTorch with CUDA)")
    try:
        torch = importlib.import_module("torch")
    except Exception as err:  # noqa: BLE001 - ImportError, or a broken install
        raise Stop("no_torch", "PyTorch is not importable by %s: %s" % (sys.executable, err), looked_for,
                   where + ["sys.path: " + ", ".join(sys.path)])
    result["versions"]["torch"] = str(getattr(torch, "__version__", ""))
    result["versions"]["cuda"] = str(getattr(torch.version, "cuda", None))
    if not torch.cuda.is_available():
        raise Stop("unsupported_gpu", "PyTorch %s sees no CUDA device (torch.version.cuda %s)" %
                   (torch.__version__, torch.version.cuda), looked_for, where)
    index = int(m.get("device_index", 0))
    if index >= torch.cuda.device_count():
        raise Stop("unsupported_gpu", "device %d asked, PyTorch sees %d" % (index, torch.cuda.device_count()),
                   looked_for, where)
    torch.cuda.set_device(index)
    p = torch.cuda.get_device_properties(index)
    cap = (p.major, p.minor)
    result["device"] = {"index": index, "name": p.name, "capability": "%d.%d" % cap,
                        "num_sms": p.multi_processor_count}
    engine = None
    routes = [args.route] if args.route else ["vllm", "flash_mla"]
    for r in routes:
        engine = find_vllm(torch, looked_for, where) if r == "vllm" else find_flash_mla(looked_for, where)
        if engine:
            break
    if engine is None:
        raise Stop("no_engine", "no engine op library found", looked_for, where)
    result["engine"] = engine.describe()
    if cap[0] not in (9, 10):
        raise Stop("unsupported_gpu", "%s is compute capability %d.%d; FlashMLA's sparse decode has kernels for 9.0 "
                   "and 10.x" % (p.name, cap[0], cap[1]), looked_for, where)
    values = _torch_tensors(torch, m, tensors, "cuda")
    run_engine(engine, values, m, result, torch=torch, timing=lambda fn: time_engine(torch, fn, m.get("timing", {})))


def _is_unsupported_gpu(text):
    t = text.lower()
    return "no kernel image" in t or "only supported on" in t or "unsupported architecture" in t


def run_engine(engine, values, m, result, torch=None, timing=None, bytes_of=None):
    """One call of the engine's op on the bundle's values; writes the outputs, fills `result`."""
    b, s_q, h_q = int(m["b"]), int(m["s_q"]), int(m["h_q"])
    try:
        out, lse, meta, splits = engine.call(values)
        if torch is not None:
            torch.cuda.synchronize()
    except Stop:
        raise
    except Exception as err:  # noqa: BLE001 - the engine's own checks raise RuntimeError
        text = "%s: %s" % (type(err).__name__, err)
        if _is_unsupported_gpu(text):
            raise Stop("unsupported_gpu", "%s has no kernel for this GPU: %s" % (engine.op, text))
        raise Stop("error", "%s raised %s" % (engine.op, text))
    bytes_of = bytes_of or (lambda t: _bytes_of(torch, t))
    lse, lse_layout = _lse_bsh(lse, b, s_q, h_q)
    if list(out.shape) != [b, s_q, h_q, int(m["d_v"])]:
        raise Stop("schema_mismatch", "the op returned out of shape %s, expected %s" %
                   (list(out.shape), [b, s_q, h_q, int(m["d_v"])]))
    bundle = result["_bundle"]
    outputs = {}

    def put(name, t, dtype, shape):
        data = bytes_of(t)
        with open(os.path.join(bundle, name + ".bin"), "wb") as f:
            f.write(data)
        outputs[name] = {"file": name + ".bin", "dtype": dtype, "shape": shape, "bytes": len(data)}

    put("out", out, "bfloat16", [b, s_q, h_q, int(m["d_v"])])
    put("lse", lse, "float32", [b, s_q, h_q])
    if meta is not None and splits is not None:
        put("tile_scheduler_metadata", meta, "int32", list(meta.shape))
        put("num_splits", splits, "int32", list(splits.shape))
    result["outputs"] = outputs
    result["lse_returned_as"] = lse_layout
    if timing is not None:
        v = dict(values)
        # The plan passed back in, so that the timed call is the decode (+ combine) alone.
        if engine.route in ("vllm", "fake") and meta is not None:
            v["tile_scheduler_metadata"], v["num_splits"] = meta, splits
        elif engine.route == "flash_mla":
            v["tile_scheduler_metadata"] = getattr(engine, "sched", None)
        try:
            result["timing"] = timing(lambda: engine.call(v))
        except Exception as err:  # noqa: BLE001 - the outputs stand; the timing says why it is missing
            result["timing"] = {"method": "cuda_graph_cold_l2", "median_us": None, "min_us": None, "p90_us": None,
                                "eager_median_us": None, "graph_error": "timing failed: %s: %s" % (type(err).__name__, err)}


# ------------------------------------------------------------------------------------------------
# A fake engine for the tests (no PyTorch)


def run_fake(path, m, tensors, result):
    """MLAPLAN_ENGINE_PROBE_FAKE: a Python file that stands in for PyTorch and the engine
    (tests/engine_probe/fake_engine.py). It may set TORCH = False (no PyTorch), CAPABILITY (the
    GPU), OPS (False: no op library), and defines OP_SCHEMA and sparse_decode_fwd(*args) over
    HostTensors."""
    looked_for, where = result["looked_for"], result["where"]
    spec = importlib.util.spec_from_file_location("mlaplan_fake_engine", path)
    fake = importlib.util.module_from_spec(spec)
    fake.HostTensor = HostTensor
    fake.BUNDLE = result["_bundle"]
    fake.MANIFEST = m
    spec.loader.exec_module(fake)
    looked_for.append("torch (PyTorch with CUDA)")
    if not getattr(fake, "TORCH", True):
        raise Stop("no_torch", "PyTorch is not importable by %s: No module named 'torch' (fake)" % sys.executable,
                   looked_for, where + ["fake engine " + path])
    cap = tuple(getattr(fake, "CAPABILITY", (9, 0)))
    result["device"] = {"index": int(m.get("device_index", 0)), "name": getattr(fake, "DEVICE_NAME", "fake GPU"),
                        "capability": "%d.%d" % cap, "num_sms": int(getattr(fake, "NUM_SMS", 132))}
    looked_for.append("fake engine ops (torch.ops._flashmla_C.sparse_decode_fwd stand-in)")
    if not getattr(fake, "OPS", True):
        raise Stop("no_engine", "no engine op library found", looked_for, where + ["fake engine %s: no ops" % path])
    e = Engine()
    e.route = "fake"
    e.module = "fake"
    e.file = path
    e.version = str(getattr(fake, "VERSION", "0"))
    e.op = "fake.sparse_decode_fwd"
    e.schema = fake.OP_SCHEMA
    where.append("fake engine " + path)
    result["engine"] = e.describe()
    if cap[0] not in (9, 10):
        raise Stop("unsupported_gpu", "%s is compute capability %d.%d; FlashMLA's sparse decode has kernels for 9.0 "
                   "and 10.x" % (result["device"]["name"], cap[0], cap[1]), looked_for, where)
    e.params, e.n_returns = parse_op_schema(e.schema)
    if e.n_returns < 2:
        raise Stop("schema_mismatch", "%s returns %d values, not (out, lse, ...): %s" % (e.op, e.n_returns, e.schema),
                   looked_for, where)
    e.call = _ops_call(e, fake.sparse_decode_fwd)
    values = {"q": tensors["q"], "kv": tensors["kv"], "indices": tensors["indices"],
              "topk_length": tensors["topk_length"], "attn_sink": tensors.get("attn_sink"),
              "extra_kv": tensors.get("extra_kv"), "extra_indices": tensors.get("extra_indices"),
              "extra_topk_length": tensors.get("extra_topk_length"), "tile_scheduler_metadata": None,
              "num_splits": None, "d_v": int(m["d_v"]), "sm_scale": float(m["softmax_scale"])}
    fake_timing = getattr(fake, "TIMING", None)
    run_engine(e, values, m, result, timing=(lambda fn: dict(fake_timing)) if fake_timing else None,
               bytes_of=lambda t: t.data)


# ------------------------------------------------------------------------------------------------


def write_result(bundle, result):
    result = {k: v for k, v in result.items() if not k.startswith("_")}
    path = os.path.join(bundle, "result.json")
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(result, f, indent=1, allow_nan=False, default=str)
    os.replace(tmp, path)


def probe(args):
    result = {"schema": RESULT_SCHEMA, "status": "error", "message": "", "looked_for": [], "where": [],
              "engine": None, "device": None, "outputs": {}, "timing": None,
              "versions": {"python": platform.python_version(), "executable": sys.executable},
              "_bundle": args.bundle}
    for p in reversed(args.engine_path or []):
        sys.path.insert(0, os.path.abspath(p))
    try:
        m, tensors = read_bundle(args.bundle)
        fake = os.environ.get("MLAPLAN_ENGINE_PROBE_FAKE")
        if fake:
            run_fake(fake, m, tensors, result)
        else:
            run_torch(args, m, tensors, result)
        result["status"] = "ok"
        result["message"] = "ran %s" % result["engine"]["op"]
    except Stop as s:
        result["status"] = s.status
        result["message"] = s.message
        result["looked_for"] = result["looked_for"] or s.looked_for
        result["where"] = result["where"] or s.where
    except Exception as err:  # noqa: BLE001 - whatever else: said, not a traceback on stderr alone
        result["status"] = "error"
        result["message"] = "the probe failed: %s: %s" % (type(err).__name__, err)
        result["traceback"] = traceback.format_exc()[-4000:]
    for k in ("median_us", "min_us", "p90_us", "eager_median_us"):
        t = result.get("timing") or {}
        if isinstance(t.get(k), float) and not math.isfinite(t[k]):
            t[k] = None
    return result


def main(argv=None):
    ap = argparse.ArgumentParser(description="Run an engine's sparse-MLA decode op on an mla-plan case bundle.")
    ap.add_argument("--bundle", required=True, help="the case bundle directory (manifest.json and .bin files)")
    ap.add_argument("--engine-path", action="append", default=[],
                    help="a directory put first on sys.path (e.g. a FlashMLA checkout with flash_mla/cuda*.so)")
    ap.add_argument("--route", choices=["vllm", "flash_mla"], help="only this op library (default: vllm, then flash_mla)")
    args = ap.parse_args(argv)
    result = probe(args)
    try:
        write_result(args.bundle, result)
    except OSError as err:
        sys.stderr.write("mla_plan_engine_probe: cannot write %s/result.json: %s\n" % (args.bundle, err))
        return 2
    sys.stderr.write("mla_plan_engine_probe: %s: %s\n" % (result["status"], result["message"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
