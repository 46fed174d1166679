#!/bin/sh
# replay-corpora.sh: run every fuzz target over its corpus without libFuzzer.
#
# Covers: each tests/fuzz/corpus/<target>/ file fed once to
# tests/fuzz/replay_<target> (built by 'make check'; under --enable-asan it
# runs with ASan+UBSan).  A target's corpus is first replayed in one
# process; if that fails, each file is replayed alone so that the count
# names the failing files.  Prints one "fuzz-replay: N passed, N failed"
# line (one per corpus file) and exits non-zero when anything failed.
#
# Usage: tests/fuzz/replay-corpora.sh [TARGET...]   (from the build directory;
# $srcdir, set by 'make check', or the script's location finds the corpora)
set -u

here=$(cd "$(dirname "$0")" && pwd)
src=${srcdir:-$here/../..}
corpora=$src/tests/fuzz/corpus
bin=${PN_FUZZ_BIN:-tests/fuzz}
# Sanitizers stop at the first report; a UBSan report is a failure.
ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}
export ASAN_OPTIONS UBSAN_OPTIONS

if [ $# -gt 0 ]; then
	targets=$*
else
	targets=$(cd "$corpora" && ls)
fi

passed=0
failed=0
log=${TMPDIR:-/tmp}/fuzz-replay.$$.log
trap 'rm -f "$log"' EXIT

for t in $targets; do
	dir=$corpora/$t
	prog=$bin/replay_$t
	n=$(find "$dir" -maxdepth 1 -type f ! -name '.*' | wc -l)
	if [ ! -x "$prog" ]; then
		echo "fuzz-replay: $t: $prog not built" >&2
		failed=$((failed + n))
		continue
	fi
	if "$prog" "$dir" >"$log" 2>&1; then
		passed=$((passed + n))
		echo "fuzz-replay: $t: $n files ok"
		continue
	fi
	# Something failed: replay file by file to count and name the failures.
	for f in $(find "$dir" -maxdepth 1 -type f ! -name '.*' | sort); do
		if "$prog" "$f" >"$log" 2>&1; then
			passed=$((passed + 1))
		else
			failed=$((failed + 1))
			echo "fuzz-replay: FAIL $t $(basename "$f")"
			sed 's/^/    /' "$log" | tail -n 30
		fi
	done
done

echo "fuzz-replay: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
