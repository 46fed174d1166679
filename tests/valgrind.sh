#!/usr/bin/env bash
# tests/valgrind.sh: the valgrind memcheck leg (issue 7; docs/RELIABILITY.md).
#
# Runs a representative slice of the integration tests with every receiver
# process (CGI runs, FastCGI workers, supervisors) under
#   valgrind --leak-check=full --errors-for-leak-kinds=definite --error-exitcode=99
# (pntest.valgrind_argv, switched on by PN_VALGRIND=1), then reads every
# process's valgrind log: any error or definitely-lost byte is a failure, and
# so is a log without its summary (a process that never finished).
#
# The slice: the hostile-input matrix over FastCGI (100 cases, all four
# providers), every FastCGI scenario of test_core (Stripe, Alipay), test_2c2p,
# test_wechatpay and test_concurrency (concurrent duplicates, every provider),
# a few CGI scenarios per provider, and the slow-database
# fault test.  Prints "valgrind: N passed, N failed" and, last,
# "N passed, N failed" (the tests plus one failure per dirty log).
# Needs a built tree (scripts/test builds; or make).  Usage: tests/valgrind.sh

set -u
cd "$(dirname "$0")/.." || exit 2
ROOT=$(pwd)
PY=/usr/bin/python3
if ! command -v valgrind >/dev/null; then
	echo "valgrind: not installed"
	echo "0 passed, 1 failed"
	exit 1
fi
WORK=$(mktemp -d "${TMPDIR:-/tmp}/pnvalgrind.XXXXXX")
chmod 755 "$WORK"
trap 'rm -rf "$WORK"' EXIT
mkdir -m 777 "$WORK/logs"
export PN_VALGRIND=1 PN_VALGRIND_LOGDIR="$WORK/logs"

p=0 f=0 n=0
slice() {	# slice FILE PATTERN...
	local file=$1 json="$WORK/r$n.json" args=() pp ff ss
	shift
	n=$((n + 1))
	for pat in "$@"; do args+=(-k "$pat"); done
	timeout -k 10 900 "$PY" "$ROOT/tests/lib/runtests.py" --json "$json" "${args[@]}" "$ROOT/$file" </dev/null
	if [ -f "$json" ]; then
		read -r pp ff ss < <("$PY" -c 'import json,sys; d=json.load(open(sys.argv[1])); print(d["passed"], d["failed"], d["skipped"])' "$json")
		p=$((p + pp)) f=$((f + ff))
	else
		echo "valgrind: $file: runner died, counted as 1 failure"
		f=$((f + 1))
	fi
}

start=$(date +%s)
slice tests/integration/test_hostile.py test_matrix_fastcgi
slice tests/integration/test_core.py FastCgi StripeCgi.test_payment_applied_once \
	AlipayCgi.test_payment_applied_once StripeCgi.test_forged AlipayCgi.test_forged \
	AlipayCgi.test_malformed StartupRefusals
slice tests/integration/test_2c2p.py FastCgi TwoC2PCgi.test_paid_twice TwoC2PCgi.test_alg_none
slice tests/integration/test_wechatpay.py FastCgi
slice tests/integration/test_concurrency.py FastCgi
slice tests/faults/test_faults.py test_4_slow_database

# every process's log: errors, definite leaks, a missing summary
logs=0 dirty=0
for log in "$WORK"/logs/vg.*.log; do
	[ -e "$log" ] || continue
	logs=$((logs + 1))
	bad=""
	if ! grep -q "ERROR SUMMARY:" "$log"; then
		bad="no summary (the process did not finish)"
	elif grep -qE "ERROR SUMMARY: [1-9]" "$log"; then
		bad="errors"
	elif grep -qE "definitely lost: [1-9]" "$log"; then
		bad="definite leaks"
	fi
	if [ -n "$bad" ]; then
		dirty=$((dirty + 1))
		echo "---- valgrind: $bad in $(basename "$log") ----"
		head -c 6000 "$log"
	fi
done
if [ $logs = 0 ]; then
	echo "valgrind: no valgrind logs were written"
	dirty=1
fi
f=$((f + dirty))
echo "valgrind: $logs processes checked, $dirty with errors or definite leaks, $(($(date +%s) - start)) s"
echo "valgrind: $p passed, $f failed"
echo "$p passed, $f failed"
[ $f = 0 ] && [ $p -gt 0 ]
