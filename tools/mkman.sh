#!/usr/bin/env bash
# The manual pages -> build/man/: remusdbd.8, remusdbctl.8, the Xen
# helper's remusdb-xen.8 and the guest helper's remusdb-eventd.8 as
# written (tools/man/), remusdb.conf.5 and
# remusdb-vm.conf.5 made from the daemon's own option tables (remusdbctl
# config --dump-defaults), so that every option, default and range is
# there and nothing else.
#   tools/mkman.sh REMUSDBCTL OUTDIR
set -eu
ctl=$1 out=$2
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$out"
cp "$here/man/remusdbd.8" "$here/man/remusdbctl.8" "$here/man/remusdb-xen.8" \
	"$here/man/remusdb-eventd.8" "$out/"

# roff-safe text: backslashes escaped, no line starting with . or '
esc() { sed -e 's/\\/\\e/g' -e "s/^\\([.']\\)/\\\\\\&\\1/"; }

# options KIND: "# doc / key = default" blocks as .TP items
options() {
	# (a list's line is commented out: "# qemu_arg = ")
	"$ctl" config --dump-defaults $1 | awk '
		/^(# )?[a-z_0-9]+ = ?/ {
		      k = $0; sub(/^# /, "", k); sub(/ *=.*/, "", k)
		      v = $0; sub(/^[^=]*= ?/, "", v)
		      print ".TP"; print ".B " k
		      print (v == "" ? "(no default) " : "Default: " v ". ") doc
		      doc = ""; next }
		/^# / { doc = (doc ? doc " " : "") substr($0, 3); next }' | esc_body
}
# (item lines start with .TP/.B: only the text lines are escaped)
esc_body() {
	while IFS= read -r l; do
		case $l in
		.TP|.B\ *) printf '%s\n' "$l" ;;
		*) printf '%s\n' "$l" | esc ;;
		esac
	done
}

{
	cat <<'EOT'
.TH REMUSDB.CONF 5 2026-11-25 RemusDB "File Formats"
.SH NAME
remusdb.conf \- remusdbd's configuration
.SH DESCRIPTION
.BR remusdbd (8)
reads
.I /etc/remusdb/remusdbd.conf
(or the file given with
.BR \-c )
at start.
Each line is
.IR key " = " value ;
blank lines and lines starting with
.B #
are ignored; a key may appear once; an unknown key, or a value out of
its range, is an error that names the file and line.
Any option can be overridden with
.BR "remusdbd \-o" " \fIkey\fR=\fIvalue\fR."
.SH OPTIONS
EOT
	options ""
	cat <<'EOT'
.SH SEE ALSO
.BR remusdbd (8),
.BR remusdbctl (8),
.BR remusdb-vm.conf (5)
EOT
} > "$out/remusdb.conf.5"

{
	cat <<'EOT'
.TH REMUSDB-VM.CONF 5 2026-11-25 RemusDB "File Formats"
.SH NAME
remusdb-vm.conf \- a protected VM, as remusdbctl protect and attach take it
.SH DESCRIPTION
A VM file describes one VM to
.BR remusdbctl (8)
.RB ( protect ", " attach ):
its name, its QEMU's sockets, its network and disk, its backup and how
it is protected.
The format is that of
.BR remusdb.conf (5);
keys that take a list
.RB ( qemu_arg )
are given once per element, in order.
.B remusdbctl
checks the file before it sends it; the daemon checks it again.
A VM protected again by name after a failover gets its file written to
its state directory
.RI ( /var/lib/remusdb/NAME/vm.conf ).
.SH OPTIONS
EOT
	options vm
	cat <<'EOT'
.SH SEE ALSO
.BR remusdbd (8),
.BR remusdbctl (8),
.BR remusdb.conf (5)
EOT
} > "$out/remusdb-vm.conf.5"
