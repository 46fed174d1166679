"""pntest: the integration-test harness for paynotify (Python 3, psycopg2).

What is here:
  PgCluster     a throwaway PostgreSQL: initdb into a fresh temp dir, unix
                socket in that dir only, fsync=off, schema from sql/[0-9]*.sql
                then sql/functions.sql;
                start/stop/restart, psql() returning rows (psycopg2),
                connect(), add_order().
                As root, initdb/pg_ctl run as `nobody` (initdb refuses root).
  module_database  a test module's own database (a copy of the schema) in
                the one cluster of this process, shared_cluster(); the same
                interface as PgCluster
  write_config  an INI config plus key and secret files (0600) in a temp dir,
                for two sites (shop-a, shop-b) with DIFFERENT keys.
  run_cgi       run a receiver as CGI (env + stdin) -> Response.
  FcgiConn      the FastCGI client (unix socket or TCP, optional keep-alive);
                fcgi_request() and oneshot() send one request on a new one.
  FcgiServer    N worker processes of a receiver on one listening unix socket
                (the way spawn-fcgi or a web server hands it over on fd 0).
  signers       stripe_header(), alipay_content(), alipay_body(), rsa_sign()
                (from pnsign, where every provider's signing lives) and
                builders for realistic Stripe and Alipay notifications.
  helpers       write_secret() (0600), temp_dir(), add_cleanup(), q() (an SQL
                literal), scratch_dir() (short, root-safe socket dirs).

Environment: PN_PG_BINDIR (PostgreSQL server binaries), PN_SQL_DIR (schema
files to load instead of sql/), PN_TMPDIR (where sockets go).

Everything made here is removed at exit (atexit, and SIGTERM/SIGINT turn into
a normal exit).  dump_diagnostics() prints the PostgreSQL server log and the
FastCGI worker logs; the test runner calls it when a test fails.
"""

import atexit
import collections
import glob
import hashlib
import json
import os
import shutil
import select
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse

import psycopg2
import psycopg2.extensions
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pnsign  # noqa: E402  (the signers; re-exported below for the tests)

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
KEYS = os.path.join(REPO, "tests", "fixtures", "keys")
FIXTURES = os.path.join(REPO, "tests", "fixtures", "integration")

IS_ROOT = os.geteuid() == 0
PG_USER = "paynotify"
PG_DB = "paynotify"

_cleanups = []          # callables run at exit, last registered first
_diagnostics = []       # objects with a diagnostics() -> str method


def _run_cleanups():
    while _cleanups:
        fn = _cleanups.pop()
        try:
            fn()
        except Exception as e:  # never let one cleanup stop the others
            sys.stderr.write("pntest: cleanup failed: %r\n" % (e,))


atexit.register(_run_cleanups)


def _exit_on_signal(signum, frame):
    sys.exit(128 + signum)


for _sig in (signal.SIGTERM, signal.SIGHUP):
    try:
        signal.signal(_sig, _exit_on_signal)
    except (ValueError, OSError):  # not the main thread
        pass


def dump_diagnostics(out=None):
    """Print everything that helps to understand a failure."""
    out = out or sys.stderr
    for obj in list(_diagnostics):
        try:
            text = obj.diagnostics()
        except Exception as e:
            text = "(could not collect diagnostics: %r)" % (e,)
        if text:
            out.write(text)
            if not text.endswith("\n"):
                out.write("\n")
    out.flush()


def _tail(path, max_bytes=6000):
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            f.seek(max(0, size - max_bytes))
            return f.read().decode("utf-8", "replace")
    except OSError as e:
        return "(cannot read %s: %s)" % (path, e)


def run_admin(config, *args, timeout=120):
    """`paynotify -c config ARGS...` in a clean environment, bounded by
    patience(timeout): (exit status, stdout, stderr) as text."""
    p = subprocess.run([os.path.join(REPO, "paynotify"), "-c", config] + list(args),
                       env=clean_env(), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, timeout=patience(timeout))
    return p.returncode, p.stdout.decode(), p.stderr.decode()


def clean_env(extra=None):
    """The environment for child processes: no PG* or PAYNOTIFY_* leaking in."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("PG") and not k.startswith("PAYNOTIFY_")}
    env.setdefault("PATH", "/usr/local/bin:/usr/bin:/bin")
    env["LC_ALL"] = "C"
    if extra:
        env.update(extra)
    return env


def _world_traversable(path):
    path = os.path.abspath(path)
    while True:
        try:
            if not os.stat(path).st_mode & 0o001:
                return False
        except OSError:
            return False
        parent = os.path.dirname(path)
        if parent == path:
            return True
        path = parent


def scratch_dir(prefix):
    """A new temp dir for sockets: short enough for a unix socket path, and
    (as root) reachable by `nobody`, who runs PostgreSQL.  PN_TMPDIR, then
    $TMPDIR, then /tmp."""
    for base in (os.environ.get("PN_TMPDIR"), tempfile.gettempdir(), "/tmp"):
        if not base or not os.path.isdir(base) or len(base) > 60:
            continue
        if IS_ROOT and not _world_traversable(base):
            continue
        return tempfile.mkdtemp(prefix=prefix, dir=base)
    return tempfile.mkdtemp(prefix=prefix, dir="/tmp")


def valgrind_argv(argv):
    """argv, prefixed with valgrind memcheck when PN_VALGRIND=1 (tests/valgrind.sh):
    errors and definite leaks make the process exit 99, and each process
    writes PN_VALGRIND_LOGDIR/vg.<pid>.log for the script to count."""
    if os.environ.get("PN_VALGRIND", "0") in ("", "0"):
        return list(argv)
    logdir = os.environ.get("PN_VALGRIND_LOGDIR") or tempfile.gettempdir()
    return ["valgrind", "--tool=memcheck", "--leak-check=full",
            "--errors-for-leak-kinds=definite", "--show-leak-kinds=definite",
            "--error-exitcode=%d" % VALGRIND_EXIT, "--num-callers=30",
            "--log-file=" + os.path.join(logdir, "vg.%p.log")] + list(argv)


VALGRIND_EXIT = 99
UNDER_VALGRIND = os.environ.get("PN_VALGRIND", "0") not in ("", "0")
# tests/sanitize.sh points the tests at its ASan+UBSan build (PN_BIN_DIR)
UNDER_SANITIZER = os.environ.get("PN_BIN_DIR", "") not in ("", REPO)
# how much slower the receivers are: valgrind runs them 10-50 times slower
# (and loads them in seconds), ASan 2-3 times
SLOWDOWN = 10 if UNDER_VALGRIND else 3 if UNDER_SANITIZER else 1


def patience(seconds):
    """A bound on a wait for something that normally takes far less (a
    process to start or stop, an answer to arrive), stretched under valgrind
    or ASan: a slow run on a loaded machine is not a failure.  Only for a
    wait's deadline, never for a duration a test asserts."""
    return seconds * SLOWDOWN


def _catches_sigterm(pid):
    """True when /proc says pid has a handler for SIGTERM (or is gone)."""
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith("SigCgt:"):
                    return bool(int(line.split()[1], 16) & (1 << (signal.SIGTERM - 1)))
    except (OSError, ValueError):
        return True
    return True


