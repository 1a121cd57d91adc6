#!/usr/bin/env bash
# Multi-core architectures on the command line: Stream hardware YAML -> TOML conversion that loads
# back to the same system, and bad input (exit 2 with file and key).
# Usage: multicore_arch.sh <mapfuse binary> <shared data dir>
set -u
bin="$1"
data="$2"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0

. "$(dirname "$0")/lib/expect.sh"

hw="$data/stream/classic_cb9dfc52/examples/hardware"
# Conversion: the TOML it prints loads and prints the same TOML again; it equals the preset.
for sys in tpu_like_quad_core eyeriss_like_quad_core; do
  if "$bin" arch "$hw/$sys.yaml" --toml >"$tmp/$sys.toml" &&
     "$bin" arch "$tmp/$sys.toml" --toml >"$tmp/$sys.again.toml" &&
     "$bin" arch "$sys" --toml >"$tmp/$sys.preset.toml" &&
     cmp -s "$tmp/$sys.toml" "$tmp/$sys.again.toml" && cmp -s "$tmp/$sys.toml" "$tmp/$sys.preset.toml" &&
     [ "$(grep -c '^\[\[core\]\]' "$tmp/$sys.toml")" -eq 6 ]; then
    echo "ok   convert $sys"
  else
    echo "FAIL convert $sys"; fail=1
  fi
done

head='name = "x"
[offchip]
name = "DRAM"
energy_pj = 100
[[offchip.port]]
bits_per_cycle = 64'
core() { printf '[[core]]\nname = "%s"\n[core.compute]\nenergy_pj = 1\n[[core.level]]\nname = "buf"\nentries = 64\nenergy_pj = 1\n' "$1"; }
sys() { printf '%s\n%s\n%s\n%s\n' "$head" "$(core a)" "$(core b)" "$1" >"$tmp/$2.toml"; echo "$tmp/$2.toml"; }

expect "link to a missing core" 2 "missing.toml:[0-9]+:.*link\[0\].to: no core or memory named 'bb'.*did you mean 'b'" -- \
  "$bin" arch "$(sys '[[link]]
from = "a"
to = "bb"
bits_per_cycle = 8' missing)"
# no DRAM port here, and only a -> b: b reaches nothing
expect "cores no path connects" 2 "nopath.toml.*link: no path connects 'b' to 'a'" -- \
  "$bin" arch "$(sys '[[link]]
from = "a"
to = "b"
bits_per_cycle = 8' nopath)"
expect "unknown topology" 2 "ring.toml:[0-9]+:.*topology.kind: unknown topology 'ring'; expected bus, mesh, torus or pairs" -- \
  "$bin" arch "$(sys '[topology]
kind = "ring"
link_bits_per_cycle = 8' ring)"
expect "mesh shape" 2 "shape.toml.*topology.rows: rows x cols = 3 x 3 does not match the 2 nodes" -- \
  "$bin" arch "$(sys '[topology]
kind = "mesh"
rows = 3
cols = 3
link_bits_per_cycle = 8' shape)"

# Stream YAML: malformed YAML, and a link naming a core the system does not list
mkdir -p "$tmp/stream/cores"
cp "$hw/cores/offchip.yaml" "$hw/cores/tpu_like.yaml" "$tmp/stream/cores/"
printf 'name: s\ncores:\n  0: tpu_like.yaml\n  1: offchip.yaml\noffchip_core_id: 1\ncore_connectivity:\n  - type: bus\n    cores: [0, 1\n' >"$tmp/stream/bad.yaml"
expect "malformed Stream YAML" 2 "bad.yaml:[0-9]+.*malformed YAML" -- "$bin" arch "$tmp/stream/bad.yaml" --toml
printf 'name: s\ncores:\n  0: tpu_like.yaml\n  1: offchip.yaml\noffchip_core_id: 1\ncore_connectivity:\n  - type: link\n    cores: [0, 7]\n    bandwidth: 64\n' >"$tmp/stream/link7.yaml"
expect "Stream link to a missing core" 2 "link7.yaml:[0-9]+:.*core_connectivity\[0\].cores: core 7 is not listed under cores" -- \
  "$bin" arch "$tmp/stream/link7.yaml" --toml
printf 'name: s\ncores:\n  0: tpu_like.yaml\n  1: offchip.yaml\noffchip_core_id: 1\ncore_connectivity:\n  - type: ring\n    cores: [0, 1]\n    bandwidth: 64\n' >"$tmp/stream/ring.yaml"
expect "Stream unknown connection type" 2 "ring.yaml:[0-9]+:.*core_connectivity\[0\].type: 'ring'; expected link or bus" -- \
  "$bin" arch "$tmp/stream/ring.yaml" --toml

exit $fail
