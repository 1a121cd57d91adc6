#!/usr/bin/python3
"""Plots of a mapfuse study file (docs/results.md), written as PNG files.

usage: plots.py STUDY.h5 OUTDIR [SWEEP.csv|-] [LAYER_ORDER.csv]

- energy_by_level_<arch>.png: per-layer energy split by memory level (best seed per layer);
- edp_by_layer.png: per-layer EDP of every architecture (log scale);
- convergence.png: best-so-far objective against time, for units that recorded a trace (GET-fusion
  units: best DRAM in MB against plans generated);
- optimizers_<workload>_<arch>.png (network-optimizer studies, FADiff's Figure 4): best-so-far exact
  EDP against time of every method and seed on one network and architecture, one colour per method;
- fused_<workload>_<arch>.png (fused-mapper studies, FFM's Figure 8): percent above FFM's optimum
  against time for every FFM baseline and seed (objective of the study), FFM's own time marked;
- a schedule file (format "mapfuse-schedule", written by `mapfuse schedule --output`), per schedule
  under /schedules/<name>: gantt_<name>.png, one row per core (CTs coloured by layer) and per link
  (transfers coloured by cause, overlapping ones on separate lanes of the link's row), and
  memory_<name>.png, each on-chip core's top-memory occupancy over time with its capacity
  (Stream's Fig. 9);
- with SWEEP.csv (network totals of the sweep points, written by `mapfuse report`):
  sweep_edp_<sweep>_<workload>[_seed<s>].png, a heat map of network EDP over the first two sweep
  axes, one panel per value of the third axis, the best over any further axes; the per-architecture
  plots above are then drawn only for architectures outside sweeps and for each network's best point.
A unit labelled "<workload>/{a,b,c} @ <arch>" stands for the identical layers a, b and c.
Layers appear in network order: that of LAYER_ORDER.csv (workload,layer rows, written by
`mapfuse report`), else the units' einsum_index column (schema 2), else first appearance.
Run with Debian's /usr/bin/python3 (python3-h5py, python3-matplotlib). Prints the files written.
"""
import csv
import math
import os
import re
import sys

import h5py
import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

OPT_LABEL = re.compile(r"^(?P<workload>\S+) @ (?P<arch>\S+) (?P<method>\w+) seed (?P<seed>\d+)$")
METHOD_COLOURS = {"fadiff": "tab:red", "dosa": "tab:green", "ga": "tab:blue", "bo": "tab:orange"}
LABEL = re.compile(r"^(?P<workload>[^/]+)/(?P<layer>.+) @ (?P<arch>\S+)(?: seed (?P<seed>\d+))?$")


def text(x):
    return x.decode() if isinstance(x, bytes) else str(x)


def layers_of(label_layer):
    if len(label_layer) > 2 and label_layer[0] == "{" and label_layer[-1] == "}" and "," in label_layer:
        return label_layer[1:-1].split(",")
    return [label_layer]


def read_layer_order(path):
    pos = {}
    if path:
        with open(path, newline="") as fh:
            for r in csv.DictReader(fh):
                pos.setdefault(r["layer"], len(pos))
    return pos


def read_sweep(path):
    rows = []
    with open(path, newline="") as fh:
        for r in csv.DictReader(fh):
            r["params"] = [(kv.split("=", 1)[0], float(kv.split("=", 1)[1])) for kv in r["params"].split(";") if kv]
            for k in ("energy_pj", "cycles", "edp"):
                r[k] = float(r[k])
            r["complete"] = r["complete"] == "1"
            r["best"] = r["best"] == "1"
            rows.append(r)
    return rows


def fmt_value(v):
    return str(int(v)) if float(v).is_integer() else f"{v:g}"


