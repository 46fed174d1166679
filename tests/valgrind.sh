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
# test_wechatpay, test_wechatpay_combine and test_concurrency (concurrent duplicates, every provider),
# the confirm endpoint (paynotify confirm's FastCGI workers, test_confirm),
# a few CGI scenarios per provider, and the slow-database fault test, run
# through pytest (tests/conftest.py).  Prints "valgrind: N passed, N failed"
# and, last, "N passed, N failed" (the tests plus one failure per dirty log).
# With PN_TEST_RESULTS=FILE (scripts/test) every test result, and each dirty
# log as a failure, is appended to FILE as a JSON line: scripts/test counts a
# test that also ran outside valgrind once.
# Needs a built tree (scripts/test builds; or make).  Usage: tests/valgrind.sh

set -u
cd "$(dirname "$0")/.." || exit 2
ROOT=$(pwd)
PY=/usr/bin/python3
if ! command -v valgrind >/dev/null; then
	echo "valgrind: not installed (apt-get install valgrind; scripts/test installs it as root)"
	[ -n "${PN_TEST_RESULTS:-}" ] &&
		echo '{"id": "valgrind::(valgrind not installed)", "outcome": "failed"}' >>"$PN_TEST_RESULTS"
	echo "0 passed, 1 failed"
	exit 1
fi
WORK=$(mktemp -d "${TMPDIR:-/tmp}/pnvalgrind.XXXXXX")
chmod 755 "$WORK"
trap 'rm -rf "$WORK"' EXIT
mkdir -m 777 "$WORK/logs"
export PN_VALGRIND=1 PN_VALGRIND_LOGDIR="$WORK/logs"

# the slice: FILE and a pytest -k expression for it, one pair a line; the
# selected tests are collected first, then run as one pytest session with
# PN_VALGRIND_WORKERS processes (default 2: valgrind is CPU-bound)
SLICE='
integration/test_hostile.py	test_matrix_fastcgi
integration/test_core.py	FastCgi or (StripeCgi and (test_payment_applied_once or test_forged)) or (AlipayCgi and (test_payment_applied_once or test_forged or test_malformed)) or StartupRefusals
integration/test_2c2p.py	FastCgi or (TwoC2PCgi and (test_paid_twice or test_alg_none))
integration/test_wechatpay.py	FastCgi
integration/test_wechatpay_combine.py	FastCgi
integration/test_concurrency.py	FastCgi
integration/test_confirm.py	TestAnswers or TestRateLimit or TestRefused
faults/test_faults.py	test_4_slow_database
'
start=$(date +%s)
ids=()
while IFS='	' read -r file expr; do
	[ -n "$file" ] || continue
	while read -r id; do
		case $id in *::*) ids+=("$id") ;; esac
	done < <(cd "$ROOT/tests" && "$PY" -m pytest -q --collect-only -c pytest.ini --rootdir . \
		-k "$expr" "$file" </dev/null 2>&1)
done <<<"$SLICE"
echo "valgrind: ${#ids[@]} tests"
if [ ${#ids[@]} = 0 ]; then
	# pytest could not collect (not installed, an import error): the leg
	# ran nothing, which is a failure, never a pass
	echo "valgrind: no test collected from the slice"
	[ -n "${PN_TEST_RESULTS:-}" ] &&
		echo '{"id": "valgrind::(no test collected)", "outcome": "failed"}' >>"$PN_TEST_RESULTS"
	echo "0 passed, 1 failed"
	exit 1
fi
res=${PN_TEST_RESULTS:-$WORK/results.jsonl}
: >"$WORK/results.jsonl"
workers=${PN_VALGRIND_WORKERS:-2}
par=()
[ "$workers" -gt 1 ] && par=(-n "$workers" --dist loadfile)
(cd "$ROOT/tests" && timeout -k 30 2400 "$PY" -m pytest -v -c pytest.ini --rootdir . "${par[@]}" \
	--pn-results="$WORK/results.jsonl" "${ids[@]}" </dev/null)
rc=$?
[ "$rc" = 0 ] || [ "$rc" = 1 ] || echo "{\"id\": \"valgrind::(pytest exit $rc)\", \"outcome\": \"failed\"}" >>"$WORK/results.jsonl"
read -r p f _ < <("$PY" "$ROOT/tests/lib/pnresults.py" "$WORK/results.jsonl")
[ "$res" != "$WORK/results.jsonl" ] && cat "$WORK/results.jsonl" >>"$res"

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
		echo "{\"id\": \"valgrind::($bad in $(basename "$log"))\", \"outcome\": \"failed\"}" >>"$res"
		echo "---- valgrind: $bad in $(basename "$log") ----"
		head -c 6000 "$log"
	fi
done
if [ $logs = 0 ]; then
	echo "valgrind: no valgrind logs were written"
	dirty=1
	echo '{"id": "valgrind::(no valgrind logs)", "outcome": "failed"}' >>"$res"
fi
f=$((f + dirty))
echo "valgrind: $logs processes checked, $dirty with errors or definite leaks, $(($(date +%s) - start)) s"
echo "valgrind: $p passed, $f failed"
echo "$p passed, $f failed"
[ $f = 0 ] && [ $p -gt 0 ]
