#!/usr/bin/env python3
"""The cases of tests/dbms/pg-host.sh: a patched postgres runs under
fakekmod.so (LD_PRELOAD), and these cases talk to it over TCP with a small
client of the PostgreSQL wire protocol (v3, trust auth, no TLS).

The client counts every byte it receives, and fakekmod logs every send of
the server ("W pid fd protected n hex").  Once the server's logged bytes
for a backend equal the bytes its client received, each message the client
got can be matched to the send(s) that carried it, and so to whether the
socket was protected when that send happened.

    pgcases.py CASE      (a b c d e f g h; environment from pg-host.sh:
                          PGH_PORT PGH_SOCKDIR PGH_FAKELOG PGH_SERVERLOG
                          PGH_GENFILE PGH_EVENT)
Exit status 0 if the case passed; the reasons it failed go to stderr.
"""
import os
import re
import socket
import struct
import subprocess
import sys
import time
import traceback

PORT = int(os.environ.get("PGH_PORT", "0"))
SOCKDIR = os.environ.get("PGH_SOCKDIR", "")
FAKELOG = os.environ.get("PGH_FAKELOG", "")
SERVERLOG = os.environ.get("PGH_SERVERLOG", "")
GENFILE = os.environ.get("PGH_GENFILE", "")
EVENT = os.environ.get("PGH_EVENT", "")
EVENT_ABORT = 0x1               # REMUSDB_EVENT_ABORT
TIMEOUT = 10.0                  # every wait has this deadline

failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
    return cond


def wait_for(pred, what, timeout=TIMEOUT):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        v = pred()
        if v:
            return v
        time.sleep(0.05)
    raise TimeoutError("timed out waiting for " + what)


class Msg:
    def __init__(self, typ, body, start, end):
        self.type, self.body, self.start, self.end = typ, body, start, end

    def fields(self):
        """ErrorResponse/NoticeResponse fields: {'S': 'ERROR', 'C': ..., 'M': ...}"""
        out = {}
        for f in self.body.split(b"\0"):
            if f:
                out[chr(f[0])] = f[1:].decode(errors="replace")
        return out

    def __repr__(self):
        return "%s@%d" % (self.type, self.start)


class Result:
    def __init__(self, msgs):
        self.msgs = msgs

    def of(self, t):
        return [m for m in self.msgs if m.type == t]

    def tags(self):
        return [m.body.rstrip(b"\0").decode() for m in self.of("C")]

    def errors(self):
        return [m.fields() for m in self.of("E")]

    def status(self):
        z = self.of("Z")
        return chr(z[-1].body[0]) if z else None