def wait_sigterm_ready(procs, timeout=120):
    """Under valgrind, wait until every process in procs has installed a
    SIGTERM handler.  Valgrind takes a second or more (longer on a loaded
    machine) to load the program before it installs its own handlers; a
    SIGTERM before that kills it with the default action and no summary in
    its log, which tests/valgrind.sh must count as a process that did not
    finish.  Once valgrind has its handlers, a SIGTERM reaches the program
    and valgrind writes the summary whatever the program does with it.
    Returns the processes still not ready at the deadline."""
    if not UNDER_VALGRIND:
        return []
    deadline = time.monotonic() + timeout
    waiting = [p for p in procs if p.poll() is None]
    while waiting and time.monotonic() < deadline:
        waiting = [p for p in waiting if p.poll() is None and not _catches_sigterm(p.pid)]
        if waiting:
            time.sleep(0.05)
    return waiting


# Under valgrind (only), a SIGTERM that reaches a worker just as it starts
# serving is now and then lost: the worker sleeps in ppoll() with no signal
# pending, and a second SIGTERM stops it at once (seen in tests/valgrind.sh
# on a loaded machine; never without valgrind: 200 of 200 SIGTERMs at
# random moments of a worker's start-up were obeyed; valgrind's emulation
# of ppoll()'s signal mask is the suspect).  So under valgrind a process
# still running a while after SIGTERM is sent another one before the last
# resort, SIGKILL, which would leave its valgrind log without a summary.
SIGTERM_AGAIN_S = 20


def wait_resending_sigterm(p, deadline, what, pids=None):
    """Wait for Popen p until deadline (time.monotonic()); under valgrind
    send SIGTERM again every SIGTERM_AGAIN_S seconds to pids() (default:
    p itself) while p runs.  Raises subprocess.TimeoutExpired at the
    deadline."""
    while True:
        left = deadline - time.monotonic()
        step = min(left, SIGTERM_AGAIN_S) if UNDER_VALGRIND else left
        try:
            return p.wait(max(0.1, step))
        except subprocess.TimeoutExpired:
            if not UNDER_VALGRIND or time.monotonic() >= deadline:
                raise
        targets = pids() if pids else [p.pid]
        sys.stderr.write("pntest: %s still running %d s after SIGTERM under valgrind: "
                         "SIGTERM again to %s\n" % (what, SIGTERM_AGAIN_S, targets))
        for pid in targets:
            try:
                os.kill(pid, signal.SIGTERM)
            except ProcessLookupError:
                pass


def need(tool, package):
    """The path of TOOL, which the tests need: scripts/test installs
    PACKAGE (scripts/packages) before it runs anything, so a missing tool
    fails the test that needs it, never skips it."""
    path = shutil.which(tool)
    if path is None:
        raise AssertionError("%s is not installed (Debian package %s; scripts/test installs "
                             "it as root, scripts/packages lists it)" % (tool, package))
    return path


def binary(name):
    """Path of a top-level receiver binary, e.g. binary('stripe').
    PN_BIN_DIR points the tests at another build (tests/sanitize.sh runs
    them against the ASan+UBSan build in build-asan/)."""
    return os.path.join(os.environ.get("PN_BIN_DIR") or REPO, "paynotify-" + name)


# ---------------------------------------------------------------------------
# PostgreSQL


def pg_bindir():
    if os.environ.get("PN_PG_BINDIR"):
        return os.environ["PN_PG_BINDIR"]

    def version(p):
        try:
            return int(p.rstrip("/").split("/")[-2])
        except ValueError:
            return 0
    cands = sorted(glob.glob("/usr/lib/postgresql/*/bin/"), key=version)
    for c in reversed(cands):
        if os.path.exists(os.path.join(c, "initdb")):
            return c.rstrip("/")
    found = shutil.which("initdb")
    if found:
        return os.path.dirname(found)
    raise RuntimeError("PostgreSQL server binaries not found "
                       "(install postgresql, or set PN_PG_BINDIR)")


_TEXT_CASTER = None


def _text_caster():
    """A psycopg2 type caster returning every built-in type as its text."""
    global _TEXT_CASTER
    if _TEXT_CASTER is None:
        _TEXT_CASTER = psycopg2.extensions.new_type(
            tuple(psycopg2.extensions.string_types), "PNTEXT", lambda value, cur: value)
    return _TEXT_CASTER


