#!/usr/bin/python3
"""Plots of a mapfuse study file (docs/results.md), written as PNG files.

usage: plots.py STUDY.h5 OUTDIR

- energy_by_level_<arch>.png: per-layer energy split by memory level (best seed per layer);
- edp_by_layer.png: per-layer EDP of every architecture (log scale);
- convergence.png: best-so-far objective against time, for units that recorded a trace.
Run with Debian's /usr/bin/python3 (python3-h5py, python3-matplotlib). Prints the files written.
"""
import os
import re
import sys

import h5py
import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

LABEL = re.compile(r"^(?P<workload>[^/]+)/(?P<layer>.+) @ (?P<arch>\S+)(?: seed (?P<seed>\d+))?$")


def text(x):
    return x.decode() if isinstance(x, bytes) else str(x)


def main(path, outdir):
    os.makedirs(outdir, exist_ok=True)
    f = h5py.File(path, "r")
    units = f["units"][...]
    levels = f["levels"][...]
    trace = f["trace"][...] if "trace" in f else None
    best = {}  # (arch, layer) -> unit row with the lowest EDP among seeds
    order = []
    for u in units:
        if u["status"] != 0:
            continue
        m = LABEL.match(text(u["label"]))
        if not m:
            continue
        key = (m["arch"], m["layer"])
        if key not in best or u["edp"] < best[key]["edp"]:
            best[key] = u
        if m["layer"] not in order:
            order.append(m["layer"])
    order.sort()
    written = []
    archs = sorted({a for a, _ in best})
    for arch in archs:
        layers = [l for l in order if (arch, l) in best]
        if not layers:
            continue
        names, parts = None, []
        for l in layers:
            u = best[(arch, l)]
            rows = levels[u["level_offset"]: u["level_offset"] + u["level_count"]]
            names = [text(r["name"]) for r in rows]
            parts.append([r["energy_pj"] for r in rows])
        fig, ax = plt.subplots(figsize=(max(6, 0.45 * len(layers)), 4))
        bottom = [0.0] * len(layers)
        for i, name in enumerate(names):
            vals = [p[i] if i < len(p) else 0.0 for p in parts]
            ax.bar(range(len(layers)), vals, bottom=bottom, label=name)
            bottom = [b + v for b, v in zip(bottom, vals)]
        ax.set_xticks(range(len(layers)))
        ax.set_xticklabels(layers, rotation=70, fontsize=7)
        ax.set_ylabel("energy [pJ] (memory levels)")
        ax.set_title(f"{os.path.basename(path)}: energy by level on {arch}")
        ax.legend(fontsize=7)
        fig.tight_layout()
        out = os.path.join(outdir, f"energy_by_level_{arch}.png")
        fig.savefig(out, dpi=110)
        plt.close(fig)
        written.append(out)
    if best:
        fig, ax = plt.subplots(figsize=(max(6, 0.45 * len(order)), 4))
        width = 0.8 / max(1, len(archs))
        for k, arch in enumerate(archs):
            xs = [i + k * width for i, l in enumerate(order) if (arch, l) in best]
            ys = [best[(arch, l)]["edp"] for l in order if (arch, l) in best]
            ax.bar(xs, ys, width=width, label=arch)
        ax.set_yscale("log")
        ax.set_xticks([i + 0.4 - width / 2 for i in range(len(order))])
        ax.set_xticklabels(order, rotation=70, fontsize=7)
        ax.set_ylabel("EDP [pJ x cycles]")
        ax.set_title(f"{os.path.basename(path)}: EDP per layer")
        ax.legend(fontsize=7)
        fig.tight_layout()
        out = os.path.join(outdir, "edp_by_layer.png")
        fig.savefig(out, dpi=110)
        plt.close(fig)
        written.append(out)
    traced = [u for u in units if u["trace_count"] > 0]
    if traced and trace is not None:
        fig, ax = plt.subplots(figsize=(6, 4))
        for u in traced[:12]:
            t = trace[u["trace_offset"]: u["trace_offset"] + u["trace_count"]]
            ax.step(t[:, 0], t[:, 2], where="post", label=text(u["label"]))
        ax.set_xlabel("time [s]")
        ax.set_ylabel("best objective so far")
        ax.set_yscale("log")
        ax.legend(fontsize=6)
        fig.tight_layout()
        out = os.path.join(outdir, "convergence.png")
        fig.savefig(out, dpi=110)
        plt.close(fig)
        written.append(out)
    for w in written:
        print(w)


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2])
