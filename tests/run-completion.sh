#!/usr/bin/env bash
# remusdbctl's bash completion (tools/remusdbctl.bash-completion) offers
# every command remusdbctl's usage lists, VM names from the daemon's
# status (a stand-in remusdbctl answers it here), states, faults and
# options where they go.  Exit 0 pass, 1 fail.
set -u
cd "$(dirname "$0")/.."
ctl=${RDB_BUILD:-build}/remusdbctl
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# the commands the real remusdbctl documents
"$ctl" --help 2>&1 | sed -n 's/^  \([a-z]*\) .*/\1/p' | sort -u > "$tmp/usage"
# a stand-in for the daemon's answer: two VMs
cat > "$tmp/remusdbctl" <<'EOS'
#!/bin/sh
printf '{\n  "vms": [\n    {\n      "name": "db1",\n      "state": "protected"\n    },\n    {\n      "name": "web2",\n      "state": "failed-over"\n    }\n  ]\n}\n'
EOS
chmod +x "$tmp/remusdbctl"
# and for virsh's domain list
cat > "$tmp/virsh" <<'EOS'
#!/bin/sh
printf 'db1\nweb2\nlvonly\n\n'
EOS
chmod +x "$tmp/virsh"
PATH=$tmp:$PATH bash --norc --noprofile -c '
	. /usr/share/bash-completion/bash_completion
	. tools/remusdbctl.bash-completion
	comp() {	# comp WORD... : the completions of the last word
		COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1))
		COMP_LINE="$*"; COMP_POINT=${#COMP_LINE}
		COMPREPLY=()
		_remusdbctl remusdbctl "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD-1]}"
		printf "%s\n" "${COMPREPLY[@]}" | sort | tr "\n" " "
	}
	fail=0
	expect() {	# expect "WANTED" WORD...
		local want=$1; shift
		local got; got=$(comp "$@")
		[ "$got" = "$want" ] || { echo "completion: $* -> [$got], want [$want]"; fail=1; }
	}
	for c in $(cat '"$tmp/usage"'); do
		comp remusdbctl "" | grep -qw -- "$c" ||
			{ echo "completion: command $c from the usage is not offered"; fail=1; }
	done
	expect "migrate " remusdbctl mig
	expect "db1 web2 " remusdbctl migrate ""
	expect "--timeout " remusdbctl migrate db1 --
	expect "failed failed-over failing-over " remusdbctl wait db1 fail
	expect "handover-cut " remusdbctl inject web2 hand
	expect "--force " remusdbctl unprotect db1 --f
	expect "db1 " remusdbctl --socket /tmp/x.sock status d
	expect "db1 " remusdbctl --config /tmp/x.conf status d
	expect "web2 " remusdbctl -c /tmp/x.conf -s /tmp/x.sock wait w
	expect "--config --socket " remusdbctl --
	expect "vm " remusdbctl config --dump-defaults ""
	expect "peer= " remusdbctl protect web2 pe
	expect "lvonly " remusdbctl enroll lv
	expect "lvonly " remusdbctl attach lv
	expect "--tap " remusdbctl enroll db1 --t
	expect "--yes " remusdbctl unenroll db1 --y
	expect "--connect " remusdbctl protect db1 --co
	exit $fail
' && echo "completion: every command offered, names, states and faults complete"
