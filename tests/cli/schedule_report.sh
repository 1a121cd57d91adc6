#!/usr/bin/env bash
# `mapfuse schedule --replay-stream DIR --output FILE.h5` then `mapfuse report FILE.h5 --plots DIR`:
# the schedule file's tables read by h5py with their row counts (448 CTs and 904 transfers for
# 2conv, as Stream's cns.csv and transfers.csv), consistent totals and memory trace, the printed
# totals, and the Gantt chart and memory plot as PNG files.
set -eu
bin="$1"
data="$2"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$bin" schedule --replay-stream "$data/stream/derived/coala/2conv_fused_fixed_k4/" --output "$tmp/s.h5" >/dev/null
/usr/bin/python3 - "$tmp/s.h5" <<'PY'
import sys
import h5py
f = h5py.File(sys.argv[1], "r")
assert f.attrs["format"] in ("mapfuse-schedule", b"mapfuse-schedule"), f.attrs["format"]
assert int(f.attrs["schema_version"]) == 1
assert list(f["schedules"]) == ["2conv_fused_fixed_k4"], list(f["schedules"])
g = f["schedules/2conv_fused_fixed_k4"]
tiles, transfers, links = g["tiles"][...], g["transfers"][...], g["transfer_links"][...]
cores, memory, energy = g["cores"][...], g["memory_trace"][...], g["energy"][...]
assert len(tiles) == 448, len(tiles)
assert len(transfers) == 904, len(transfers)
assert len(cores) == 7 and len(g["links"]) >= 1
assert float(g.attrs["latency_cc"]) == 61004
assert abs(sum(energy["pj"]) - 43296172.624) < 1e-9 * 43296172.624
assert abs(float(g.attrs["energy_pj"]) - 43296172.624) < 1e-9 * 43296172.624
assert max(tiles["end"]) == 61004 and all(tiles["end"] > tiles["start"])
causes = {c.decode() if isinstance(c, bytes) else c for c in transfers["cause"]}
assert causes == {"OFF_CHIP", "CORE_TO_CORE"}, causes
assert sum(transfers["cause"] == transfers["cause"][0]) > 0
assert int(transfers["link_count"].sum()) == len(links) and len(links) >= 904
for k in range(7):
    bits = memory["bits"][memory["core"] == k]
    assert len(bits) >= 1 and max(bits) == cores["peak_memory_bits"][k], (k, max(bits), cores["peak_memory_bits"][k])
assert cores["peak_memory_bits"][0] == 685056
PY
"$bin" report "$tmp/s.h5" --plots "$tmp/plots" >"$tmp/report.md" 2>"$tmp/err"
grep -q "^## Schedule 2conv_fused_fixed_k4" "$tmp/report.md"
grep -q "^| latency | 61004 cc |" "$tmp/report.md"
grep -q "^| energy | 43296172.624 pJ |" "$tmp/report.md"
grep -q "^| CORE_TO_CORE | 672 |" "$tmp/report.md"
grep -q "^| OFF_CHIP | 232 |" "$tmp/report.md"
for png in gantt_2conv_fused_fixed_k4.png memory_2conv_fused_fixed_k4.png; do
  [ "$(head -c 8 "$tmp/plots/$png" | od -An -tx1 | tr -d ' \n')" = "89504e470d0a1a0a" ] || { cat "$tmp/err"; exit 1; }
done
# A newer schema version: exit 2 with a hint.
cp "$tmp/s.h5" "$tmp/new.h5"
/usr/bin/python3 -c "import h5py,sys; f=h5py.File(sys.argv[1],'r+'); f.attrs['schema_version']=2; f.close()" "$tmp/new.h5"
set +e
"$bin" report "$tmp/new.h5" --no-plots >/dev/null 2>"$tmp/err3"
rc=$?
set -e
[ "$rc" -eq 2 ] || { echo "expected exit 2, got $rc"; exit 1; }
grep -q "newer mapfuse" "$tmp/err3" || { cat "$tmp/err3"; exit 1; }
# Not a schedule or study file: exit 2, naming it.
echo "plain text" >"$tmp/x.h5"
set +e
"$bin" report "$tmp/x.h5" --no-plots 2>"$tmp/err2"
rc=$?
set -e
[ "$rc" -eq 2 ] || { echo "expected exit 2, got $rc"; exit 1; }
grep -q "x.h5" "$tmp/err2"
echo "schedule_report: ok"