class PgCluster:
    """A throwaway PostgreSQL cluster reachable only through a unix socket.

    base/            the temp dir: also the socket directory
    base/data        PGDATA
    base/server.log  the server log
    """

    def __init__(self, port=5432, load_schema=True, settings=()):
        self.port = port
        self.load_schema = load_schema
        self.settings = list(settings)      # more postgresql.conf lines (they win)
        self.bindir = pg_bindir()
        self.dbname = PG_DB
        self.base = None
        self.data = None
        self.logfile = None
        self.running = False
        self._owner_ids = None

    # -- helpers ----------------------------------------------------------
    def _as_owner(self, argv):
        if IS_ROOT:
            return ["runuser", "-u", "nobody", "--"] + argv
        return argv

    def _pg(self, prog, *args, check=True, timeout=120):
        argv = self._as_owner([os.path.join(self.bindir, prog)] + list(args))
        p = subprocess.run(argv, cwd=self.base, env=clean_env(),
                           stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, timeout=timeout)
        if check and p.returncode != 0:
            raise RuntimeError("%s failed (exit %d):\n%s\n%s" % (
                prog, p.returncode, p.stdout.decode("utf-8", "replace"),
                self.server_log()))
        return p

    @property
    def host(self):
        return self.base

    def conninfo(self):
        return "host=%s port=%d dbname=%s user=%s" % (self.base, self.port, self.dbname, PG_USER)

    def libpq_env(self):
        return {"PGHOST": self.base, "PGPORT": str(self.port), "PGUSER": PG_USER,
                "PGDATABASE": self.dbname}

    # -- lifecycle --------------------------------------------------------
    def init(self):
        self.base = scratch_dir("pntest-pg.")
        _cleanups.append(self.destroy)
        _diagnostics.append(self)
        self.data = os.path.join(self.base, "data")
        self.logfile = os.path.join(self.base, "server.log")
        # the socket dir must be reachable by the tests (and by `nobody`)
        os.chmod(self.base, 0o755)
        if IS_ROOT:
            import pwd
            pw = pwd.getpwnam("nobody")
            self._owner_ids = (pw.pw_uid, pw.pw_gid)
            os.chown(self.base, pw.pw_uid, pw.pw_gid)
        self._pg("initdb", "-D", self.data, "-U", PG_USER, "--auth=trust",
                 "-E", "UTF8", "--locale=C", "--no-sync")
        conf = os.path.join(self.data, "postgresql.conf")
        settings = [
            "listen_addresses = ''",
            "unix_socket_directories = '%s'" % self.base,
            "unix_socket_permissions = 0777",
            "port = %d" % self.port,
            "fsync = off",
            "synchronous_commit = off",
            "full_page_writes = off",
            "max_connections = 200",
            "shared_buffers = 32MB",
            "log_min_messages = warning",
            "log_connections = off",
            "log_line_prefix = '%m [%p] %q%u@%d '",
        ] + self.settings
        # postgresql.conf belongs to `nobody` when we are root: append as root
        with open(conf, "a") as f:
            f.write("\n# pntest\n" + "\n".join(settings) + "\n")
        return self

    def start(self):
        if self.base is None:
            self.init()
            first = True
        else:
            first = False
        if IS_ROOT and not os.path.exists(self.logfile):
            open(self.logfile, "a").close()
            os.chown(self.logfile, *self._owner_ids)
        self._pg("pg_ctl", "-D", self.data, "-l", self.logfile, "-w", "-t", "60", "start")
        self.running = True
        if first:
            self.psql("CREATE DATABASE %s" % PG_DB, db="postgres")
            if self.load_schema:
                sql_dir = os.environ.get("PN_SQL_DIR") or os.path.join(REPO, "sql")
                for f in sorted(glob.glob(os.path.join(sql_dir, "[0-9]*.sql"))):
                    self.psql_file(f)
                # every function's one definition, after the tables (as migrate does)
                self.psql_file(os.path.join(sql_dir, "functions.sql"))
        return self

    def stop(self, mode="fast"):
        if self.running:
            self._pg("pg_ctl", "-D", self.data, "-m", mode, "-w", "-t", "60", "stop")
            self.running = False

    def restart(self):
        self.stop()
        self.start()

    def destroy(self):
        if self.base is None:
            return
        if self.running:
            try:
                self._pg("pg_ctl", "-D", self.data, "-m", "immediate", "-w", "stop",
                         check=False, timeout=60)
            except Exception:
                pass
            self.running = False
        shutil.rmtree(self.base, ignore_errors=True)
        if self in _diagnostics:
            _diagnostics.remove(self)
        self.base = None

    # -- SQL --------------------------------------------------------------
    def _psql_argv(self, db=None):
        db = db or self.dbname
        return ["psql", "-X", "-q", "-v", "ON_ERROR_STOP=1", "-h", self.base,
                "-p", str(self.port), "-U", PG_USER, "-d", db]

    def connect(self, db=None, autocommit=True, **kw):
        """A psycopg2 connection to database db (default: this cluster's
        database) whose every value comes back as the server's text (as psql
        prints it: 't'/'f', numerics, timestamps, bytea as \\x...), None for
        NULL.  The caller closes it."""
        conn = psycopg2.connect(host=self.base, port=self.port, user=PG_USER,
                                dbname=db or self.dbname, connect_timeout=30, **kw)
        psycopg2.extensions.register_type(_text_caster(), conn)
        conn.autocommit = autocommit
        return conn

    def psql(self, sql, db=None, timeout=60):
        """Run SQL (one statement or several, as one simple query, outside
        an explicit transaction like psql -c); return the rows of the last
        statement as tuples of str (None for NULL).  Errors raise
        RuntimeError.  (psycopg2; the name is from when this ran psql.)"""
        try:
            conn = self.connect(db, options="-c statement_timeout=%d" % (timeout * 1000))
        except psycopg2.Error as e:
            raise RuntimeError("psql failed: %s\nSQL: %s" % (str(e).strip(), sql)) from None
        try:
            with conn.cursor() as cur:
                cur.execute(sql)
                return [tuple(r) for r in cur.fetchall()] if cur.description else []
        except psycopg2.Error as e:
            raise RuntimeError("psql failed: %s\nSQL: %s" % (
                (e.pgerror or str(e)).strip(), sql)) from None
        finally:
            conn.close()

    def scalar(self, sql):
        rows = self.psql(sql)
        return rows[0][0] if rows else None

    def reload_conf(self, name, value, timeout=30):
        """pg_reload_conf(), then wait until the postmaster has re-read its
        configuration: a new session sees setting `name` as `value` (a
        string, as SHOW prints it).  pg_reload_conf() only sends the
        postmaster a SIGHUP; once a new session has the value, the
        postmaster has passed the SIGHUP on to every other process, and an
        open session applies it before its next statement.  (Background
        processes such as the checkpointer apply it on their own time.)"""
        self.psql("SELECT pg_reload_conf()")
        deadline = time.monotonic() + timeout
        while True:
            now = self.scalar("SELECT current_setting(%s)" % q(name))
            if now == value:
                return
            if time.monotonic() > deadline:
                raise AssertionError("PostgreSQL did not reload: %s is %r, not %r after %ss"
                                     % (name, now, value, timeout))
            time.sleep(0.02)

    def psql_file(self, path, db=None):
        p = subprocess.run(self._psql_argv(db) + ["-f", path], env=clean_env(),
                           stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, timeout=120)
        if p.returncode != 0:
            raise RuntimeError("loading %s failed: %s" % (
                path, p.stderr.decode("utf-8", "replace")))

    def add_order(self, site, order_id, amount_minor, currency, status="pending"):
        self.psql("INSERT INTO paynotify.orders (site, order_id, amount_minor, currency, status) "
                  "VALUES (%s, %s, %d, %s, %s)" % (q(site), q(order_id), amount_minor,
                                                   q(currency), q(status)))

    def order(self, site, order_id):
        """The order as a dict, or None."""
        rows = self.psql("SELECT status, amount_minor, currency, refunded_minor, psp, psp_txn_id, "
                         "paid_at IS NOT NULL FROM paynotify.orders WHERE site = %s AND order_id = %s"
                         % (q(site), q(order_id)))
        if not rows:
            return None
        r = rows[0]
        return {"status": r[0], "amount_minor": int(r[1]), "currency": r[2],
                "refunded_minor": int(r[3]), "psp": r[4], "psp_txn_id": r[5],
                "paid": r[6] == "t"}

    NOTIFICATION_COLS = ("id", "site", "provider", "dedup_key", "event_kind", "event_type",
                         "order_id", "psp_txn_id", "psp_event_id", "amount_minor", "currency",
                         "refund_minor", "outcome", "deliveries", "key_id")

    def notifications(self, where="true"):
        """Notification rows (dicts, plus raw_body as bytes), oldest first."""
        cols = ", ".join(self.NOTIFICATION_COLS)
        rows = self.psql("SELECT %s, encode(raw_body, 'hex') FROM paynotify.notifications "
                         "WHERE %s ORDER BY id" % (cols, where))
        out = []
        for r in rows:
            d = dict(zip(self.NOTIFICATION_COLS, r[:-1]))
            for k in ("id", "amount_minor", "refund_minor", "deliveries"):
                if d[k] is not None:
                    d[k] = int(d[k])
            d["raw_body"] = bytes.fromhex(r[-1] or "")
            out.append(d)
        return out

    def reset(self):
        self.psql("TRUNCATE paynotify.notifications, paynotify.orders, paynotify.feed, "
                  "paynotify.cases")
        # the follow-up schedule (schema 17; an older schema has none)
        self.psql("DO $$BEGIN IF to_regclass('paynotify.follow_ups') IS NOT NULL THEN "
                  "TRUNCATE paynotify.follow_ups; END IF; END$$")
        # confirm's rate limit (schema 18)
        self.psql("DO $$BEGIN IF to_regclass('paynotify.confirm_asks') IS NOT NULL THEN "
                  "TRUNCATE paynotify.confirm_asks; END IF; END$$")

    def server_log(self):
        if not self.logfile:
            return ""
        return _tail(self.logfile)

    def diagnostics(self):
        return "---- PostgreSQL server log (%s) ----\n%s" % (self.logfile, self.server_log())


