#!/bin/sh
# sanitize.sh: the ASan+UBSan CI leg (issue 7).
#
# Covers: an out-of-tree build with --enable-asan (gcc by default; CC=clang
# works too), the Check unit tests under ASan with LeakSanitizer on and
# UBSan halting on the first report, then every fuzz corpus file replayed
# through tests/fuzz/replay_<target> (tests/fuzz/replay-corpora.sh).
# Prints "sanitize: N passed, N failed", N counting unit checks plus
# corpus files (a build or configure failure counts as one failure).
# Needs no database and no network; about 2-3 minutes on 2 cores.
#
# Usage: tests/sanitize.sh            (from anywhere; builds in <top>/build-asan)
#        PN_ASAN_BUILD=/tmp/b CC=clang tests/sanitize.sh
set -u

top=$(cd "$(dirname "$0")/.." && pwd)
build=${PN_ASAN_BUILD:-$top/build-asan}
CC=${CC:-gcc}
jobs=$(nproc 2>/dev/null || echo 2)
passed=0
failed=0

ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:strict_string_checks=1
UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
export ASAN_OPTIONS UBSAN_OPTIONS

finish() {
	echo "sanitize: $passed passed, $failed failed"
	[ "$failed" -eq 0 ]
	exit $?
}

step() {
	echo "sanitize: $*"
}

if [ ! -x "$top/configure" ]; then
	step "autoreconf"
	(cd "$top" && autoreconf -fi) || { failed=$((failed + 1)); finish; }
fi
mkdir -p "$build" && cd "$build" || { failed=$((failed + 1)); finish; }

step "configure --enable-asan CC=$CC in $build"
if ! "$top/configure" --enable-asan CC="$CC" >configure.out 2>&1; then
	tail -n 30 configure.out
	failed=$((failed + 1))
	finish
fi

step "build"
if ! make -j"$jobs" all >make.out 2>&1 || ! make -j"$jobs" check TESTS= >>make.out 2>&1; then
	grep -E 'error|Error' make.out | head -n 30
	failed=$((failed + 1))
	finish
fi

step "unit tests (make check TESTS=tests/unit/runner)"
if [ -x tests/unit/runner ]; then
	make check TESTS=tests/unit/runner >check.out 2>&1
	rc=$?
	# Check's summary: "100%: Checks: 120, Failures: 0, Errors: 0"
	summary=$(grep -E '^[0-9]+%: Checks: ' tests/unit/runner.log | tail -n 1)
	if [ -n "$summary" ]; then
		checks=$(echo "$summary" | sed 's/.*Checks: \([0-9]*\).*/\1/')
		bad=$(echo "$summary" | sed 's/.*Failures: \([0-9]*\), Errors: \([0-9]*\).*/\1 + \2/')
		bad=$(($bad))
		passed=$((passed + checks - bad))
		failed=$((failed + bad))
		echo "$summary"
	fi
	if [ "$rc" -ne 0 ]; then
		grep -E 'ERROR|Sanitizer|runtime error|:[EF]:' tests/unit/runner.log | head -n 40
		# a crash of the runner itself (not counted by Check)
		[ -z "$summary" ] && failed=$((failed + 1))
	fi
else
	step "Check is not installed: unit tests skipped"
fi

step "fuzz corpora replay"
srcdir=$top PN_FUZZ_BIN=tests/fuzz "$top/tests/fuzz/replay-corpora.sh" >replay.out 2>&1
tail -n 40 replay.out | grep -v ' files ok$'
line=$(grep -E '^fuzz-replay: [0-9]+ passed, [0-9]+ failed' replay.out | tail -n 1)
if [ -n "$line" ]; then
	passed=$((passed + $(echo "$line" | sed 's/fuzz-replay: \([0-9]*\) passed.*/\1/')))
	failed=$((failed + $(echo "$line" | sed 's/.*passed, \([0-9]*\) failed/\1/')))
else
	failed=$((failed + 1))
fi
finish
