#!/usr/bin/env bash
# Fuzzes the readers users feed their own files to (study and architecture TOML, workload TOML,
# ONNX, Timeloop/DOSA problem YAML, the journal) with libFuzzer under AddressSanitizer and
# UndefinedBehaviorSanitizer.
#   scripts/fuzz.sh [SECONDS_PER_TARGET=600] [TARGET ...]     (targets: fuzz_onnx, fuzz_journal, ...)
# Seeds come from the repository's own inputs and ../shared/data; crashes are written to
# out/fuzz/<target>/ and the script exits 1 if any target found one. Every crash found becomes a
# regression test in tests/unit/test_fuzz_regressions.cpp.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
seconds="${1:-600}"
shift || true
bash "$root/scripts/setup.sh"
need=()
for p in clang libclang-rt-14-dev libomp-14-dev; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || need+=("$p")
done
if [ ${#need[@]} -gt 0 ]; then
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get -o DPkg::Lock::Timeout=600 update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi
build="${MAPFUSE_FUZZ_BUILD_DIR:-$root/build-fuzz}"
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
  -DMAPFUSE_FUZZ=ON -DMAPFUSE_BUILD_TESTS=OFF -DMAPFUSE_BUILD_BENCH=OFF >/dev/null
targets=("$@")
[ ${#targets[@]} -eq 0 ] && targets=(fuzz_study_toml fuzz_arch_toml fuzz_workload_toml fuzz_onnx fuzz_timeloop_yaml fuzz_journal)
cmake --build "$build" -j "$(nproc)" --target "${targets[@]}"

shared="$root/../shared/data"
seeds() {  # the seed corpus of a target: real files of its format
  case "$1" in
    fuzz_study_toml) ls "$root"/experiments/*.toml "$root"/tests/fixtures/*study*.toml ;;
    fuzz_arch_toml) ls "$root"/presets/arch/*.toml ;;
    fuzz_workload_toml) ls "$root"/tests/fixtures/*.toml ;;
    fuzz_onnx) find "$shared" -name '*.onnx' -size -2M 2>/dev/null | head -20 ;;
    fuzz_timeloop_yaml) find "$shared" -path '*timeloop*' -name '*.yaml' 2>/dev/null | head -40 ;;
    fuzz_journal) ls "$root"/tests/fixtures/journal/*.journal ;;
  esac
}
export ASAN_OPTIONS="detect_leaks=1:abort_on_error=1" UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
status=0
for t in "${targets[@]}"; do
  out="$root/out/fuzz/$t"
  corpus="$out/corpus"
  mkdir -p "$corpus"
  while read -r f; do [ -n "$f" ] && cp -n "$f" "$corpus/" 2>/dev/null || true; done < <(seeds "$t")
  echo "fuzz: $t for ${seconds} s (corpus $(ls "$corpus" | wc -l) files)"
  if ! "$build/tests/fuzz/$t" "$corpus" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=4096 \
       -artifact_prefix="$out/" -print_final_stats=1 >"$out/log.txt" 2>&1; then
    echo "fuzz: $t FOUND A CRASH, HANG OR SANITIZER REPORT: $(ls "$out" | grep -E '^(crash|timeout|oom|leak)-' | head -3) (log: $out/log.txt)"
    status=1
  else
    echo "fuzz: $t clean: $(grep -E '^stat::number_of_executed_units' "$out/log.txt" | awk '{print $2}') inputs run"
  fi
done
exit $status