class Conn:
    def __init__(self, unix=False):
        if unix:
            self.s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            self.s.connect("%s/.s.PGSQL.%d" % (SOCKDIR, PORT))
        else:
            self.s = socket.create_connection(("127.0.0.1", PORT))
        self.s.settimeout(TIMEOUT)
        self.buf = b""
        self.received = 0
        self.eof = False
        body = struct.pack("!I", 196608) + b"user\0postgres\0database\0postgres\0\0"
        self.s.sendall(struct.pack("!I", len(body) + 4) + body)
        r = self.until_ready()
        self.pid = struct.unpack("!I", r.of("K")[0].body[:4])[0]

    def recv_msg(self, timeout=TIMEOUT):
        """The next message, or None at end of stream."""
        self.s.settimeout(timeout)
        while True:
            if len(self.buf) >= 5:
                n = struct.unpack("!I", self.buf[1:5])[0]
                if len(self.buf) >= 1 + n:
                    start = self.received - len(self.buf)
                    m = Msg(chr(self.buf[0]), self.buf[5:1 + n], start, start + 1 + n)
                    self.buf = self.buf[1 + n:]
                    return m
            try:
                d = self.s.recv(65536)
            except ConnectionResetError:
                d = b""
            if not d:
                self.eof = True
                return None
            self.buf += d
            self.received += len(d)

    def until_ready(self):
        msgs = []
        while True:
            m = self.recv_msg()
            if m is None:
                raise EOFError("server closed the connection: %r" % msgs)
            msgs.append(m)
            if m.type == "Z":
                return Result(msgs)

    def send(self, typ, body=b""):
        self.s.sendall(typ.encode() + struct.pack("!I", len(body) + 4) + body)

    def q(self, sql):
        """Simple query protocol: one Query message, everything up to ReadyForQuery."""
        self.send("Q", sql.encode() + b"\0")
        return self.until_ready()

    def ext_msgs(self, sql, params=()):
        """Parse, Bind, Describe (portal), Execute of one statement (text params)."""
        out = []
        out.append(("P", b"\0" + sql.encode() + b"\0" + struct.pack("!H", 0)))
        b = b"\0\0" + struct.pack("!H", 0) + struct.pack("!H", len(params))
        for p in params:
            p = p.encode()
            b += struct.pack("!i", len(p)) + p
        b += struct.pack("!H", 0)
        out.append(("B", b))
        out.append(("D", b"P\0"))
        out.append(("E", b"\0" + struct.pack("!i", 0)))
        return out

    def ext(self, sql, params=()):
        """Extended query protocol, then Sync (an autocommit statement commits at Sync)."""
        for t, b in self.ext_msgs(sql, params):
            self.send(t, b)
        self.send("S")
        return self.until_ready()

    def close(self):
        try:
            self.send("X")
        except OSError:
            pass
        self.s.close()

    # ---- what the server logged for this backend ----
    def events(self):
        """fakekmod's lines for this backend: ('P', on), ('G', gen),
        ('W', protected, start, end) with stream offsets."""
        ev, off = [], 0
        with open(FAKELOG) as f:
            for line in f:
                p = line.split()
                if len(p) < 4 or p[1] != str(self.pid):
                    continue
                if p[0] == "P":
                    ev.append(("P", int(p[3])))
                elif p[0] == "G":
                    ev.append(("G", int(p[3])))
                elif p[0] == "W":
                    n = int(p[4])
                    ev.append(("W", int(p[3]), off, off + n))
                    off += n
        return ev

    def sync_log(self):
        """Waits until the server has logged every byte this client received."""
        def logged():
            return sum(e[3] - e[2] for e in self.events() if e[0] == "W") == self.received
        wait_for(logged, "fakekmod's log of backend %d" % self.pid)
        return self.events()

    def protection(self, msg):
        """The protected flags of the sends that carried msg's bytes."""
        return {e[1] for e in self.events()
                if e[0] == "W" and e[2] < msg.end and e[3] > msg.start}


def admin_q(sql):
    c = Conn()
    try:
        r = c.q(sql)
        if r.errors():
            raise RuntimeError("%s: %s" % (sql, r.errors()))
        return [m.body for m in r.of("D")]
    finally:
        c.close()


def scalar(sql):
    rows = admin_q(sql)
    if not rows:
        return None
    n = struct.unpack("!i", rows[0][2:6])[0]
    return None if n < 0 else rows[0][6:6 + n].decode()


def count(key):
    return int(scalar("SELECT count(*) FROM t WHERE k = '%s'" % key))


def protected(c, result, types, want, what):
    """Every message of types in result went out with protection == want."""
    c.sync_log()
    for m in result.msgs:
        if m.type in types:
            got = c.protection(m)
            check(got == {int(want)}, "%s: message '%s' sent %s, want %s" %
                  (what, m.type, "protected" if got == {1} else
                   "unprotected" if got == {0} else "mixed %s" % got,
                   "protected" if want else "unprotected"))


ALL = "TDCZENI12nst"


def set_gen(g):
    with open(GENFILE + ".tmp", "w") as f:
        f.write("%d\n" % g)
    os.rename(GENFILE + ".tmp", GENFILE)


def gen_now():
    try:
        return int(open(GENFILE).read().strip() or 0)
    except FileNotFoundError:
        return 0


def rollback_error(r, what):
    """The command failed with the failover error, not a silent ROLLBACK."""
    errs = r.errors()
    check(len(errs) == 1 and errs[0].get("C") == "40001" and
          "failed over" in errs[0].get("M", ""),
          "%s: want one ERROR 40001 'failed over', got %s" % (what, errs))
    check("ROLLBACK" not in r.tags(), "%s: answered with the ROLLBACK tag" % what)