def heat_maps(rows, outdir, study):
    """One figure per (sweep, workload, seed): network EDP over axes 0 x 1, a panel per axis-2 value."""
    written = []
    groups = {}
    for r in rows:
        groups.setdefault((r["family"], r["workload"], r["seed"]), []).append(r)
    for (family, workload, seed), rs in groups.items():
        rs = [r for r in rs if r["complete"]]
        if not rs:
            continue
        keys = [k for k, _ in rs[0]["params"]]
        values = [sorted({dict(r["params"])[k] for r in rs}) for k in keys]
        ykey, yvals = keys[0], values[0]
        xkey, xvals = (keys[1], values[1]) if len(keys) > 1 else ("", [None])
        pkey, pvals = (keys[2], values[2]) if len(keys) > 2 else ("", [None])
        # cell -> lowest EDP over the axes beyond the third
        cells = {}
        for r in rs:
            p = dict(r["params"])
            c = (p.get(pkey), p[ykey], p.get(xkey))
            cells[c] = min(cells.get(c, math.inf), r["edp"])
        best = min(cells.values())
        lo, hi = math.log10(best), math.log10(max(cells.values()))
        fig, axes = plt.subplots(1, len(pvals), figsize=(1.6 + 3.0 * len(pvals), 2.2 + 0.45 * len(yvals)),
                                 squeeze=False, layout="constrained")
        im = None
        for i, pv in enumerate(pvals):
            ax = axes[0][i]
            grid = [[math.log10(cells[(pv, yv, xv)]) if (pv, yv, xv) in cells else float("nan") for xv in xvals] for yv in yvals]
            im = ax.imshow(grid, cmap="viridis_r", vmin=lo, vmax=max(hi, lo + 1e-9), aspect="auto", origin="lower")
            for yi, yv in enumerate(yvals):
                for xi, xv in enumerate(xvals):
                    if (pv, yv, xv) in cells:
                        rel = cells[(pv, yv, xv)] / best
                        dark = math.log10(cells[(pv, yv, xv)]) > (lo + hi) / 2
                        ax.text(xi, yi, "best" if rel == 1.0 else f"{rel:.2f}", ha="center", va="center", fontsize=7,
                                color="white" if dark else "black", fontweight="bold" if rel == 1.0 else "normal")
            ax.set_xticks(range(len(xvals)))
            ax.set_xticklabels([fmt_value(v) if v is not None else "" for v in xvals], fontsize=7)
            ax.set_yticks(range(len(yvals)))
            ax.set_yticklabels([fmt_value(v) for v in yvals], fontsize=7)
            ax.set_xlabel(xkey)
            if i == 0:
                ax.set_ylabel(ykey)
            if pkey:
                ax.set_title(f"{pkey} = {fmt_value(pv)}", fontsize=8)
        cb = fig.colorbar(im, ax=axes[0].tolist(), shrink=0.9)
        cb.set_label("log10 network EDP [pJ x cycles]")
        seed_text = f" seed {seed}" if seed else ""
        fig.suptitle(f"{study}: {workload}{seed_text} on {family} (cell: EDP / best = {best:.4g})", fontsize=9)
        name = f"sweep_edp_{family}_{workload}" + (f"_seed{seed}" if seed else "")
        out = os.path.join(outdir, re.sub(r"[^A-Za-z0-9_.+-]", "_", name) + ".png")
        fig.savefig(out, dpi=110)
        plt.close(fig)
        written.append(out)
    return written


def optimizer_plots(units, trace, outdir):
    """EDP against time per (workload, architecture) for the optimize_network units (Figure 4)."""
    runs = {}
    for u in units:
        if u["status"] != 0 or u["trace_count"] == 0 or text(u["kind"]) != "optimize_network":
            continue
        m = OPT_LABEL.match(text(u["label"]))
        if m:
            runs.setdefault((m["workload"], m["arch"]), []).append((m["method"], int(m["seed"]), u))
    written = []
    for (workload, arch), rows in sorted(runs.items()):
        fig, ax = plt.subplots(figsize=(6, 4))
        seen = set()
        end = max(u["wall_seconds"] for _, _, u in rows)
        for method, seed, u in sorted(rows, key=lambda r: (r[0], r[1])):
            t = trace[u["trace_offset"]: u["trace_offset"] + u["trace_count"]]
            xs, ys = list(t[:, 0]) + [end], list(t[:, 2]) + [t[-1, 2]]
            ax.step(xs, ys, where="post", color=METHOD_COLOURS.get(method), alpha=0.8,
                    linestyle="--" if method == "dosa" else "-",
                    label=None if method in seen else method)
            seen.add(method)
        ax.set_xlabel("optimisation time [s]")
        ax.set_ylabel("best exact EDP so far [pJ x cycles]")
        ax.set_yscale("log")
        ax.set_title(f"{workload} on {arch}: EDP vs time (every seed)")
        ax.legend(fontsize=7)
        fig.tight_layout()
        out = os.path.join(outdir, f"optimizers_{workload}_{arch}.png")
        fig.savefig(out, dpi=110)
        plt.close(fig)
        written.append(out)
    return written


