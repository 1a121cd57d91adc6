#!/usr/bin/env bash
# FFM against AccelForge's own mapper results (docs/validation.md, "FFM against AccelForge").
# Runs `mapfuse ffm` on the oracle cases of shared/data/ffm/oracles_accelforge_regression.csv that
# mapfuse can express and prints AccelForge's and mapfuse's best energy and latency with the gap.
# Usage: [VERBOSE=1] scripts/ffm_crosscheck.sh [BUILD_DIR] [CASE_FILTER]   (filter: grep pattern on
# "arch|workload"; VERBOSE prints each optimum's LoopTree)
# Energies: AccelForge J (or unit energies for "simple"), mapfuse pJ (units); latency: AccelForge s
# (or MAC cycles for "simple"), mapfuse cycles / frequency.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$here/build}
filter=${2:-.}
mapfuse=$build/cli/mapfuse
csv=$here/../shared/data/ffm/oracles_accelforge_regression.csv
[ -f "$csv" ] || csv=/work/shared/data/ffm/oracles_accelforge_regression.csv
hwjson=$(dirname "$csv")/accelforge/HEAD/tests/hwcomponents_expected.json
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT

# A chain of n matmuls T<i+1>[m,n] = T<i>[m,k] W<i>[k,n], all ranks of size s except M (AccelForge
# examples/workloads/basic/matmuls.yaml with KN = s, and three_matmuls_annotated.yaml: n = 3, 128).
chain() {  # name n M KN
  local f=$tmp/$1.toml
  echo "name = \"$1\"" > "$f"
  for ((i = 0; i < $2; i++)); do
    cat >> "$f" <<T
[[einsum]]
name = "Matmul$i"
ranks = { M = $3, N = $4, K = $4 }
tensors = [ { name = "T$i", role = "input", dims = ["m", "k"] }, { name = "W$i", role = "weight", dims = ["k", "n"] }, { name = "T$((i + 1))", role = "output", dims = ["m", "n"] } ]
T
  done
  echo "$f"
}
matmuls=$(chain matmuls 2 64 64)
three=$(chain three_matmuls_annotated 3 128 128)

# One GPT-3 decoder layer as AccelForge's examples/workloads/transformers/gpt (_gpt3.yaml with
# multi_head.yaml and dense_two_layer.yaml, prefill: M = P = N_NEW_TOKENS): the zoo's ten Einsums
# with every value 16 bits wide (_gpt3.yaml's `bits_per_value: {All: 16}`).
gpt3() {  # name H E D C B T
  local f=$tmp/$1.toml H=$2 E=$3 D=$4 C=$5 B=$6 T=$7
  t() { echo "{ name = \"$1\", role = \"$2\", dims = [$3], bits = 16 }"; }
  einsum() { printf '[[einsum]]\nname = "%s"\n%branks = { %s }\ntensors = [ %s, %s%s ]\n' "$1" "$2" "$3" "$4" "$5" "${6:+, $6}"; }
  {
    echo "name = \"$1\""
    einsum I 'op = "copy"\n' "B = $B, M = $T, D = $D" "$(t I_in input '"b", "m", "d"')" "$(t I output '"b", "m", "d"')"
    for x in V K Q; do
      einsum $x "" "B = $B, M = $T, H = $H, E = $E, D = $D" "$(t I input '"b", "m", "d"')" \
        "$(t W$x weight '"h", "e", "d"')" "$(t $x output '"b", "m", "h", "e"')"
    done
    einsum QK "" "B = $B, M = $T, P = $T, H = $H, E = $E" "$(t Q input '"b", "m", "h", "e"')" \
      "$(t K weight '"b", "p", "h", "e"')" "$(t QK output '"b", "m", "p", "h"')"
    einsum QK_softmax 'op = "softmax"\n' "B = $B, M = $T, P = $T, H = $H" "$(t QK input '"b", "m", "p", "h"')" \
      "$(t QK_softmax output '"b", "m", "p", "h"')"
    einsum AV "" "B = $B, M = $T, P = $T, H = $H, F = $E" "$(t QK_softmax input '"b", "m", "p", "h"')" \
      "$(t V weight '"b", "p", "h", "f"')" "$(t AV output '"b", "m", "h", "f"')"
    einsum Z "" "B = $B, M = $T, H = $H, F = $E, G = $D" "$(t AV input '"b", "m", "h", "f"')" \
      "$(t WZ weight '"h", "f", "g"')" "$(t Z output '"b", "m", "g"')"
    einsum FFA "" "B = $B, M = $T, G = $D, C = $C" "$(t Z input '"b", "m", "g"')" \
      "$(t WFFA weight '"g", "c"')" "$(t FFA output '"b", "m", "c"')"
    einsum FFB "" "B = $B, M = $T, C = $C, J = $D" "$(t FFA input '"b", "m", "c"')" \
      "$(t WFFB weight '"c", "j"')" "$(t FFB output '"b", "m", "j"')"
  } > "$f"
  echo "$f"
}
gpt3_67=$(gpt3 gpt3_6.7B 32 128 4096 16384 1 2048)
gpt3_175=$(gpt3 gpt3_175B 96 128 12288 49152 1 2048)