# ---------------------------------------------------------------- cases

def case_a():
    """explicit BEGIN; INSERT; SELECT; error; COMMIT"""
    c = Conn()
    unprot = [c.q("BEGIN"), c.q("INSERT INTO t VALUES ('a1', 1)"),
              c.q("SELECT k FROM t WHERE k = 'a1'"), c.q("SAVEPOINT s"),
              c.q("SELECT 1/0"), c.q("ROLLBACK TO s"),
              c.q("DO $$BEGIN RAISE NOTICE 'inside'; END$$")]
    check(unprot[4].errors() and unprot[6].of("N"), "a: no error / notice to look at")
    commit = c.q("COMMIT")
    check(commit.tags() == ["COMMIT"], "a: COMMIT answered %s" % commit.tags())
    for i, r in enumerate(unprot):
        protected(c, r, ALL, False, "a: in-transaction answer %d" % i)
    protected(c, commit, "CZ", True, "a: COMMIT's CommandComplete+ReadyForQuery")
    # the socket stays protected until the client's next message ...
    time.sleep(0.3)
    ev = [e for e in c.events() if e[0] != "G"]
    check(ev[-1][0] == "W" and ev[-1][1] == 1,
          "a: protection dropped before the client's next message: %s" % ev[-3:])
    # ... which finds everything acknowledged and unprotects before answering
    after = c.q("SELECT 'after'")
    protected(c, after, ALL, False, "a: answer after the commit")
    ev = [e for e in c.events() if e[0] in "PW"]
    prot = [i for i, e in enumerate(ev) if e[0] == "W" and e[1] == 1]
    check(prot and ("P", 0) in ev[prot[-1]:], "a: no P 0 after the commit's protected send")
    check(count("a1") == 1, "a: row a1 not committed")
    c.close()


def case_b():
    """autocommit INSERT; autocommit SELECT under writes and under all"""
    c = Conn()
    r = c.q("INSERT INTO t VALUES ('b1', 1)")
    protected(c, r, "CZ", True, "b: autocommit INSERT")
    r = c.q("SELECT k FROM t WHERE k = 'b1'")
    protected(c, r, ALL, False, "b: autocommit SELECT under writes")
    c.q("BEGIN")
    c.q("SELECT k FROM t WHERE k = 'b1'")
    r = c.q("COMMIT")
    protected(c, r, ALL, False, "b: COMMIT of a read-only block under writes")
    c.q("SET remusdb.commit_protection = 'all'")
    r = c.q("SELECT k FROM t WHERE k = 'b1'")
    check(r.of("D"), "b: SELECT returned no row")
    protected(c, r, "TD", False, "b: rows of an autocommit SELECT under all")
    protected(c, r, "CZ", True, "b: completion of an autocommit SELECT under all")
    c.q("BEGIN")
    r1 = c.q("SELECT k FROM t WHERE k = 'b1'")
    r = c.q("COMMIT")
    protected(c, r1, ALL, False, "b: SELECT in a block under all")
    protected(c, r, "CZ", True, "b: COMMIT of a read-only block under all")
    c.close()


def case_c():
    """ROLLBACK, PREPARE TRANSACTION, COMMIT PREPARED, ROLLBACK PREPARED"""
    c = Conn()
    c.q("BEGIN")
    c.q("INSERT INTO t VALUES ('c1', 1)")
    r = c.q("ROLLBACK")
    protected(c, r, ALL, False, "c: ROLLBACK")
    c.q("BEGIN")
    c.q("INSERT INTO t VALUES ('c2', 1)")
    r = c.q("PREPARE TRANSACTION 'rdb_c2'")
    check(r.tags() == ["PREPARE TRANSACTION"], "c: PREPARE answered %s" % r.tags())
    protected(c, r, "CZ", True, "c: PREPARE TRANSACTION")
    r = c.q("COMMIT PREPARED 'rdb_c2'")
    check(r.tags() == ["COMMIT PREPARED"], "c: COMMIT PREPARED answered %s" % r.tags())
    protected(c, r, "CZ", True, "c: COMMIT PREPARED")
    c.q("BEGIN")
    c.q("INSERT INTO t VALUES ('c3', 1)")
    c.q("PREPARE TRANSACTION 'rdb_c3'")
    r = c.q("ROLLBACK PREPARED 'rdb_c3'")
    protected(c, r, "CZ", True, "c: ROLLBACK PREPARED")
    check(count("c1") == 0 and count("c2") == 1 and count("c3") == 0,
          "c: rows c1 c2 c3 = %d %d %d, want 0 1 0" % (count("c1"), count("c2"), count("c3")))
    c.close()