def fused_plots(units, trace, outdir):
    """Percent above FFM's optimum against time for the ffm_baseline units (FFM's Figure 8)."""
    header = re.compile(r"^ffm: generation (\S+) s over \d+ units, join (\S+) s, .* objective (\w+)")
    optimum = {}
    for u in units:
        if u["status"] != 0 or text(u["kind"]) != "ffm_join":
            continue
        m = re.match(r"^(\S+) @ (\S+) ffm$", text(u["label"]))
        h = header.match(text(u["best_mapping"]))
        if m and h:
            objective = h[3]
            best = {"energy": u["energy_pj"], "cycles": u["cycles"]}.get(objective, u["edp"])
            optimum[(m[1], m[2])] = (best, objective, float(h[1]) + float(h[2]), u)
    runs = {}
    for u in units:
        if u["status"] != 0 or u["trace_count"] == 0 or text(u["kind"]) != "ffm_baseline":
            continue
        m = OPT_LABEL.match(text(u["label"]))
        if m and (m["workload"], m["arch"]) in optimum:
            runs.setdefault((m["workload"], m["arch"]), []).append((m["method"], int(m["seed"]), u))
    colours = {"ffm_sa": "tab:green", "ffm_ga": "tab:blue", "ffm_random": "tab:orange"}
    written = []
    for key, rows in sorted(runs.items()):
        best, objective, ffm_time, _ = optimum[key]
        fig, ax = plt.subplots(figsize=(6, 4))
        seen = set()
        end = max(u["wall_seconds"] for _, _, u in rows)
        for method, seed, u in sorted(rows, key=lambda r: (r[0], r[1])):
            t = trace[u["trace_offset"]: u["trace_offset"] + u["trace_count"]]
            xs = list(t[:, 0]) + [end]
            ys = [max(100 * (v / best - 1), 1e-3) for v in list(t[:, 2]) + [t[-1, 2]]]
            ax.step(xs, ys, where="post", color=colours.get(method), alpha=0.8, label=None if method in seen else method)
            seen.add(method)
        ax.axvline(ffm_time, color="tab:red", linestyle="--", label=f"FFM optimum ({ffm_time:.2g} s)")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("time [s]")
        ax.set_ylabel(f"% above FFM's optimum ({objective})")
        ax.set_title(f"{key[0]} on {key[1]}: baselines vs FFM")
        ax.legend(fontsize=7)
        fig.tight_layout()
        out = os.path.join(outdir, f"fused_{key[0]}_{key[1]}.png".replace("/", "_"))
        fig.savefig(out, dpi=110)
        plt.close(fig)
        written.append(out)
    return written



CAUSE_COLOURS = {"OFF_CHIP": "tab:blue", "CORE_TO_CORE": "tab:green", "EVICTION": "tab:red",
                 "SINK_LAYER": "tab:purple", "BLOCK": "tab:gray"}


def lanes(intervals):
    """Greedy interval partitioning: a lane per interval such that no two in one lane overlap."""
    ends = []
    out = []
    for start, end in intervals:
        for k, e in enumerate(ends):
            if e <= start:
                ends[k] = end
                out.append(k)
                break
        else:
            ends.append(end)
            out.append(len(ends) - 1)
    return out, max(1, len(ends))


def save_png(fig, out, dpi=100):
    fig.tight_layout()
    fig.savefig(out, dpi=dpi)
    plt.close(fig)
    return out