class Listener:
    """LISTEN on a channel (psycopg2): the payloads of the notifications
    received, in arrival order."""

    def __init__(self, cluster, channel="paynotify", timeout=10):
        self.conn = cluster.connect()
        self.timeout = timeout
        self.payloads = []
        with self.conn.cursor() as cur:
            cur.execute("LISTEN %s" % channel)

    def _collect(self):
        self.conn.poll()
        while self.conn.notifies:
            self.payloads.append(self.conn.notifies.pop(0).payload)

    def drain(self, settle=0.5, timeout=30, expect=0):
        """Read notifications until none arrive for `settle` seconds, and
        (a listening backend descheduled on a loaded machine can pause
        longer than that mid-way) not before `expect` have arrived or
        timeout seconds have passed."""
        deadline = time.monotonic() + timeout
        self._collect()
        while time.monotonic() < deadline:
            wait = settle if len(self.payloads) >= expect else \
                max(0.0, deadline - time.monotonic())
            ready, _, _ = select.select([self.conn], [], [], wait)
            if not ready and len(self.payloads) >= expect:
                break
            self._collect()
        return self.payloads

    def close(self):
        self.conn.close()


# ---------------------------------------------------------------------------
# The session-wide PostgreSQL: one cluster per test process (each pytest or
# xdist worker process), each test module its own database in it


_shared_cluster = None
_module_dbs = 0


def shared_cluster():
    """The process-wide throwaway cluster (started on first use, removed at
    exit), its database "paynotify" holding the schema: the template of
    every module_database()."""
    global _shared_cluster
    if _shared_cluster is None or _shared_cluster.base is None:
        _shared_cluster = PgCluster().start()
    elif not _shared_cluster.running:
        _shared_cluster.start()
    return _shared_cluster


class SharedDatabase(PgCluster):
    """A database of its own in shared_cluster(), with PgCluster's interface:
    a test module's PG.  stop()/start()/restart() stop and start the shared
    cluster (modules of one process run one after the other, so a test that
    takes the database down and brings it back affects no other); destroy()
    drops the database.  A test that kills, reconfigures or replicates
    PostgreSQL, or creates roles (cluster-wide), makes its own PgCluster."""

    def __init__(self, load_schema=True):
        global _module_dbs
        self.cluster = shared_cluster()
        _module_dbs += 1
        self.dbname = "pn_%d_%d" % (os.getpid(), _module_dbs)
        self.load_schema = load_schema
        self.port = self.cluster.port
        self.bindir = self.cluster.bindir
        self.settings = []
        self.created = False

    base = property(lambda self: self.cluster.base)
    data = property(lambda self: self.cluster.data)
    logfile = property(lambda self: self.cluster.logfile)
    running = property(lambda self: self.cluster.running)
    _owner_ids = property(lambda self: self.cluster._owner_ids)

    def init(self):
        return self

    def start(self):
        if self.cluster.base is None:
            raise RuntimeError("the shared PostgreSQL cluster was destroyed")
        if not self.cluster.running:
            self.cluster.start()
        if not self.created:
            self.cluster.psql("CREATE DATABASE %s TEMPLATE %s" % (
                self.dbname, PG_DB if self.load_schema else "template0"), db="postgres")
            self.created = True
            _cleanups.append(self.destroy)
        return self

    def stop(self, mode="fast"):
        self.cluster.stop(mode)

    def destroy(self):
        if self.created and self.cluster.base is not None and self.cluster.running:
            try:
                self.cluster.psql("DROP DATABASE IF EXISTS %s WITH (FORCE)" % self.dbname,
                                  db="postgres")
            except RuntimeError as e:
                sys.stderr.write("pntest: %s\n" % e)
        self.created = False

    def diagnostics(self):
        return self.cluster.diagnostics()


def module_database(load_schema=True):
    """A test module's own database in the session-wide cluster, started:
    a fresh copy of the schema (load_schema=False: empty)."""
    return SharedDatabase(load_schema).start()


class PgBouncer:
    """Debian's pgbouncer in front of a PgCluster, on a unix socket in its
    own temp dir (no TCP), trust authentication, pool_mode session or
    transaction.  As root it runs as `nobody` (pgbouncer refuses root)."""

    def __init__(self, cluster, pool_mode, pool_size=4, port=6432, settings=()):
        self.cluster = cluster
        self.settings = list(settings)      # more "key = value" lines of [pgbouncer]
        self.pool_mode = pool_mode
        self.pool_size = pool_size
        self.port = port
        self.base = None
        self.proc = None
        self.logfile = None

    @staticmethod
    def binary():
        return shutil.which("pgbouncer") or "/usr/sbin/pgbouncer"

    def conninfo(self):
        return "host=%s port=%d dbname=%s user=%s" % (self.base, self.port, PG_DB, PG_USER)

    def start(self):
        if not os.path.exists(self.binary()):
            raise RuntimeError("pgbouncer not found (apt-get install pgbouncer)")
        self.base = scratch_dir("pntest-pgb.")
        _cleanups.append(self.stop)
        _diagnostics.append(self)
        os.chmod(self.base, 0o755)
        self.logfile = os.path.join(self.base, "pgbouncer.log")
        users = os.path.join(self.base, "userlist.txt")
        with open(users, "w") as f:
            f.write('"%s" ""\n' % PG_USER)
        ini = os.path.join(self.base, "pgbouncer.ini")
        with open(ini, "w") as f:
            f.write("\n".join([
                "[databases]",
                "%s = host=%s port=%d dbname=%s" % (PG_DB, self.cluster.base, self.cluster.port,
                                                    PG_DB),
                "[pgbouncer]",
                "listen_addr =",
                "listen_port = %d" % self.port,
                "unix_socket_dir = %s" % self.base,
                "auth_type = trust",
                "auth_file = %s" % users,
                "admin_users = %s" % PG_USER,
                "pool_mode = %s" % self.pool_mode,
                "default_pool_size = %d" % self.pool_size,
                "max_client_conn = 500",
                "server_reset_query = DISCARD ALL",
                "logfile = %s" % self.logfile,
                "pidfile = %s" % os.path.join(self.base, "pgbouncer.pid")]
                + self.settings + [""]))
        argv = [self.binary(), "-q", ini]
        if IS_ROOT:
            import pwd
            pw = pwd.getpwnam("nobody")
            for path in (self.base, users, ini):
                os.chown(path, pw.pw_uid, pw.pw_gid)
            argv = ["runuser", "-u", "nobody", "--"] + argv
        self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL, env=clean_env(), cwd=self.base)
        sock = os.path.join(self.base, ".s.PGSQL.%d" % self.port)
        deadline = time.monotonic() + 15
        while not os.path.exists(sock):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("pgbouncer did not start:\n" + _tail(self.logfile))
            time.sleep(0.05)
        return self

    def psql(self, sql, db=PG_DB):
        """Run SQL through the pooler (db "pgbouncer": its admin console)."""
        argv = ["psql", "-X", "-q", "-A", "-t", "-h", self.base, "-p", str(self.port),
                "-U", PG_USER, "-d", db, "-c", sql]
        p = subprocess.run(argv, env=clean_env(), stdin=subprocess.DEVNULL,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60)
        if p.returncode != 0:
            raise RuntimeError("psql via pgbouncer failed: %s" % p.stderr.decode())
        return p.stdout.decode()

    def stop(self):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None
        if self in _diagnostics:
            _diagnostics.remove(self)
        if self.base:
            d = self.base
            _cleanups.insert(0, lambda: shutil.rmtree(d, ignore_errors=True))
            self.base = None

    def diagnostics(self):
        return "---- pgbouncer log (%s) ----\n%s" % (self.logfile, _tail(self.logfile or ""))


def q(s):
    """An SQL string literal."""
    if s is None:
        return "NULL"
    return "'" + str(s).replace("'", "''") + "'"