def visible_types(hexs):
    """Message types visible in the first bytes of one send."""
    b, out, i = bytes.fromhex(hexs), [], 0
    while i + 5 <= len(b):
        out.append(chr(b[i]))
        i += 1 + struct.unpack("!I", b[i + 1:i + 5])[0]
    return out


def pgbench_check(mode, ours):
    before = os.path.getsize(FAKELOG)
    n_tx = 2 * 10
    p = subprocess.run(["/usr/lib/postgresql/15/bin/pgbench", "-n", "-c", "2", "-t", "10",
                        "-M", mode, "-f", os.environ["PGH_PGBENCH_SCRIPT"],
                        "-h", "127.0.0.1", "-p", str(PORT), "-U", "postgres", "postgres"],
                       capture_output=True, text=True, timeout=60)
    if not check(p.returncode == 0, "d: pgbench -M %s failed: %s" % (mode, p.stderr[-300:])):
        return
    # fakekmod logs a send after it returns: pgbench can read a backend's
    # last answer and exit before that backend wrote its line. A backend
    # leaves pg_stat_activity at exit, after its last send was logged.
    w = Conn()
    ours = ours | {w.pid}

    def others_gone():
        rows = w.q("SELECT count(*) FROM pg_stat_activity WHERE backend_type ="
                   " 'client backend' AND pid <> pg_backend_pid()").of("D")
        n = struct.unpack("!i", rows[0].body[2:6])[0]
        return rows[0].body[6:6 + n] == b"0"
    wait_for(others_gone, "pgbench -M %s's backends to exit" % mode)
    w.close()
    with open(FAKELOG) as f:
        f.seek(before)
        lines = [l.split() for l in f if l.startswith("W ")]
    lines = [l for l in lines if int(l[1]) not in ours]
    prot_z = sum(1 for l in lines if l[3] == "1" and len(l) > 5 and visible_types(l[5]) == ["Z"])
    prot_c = sum(1 for l in lines if l[3] == "1" and len(l) > 5 and "C" in visible_types(l[5]))
    check(prot_z == n_tx, "d: pgbench -M %s: %d protected ReadyForQuery alone, want %d"
          % (mode, prot_z, n_tx))
    check(prot_c == 0, "d: pgbench -M %s: %d sends with an INSERT's CommandComplete protected"
          % (mode, prot_c))


def case_d():
    """extended query protocol"""
    c = Conn()
    r = c.ext("INSERT INTO t VALUES ($1, 1)", ["d1"])
    check(r.tags() == ["INSERT 0 1"], "d: INSERT answered %s" % r.tags())
    protected(c, r, "12nC", False, "d: autocommit INSERT before Sync's commit")
    protected(c, r, "Z", True, "d: ReadyForQuery after Sync's commit")
    r = c.ext("SELECT k FROM t WHERE k = $1", ["d1"])
    protected(c, r, ALL, False, "d: autocommit SELECT")
    c.ext("BEGIN")
    r1 = c.ext("INSERT INTO t VALUES ($1, 1)", ["d2"])
    r = c.ext("COMMIT")
    protected(c, r1, ALL, False, "d: INSERT in a block")
    protected(c, r, "12n", False, "d: COMMIT's Parse/Bind/Describe answers")
    protected(c, r, "CZ", True, "d: COMMIT's CommandComplete+ReadyForQuery")
    # a pipeline: two INSERTs, one Sync; both commit at the Sync
    for k in ("d3", "d4"):
        for t, b in c.ext_msgs("INSERT INTO t VALUES ($1, 1)", [k]):
            c.send(t, b)
    c.send("S")
    r = c.until_ready()
    protected(c, r, "12nC", False, "d: pipelined INSERTs before the commit")
    protected(c, r, "Z", True, "d: pipelined INSERTs' ReadyForQuery")
    check(all(count(k) == 1 for k in ("d1", "d2", "d3", "d4")), "d: rows missing")
    ours = {c.pid}
    c.close()
    pgbench_check("extended", ours)
    pgbench_check("prepared", ours)