def schedule_plots(name, g, outdir):
    cores = g["cores"][...]
    links = g["links"][...]
    tiles = g["tiles"][...]
    transfers = g["transfers"][...]
    path_links = g["transfer_links"][...]
    memory = g["memory_trace"][...]
    latency = float(g.attrs["latency_cc"])
    written = []
    used_cores = sorted({int(t["core"]) for t in tiles})
    busy = [t for t in transfers if t["occupies_links"] and t["end"] > t["start"]]
    on_link = {}
    for t in busy:
        for l in path_links[t["link_offset"]: t["link_offset"] + t["link_count"]]:
            on_link.setdefault(int(l), []).append(t)
    used_links = sorted(on_link)
    rows = [("core", c) for c in used_cores] + [("link", l) for l in used_links]
    fig, ax = plt.subplots(figsize=(12, 0.55 * len(rows) + 1.8))
    layers = sorted({int(t["layer"]) for t in tiles})
    # Pastel layer colours, so that the saturated transfer-cause colours stand apart from them.
    pastel = list(plt.get_cmap("Set3").colors) + list(plt.get_cmap("Pastel2").colors)
    colour = {l: pastel[i % len(pastel)] for i, l in enumerate(layers)}
    for y, (kind, k) in enumerate(rows):
        if kind == "core":
            mine = [t for t in tiles if t["core"] == k]
            for layer in layers:
                bars = [(t["start"], t["end"] - t["start"]) for t in mine if t["layer"] == layer]
                if bars:
                    ax.broken_barh(bars, (y - 0.4, 0.8), facecolors=colour[layer], edgecolor="black", linewidth=0.2)
        else:
            mine = sorted(on_link[k], key=lambda t: (t["start"], t["end"]))
            lane, n = lanes([(t["start"], t["end"]) for t in mine])
            h = 0.8 / n
            for cause, c in CAUSE_COLOURS.items():
                for j, t in enumerate(mine):
                    if text(t["cause"]) == cause:
                        ax.broken_barh([(t["start"], t["end"] - t["start"])], (y - 0.4 + lane[j] * h, h),
                                       facecolors=c, edgecolor="none")
    ax.set_yticks(range(len(rows)))
    ax.set_yticklabels([f"core {k} {text(cores[k]['name'])}" if kind == "core" else "link " + text(links[k]["name"])
                        for kind, k in rows], fontsize=8)
    ax.invert_yaxis()
    ax.set_xlim(0, latency)
    ax.set_xlabel("time [cycles]")
    ax.set_title(f"{name}: {len(tiles)} CTs, {len(transfers)} transfers, latency {latency:.6g} cc")
    from matplotlib.patches import Patch
    handles = [Patch(color=colour[l], label=f"layer {l}") for l in layers[:20]]
    causes = {text(t["cause"]) for t in busy}
    handles += [Patch(color=c, label=cause.lower()) for cause, c in CAUSE_COLOURS.items() if cause in causes]
    ax.legend(handles=handles, fontsize=6, ncol=max(1, (len(handles) + 11) // 12), loc="upper left",
              bbox_to_anchor=(1.01, 1.0), title=f"{len(layers)} layers, colours repeat every {len(pastel)}"
              if len(layers) > len(pastel) else None, title_fontsize=6)
    written.append(save_png(fig, os.path.join(outdir, f"gantt_{name}.png")))

    shown = [k for k in range(len(cores)) if not cores[k]["offchip"] and (k in used_cores or cores[k]["peak_memory_bits"] > 0)]
    if shown:
        fig, axes = plt.subplots(len(shown), 1, figsize=(10, 1.6 * len(shown) + 1), sharex=True, squeeze=False)
        for ax, k in zip(axes[:, 0], shown):
            steps = [(m["t"], m["bits"]) for m in memory if m["core"] == k] or [(0.0, 0.0)]
            ts = [t for t, _ in steps] + [max(latency, steps[-1][0])]
            kib = [b / 8192 for _, b in steps]
            ax.step(ts, kib + kib[-1:], where="post", color="tab:blue", linewidth=0.8)
            ax.fill_between(ts, kib + kib[-1:], step="post", alpha=0.3, color="tab:blue")
            cap = cores[k]["capacity_bits"] / 8192
            peak = cores[k]["peak_memory_bits"] / 8192
            note = f"peak {peak:.6g} KiB of {cap:.6g} KiB ({100 * peak / cap:.3g} %)"
            if cap <= 4 * peak:
                ax.axhline(cap, color="tab:red", linestyle="--", linewidth=0.8)
                ax.set_ylim(0, cap * 1.08)
            else:  # a capacity line would flatten the occupancy: scale to the peak, say so
                ax.set_ylim(0, max(peak, 1e-9) * 1.15)
                note += "; capacity off the scale"
            ax.set_ylabel(f"core {k} {text(cores[k]['name'])}\n[KiB]", fontsize=8)
            ax.text(0.005, 0.95, note, transform=ax.transAxes, ha="left", va="top", fontsize=7)
        axes[-1, 0].set_xlabel("time [cycles]")
        axes[0, 0].set_title(f"{name}: top-memory occupancy per core (dashed: capacity, where on the scale)")
        written.append(save_png(fig, os.path.join(outdir, f"memory_{name}.png")))
    return written


def main(path, outdir, sweep_path=None, order_path=None):
    os.makedirs(outdir, exist_ok=True)
    with h5py.File(path, "r") as f:
        if text(f.attrs.get("format", "")) == "mapfuse-schedule":
            for name in sorted(f["schedules"]):
                for w in schedule_plots(name, f["schedules"][name], outdir):
                    print(w)
            return
        if "schedules" in f:  # a study's schedule units: their Gantt charts and memory plots
            for name in sorted(f["schedules"]):
                for w in schedule_plots(name, f["schedules"][name], outdir):
                    print(w)
            if all(text(k) == "schedule" for k in f["units"]["kind"]):
                return
    sweep = read_sweep(sweep_path) if sweep_path and sweep_path != "-" else []
    position = read_layer_order(order_path)
    swept = {r["arch"] for r in sweep}
    shown = {r["arch"] for r in sweep if r["best"]}
    f = h5py.File(path, "r")
    units = f["units"][...]
    levels = f["levels"][...]
    trace = f["trace"][...] if "trace" in f else None
    best = {}  # (arch, layer) -> unit row with the lowest EDP among seeds
    order = []
    index_of = {}  # layer -> (einsum_index of its unit, place in the unit's list)
    for u in units:
        if u["status"] != 0:
            continue
        m = LABEL.match(text(u["label"]))
        if not m or (m["arch"] in swept and m["arch"] not in shown):
            continue
        for k, layer in enumerate(layers_of(m["layer"])):
            key = (m["arch"], layer)
            if key not in best or u["edp"] < best[key]["edp"]:
                best[key] = u
            if layer not in order:
                order.append(layer)
            if not position and "einsum_index" in units.dtype.names and layer not in index_of:
                index_of[layer] = (u["einsum_index"], k)
    appearance = {l: i for i, l in enumerate(order)}
    order.sort(key=lambda l: (position.get(l, len(position)), index_of.get(l, (0, 0)), appearance[l]))
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
        # GET-fusion units trace best DRAM (MB) against plans generated, not time.
        by_plans = all(text(u["kind"]) == "get_partition" for u in traced)
        fig, ax = plt.subplots(figsize=(6, 4))
        for u in traced[:12]:
            t = trace[u["trace_offset"]: u["trace_offset"] + u["trace_count"]]
            ax.step(t[:, 1] if by_plans else t[:, 0], t[:, 2], where="post", label=text(u["label"]))
        ax.set_xlabel("plans generated" if by_plans else "time [s]")
        ax.set_ylabel("best DRAM so far [MB]" if by_plans else "best objective so far")
        ax.set_yscale("log")
        ax.legend(fontsize=6)
        fig.tight_layout()
        out = os.path.join(outdir, "convergence.png")
        fig.savefig(out, dpi=110)
        plt.close(fig)
        written.append(out)
    if trace is not None:
        written += optimizer_plots(units, trace, outdir)
        written += fused_plots(units, trace, outdir)
    if sweep:
        written += heat_maps(sweep, outdir, os.path.basename(path))
    for w in written:
        print(w)


if __name__ == "__main__":
    if len(sys.argv) not in (3, 4, 5):
        sys.exit(__doc__)
    main(*sys.argv[1:])