# mapfuse's model counts words of each level's width (word_bits) and ignores a tensor's own
# width, so a workload of 16-bit values is run on the preset with every level's word twice as
# wide: the same bits per level (entries halved, at least one), twice the energy per word and half
# the words per cycle. Simba's accumulator, 3 x the value width in AccelForge's simba.yaml, goes
# from 24 to 48 bits. The compute unit is left as it is.
wide() {  # preset -> file
  local f=$tmp/$1_16bit.toml
  python3 - "$here/presets/arch/$1.toml" > "$f" <<'P'
import re, sys
level = False
for line in open(sys.argv[1]).read().split("\n"):
    if line.startswith("["):
        level = line.strip() == "[[level]]"
    elif level:
        m = re.match(r"(\w+) = ([0-9.eE+-]+)\s*$", line)
        if m:
            k, v = m.group(1), float(m.group(2))
            scale = {"energy_pj": 2, "read_pj": 2, "write_pj": 2, "update_pj": 2,
                     "read_bandwidth": 0.5, "write_bandwidth": 0.5, "shared_bandwidth": 0.5}.get(k)
            if k == "word_bits":
                line = f"word_bits = {int(v) * 2}"
            elif k == "entries":
                line = f"entries = {max(1, int(v) // 2)}"
            elif scale:
                line = f"{k} = {v * scale!r}"
    print(line)
P
  echo "$f"
}

# case: arch-in-csv workload-in-csv fusion(True/False) mapfuse-arch workload-file freq_MHz energy-scale
cases=(
  "simple matmuls True accelforge_simple $matmuls 1000 1"
  "simple matmuls False accelforge_simple $matmuls 1000 1"
  "simple three_matmuls_annotated True accelforge_simple $three 1000 1"
  "simple three_matmuls_annotated False accelforge_simple $three 1000 1"
  "eyeriss matmuls True accelforge_eyeriss $matmuls 200 1e-12"
  "eyeriss matmuls False accelforge_eyeriss $matmuls 200 1e-12"
  "eyeriss three_matmuls_annotated True accelforge_eyeriss $three 200 1e-12"
  "eyeriss three_matmuls_annotated False accelforge_eyeriss $three 200 1e-12"
  "simba matmuls True accelforge_simba $matmuls 2500 1e-12"
  "simba matmuls False accelforge_simba $matmuls 2500 1e-12"
  "simba three_matmuls_annotated True accelforge_simba $three 2500 1e-12"
  "simba three_matmuls_annotated False accelforge_simba $three 2500 1e-12"
  "tpu_v4i matmuls True accelforge_tpu_v4i $matmuls 1050 1e-12"
  "tpu_v4i matmuls False accelforge_tpu_v4i $matmuls 1050 1e-12"
  "tpu_v4i three_matmuls_annotated True accelforge_tpu_v4i $three 1050 1e-12"
  "tpu_v4i three_matmuls_annotated False accelforge_tpu_v4i $three 1050 1e-12"
  # GPT-3 prefill (BATCH_SIZE = 1, N_NEW_TOKENS = 2048), 16-bit values: 175B on simple and
  # tpu_v4i, 6.7B on eyeriss and simba, as in AccelForge's regression.
  "simple gpt3_175B False $(wide accelforge_simple) $gpt3_175 1000 1"
  "simple gpt3_175B True $(wide accelforge_simple) $gpt3_175 1000 1"
  "tpu_v4i gpt3_175B False $(wide accelforge_tpu_v4i) $gpt3_175 1050 1e-12"
  "tpu_v4i gpt3_175B True $(wide accelforge_tpu_v4i) $gpt3_175 1050 1e-12"
  "eyeriss gpt3_6.7B False $(wide accelforge_eyeriss) $gpt3_67 200 1e-12"
  "eyeriss gpt3_6.7B True $(wide accelforge_eyeriss) $gpt3_67 200 1e-12"
  "simba gpt3_6.7B False $(wide accelforge_simba) $gpt3_67 2500 1e-12"
  "simba gpt3_6.7B True $(wide accelforge_simba) $gpt3_67 2500 1e-12"
)
printf '%-8s %-24s %-6s %14s %14s %8s %14s %8s %14s %14s %8s %s\n' arch workload fused \
  af_energy mf_energy gap% mf+leak gap% af_latency mf_latency gap% cpu_s