def case_e():
    """remusdb.commit_protection = off, and reload"""
    admin_q("ALTER SYSTEM SET remusdb.commit_protection = 'off'")
    admin_q("SELECT pg_reload_conf()")
    c = Conn()
    wait_for(lambda: c.q("SHOW remusdb.commit_protection").of("D")[0].body.endswith(b"off"),
             "remusdb.commit_protection = off")
    c.q("INSERT INTO t VALUES ('e1', 1)")
    c.q("BEGIN")
    c.q("INSERT INTO t VALUES ('e2', 1)")
    c.q("PREPARE TRANSACTION 'rdb_e2'")
    c.q("COMMIT PREPARED 'rdb_e2'")
    c.ext("INSERT INTO t VALUES ($1, 1)", ["e3"])
    ev = c.sync_log()
    check(not [e for e in ev if e[0] in "PG"],
          "e: off: protect or abort-generation calls: %s" % [e for e in ev if e[0] in "PG"][:5])
    check(not [e for e in ev if e[0] == "W" and e[1] == 1], "e: off: protected sends")
    admin_q("ALTER SYSTEM RESET remusdb.commit_protection")
    admin_q("SELECT pg_reload_conf()")
    # the same session picks the reload up
    wait_for(lambda: c.q("SHOW remusdb.commit_protection").of("D")[0].body.endswith(b"writes"),
             "remusdb.commit_protection = writes again")
    r = c.q("INSERT INTO t VALUES ('e4', 1)")
    protected(c, r, "CZ", True, "e: INSERT after reloading writes")
    check(all(count(k) == 1 for k in ("e1", "e2", "e3", "e4")), "e: rows missing")
    c.close()


def case_f():
    """module absent: clients work, one warning per server"""
    conns = []
    for i in range(20):
        c = Conn()
        conns.append(c)
        r1 = c.q("INSERT INTO t VALUES ('f%d', 1)" % i)
        c.q("BEGIN")
        c.q("INSERT INTO t VALUES ('f%d_', 1)" % i)
        r2 = c.q("COMMIT")
        r3 = c.ext("SELECT k FROM t WHERE k = $1", ["f%d" % i])
        check(r1.tags() == ["INSERT 0 1"] and r2.tags() == ["COMMIT"] and r3.of("D"),
              "f: connection %d: %s %s" % (i, r1.tags(), r2.tags()))
    for c in conns:
        c.close()
    check(int(scalar("SELECT count(*) FROM t WHERE k LIKE 'f%'")) == 40, "f: rows missing")
    log = open(SERVERLOG).read()
    n = len(re.findall(r"WARNING:  RemusDB commit protection is unavailable", log))
    check(n == 1, "f: %d 'unavailable' warnings in the server log, want 1" % n)
    check(re.search(r"RemusDB failover handler could not open \"/dev/remusdb\"", log),
          "f: the failover handler did not say the device is missing")
    check(not [l for l in open(FAKELOG) if l[0] in "PG"], "f: protect calls succeeded")