# ---------------------------------------------------------------------------
# Sites and configuration

Site = collections.namedtuple("Site", [
    "name", "alipay_app_id", "alipay_seller_id", "alipay_private_key", "alipay_public_key",
    "stripe_secrets"])

# Two sites with DIFFERENT keys and merchant identities.  shop-a uses the
# Appendix A test key (SPKI PEM); shop-b a second key, configured in the
# Alipay-console form (bare base64 SPKI).
SITE_A = Site("shop-a", "2021000000000001", "2088000000000001",
              os.path.join(KEYS, "site-a-private.pem"), os.path.join(KEYS, "site-a-public.pem"),
              ("whsec_test_secret",))
SITE_B = Site("shop-b", "2021000000000002", "2088000000000002",
              os.path.join(KEYS, "site-b-private.pem"), os.path.join(KEYS, "site-b-public.b64"),
              ("whsec_shop_b_secret",))
# A site in the middle of a key rotation: two Alipay public keys (site A's
# as SPKI PEM and site B's as an X.509 certificate) and two Stripe secrets.
SITE_R = Site("shop-r", "2021000000000003", "2088000000000003",
              os.path.join(KEYS, "site-a-private.pem"),
              (os.path.join(KEYS, "site-a-public.pem"), os.path.join(KEYS, "site-b-cert.pem")),
              ("whsec_rotation_old", "whsec_rotation_new"))
SITES = (SITE_A, SITE_B, SITE_R)

Config = collections.namedtuple("Config", ["path", "dir", "sites", "max_body_bytes"])


def _write_secret(path, text):
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(text)
    os.chmod(path, 0o600)


def key_id(file_name, material):
    """The key id the receivers record: file base name and the first 8 hex
    digits of SHA-256 of the key material (a secret's text, a public key's
    DER SubjectPublicKeyInfo)."""
    if isinstance(material, str):
        material = material.encode()
    return "%s:%s" % (os.path.basename(file_name), hashlib.sha256(material).hexdigest()[:8])


def write_secret(path, text):
    """Write a secret file with mode 0600 (the receivers refuse others)."""
    _write_secret(path, text)


def add_cleanup(fn):
    """Run fn at exit (after the tests), last added first."""
    _cleanups.append(fn)


def temp_dir(prefix="pntest."):
    """A temp dir removed at exit."""
    d = tempfile.mkdtemp(prefix=prefix)
    _cleanups.append(lambda: shutil.rmtree(d, ignore_errors=True))
    return d


def write_config(cluster=None, conninfo=None, sites=SITES, max_body_bytes=1048576,
                 statement_timeout_ms=3000, directory=None, extra="", site_lines=None):
    """Write paynotify.ini, key and secret files into a new temp dir.

    shop-a's key and secret paths are relative (resolved against the config
    file's directory); shop-b's are absolute.  site_lines maps a site name to
    extra "key = value" lines for its section (other providers' keys; write
    their files into the returned Config.dir first, or give absolute paths);
    extra is appended verbatim (more [site ...] sections).  Returns a Config."""
    d = directory or tempfile.mkdtemp(prefix="pntest-cfg.")
    if directory is None:
        _cleanups.append(lambda: shutil.rmtree(d, ignore_errors=True))
    os.chmod(d, 0o755)
    os.makedirs(os.path.join(d, "keys"), exist_ok=True)
    os.makedirs(os.path.join(d, "secrets"), exist_ok=True)
    os.chmod(os.path.join(d, "secrets"), 0o700)
    if conninfo is None:
        conninfo = cluster.conninfo() if cluster else "host=/nonexistent dbname=paynotify"
    lines = [
        "; written by tests/lib/pntest.py",
        "[database]",
        "conninfo = %s" % conninfo,
        "statement_timeout_ms = %d" % statement_timeout_ms,
        "",
        "[limits]",
        "max_body_bytes = %d" % max_body_bytes,
        "",
    ]
    for i, s in enumerate(sites):
        relative = (i % 2 == 0)
        keyfiles = s.alipay_public_key
        if isinstance(keyfiles, str):
            keyfiles = (keyfiles,)
        pubs = []
        for j, kf in enumerate(keyfiles):
            pub_name = "%s-alipay-%d%s" % (s.name, j + 1, os.path.splitext(kf)[1])
            shutil.copyfile(kf, os.path.join(d, "keys", pub_name))
            os.chmod(os.path.join(d, "keys", pub_name), 0o644)
            pubs.append("keys/" + pub_name if relative else os.path.join(d, "keys", pub_name))
        pub = " ".join(pubs)
        secret_name = "%s-stripe-whsec" % s.name
        _write_secret(os.path.join(d, "secrets", secret_name),
                      "".join(x + "\n" for x in s.stripe_secrets))
        sec = "secrets/" + secret_name if relative else os.path.join(d, "secrets", secret_name)
        lines += [
            "[site %s]" % s.name,
            "alipay.app_id = %s" % s.alipay_app_id,
            "alipay.seller_id = %s" % s.alipay_seller_id,
            "alipay.public_key_file = %s" % pub,
            "alipay.sign_type = RSA2",
            "stripe.secret_files = %s" % sec,
            "stripe.tolerance_s = 300",
        ] + list((site_lines or {}).get(s.name, ())) + [
            "",
        ]
    path = os.path.join(d, "paynotify.ini")
    with open(path, "w") as f:
        f.write("\n".join(lines) + extra)
    return Config(path, d, tuple(sites), max_body_bytes)


def write_site_config(cluster, site_lines, secrets=(), files=(), prefix="pntest-cfg."):
    """A config for sites write_config() does not know (WeChat Pay, 2C2P):
    a temp dir (removed at exit) holding the secret files (name, text;
    mode 0600) and copies of files (source path, name), and paynotify.ini
    with the [database] section for cluster followed by site_lines.
    Returns the path of the ini file."""
    d = tempfile.mkdtemp(prefix=prefix)
    _cleanups.append(lambda: shutil.rmtree(d, ignore_errors=True))
    for name, text in secrets:
        _write_secret(os.path.join(d, name), text)
    for src, name in files:
        os.makedirs(os.path.dirname(os.path.join(d, name)), exist_ok=True)
        shutil.copyfile(src, os.path.join(d, name))
    path = os.path.join(d, "paynotify.ini")
    with open(path, "w") as f:
        f.write("\n".join(["[database]", "conninfo = %s" % cluster.conninfo(),
                           "statement_timeout_ms = 3000", ""] + list(site_lines) + [""]))
    return path


# ---------------------------------------------------------------------------
# Requests and responses

Response = collections.namedtuple("Response", ["status", "headers", "body", "stderr"])


def parse_cgi_response(out, stderr=b""):
    """Split a CGI/FastCGI response into (status, headers, body)."""
    for sep in (b"\r\n\r\n", b"\n\n"):
        i = out.find(sep)
        if i >= 0:
            head, body = out[:i], out[i + len(sep):]
            break
    else:
        return Response(None, {}, out, stderr)
    headers = {}
    status = 200
    for line in head.replace(b"\r\n", b"\n").split(b"\n"):
        if b":" not in line:
            continue
        k, v = line.split(b":", 1)
        k = k.decode("latin-1").strip().lower()
        v = v.decode("latin-1").strip()
        headers[k] = v
        if k == "status":
            try:
                status = int(v.split()[0])
            except (ValueError, IndexError):
                status = None
    return Response(status, headers, body, stderr)


