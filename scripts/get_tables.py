#!/usr/bin/env python3
"""GET-fusion Table III/IV-style runs through `mapfuse partition` (docs/get_search.md, "Measured").

For each network and scheme at 128 KB: LS and RS with 2k plans and each split (random baseline,
Algorithm 1 with the cut / occlusion / dp explainers) over several seeds (mean and spread), the
true optimum, and the paper's numbers (note §7.3/7.4). Prints Markdown.

  python3 scripts/get_tables.py build/cli/mapfuse ../shared/data [--seeds 5] [--budget 2000]
  python3 scripts/get_tables.py build/cli/mapfuse ../shared/data --table2 [--seeds 3]   # Table II
"""
import argparse, json, os, statistics, subprocess, sys

NETS = ["mobilenet_v2", "vgg16", "resnet50", "resnet18", "squeezenet1_0"]
# [P] Tables III (LS) and IV (RS), 128 KB, 2k plans, baseline rows, in MB (note §7.3/7.4).
PAPER = {
    ("ls", "brr"): [15.101, 27.606, 83.685, 27.127, 8.202],
    ("ls", "lbdf"): [9.803, 5.973, 25.764, 5.974, 3.839],
    ("rs", "brr"): [16.195, 29.274, 91.866, 28.525, 10.249],
    ("rs", "lbdf"): [13.209, 6.856, 39.092, 6.856, 10.080],
}
PAPER_BEST_GET = {  # best of GNNE/PG/RG per cell
    ("ls", "brr"): [13.401, 26.975, 83.317, 26.975, 6.232],
    ("ls", "lbdf"): [8.823, 5.973, 24.196, 5.974, 3.585],
    ("rs", "brr"): [12.593, 28.124, 91.669, 27.599, 7.601],
    ("rs", "lbdf"): [11.432, 6.268, 32.036, 6.464, 7.333],
}


# [P-pdf] Table II (LBDF, 256 KB, 5k plans): baseline and best GET per search, DRAM MB (note §7.2).
NETS2 = ["efficientnet_b3", "resnet152", "deeplabv3_mobilenet_v3_large"]
PAPER2 = {"ls": [90.500, 80.733, 116.644], "nsga2": [77.334, 77.205, 114.351], "rs": [172.802, 113.661, 148.153]}
PAPER2_BEST_GET = {"ls": [73.569, 74.461, 113.942], "nsga2": [61.265, 66.621, 113.602],
                   "rs": [162.774, 94.453, 142.548]}


def run(binary, args):
    out = subprocess.run([binary, "partition", "--json", *args], check=True, capture_output=True, text=True).stdout
    return json.loads(out)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("binary")
    ap.add_argument("shared")
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--budget", type=int, default=2000)
    ap.add_argument("--buffer-kb", type=float, default=128)
    ap.add_argument("--table2", action="store_true", help="Table II: EB3, RN152, DLv3; LBDF 256 KB, 5k plans")
    a = ap.parse_args()
    os.environ["MAPFUSE_SHARED_DATA"] = a.shared
    global NETS, PAPER, PAPER_BEST_GET
    searches, schemes = ["ls", "rs"], ["brr", "lbdf"]
    if a.table2:
        NETS, searches, schemes = NETS2, ["ls", "nsga2", "rs"], ["lbdf"]
        a.buffer_kb, a.budget = 256, 5000
        PAPER = {(k, "lbdf"): v for k, v in PAPER2.items()}
        PAPER_BEST_GET = {(k, "lbdf"): v for k, v in PAPER2_BEST_GET.items()}
    for search in searches:
        for scheme in schemes:
            print(f"\n#### {search.upper()}, {scheme.upper()}, {a.buffer_kb:g} KB, {a.budget} plans, "
                  f"{a.seeds} seeds: DRAM MB (mean ± sd; rectify rate)\n")
            print("| row | " + " | ".join(NETS) + " |")
            print("|---|" + "---|" * len(NETS))
            rows = {}
            for split in ["random", "cut", "occlusion", "dp"]:
                cells = []
                for net in NETS:
                    d, r = [], []
                    for seed in range(1, a.seeds + 1):
                        j = run(a.binary, ["--workload", net, "--scheme", scheme, "--buffer-kb", str(a.buffer_kb),
                                           "--search", search, "--split", split, "--budget", str(a.budget),
                                           "--seed", str(seed)])
                        d.append(j["dram_mb"])
                        if j["rectify_rate"] is not None:
                            r.append(j["rectify_rate"])
                    sd = statistics.stdev(d) if len(d) > 1 else 0.0
                    rate = f"; {100 * statistics.mean(r):.1f} %" if r else ""
                    cells.append(f"{statistics.mean(d):.3f} ± {sd:.3f}{rate}")
                name = "baseline (random split)" if split == "random" else f"Algorithm 1 + {split}"
                print(f"| {search.upper()} {name} | " + " | ".join(cells) + " |")
            exact = [run(a.binary, ["--workload", net, "--scheme", scheme, "--buffer-kb", str(a.buffer_kb),
                                    "--search", "exact"]) for net in NETS]
            print("| true optimum | " + " | ".join(
                f"{x['dram_mb']:.3f}" + ("" if x["optimal"] else f" (gap {100 * x['gap']:.1f} %)") for x in exact) + " |")
            print("| fuseable / operators | " + " | ".join(f"{x['fuseable_nodes']} / {x['nodes']}" for x in exact) + " |")
            print(f"| paper {search.upper()} | " + " | ".join(f"{v:.3f}" for v in PAPER[(search, scheme)]) + " |")
            print(f"| paper best {search.upper()}+GET | " + " | ".join(f"{v:.3f}" for v in PAPER_BEST_GET[(search, scheme)]) + " |")


if __name__ == "__main__":
    sys.exit(main())