def case_g():
    """abort generation: a transaction open across a failover cannot commit"""
    c = Conn()
    g = gen_now()

    c.q("BEGIN")
    c.q("INSERT INTO t VALUES ('g1', 1)")
    g += 1
    set_gen(g)
    r = c.q("INSERT INTO t VALUES ('g2', 1)")
    rollback_error(r, "g: next statement after the failover")
    r = c.q("COMMIT")
    rollback_error(r, "g: COMMIT after the failover")
    check(r.status() == "I", "g: block still open after the failed COMMIT (%s)" % r.status())

    c.q("BEGIN")
    c.q("INSERT INTO t VALUES ('g3', 1)")
    r = c.q("COMMIT")
    check(r.tags() == ["COMMIT"] and not r.errors(), "g: a new transaction: %s %s" %
          (r.tags(), r.errors()))

    c.q("BEGIN")
    c.q("INSERT INTO t VALUES ('g4', 1)")
    g += 1
    set_gen(g)
    rollback_error(c.q("COMMIT"), "g: COMMIT right after the failover")

    c.q("BEGIN")
    c.q("INSERT INTO t VALUES ('g5', 1)")
    g += 1
    set_gen(g)
    rollback_error(c.q("PREPARE TRANSACTION 'rdb_g5'"), "g: PREPARE TRANSACTION")

    c.q("BEGIN")
    c.q("SAVEPOINT s")
    c.q("INSERT INTO t VALUES ('g6', 1)")
    g += 1
    set_gen(g)
    rollback_error(c.q("INSERT INTO t VALUES ('g7', 1)"), "g: in a savepoint")
    c.q("ROLLBACK TO s")
    rollback_error(c.q("INSERT INTO t VALUES ('g8', 1)"), "g: after ROLLBACK TO SAVEPOINT")
    rollback_error(c.q("COMMIT"), "g: COMMIT after ROLLBACK TO SAVEPOINT")

    c.ext("BEGIN")
    c.ext("INSERT INTO t VALUES ($1, 1)", ["g10"])
    g += 1
    set_gen(g)
    rollback_error(c.ext("INSERT INTO t VALUES ($1, 1)", ["g11"]), "g: extended INSERT")
    rollback_error(c.ext("COMMIT"), "g: extended COMMIT")

    g += 1
    set_gen(g)
    r = c.q("INSERT INTO t VALUES ('g9', 1)")
    check(r.tags() == ["INSERT 0 1"], "g: autocommit INSERT after a failover: %s" % r.errors())

    # a client on the Unix socket runs in the VM: its transactions go on
    u = Conn(unix=True)
    u.q("BEGIN")
    u.q("INSERT INTO t VALUES ('g12', 1)")
    g += 1
    set_gen(g)
    r = u.q("INSERT INTO t VALUES ('g13', 1)")
    r2 = u.q("COMMIT")
    check(not r.errors() and r2.tags() == ["COMMIT"], "g: Unix-socket client: %s %s" %
          (r.errors(), r2.tags()))
    u.close()

    want = {"g1": 0, "g2": 0, "g3": 1, "g4": 0, "g5": 0, "g6": 0, "g7": 0, "g8": 0,
            "g9": 1, "g10": 0, "g11": 0, "g12": 1, "g13": 1}
    got = {k: count(k) for k in want}
    check(got == want, "g: rows %s, want %s" % (got, want))
    check(scalar("SELECT count(*) FROM pg_prepared_xacts WHERE gid = 'rdb_g5'") == "0",
          "g: rdb_g5 was prepared")
    c.close()


def write_event(epoch, generation, flags):
    rec = struct.pack("<QQII", epoch, generation, flags, 0)   # struct remusdb_event

    def opened():
        try:
            return os.open(EVENT, os.O_WRONLY | os.O_NONBLOCK)
        except OSError:         # ENXIO: the handler has not (re)opened it yet
            return None
    fd = wait_for(opened, "the failover handler to open its event FIFO")
    os.write(fd, rec)
    os.close(fd)


def log_has(pattern):
    return re.search(pattern, open(SERVERLOG).read())


def expect_fatal(c, what):
    m = c.recv_msg()
    while m is not None and m.type == "T":      # a running SELECT's RowDescription
        m = c.recv_msg()
    f = m.fields() if m is not None and m.type == "E" else {}
    check(f.get("S") == "FATAL" and f.get("C") == "40001" and
          "open at a RemusDB failover" in f.get("M", ""),
          "%s: want FATAL 40001 'open at a RemusDB failover', got %s" % (what, m and (m.type, f)))
    check(c.recv_msg() is None, "%s: connection not closed" % what)


