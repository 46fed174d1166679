# scripts/packages.sh: sourced by scripts/up, scripts/test and .ci/run.
# Reads scripts/packages (the one list) and installs what is missing.
#
#   pn_packages GROUP...         the packages of these groups, one a line
#   pn_packages_missing GROUP... those of them dpkg does not have installed
#   pn_packages_install WHO GROUP...
#                                as root: apt-get install what is missing
#                                (and say so); not root: print the one
#                                apt-get line to run and return 1

PN_PACKAGES_FILE=${PN_PACKAGES_FILE:-$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/packages}

pn_packages() {
	awk -v want=" $* " '
		/^[ \t]*(#|$)/ { next }
		{ for (i = 2; i <= NF; i++) if (index(want, " " $i " ")) { print $1; next } }
	' "$PN_PACKAGES_FILE"
}

pn_packages_missing() {
	local p
	for p in $(pn_packages "$@"); do
		# "install ok installed" only: a package removed with its
		# configuration left ("deinstall ok config-files") is missing
		[ "$(dpkg-query -W -f '${Status}' "$p" 2>/dev/null)" = "install ok installed" ] || echo "$p"
	done
}

pn_packages_install() {
	local who=$1 missing
	shift
	missing=$(pn_packages_missing "$@" | tr '\n' ' ')
	missing=${missing% }
	[ -n "$missing" ] || return 0
	if [ "$(id -u)" != 0 ]; then
		printf '%s: missing Debian packages; as root, run:\n  apt-get install -y --no-install-recommends %s\n' \
			"$who" "$missing" >&2
		return 1
	fi
	printf '== installing %s\n' "$missing"
	local attempt log
	log=$(mktemp "${TMPDIR:-/tmp}/pn-apt.XXXXXX")
	for attempt in 1 2 3; do	# a mirror hiccup should not stop the set-up
		# shellcheck disable=SC2086
		if { DEBIAN_FRONTEND=noninteractive apt-get update -q &&
			DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends $missing; } \
			>"$log" 2>&1 </dev/null; then
			rm -f "$log"
			return 0
		fi
		printf '%s: apt-get failed (attempt %d)\n' "$who" "$attempt" >&2
		[ $attempt = 3 ] || sleep $((attempt * 10))
	done
	tail -n 30 "$log" >&2
	rm -f "$log"
	return 1
}
