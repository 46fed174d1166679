#!/bin/sh
# sanitize.sh: the ASan+UBSan CI leg (issue 7).
#
# Covers: an out-of-tree build with --enable-asan (gcc by default; CC=clang
# works too), the Check unit tests under ASan with LeakSanitizer on and
# UBSan halting on the first report, every fuzz corpus file replayed
# through tests/fuzz/replay_<target> (tests/fuzz/replay-corpora.sh), and the
# integration suite with the ASan+UBSan receivers (PN_BIN_DIR): every
# receiver process writes its sanitizer reports under asan-logs/, and any
# report there is a failure.
# The integration tests run through pytest (tests/conftest.py) over
# PN_SANITIZE_WORKERS processes (pytest-xdist, default 2, whole files per
# process).  Prints "sanitize unit: ...", "sanitize fuzz: ...", "sanitize
# integration: ..." and, last, "sanitize: N passed, N failed", N counting
# unit checks, corpus files and integration tests (a build or configure
# failure, and each sanitizer report, counts as one failure).  With
# PN_TEST_RESULTS=FILE (scripts/test) the integration results and those
# failures are appended to FILE as JSON lines: scripts/test counts a test
# that also ran in the normal build once.  About 4-5 minutes on 2 cores;
# PN_SANITIZE_NO_INTEGRATION=1 leaves the integration part out.
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

unit_line=""
# result ID: a failure that is not a test (a build failure, a sanitizer
# report), for scripts/test's count (PN_TEST_RESULTS)
result() {
	[ -n "${PN_TEST_RESULTS:-}" ] &&
		echo "{\"id\": \"$1\", \"outcome\": \"failed\"}" >>"$PN_TEST_RESULTS"
	return 0
}

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
	(cd "$top" && autoreconf -fi) || { failed=$((failed + 1)); result "sanitize::(build failed)"; finish; }
fi
# An in-tree configured source cannot also be built out of tree: then build
# a copy of the distributed sources (make distdir), as make distcheck does.
if [ -f "$top/config.status" ]; then
	step "the source tree is configured: building a copy (make distdir)"
	rm -rf "$build" && mkdir -p "$build" || { failed=$((failed + 1)); result "sanitize::(build failed)"; finish; }
	if ! make -C "$top" distdir distdir="$build/src" >"$build/distdir.out" 2>&1; then
		tail -n 20 "$build/distdir.out"
		failed=$((failed + 1)); result "sanitize::(build failed)"
		finish
	fi
	build=$build/src
	configure=./configure
else
	configure=$top/configure
fi
mkdir -p "$build" && cd "$build" || { failed=$((failed + 1)); result "sanitize::(build failed)"; finish; }

step "configure --enable-asan CC=$CC in $build"
if ! "$configure" --enable-asan CC="$CC" >configure.out 2>&1; then
	tail -n 30 configure.out
	failed=$((failed + 1)); result "sanitize::(build failed)"
	finish
fi

step "build"
if ! make -j"$jobs" all >make.out 2>&1 || ! make -j"$jobs" check TESTS= >>make.out 2>&1; then
	grep -E 'error|Error' make.out | head -n 30
	failed=$((failed + 1)); result "sanitize::(build failed)"
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
		unit_line="sanitize unit: $((checks - bad)) passed, $bad failed"
	fi
	if [ "$rc" -ne 0 ]; then
		grep -E 'ERROR|Sanitizer|runtime error|:[EF]:' tests/unit/runner.log | head -n 40
		# a crash of the runner itself (not counted by Check)
		if [ -z "$summary" ]; then
			failed=$((failed + 1))
			result "sanitize::(unit runner crashed)"
		fi
	fi
	[ -n "$unit_line" ] && echo "$unit_line"
else
	step "Check is not installed: unit tests skipped"
fi

step "fuzz corpora replay"
srcdir=$top PN_FUZZ_BIN=tests/fuzz "$top/tests/fuzz/replay-corpora.sh" >replay.out 2>&1
tail -n 40 replay.out | grep -v ' files ok$'
line=$(grep -E '^fuzz-replay: [0-9]+ passed, [0-9]+ failed' replay.out | tail -n 1)
if [ -n "$line" ]; then
	fp=$(echo "$line" | sed 's/fuzz-replay: \([0-9]*\) passed.*/\1/')
	ff=$(echo "$line" | sed 's/.*passed, \([0-9]*\) failed.*/\1/')
	passed=$((passed + fp))
	failed=$((failed + ff))
	echo "sanitize fuzz: $fp passed, $ff failed"
else
	failed=$((failed + 1))
	result "sanitize::(fuzz replay gave no summary)"
fi

if [ "${PN_SANITIZE_NO_INTEGRATION:-0}" != 1 ]; then
	step "integration tests with the ASan+UBSan receivers"
	rm -rf "$build/asan-logs" && mkdir -p "$build/asan-logs" && chmod 1777 "$build/asan-logs"
	res="$build/integration.jsonl"
	: >"$res"
	# RSS under ASan (shadow memory, quarantine) says nothing about leaks:
	# test_memory.py runs in the normal build, LeakSanitizer covers this one
	set --
	for f in "$top"/tests/integration/test_*.py; do
		[ "$(basename "$f")" = test_memory.py ] && continue
		set -- "$@" "$f"
	done
	workers=${PN_SANITIZE_WORKERS:-2}
	par=""
	[ "$workers" -gt 1 ] && par="-n $workers --dist loadfile"
	# shellcheck disable=SC2086
	(cd "$top/tests" && PN_BIN_DIR="$build" \
		ASAN_OPTIONS="$ASAN_OPTIONS:log_path=$build/asan-logs/asan" \
		UBSAN_OPTIONS="$UBSAN_OPTIONS:log_path=$build/asan-logs/ubsan" \
		timeout -k 30 2400 /usr/bin/python3 -m pytest -v -c pytest.ini --rootdir . $par \
		--pn-results="$res" "$@" </dev/null >"$build/integration.out" 2>&1)
	rc=$?
	if [ "$rc" != 0 ] && [ "$rc" != 1 ]; then
		echo "{\"id\": \"sanitize::(pytest exit $rc)\", \"outcome\": \"failed\"}" >>"$res"
		tail -n 30 "$build/integration.out"
	fi
	if [ ! -s "$res" ]; then
		# pytest could not start or collected nothing: no test ran
		echo '{"id": "sanitize::(integration ran no test)", "outcome": "failed"}' >>"$res"
		tail -n 30 "$build/integration.out"
	fi
	set -- $(/usr/bin/python3 "$top/tests/lib/pnresults.py" "$res")
	passed=$((passed + $1))
	failed=$((failed + $2))
	echo "sanitize integration: $1 passed, $2 failed, $3 skipped"
	[ "$2" -gt 0 ] && /usr/bin/python3 "$top/tests/lib/pnresults.py" --failed-ids "$res" | sed 's/^/  failed: /'
	[ -n "${PN_TEST_RESULTS:-}" ] && cat "$res" >>"$PN_TEST_RESULTS"
	reports=$(ls "$build/asan-logs" | wc -l)
	if [ "$reports" -ne 0 ]; then
		step "$reports sanitizer report(s) from receivers:"
		head -n 40 "$build"/asan-logs/*
		failed=$((failed + reports))
		for r in "$build"/asan-logs/*; do
			result "sanitize::(sanitizer report $(basename "$r"))"
		done
	else
		step "no sanitizer report from any receiver"
	fi
fi
finish