def cgi_params(method, path, headers=None, body=b"", content_length=None):
    """The CGI variables a web server would pass for this request."""
    params = collections.OrderedDict([
        ("GATEWAY_INTERFACE", "CGI/1.1"),
        ("SERVER_PROTOCOL", "HTTP/1.1"),
        ("SERVER_SOFTWARE", "pntest"),
        ("SERVER_NAME", "localhost"),
        ("SERVER_PORT", "80"),
        ("REMOTE_ADDR", "127.0.0.1"),
        ("REMOTE_PORT", "40000"),
        ("REQUEST_METHOD", method),
        ("SCRIPT_NAME", ""),
        ("PATH_INFO", path),
        ("REQUEST_URI", path),
        ("QUERY_STRING", ""),
    ])
    if body or method in ("POST", "PUT"):
        params["CONTENT_LENGTH"] = str(len(body) if content_length is None else content_length)
    for k, v in (headers or {}).items():
        name = k.upper().replace("-", "_")
        if name == "CONTENT_TYPE":
            params["CONTENT_TYPE"] = v
        elif name == "CONTENT_LENGTH":
            params["CONTENT_LENGTH"] = v
        else:
            params["HTTP_" + name] = v
    return params


def run_cgi(binary_path, method, path, headers=None, body=b"", config=None,
            extra_env=None, timeout=30, content_length=None):
    """Run a receiver as a CGI program.  Returns Response(status, headers,
    body bytes, stderr text)."""
    if isinstance(body, str):
        body = body.encode("utf-8")
    env = clean_env(cgi_params(method, path, headers, body, content_length))
    if config is not None:
        env["PAYNOTIFY_CONFIG"] = config.path if isinstance(config, Config) else config
    if extra_env:
        env.update(extra_env)
    timeout = patience(timeout)
    if UNDER_VALGRIND:
        timeout = max(timeout, 120)
    p = subprocess.Popen(valgrind_argv([binary_path]), env=env, cwd="/", stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        out, err = p.communicate(body, timeout=timeout)  # EPIPE is ignored
    except subprocess.TimeoutExpired:
        p.kill()
        out, err = p.communicate()
        raise AssertionError("CGI %s timed out after %ss; stderr:\n%s" % (
            binary_path, timeout, err.decode("utf-8", "replace")))
    err = err.decode("utf-8", "replace")
    if p.returncode < 0:
        raise AssertionError("CGI %s died of signal %d; stderr:\n%s" % (
            binary_path, -p.returncode, err))
    if UNDER_VALGRIND and p.returncode == VALGRIND_EXIT:
        raise AssertionError("valgrind found errors or definite leaks in CGI %s (see "
                             "vg.%d.log in PN_VALGRIND_LOGDIR)" % (binary_path, p.pid))
    return parse_cgi_response(out, err)


# ---------------------------------------------------------------------------
# FastCGI

FCGI_BEGIN_REQUEST, FCGI_ABORT_REQUEST, FCGI_END_REQUEST = 1, 2, 3
FCGI_PARAMS, FCGI_STDIN, FCGI_STDOUT, FCGI_STDERR = 4, 5, 6, 7
FCGI_RESPONDER = 1


def _fcgi_record(rtype, req_id, content=b""):
    pad = (8 - len(content) % 8) % 8
    return struct.pack("!BBHHBx", 1, rtype, req_id, len(content), pad) + content + b"\0" * pad


def _fcgi_len(n):
    return struct.pack("!B", n) if n < 128 else struct.pack("!I", n | 0x80000000)


def _fcgi_nv(name, value):
    name = name.encode("latin-1") if isinstance(name, str) else name
    value = value.encode("utf-8") if isinstance(value, str) else value
    return _fcgi_len(len(name)) + _fcgi_len(len(value)) + name + value


def _fcgi_stream(rtype, req_id, data, chunk=32768):
    out = []
    for i in range(0, len(data), chunk):
        out.append(_fcgi_record(rtype, req_id, data[i:i + chunk]))
    out.append(_fcgi_record(rtype, req_id, b""))
    return out


def fcgi_encode(params, body=b"", req_id=1, keep_conn=False):
    """One responder request as bytes: BEGIN_REQUEST (FCGI_KEEP_CONN when
    keep_conn), the PARAMS stream, the STDIN stream."""
    out = [_fcgi_record(FCGI_BEGIN_REQUEST, req_id,
                        struct.pack("!HB5x", FCGI_RESPONDER, 1 if keep_conn else 0))]
    out += _fcgi_stream(FCGI_PARAMS, req_id,
                        b"".join(_fcgi_nv(k, v) for k, v in params.items()))
    out += _fcgi_stream(FCGI_STDIN, req_id, body)
    return b"".join(out)


class FcgiConn:
    """The FastCGI client: a connection to a responder over a unix socket
    (or TCP: sock_path a (host, port) tuple).  request()/send_raw() send one
    request and read its answer up to FCGI_END_REQUEST -> Response (FCGI_STDERR
    output in stderr); with keep_conn (FCGI_KEEP_CONN) many requests share
    the connection.  A connection that closes before FCGI_END_REQUEST raises
    ConnectionError."""

    def __init__(self, sock_path, timeout=10, keep_conn=True):
        # timeout bounds the wait for the answer: stretched under valgrind
        # and ASan (a first request there includes loading the program)
        timeout = patience(timeout)
        self.s = socket.socket(socket.AF_INET if isinstance(sock_path, tuple) else socket.AF_UNIX,
                               socket.SOCK_STREAM)
        self.s.settimeout(timeout)
        self.s.connect(sock_path)
        self.timeout = timeout
        self.keep_conn = keep_conn
        self.buf = b""

    def close(self):
        self.s.close()

    @staticmethod
    def encode(params, body, req_id=1, keep_conn=True):
        return fcgi_encode(params, body, req_id, keep_conn)

    def read_response(self):
        """Records up to FCGI_END_REQUEST -> Response."""
        stdout, stderr = [], []
        deadline = time.monotonic() + self.timeout
        while True:
            while len(self.buf) >= 8:
                _v, rtype, _rid, clen, plen = struct.unpack("!BBHHBx", self.buf[:8])
                if len(self.buf) < 8 + clen + plen:
                    break
                content = self.buf[8:8 + clen]
                self.buf = self.buf[8 + clen + plen:]
                if rtype == FCGI_STDOUT:
                    stdout.append(content)
                elif rtype == FCGI_STDERR:
                    stderr.append(content)
                elif rtype == FCGI_END_REQUEST:
                    return parse_cgi_response(b"".join(stdout),
                                              b"".join(stderr).decode("utf-8", "replace"))
            if time.monotonic() > deadline:
                raise AssertionError("FastCGI request timed out after %ss" % self.timeout)
            try:
                chunk = self.s.recv(65536)
            except ConnectionResetError:
                chunk = b""
            if not chunk:
                raise ConnectionError("FastCGI connection closed without FCGI_END_REQUEST "
                                      "(stdout so far: %r)" % (b"".join(stdout)[:200],))
            self.buf += chunk

    def send_raw(self, data):
        """Send one encoded request and read its answer -> Response."""
        self.s.sendall(data)
        return self.read_response()

    def request(self, method, p, headers=None, body=b""):
        if isinstance(body, str):
            body = body.encode("utf-8")
        return self.send_raw(fcgi_encode(cgi_params(method, p, headers, body), body,
                                         keep_conn=self.keep_conn))


def oneshot(sock_path, method, p, headers=None, body=b"", timeout=10):
    """One request on a new connection (no keep-alive, so any worker may
    take the next one).  Raises ConnectionError/OSError when the worker dies
    before FCGI_END_REQUEST."""
    c = FcgiConn(sock_path, timeout, keep_conn=False)
    try:
        return c.request(method, p, headers, body)
    finally:
        c.close()


def fcgi_request(sock_path, params, body=b"", timeout=30, req_id=1):
    """One FastCGI responder request over a unix socket, or TCP when
    sock_path is a (host, port) tuple (no keep-alive).  The request is sent
    from a thread while the answer is read (the application may answer, 413,
    and close before reading it all).  Returns Response; FCGI_STDERR output
    is the stderr field.  A connection closed before FCGI_END_REQUEST raises
    AssertionError."""
    if isinstance(body, str):
        body = body.encode("utf-8")
    c = FcgiConn(sock_path, timeout, keep_conn=False)
    data = fcgi_encode(params, body, req_id)

    def sender():
        try:
            c.s.sendall(data)
        except OSError:         # the app may answer (413) and close early
            pass

    t = threading.Thread(target=sender, daemon=True)
    t.start()
    try:
        return c.read_response()
    except ConnectionError as e:
        raise AssertionError(str(e)) from None
    finally:
        c.close()
        t.join(5)


class FcgiServer:
    """N worker processes of one receiver sharing a listening unix socket on
    fd 0, as spawn-fcgi or a web server would start them."""

    def __init__(self, binary_path, config, workers=2, extra_env=None):
        self.binary = binary_path
        self.config = config
        self.nworkers = workers
        self.extra_env = extra_env or {}
        self.dir = None
        self.sock_path = None
        self.listener = None
        self.procs = []
        self.logs = []

    def start(self):
        self.dir = scratch_dir("pntest-fcgi.")
        os.chmod(self.dir, 0o755)
        _cleanups.append(self.stop)
        _diagnostics.append(self)
        self.sock_path = os.path.join(self.dir, "fcgi.sock")
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.listener.bind(self.sock_path)
        self.listener.listen(256)
        env = clean_env({"PAYNOTIFY_CONFIG": self.config.path
                         if isinstance(self.config, Config) else self.config})
        env.update(self.extra_env)
        for i in range(self.nworkers):
            log = os.path.join(self.dir, "worker-%d.log" % i)
            self.logs.append(log)
            with open(log, "wb") as lf:
                p = subprocess.Popen(valgrind_argv([self.binary]), stdin=self.listener.fileno(),
                                     stdout=lf, stderr=lf, env=env, cwd="/",
                                     close_fds=True)
            self.procs.append(p)
        time.sleep(0.3)
        wait_sigterm_ready(self.procs)
        dead = [p for p in self.procs if p.poll() is not None]
        if dead:
            text = self.diagnostics()
            self.stop()
            raise RuntimeError("FastCGI worker(s) exited at start-up:\n" + text)
        return self

    def alive(self):
        return sum(1 for p in self.procs if p.poll() is None)

    def dead_workers(self):
        return [(i, p.returncode) for i, p in enumerate(self.procs) if p.poll() is not None]

    def request(self, method, path, headers=None, body=b"", timeout=30, content_length=None):
        if isinstance(body, str):
            body = body.encode("utf-8")
        return fcgi_request(self.sock_path,
                            cgi_params(method, path, headers, body, content_length),
                            body, timeout=timeout)

    def stop(self):
        wait_sigterm_ready(self.procs)
        for p in self.procs:
            if p.poll() is None:
                p.terminate()
        # under valgrind the exit includes the leak check; on a loaded
        # machine that can take a minute
        limit = 300 if UNDER_VALGRIND else patience(10)
        deadline = time.monotonic() + limit
        for i, p in enumerate(self.procs):
            try:
                wait_resending_sigterm(p, deadline, "FastCGI worker %d of %s" % (
                    i, os.path.basename(self.binary)))
            except subprocess.TimeoutExpired:
                # say so: under valgrind its log then has no summary
                sys.stderr.write("pntest: FastCGI worker %d (pid %d) of %s still running %ss "
                                 "after SIGTERM: SIGKILL\n" % (i, p.pid,
                                                              os.path.basename(self.binary),
                                                              limit))
                p.kill()
                p.wait()
        if self.listener is not None:
            self.listener.close()
            self.listener = None
        if self in _diagnostics:
            _diagnostics.remove(self)
        if self.dir:
            # keep the logs readable for diagnostics until the very end
            d = self.dir
            _cleanups.insert(0, lambda: shutil.rmtree(d, ignore_errors=True))

    def log_text(self):
        return "".join(_tail(l, 4000) for l in self.logs)

    def diagnostics(self):
        parts = []
        for i, l in enumerate(self.logs):
            st = self.procs[i].poll() if i < len(self.procs) else None
            parts.append("---- FastCGI worker %d of %s (%s) log ----\n%s" % (
                i, os.path.basename(self.binary),
                "running" if st is None else "exited %s" % st, _tail(l, 1500)))
        return "\n".join(parts)



# ---------------------------------------------------------------------------
# A receiver under test, as CGI or over FastCGI


class ReceiverScenarios:
    """Base of the integration test classes that run one receiver's
    scenarios twice: as CGI (transport "cgi": one process per request) and
    over FastCGI (transport "fcgi": pre-forked workers on a unix socket).
    A worker that dies during a test fails that test and is replaced, so
    later tests still run.  Subclasses set `receiver` (the provider name) or
    `kit` (a pnkit.Kit), `transport` and `workers`, and env() returning
    the module's (PgCluster, Config)."""
    receiver = None
    transport = None        # "cgi" or "fcgi"
    workers = 3
    server = None

    @staticmethod
    def env():
        raise NotImplementedError

    kit = None              # or a pnkit.Kit: its provider is the receiver

    @classmethod
    def receiver_name(cls):
        return cls.receiver or cls.kit.provider

    @classmethod
    def setUpClass(cls):
        cls.binary = binary(cls.receiver_name())
        if not os.access(cls.binary, os.X_OK):
            raise AssertionError("%s is not built (run autoreconf -fi && ./configure && make)"
                                 % cls.binary)
        if cls.transport == "fcgi":
            cls.server = FcgiServer(cls.binary, cls.env()[1], workers=cls.workers).start()

    @classmethod
    def tearDownClass(cls):
        if cls.server is not None:
            cls.server.stop()
            cls.server = None

    def setUp(self):
        pg = self.env()[0]
        if not pg.running:
            pg.start()
        pg.reset()

    def tearDown(self):
        if self.server is not None:
            dead = self.server.dead_workers()
            if dead:
                text = self.server.diagnostics()
                self.server.stop()
                type(self).server = FcgiServer(self.binary, self.env()[1],
                                               workers=self.workers).start()
                self.fail("FastCGI worker(s) died during the test: %r\n%s" % (dead, text))

# ---------------------------------------------------------------------------
# Signers


# The signing itself lives in pnsign (shared with the fixtures, the
# stand-ins and the benchmark); these names stay for the many callers.
stripe_signature = pnsign.stripe_signature
stripe_header = pnsign.stripe_header
alipay_content = pnsign.alipay_content
rsa_sign = pnsign.rsa_sign
alipay_sign = pnsign.alipay_sign
alipay_body = pnsign.alipay_body


def form_decode(body):
    """Decode a form body once into (key, value) pairs, blanks kept."""
    if isinstance(body, bytes):
        body = body.decode("ascii")
    return urllib.parse.parse_qsl(body, keep_blank_values=True, strict_parsing=True,
                                  encoding="utf-8", errors="strict")


# ---------------------------------------------------------------------------
# Notification builders

_seq = [0]


def _next():
    _seq[0] += 1
    return "%d%06d" % (int(time.time()), _seq[0])


def alipay_params(site, out_trade_no, total_amount, trade_status="TRADE_SUCCESS", **extra):
    """The fields of a realistic Alipay trade_status_sync notification (a dict,
    unsigned).  extra overrides or adds fields (None removes one)."""
    n = _next()
    p = collections.OrderedDict([
        ("gmt_create", "2024-05-20 10:00:01"),
        ("charset", "utf-8"),
        ("seller_email", "merchant@example.com"),
        ("subject", "会员+年卡 (test)"),
        ("buyer_id", "2088102177846880"),
        ("invoice_amount", total_amount),
        ("notify_id", "2024052001222" + n),
        ("fund_bill_list", '[{"amount":"%s","fundChannel":"ALIPAYACCOUNT"}]' % total_amount),
        ("notify_type", "trade_status_sync"),
        ("trade_status", trade_status),
        ("receipt_amount", total_amount),
        ("app_id", site.alipay_app_id),
        ("buyer_pay_amount", total_amount),
        ("seller_id", site.alipay_seller_id),
        ("gmt_payment", "2024-05-20 10:00:05"),
        ("notify_time", "2024-05-20 10:00:06"),
        ("passback_params", "order%3D42"),
        ("version", "1.0"),
        ("out_trade_no", out_trade_no),
        ("total_amount", total_amount),
        # Alipay's trade id: digits, one per trade (the dedup key names it)
        ("trade_no", "2024052022001400%012d"
         % (int(hashlib.sha1(out_trade_no.encode()).hexdigest()[:12], 16) % 10 ** 12)),
        ("auth_app_id", site.alipay_app_id),
        ("buyer_logon_id", "tes***@example.com"),
        ("point_amount", "0.00"),
        ("body", ""),
    ])
    for k, v in extra.items():
        if v is None:
            p.pop(k, None)
        else:
            p[k] = v
    return p


def alipay_notification(site, out_trade_no, total_amount, trade_status="TRADE_SUCCESS",
                        key=None, sign_type="RSA2", **extra):
    """A signed Alipay notification body for site (signed with the site's
    own private key unless key is given)."""
    return alipay_body(alipay_params(site, out_trade_no, total_amount, trade_status, **extra),
                       key or site.alipay_private_key, sign_type)


ALIPAY_CONTENT_TYPE = pnsign.ALIPAY_CONTENT_TYPE
STRIPE_CONTENT_TYPE = pnsign.STRIPE_CONTENT_TYPE


def _stripe_event(event_id, etype, obj, created=None, livemode=True, metadata=None):
    """livemode True by default: the sites written here take live events
    (stripe.mode defaults to live; a test-mode event is mode_mismatch).
    metadata: extra members merged into the object's metadata (a site
    marker, stripe.site_metadata)."""
    if metadata:
        md = dict(obj.get("metadata") or {})
        md.update(metadata)
        obj["metadata"] = md
    ev = collections.OrderedDict([
        ("id", event_id), ("object", "event"), ("api_version", "2024-06-20"),
        ("created", int(created or time.time())), ("livemode", livemode),
        ("pending_webhooks", 1), ("type", etype), ("data", {"object": obj}),
    ])
    return json.dumps(ev, separators=(",", ":")).encode("utf-8")


def stripe_checkout_completed(order_id, amount_minor, currency="usd", event_id=None,
                              payment_status="paid", etype="checkout.session.completed",
                              payment_intent=None, livemode=True, metadata=None):
    """A checkout.session.* event body (bytes); by default completed + paid."""
    n = _next()
    obj = collections.OrderedDict([
        ("id", "cs_test_" + n), ("object", "checkout.session"),
        ("amount_total", amount_minor), ("currency", currency),
        ("client_reference_id", order_id), ("metadata", {"order_id": order_id}),
        ("mode", "payment"), ("payment_intent", payment_intent or "pi_test_" + n),
        ("payment_status", payment_status),
        ("status", "expired" if etype.endswith("expired") else "complete"),
    ])
    return _stripe_event(event_id or "evt_test_" + n, etype, obj, livemode=livemode,
                         metadata=metadata)


def stripe_charge_refunded(order_id, amount_minor, amount_refunded, currency="usd",
                           event_id=None, payment_intent=None, livemode=True, metadata=None):
    """A charge.refunded event body (amount_refunded is cumulative).  With
    order_id None the charge carries no metadata (as when the Checkout
    Session's metadata was not copied to the PaymentIntent)."""
    n = _next()
    obj = collections.OrderedDict([
        ("id", "ch_test_" + n), ("object", "charge"), ("amount", amount_minor),
        ("amount_captured", amount_minor), ("amount_refunded", amount_refunded),
        ("currency", currency),
        ("metadata", {"order_id": order_id} if order_id is not None else {}),
        ("payment_intent", payment_intent or "pi_test_" + n), ("paid", True),
        ("refunded", amount_refunded >= amount_minor), ("status", "succeeded"),
    ])
    return _stripe_event(event_id or "evt_test_" + n, "charge.refunded", obj, livemode=livemode,
                         metadata=metadata)


def stripe_dispute(etype, dispute_id, status, payment_intent, amount_minor=1000, currency="usd",
                   reason="fraudulent", due_by=None, event_id=None, created=None,
                   charge=None, livemode=True):
    """A charge.dispute.* event body (bytes): data.object is the Dispute as
    the Stripe API reference describes it (amount/currency of the disputed
    charge, reason, status, evidence_details.due_by, charge and
    payment_intent, balance_transactions)."""
    n = _next()
    obj = collections.OrderedDict([
        ("id", dispute_id), ("object", "dispute"), ("amount", amount_minor),
        ("balance_transactions", []), ("charge", charge or "ch_test_" + n),
        ("created", int(created or time.time())), ("currency", currency),
        ("evidence_details", collections.OrderedDict([
            ("due_by", due_by), ("has_evidence", False), ("past_due", False),
            ("submission_count", 0)])),
        ("is_charge_refundable", False), ("livemode", livemode), ("metadata", {}),
        ("payment_intent", payment_intent), ("reason", reason), ("status", status),
    ])
    return _stripe_event(event_id or "evt_test_" + n, etype, obj, created=created,
                         livemode=livemode)


def stripe_customer_created(event_id=None):
    """An event type no receiver acts on (the shape of the stripe-dotnet fixture)."""
    n = _next()
    obj = collections.OrderedDict([
        ("id", "cus_" + n), ("object", "customer"), ("created", 123456789),
        ("email", "test@stripe.com"), ("livemode", False), ("metadata", {}),
    ])
    return _stripe_event(event_id or "evt_test_" + n, "customer.created", obj)


def stripe_headers(site, body, t=None, secret=None):
    t = int(time.time()) if t is None else t
    return {"Content-Type": STRIPE_CONTENT_TYPE,
            "Stripe-Signature": stripe_header(secret or site.stripe_secrets[0], t, body)}


def alipay_headers():
    return {"Content-Type": ALIPAY_CONTENT_TYPE}
