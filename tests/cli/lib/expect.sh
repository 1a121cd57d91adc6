# Sourced by CLI tests (not a test itself: tests/CMakeLists.txt globs tests/cli/*.sh only).
# Needs $tmp (a scratch directory) and $fail (set to 1 on a failure).
# expect <name> <expected status> <regex that stderr must match> -- command...
expect() {
  local name="$1" status="$2" pattern="$3"
  shift 4
  "$@" >"$tmp/out" 2>"$tmp/err"
  local rc=$?
  if [ "$rc" -ne "$status" ] || ! grep -Eq -- "$pattern" "$tmp/err"; then
    echo "FAIL $name: status $rc (want $status), stderr:"; sed 's/^/    /' "$tmp/err"
    fail=1
  else
    echo "ok   $name: $(head -c 200 "$tmp/err")"
  fi
}