def case_h():
    """the failover handler"""
    wait_for(lambda: log_has(r"RemusDB failover handler is waiting for events"),
             "the failover handler")
    s1 = Conn()                 # idle in an open block
    s1.q("BEGIN")
    s1.q("INSERT INTO t VALUES ('h1', 1)")
    s2 = Conn()                 # idle, no transaction
    s2.q("SELECT 1")
    s5 = Conn()                 # running a statement in an open block
    s5.q("BEGIN")
    s5.q("INSERT INTO t VALUES ('h5', 1)")
    s5.send("Q", b"SELECT pg_sleep(30)\0")
    s4 = Conn()                 # running an autocommit statement
    s4.send("Q", b"SELECT pg_sleep(2), 'autocommit'\0")
    s3 = Conn()                 # committing: waits for a standby that does not exist
    admin_q("ALTER SYSTEM SET synchronous_standby_names = 'rdb_nosuch'")
    admin_q("SELECT pg_reload_conf()")
    # (the checkpointer tells backends that a standby is required: until
    # then a commit does not wait)
    h3 = None
    for i in range(50):
        s3.q("BEGIN")
        s3.q("INSERT INTO t VALUES ('h3_%d', 1)" % i)
        s3.send("Q", b"COMMIT\0")
        try:
            wait_for(lambda: scalar("SELECT wait_event FROM pg_stat_activity WHERE pid = %d"
                                    % s3.pid) == "SyncRep", "s3 to wait in its commit", 0.5)
            h3 = "h3_%d" % i
            break
        except TimeoutError:
            s3.until_ready()
    check(h3, "h: no commit waits for the synchronous standby")
    wait_for(lambda: scalar("SELECT wait_event FROM pg_stat_activity WHERE pid = %d" % s5.pid)
             == "PgSleep", "s5 to sleep")

    # the module moves the abort generation before it delivers the event
    g = gen_now() + 1
    set_gen(g)
    write_event(7, 1, EVENT_ABORT)
    wait_for(lambda: log_has(r"RemusDB failover event \(epoch 7, generation 1\)"), "event 1 logged")
    check(log_has(r"RemusDB failover event \(epoch 7, generation 1\): aborted 2 open "
                  r"transactions, left 1 committing transactions alone"),
          "h: event 1 not logged as 2 aborted, 1 committing")
    expect_fatal(s1, "h: idle in an open block")
    expect_fatal(s5, "h: running in an open block")
    r = s2.q("SELECT 2")
    check(not r.errors() and r.of("D"), "h: idle session outside a transaction: %s" % r.errors())
    r = s4.until_ready()
    check(not r.errors() and r.of("D"), "h: running autocommit statement: %s" % r.errors())
    check(scalar("SELECT wait_event FROM pg_stat_activity WHERE pid = %d" % s3.pid) == "SyncRep",
          "h: the committing session stopped waiting")
    admin_q("ALTER SYSTEM RESET synchronous_standby_names")
    admin_q("SELECT pg_reload_conf()")
    r = s3.until_ready()
    check(r.tags() == ["COMMIT"], "h: committing session: %s %s" % (r.tags(), r.errors()))

    # plain Remus: nothing is aborted
    s6 = Conn()
    s6.q("BEGIN")
    s6.q("INSERT INTO t VALUES ('h6', 1)")
    write_event(8, 2, 0)
    wait_for(lambda: log_has(r"RemusDB failover event \(epoch 8, generation 2\) without the "
                             r"abort flag"), "event 2 logged")
    r = s6.q("COMMIT")
    check(r.tags() == ["COMMIT"], "h: event without the abort flag: %s %s" % (r.tags(), r.errors()))

    want = {"h1": 0, h3: 1, "h5": 0, "h6": 1}
    got = {k: count(k) for k in want}
    check(got == want, "h: rows %s, want %s" % (got, want))
    for c in (s2, s3, s4, s6):
        c.close()


if __name__ == "__main__":
    name = sys.argv[1]
    try:
        globals()["case_" + name]()
    except Exception as e:       # a broken protocol exchange or a missed deadline
        tb = traceback.extract_tb(e.__traceback__)[-1]
        failures.append("%s: %s: %s (line %d)" % (name, type(e).__name__, e, tb.lineno))
    for f in failures:
        print("  " + f, file=sys.stderr)
    sys.exit(1 if failures else 0)