for c in "${cases[@]}"; do
  read -r arch wl fused preset file mhz scale <<<"$c"
  echo "$arch|$wl" | grep -q -- "$filter" || continue
  row=$(grep -F "\"$arch|$wl|" "$csv" | grep -v "DECODE=True" | grep -F "|$([ "$fused" = True ] && echo fused || echo unfused)\"" | head -1)
  af_e=$(echo "$row" | awk -F, '{for (i = 1; i <= NF; i++) if ($i == "True" || $i == "False") {print $(i + 1); exit}}')
  af_l=$(echo "$row" | awk -F, '{for (i = 1; i <= NF; i++) if ($i == "True" || $i == "False") {print $(i + 2); exit}}')
  # As AccelForge's regression (tests/test_regression.py): minimise EDP (Metrics.ENERGY_DELAY_PRODUCT
  # on these arches) with max_fused_loops = 1. "fused" runs the YAML as it is: MainMemory
  # `keep: ~Intermediates, may_keep: All`, so each intermediate goes through DRAM or stays on chip
  # (free fusion: mapfuse ffm's default; `MUST_FUSE=1` forces every one on chip instead);
  # "unfused" sets MainMemory `keep: All` (--no-fusion). The CSV's latency is that mapping's.
  if [ "$fused" = False ]; then mode=(--no-fusion); elif [ -n "${MUST_FUSE:-}" ]; then mode=(--must-fuse others); else mode=(); fi
  if ! /usr/bin/time -f '%U' -o "$tmp/time" timeout "${TIMEOUT:-600}" "$mapfuse" ffm --arch "$preset" \
      --workload "$file" "${mode[@]}" --objective "${OBJECTIVE:-edp}" --json > "$tmp/out.json"; then
    printf '%-8s %-24s %-6s not finished within %s s (TIMEOUT) or failed\n' "$arch" "$wl" "$fused" "${TIMEOUT:-600}"
    continue
  fi
  python3 - "$arch" "$wl" "$fused" "$af_e" "$af_l" "$tmp/out.json" "$mhz" "$scale" "$(cat "$tmp/time")" "$hwjson" <<'P'
import json, sys
arch, wl, fused, af_e, af_l, out, mhz, scale, cpu, hwjson = sys.argv[1:]
af_e, af_l, mhz, scale = map(float, (af_e, af_l, mhz, scale))
j = json.load(open(out))
e = j["energy_pj"] * scale
l = j["cycles"] if arch == "simple" else j["cycles"] / (mhz * 1e6)
# Leakage, which mapfuse does not model: AccelForge's leak_power per component instance
# (tests/hwcomponents_expected.json) x instances x latency, added to mapfuse's energy for the
# "+leak" column. Instances: Eyeriss 14 x 12 PEs, Simba 16 PEs of 8 x 8 MACs.
instances = {"eyeriss": {"GlobalBuffer": 1, "InputScratchpad": 168, "WeightScratchpad": 168,
                         "OutputScratchpad": 168, "MAC": 168},
             "simba": {"GlobalBuffer": 1, "InputBuffer": 16, "WeightBuffer": 16,
                       "AccumulationBuffer": 16, "Register": 1024, "MAC": 1024}}.get(arch, {})
hw = json.load(open(hwjson)).get(arch, {})
leak_w = sum(hw[c]["leak_power"] * n for c, n in instances.items())
el = e + leak_w * l
print(f"{arch:<8} {wl:<24} {fused:<6} {af_e:14.6g} {e:14.6g} {100 * (e / af_e - 1):+8.2f} "
      f"{el:14.6g} {100 * (el / af_e - 1):+8.2f} {af_l:14.6g} {l:14.6g} {100 * (l / af_l - 1):+8.2f} {cpu}")
P
  [ -z "${VERBOSE:-}" ] || python3 -c "import json; print(json.load(open('$tmp/out.json'))['looptree'])"
done
