#!/usr/bin/env bash
# Bad input: one clear message naming the file, key or line and what was expected; exit status 2.
# Usage: bad_input.sh <mapfuse binary> <shared data dir>
set -u
bin="$1"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0

. "$(dirname "$0")/lib/expect.sh"

arch() { printf '%s\n' "$1" >"$tmp/$2.toml"; echo "$tmp/$2.toml"; }
base='name = "t"
[compute]
energy_pj = 1
[[level]]
name = "DRAM"
energy_pj = 100
[[level]]
name = "Buf"
entries = 64
energy_pj = 1'

expect "malformed TOML" 2 'malformed.toml:2:.*malformed TOML' -- "$bin" arch "$(arch 'name = "t"
[compute' malformed)"
expect "missing key" 2 'missing.toml.*compute.energy_pj: missing required key' -- "$bin" arch "$(arch 'name = "t"
[compute]
name = "MAC"
[[level]]
name = "DRAM"' missing)"
expect "wrong type" 2 'wrongtype.toml:[0-9]+:.*level\[1\].entries: expected an integer, found a string' -- "$bin" arch "$(arch "${base/entries = 64/entries = \"big\"}" wrongtype)"
expect "unknown key with suggestion" 2 "unknown.toml:[0-9]+:.*level\[1\].enrgy_pj: unknown key \(did you mean 'energy_pj'\?\)" -- "$bin" arch "$(arch "${base/entries = 64/entries = 64
enrgy_pj = 2}" unknown)"
expect "zero capacity" 2 'zerocap.toml:[0-9]+:.*entries: capacity 0 is not positive' -- "$bin" arch "$(arch "${base/entries = 64/entries = 0}" zerocap)"
expect "negative capacity" 2 'negcap.toml:[0-9]+:.*size_kb: capacity -4 is not positive' -- "$bin" arch "$(arch "${base/entries = 64/size_kb = -4}" negcap)"
expect "unknown role" 2 "role.toml:[0-9]+:.*keeps: unknown tensor role 'weights'.*did you mean 'weight'" -- "$bin" arch "$(arch "${base}
keeps = [\"weights\"]" role)"
expect "unknown preset" 2 "'gemini_default' is neither a preset nor a readable file.*did you mean 'gemmini_default'" -- "$bin" arch gemini_default
expect "missing dataset" 2 'nonexistent.csv: cannot open file' -- "$bin" validate dosa "$tmp/nonexistent.csv"
printf 'not a gzip' >"$tmp/corrupt.csv.tar.gz"
expect "corrupt archive" 2 'corrupt.csv.tar.gz: ' -- "$bin" validate dosa "$tmp/corrupt.csv.tar.gz"
printf 'a,b\n1,2,3\n' >"$tmp/ragged.csv"
expect "ragged csv" 2 'ragged.csv:2: row has 3 fields; the header has 2' -- "$bin" validate dosa "$tmp/ragged.csv"
expect "unknown subcommand" 2 '' -- "$bin" frobnicate

# Workloads and mappings.
expect "unknown zoo name" 2 "no workload 'resnet19'|'resnet19'.*did you mean 'resnet18'" -- "$bin" workload resnet19
printf 'name = "w"\n[[einsum]]\nname = "a"\nranks = { P = 0 }\ntensors = [ { name = "O", role = "output", dims = ["p"] } ]\n' >"$tmp/zero.toml"
expect "zero rank size" 2 'zero.toml:.*(not positive|must be)' -- "$bin" workload "$tmp/zero.toml"
printf 'name = "w"\n[[einsum]]\nname = "a"\nranks = { P = 4 }\ntensors = [ { name = "X", role = "input", dims = ["p"] }, { name = "Y", role = "output", dims = ["p"] } ]\n[[einsum]]\nname = "b"\nranks = { P = 4 }\ntensors = [ { name = "Y", role = "input", dims = ["p"] }, { name = "X", role = "output", dims = ["p"] } ]\n' >"$tmp/cycle.toml"
expect "cyclic workload" 2 'cycle' -- "$bin" workload "$tmp/cycle.toml"
printf 'this is not protobuf' >"$tmp/corrupt.onnx"
expect "corrupt onnx" 2 'corrupt.onnx' -- "$bin" workload "$tmp/corrupt.onnx"
expect "factorisation does not multiply out" 2 'factors of rank Q multiply to 56; its size is 112' -- \
  "$bin" eval --workload resnet18 --layer conv1 --mapping "DRAM[conv1.weight,input,conv1] K=64 C=3 R=7 S=7 P=112 Q=56"
expect "unknown level in mapping" 2 "unknown level 'DRAMM'.*did you mean 'DRAM'" -- \
  "$bin" eval --workload resnet18 --layer conv1 --mapping "DRAMM[conv1] K=64"
expect "unknown tensor in mapping" 2 "unknown tensor 'weights'" -- \
  "$bin" eval --workload resnet18 --layer conv1 --mapping "DRAM[weights] K=64"
expect "unknown layer" 2 "no Einsum 'conv9'" -- "$bin" eval --workload resnet18 --layer conv9 --mapping "DRAM[x]"

exit $fail
