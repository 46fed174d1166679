#!/usr/bin/env python3
"""docrun: run the operators' documentation as written (tests/e2e/test_docs_run.py).

The documents (DOCS below) are parsed for fenced blocks.  Every fence has a
language; ```sh, ```sql and ```cron blocks are the ones an operator runs,
and each carries, on the line directly above its fence (other HTML comment
lines may sit between the marker and the fence), one of

    <!-- doc-run: USER [db=NAME] [role=ROLE] [step=N] [wait=PATH] [exit=N] -->
    <!-- doc-run: cron [step=N] -->                 (```cron only)
    <!-- doc-run: skip: REASON -->

USER is the operating-system user the documents name (root, paynotify,
postgres, ...).  An ```sh block runs as USER (`runuser`) with bash, command
by command (a command continues over a trailing backslash, |, &&, ||, an
open quote or a here-document): the first that fails ends the block, also
the first half of `a && b` (pipefail is on); `exit=N` expects the block to
end with status N instead of 0.  An ```sql block runs as
`psql -X -v ON_ERROR_STOP=1 -d NAME [-U ROLE]` (default database `shop`)
as USER, the block on stdin.  A ```cron block is an /etc/cron.d file: its
`NAME=VALUE` lines are the environment, and each job line's command runs as
the line's user the way cron runs it (`/bin/sh -c`, PATH=/usr/bin:/bin,
`%` the end of the command and the rest its stdin, `\\%` a literal `%`),
and must exit 0 and print nothing (cron mails what a job prints).
`expect=TEXT` (repeatable; quote it if it has spaces): the output must
contain TEXT.  `wait=PATH`: the block starts something that keeps
running (a receiver in the foreground): it runs in the background and the
run goes on once PATH exists.  Blocks run in order of (step, the order of
DOCS, line); `step` defaults to 50.  Blocks that are examples of output or
file contents use other fences (```text, ```ini, ...) and are not run.

The environment (tests/e2e/test_docs_run.py runs it as root, with the
package installed): a private mount, network and pid namespace (unshare), in
which /etc, /var, /usr, /root, /home, /srv and /opt are overlays whose
writes are thrown away, /run is a new tmpfs, the loopback is up, and a new
PostgreSQL cluster `main` of the newest installed major version
(pg_createcluster, Debian's defaults: peer authentication on the standard
socket /var/run/postgresql, port 5432) has a database `shop`; nginx as
Debian installs it.  Nothing a block does reaches the machine.  Three
stand-ins, first on PATH for ```sh blocks, replace what a container cannot
give or a script cannot type:
  systemctl  systemd is not PID 1: daemon-reload, enable/start/stop/
             restart/reload/is-active of paynotify@P.socket/.service and
             paynotify-confirm.socket/.service (started
             as the INSTALLED units say: the socket of ListenStream= with
             SocketUser=/SocketGroup=/SocketMode= on fd 0, ExecStart= as
             User=/Group= with Environment=; ExecReload= lines in order),
             nginx and postgresql; anything else fails, saying so
  editor     the edit the surrounding text describes: for
             /etc/paynotify/conf.d/50-shop-a.conf, the example's commented
             site shop-a with its keys set, made a sandbox site (test keys
             for every provider under /etc/paynotify/shop-a/, owned by
             paynotify, secrets 0600, and test signing); for /etc/nginx/sites-available/default, the include lines
             of README "nginx" in its server { }
  (the .deb)  build/deb/paynotify_*.deb in the working directory is the
             package under test ($PN_PACKAGE_DEB, else the tree's build/deb)
Every block runs in one shared working directory (mode 1777) with
HOME=a scratch directory of that user, LANG=C.UTF-8, stdin /dev/null.

Usage (as root): docrun.py check   (the markers only; exit 1 on errors)
                 docrun.py run RESULTS.json   (every block; a JSON list)
"""

import glob
import grp
import json
import os
import pwd
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DOCS = ["README.md", "docs/DATABASE.md", "docs/DEPLOYMENT.md", "docs/OPERATIONS.md",
        "docs/SHOP-ORDERS.md"]
RUNNABLE = ("sh", "sql", "cron")
OPTIONS = ("db", "role", "step", "wait", "exit", "expect")
FENCE = re.compile(r"^(\s*)(`{3,}|~{3,})\s*([^`\s]*)(.*)$")
MARKER = re.compile(r"^\s*<!--\s*doc-run:(.*?)-->\s*$")
COMMENT = re.compile(r"^\s*<!--.*-->\s*$")
USER_RE = re.compile(r"^[a-z_][a-z0-9_-]*$")
SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
BLOCK_TIMEOUT = 180
RUNUSER = "/usr/sbin/runuser" if os.path.exists("/usr/sbin/runuser") else "/sbin/runuser"
OVERLAID = ("/etc", "/var", "/usr", "/root", "/home", "/srv", "/opt")


class Block:
    def __init__(self, doc, line, lang, text):
        self.doc, self.line, self.lang, self.text = doc, line, lang, text
        self.marker = None      # the marker's text, None if there is none
        self.skip = None        # the reason, for skip
        self.user = None
        self.opts = {}
        self.step = 50
        self.expect = []        # lines the output must have

    @property
    def where(self):
        return "%s:%d" % (self.doc, self.line)

    def as_dict(self):
        return {"doc": self.doc, "line": self.line, "lang": self.lang, "user": self.user,
                "opts": self.opts, "step": self.step, "skip": self.skip, "expect": self.expect}


def parse_marker(block, text, errors):
    """Fill block from the marker's text; append what is wrong to errors."""
    text = text.strip()
    block.marker = text
    if text.startswith("skip"):
        m = re.match(r"^skip:\s*(\S.*)$", text)
        if not m:
            errors.append("%s: doc-run skip without a reason (<!-- doc-run: skip: WHY -->)"
                          % block.where)
            return
        block.skip = m.group(1).strip()
        return
    try:
        words = shlex.split(text)
    except ValueError as e:
        errors.append("%s: doc-run marker: %s" % (block.where, e))
        return
    if not words:
        errors.append("%s: empty doc-run marker: name the user (root, paynotify, postgres, ...)"
                      " or skip: REASON" % block.where)
        return
    block.user = words[0]
    if block.user == "cron":
        if block.lang != "cron":
            errors.append("%s: doc-run: cron is for ```cron blocks" % block.where)
    elif block.lang == "cron":
        errors.append("%s: a ```cron block is marked <!-- doc-run: cron --> (its lines name"
                      " their users) or skip: REASON" % block.where)
    elif not USER_RE.match(block.user):
        errors.append("%s: doc-run: %r is not a user name" % (block.where, block.user))
    for w in words[1:]:
        k, sep, v = w.partition("=")
        if not sep or k not in OPTIONS or not v:
            errors.append("%s: doc-run: unknown option %r (known: %s, as KEY=VALUE)"
                          % (block.where, w, ", ".join(OPTIONS)))
            continue
        if k in ("step", "exit") and not v.isdigit():
            errors.append("%s: doc-run: %s=%s is not a number" % (block.where, k, v))
            continue
        if k in ("db", "role") and block.lang != "sql":
            errors.append("%s: doc-run: %s= is for ```sql blocks" % (block.where, k))
        if k == "wait" and block.lang != "sh":
            errors.append("%s: doc-run: wait= is for ```sh blocks" % (block.where))
        if k == "expect":
            block.expect.append(v)
            continue
        block.opts[k] = v
    block.step = int(block.opts.get("step", 50))


DOCS_DIR = os.environ.get("PN_DOCRUN_DOCS") or REPO   # another copy of the documents


def parse(doc, repo=None):
    """The fenced blocks of one document and the marker errors in it."""
    with open(os.path.join(repo or DOCS_DIR, doc), encoding="utf-8") as f:
        lines = f.read().split("\n")
    blocks, errors, used = [], [], set()
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        indent, fence, lang, rest = m.groups()
        start = i
        close = re.compile(r"^\s*" + re.escape(fence[0]) + "{%d,}\\s*$" % len(fence))
        j = i + 1
        while j < len(lines) and not close.match(lines[j]):
            if re.match(r"^\s*" + re.escape(fence) + r"\s*\S", lines[j]):
                # a fence with text after it does not close the block: CommonMark
                # runs on to the next bare fence
                errors.append("%s:%d: a fence line inside the block opened at line %d that does"
                              " not close it (text after the fence?)" % (doc, j + 1, start + 1))
            j += 1
        if j >= len(lines):
            errors.append("%s:%d: fence never closed" % (doc, start + 1))
            break
        body = [ln[len(indent):] if ln.startswith(indent) else ln.lstrip()
                for ln in lines[start + 1:j]]
        b = Block(doc, start + 1, lang, "\n".join(body) + "\n")
        if not lang:
            errors.append("%s: fenced block without a language: ```sh or ```sql if an operator"
                          " runs it (with a doc-run marker), ```text or the file's format"
                          " otherwise" % b.where)
        # the marker: the run of comment lines directly above the fence
        k = start - 1
        while k >= 0 and COMMENT.match(lines[k]):
            mm = MARKER.match(lines[k])
            if mm:
                used.add(k)
                if lang in RUNNABLE:
                    parse_marker(b, mm.group(1), errors)
                else:
                    errors.append("%s: a doc-run marker on a ```%s block (only sh, sql and"
                                  " cron blocks run)" % (b.where, lang or "(none)"))
            k -= 1
        if lang in RUNNABLE and b.marker is None:
            errors.append("%s: ```%s block without a doc-run marker: put <!-- doc-run: USER -->"
                          " or <!-- doc-run: skip: REASON --> directly above it"
                          % (b.where, lang))
        blocks.append(b)
        i = j + 1
    for n, ln in enumerate(lines):
        if MARKER.match(ln) and n not in used:
            errors.append("%s:%d: a doc-run marker that is not directly above a fence"
                          % (doc, n + 1))
    return blocks, errors


def parse_all(repo=None):
    blocks, errors = [], []
    for doc in DOCS:
        b, e = parse(doc, repo)
        blocks += b
        errors += e
    return blocks, errors


def runnable(blocks):
    order = {d: n for n, d in enumerate(DOCS)}
    todo = [b for b in blocks if b.lang in RUNNABLE and b.marker is not None and b.skip is None
            and b.user is not None]
    return sorted(todo, key=lambda b: (b.step, order.get(b.doc, len(DOCS)), b.line))


# ---- the environment (inside the namespaces) ---------------------------------------------

def sh(cmd, **kw):
    return subprocess.run(cmd, shell=isinstance(cmd, str), check=True, stdin=subprocess.DEVNULL,
                          **kw)


def setup_namespace(ns):
    sh(["mount", "--make-rprivate", "/"])
    sh(["ip", "link", "set", "lo", "up"])
    sh(["mount", "-t", "tmpfs", "-o", "mode=0755", "tmpfs", ns])
    for d in OVERLAID:
        if not os.path.isdir(d) or os.path.islink(d):
            continue
        up, wk = ns + "/up" + d, ns + "/wk" + d
        os.makedirs(up)
        os.makedirs(wk)
        sh(["mount", "-t", "overlay", "overlay", "-o",
            "lowerdir=%s,upperdir=%s,workdir=%s" % (d, up, wk), d])
    sh(["mount", "-t", "tmpfs", "-o", "mode=0755", "tmpfs", "/run"])
    os.makedirs("/run/lock", mode=0o1777)
    os.chmod("/run/lock", 0o1777)


def start_postgresql(log):
    versions = sorted((int(v) for v in os.listdir("/usr/lib/postgresql") if v.isdigit()))
    if not versions:
        raise RuntimeError("no PostgreSQL server in /usr/lib/postgresql")
    v = str(versions[-1])
    pg = pwd.getpwnam("postgres")
    # hide the machine's clusters: a new, empty cluster main on the standard socket
    for d, owner, mode in (("/etc/postgresql", 0, 0o755),
                           ("/var/lib/postgresql", pg.pw_uid, 0o755)):
        os.makedirs(d, exist_ok=True)
        sh(["mount", "-t", "tmpfs", "-o", "mode=%o" % mode, "tmpfs", d])
        os.chown(d, owner, pg.pw_gid if owner else 0)
    os.makedirs("/var/run/postgresql", exist_ok=True)
    os.chown("/var/run/postgresql", pg.pw_uid, pg.pw_gid)
    os.chmod("/var/run/postgresql", 0o2775)
    env = dict(os.environ, LANG="C.UTF-8", LC_ALL="C.UTF-8")
    sh(["pg_createcluster", v, "main", "-p", "5432", "--", "--no-sync"], env=env,
       stdout=log, stderr=subprocess.STDOUT)
    with open("/etc/postgresql/%s/main/conf.d/docrun.conf" % v, "w") as f:
        f.write("fsync = off\nlisten_addresses = 'localhost'\n")
    sh(["pg_ctlcluster", v, "main", "start"], env=env, stdout=log, stderr=subprocess.STDOUT)
    sh([RUNUSER, "-u", "postgres", "--", "createdb", "shop"], env=env, stdout=log,
       stderr=subprocess.STDOUT)
    return v


def user_env(user, work, shims, extra=None):
    home = os.path.join(work, "home", user)
    if not os.path.isdir(home):
        os.makedirs(home)
        pw = pwd.getpwnam(user)
        os.chown(home, pw.pw_uid, pw.pw_gid)
        os.chmod(home, 0o700)
    env = {"HOME": home, "USER": user, "LOGNAME": user, "LANG": "C.UTF-8", "TERM": "dumb",
           "PATH": (shims + ":" if shims else "") + SYSTEM_PATH,
           "DOCRUN_REPO": REPO, "DOCRUN_WORK": work}
    env.update(extra or {})
    return env


def cron_jobs(text):
    """(environment, [(user, command, stdin)]) of an /etc/cron.d file."""
    env, jobs = {}, []
    for ln in text.split("\n"):
        s = ln.strip()
        if not s or s.startswith("#"):
            continue
        m = re.match(r"^([A-Za-z_][A-Za-z0-9_]*)\s*=\s*(.*)$", s)
        if m and not re.match(r"^[\d*@]", s):
            env[m.group(1)] = m.group(2).strip().strip("'\"")
            continue
        if s.startswith("@"):
            parts = s.split(None, 2)
            user, cmd = parts[1], parts[2]
        else:
            parts = s.split(None, 6)
            if len(parts) < 7:
                raise ValueError("not a cron.d job line (5 time fields, user, command): %r" % s)
            user, cmd = parts[5], parts[6]
        # cron: an unescaped % ends the command, the rest (with % as newlines) is stdin
        out, stdin, k = "", None, 0
        while k < len(cmd):
            c = cmd[k]
            if c == "\\" and k + 1 < len(cmd) and cmd[k + 1] == "%":
                out += "%"
                k += 2
                continue
            if c == "%":
                stdin = cmd[k + 1:].replace("%", "\n")
                break
            out += c
            k += 1
        jobs.append((user, out, stdin))
    return env, jobs


def commands(text):
    """The block's complete commands, each (first line number, text): lines
    joined across a trailing backslash, |, && or ||, an open quote, and a
    here-document up to its terminator."""
    out, cur, start, quote, heredoc = [], [], None, None, None
    for n, ln in enumerate(text.split("\n"), 1):
        if heredoc is not None:
            cur.append(ln)
            if ln.strip() == heredoc:
                heredoc = None
                if quote is None:
                    out.append((start, "\n".join(cur)))
                    cur, start = [], None
            continue
        if not cur and (not ln.strip() or ln.lstrip().startswith("#")):
            continue
        if start is None:
            start = n
        cur.append(ln)
        k = 0
        while k < len(ln):      # the quote state at the end of the line
            c = ln[k]
            if quote is None:
                if c == "#" and (k == 0 or ln[k - 1] in " \t;|&("):
                    break
                if c == "\\":
                    k += 2
                    continue
                if c in "'\"":
                    quote = c
            elif c == quote:
                quote = None
            elif c == "\\" and quote == '"':
                k += 2
                continue
            k += 1
        m = re.search(r"<<-?\s*(['\"]?)([A-Za-z_][A-Za-z0-9_]*)\1", ln) if quote is None else None
        if m:
            heredoc = m.group(2)
            continue
        code = re.sub(r"\s+#.*$", "", ln).rstrip() if quote is None else ln
        if quote is None and not code.endswith(("\\", "|", "&&", "||")):
            out.append((start, "\n".join(cur)))
            cur, start = [], None
    if cur:
        out.append((start, "\n".join(cur)))
    return out


def checked_script(text):
    """The block as a bash script that stops at the first command that fails,
    saying which (an operator sees every command's failure, also the first
    of `a && b`, which errexit lets pass)."""
    parts = ["set -o pipefail"]
    for line, cmd in commands(text):
        parts.append(cmd)
        parts.append("__rc=$?; if [ $__rc != 0 ]; then echo \"[doc-run] the command at line %d of"
                     " the block exited $__rc\" >&2; exit $__rc; fi" % line)
    return "\n".join(parts) + "\n"


def run_one(argv, user, env, cwd, stdin_text, timeout):
    t0 = time.monotonic()
    try:
        p = subprocess.run([RUNUSER, "-u", user, "--"] + argv, env=env, cwd=cwd,
                           input=(stdin_text or "").encode(), stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, timeout=timeout)
        rc, out = p.returncode, p.stdout.decode("utf-8", "replace")
    except subprocess.TimeoutExpired as e:
        rc, out = -1, (e.stdout or b"").decode("utf-8", "replace") + \
            "\n[doc-run: timed out after %d s]" % timeout
    return rc, out, time.monotonic() - t0


def run_block(b, work, shims, background):
    cwd = os.path.join(work, "cwd")
    try:
        pwd.getpwnam(b.user if b.user != "cron" else "root")
    except KeyError:
        return {"rc": -1, "out": "no such user %r on this machine" % b.user, "seconds": 0}
    if b.lang == "sh":
        argv = ["/bin/bash", "-c", checked_script(b.text)]
        env = user_env(b.user, work, shims)
        if "wait" in b.opts:
            log = open(os.path.join(work, "log", "bg-%s-%d.log" % (b.doc.replace("/", "_"),
                                                                     b.line)), "wb")
            p = subprocess.Popen([RUNUSER, "-u", b.user, "--"] + argv, env=env, cwd=cwd,
                                 stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                 start_new_session=True)
            background.append(p)
            deadline = time.monotonic() + 60
            while not os.path.exists(b.opts["wait"]) and p.poll() is None and \
                    time.monotonic() < deadline:
                time.sleep(0.05)
            log.close()
            with open(log.name, encoding="utf-8", errors="replace") as f:
                out = f.read()
            if os.path.exists(b.opts["wait"]):
                return {"rc": 0, "out": out, "seconds": 0}
            return {"rc": p.poll() if p.poll() is not None else -1, "seconds": 60,
                    "out": out + "\n[doc-run: %s did not appear]" % b.opts["wait"]}
        rc, out, secs = run_one(argv, b.user, env, cwd, None, BLOCK_TIMEOUT)
    elif b.lang == "sql":
        argv = ["psql", "-X", "-v", "ON_ERROR_STOP=1", "-d", b.opts.get("db", "shop")]
        if "role" in b.opts:
            argv += ["-U", b.opts["role"]]
        rc, out, secs = run_one(argv, b.user, user_env(b.user, work, None), cwd, b.text,
                                BLOCK_TIMEOUT)
    else:
        cenv, jobs = cron_jobs(b.text)
        rc, out, secs = 0, "", 0.0
        for user, cmd, stdin in jobs:
            env = user_env(user, work, None, {"SHELL": "/bin/sh", "PATH": "/usr/bin:/bin"})
            env.update(cenv)
            env.pop("MAILTO", None)
            r, o, s = run_one(["/bin/sh", "-c", cmd], user, env, cwd, stdin, BLOCK_TIMEOUT)
            out += "$ (%s) %s\n%s(exit %d)\n" % (user, cmd, o, r)
            secs += s
            if r != 0 and rc == 0:
                rc = r
            elif r == 0 and o.strip() and rc == 0:
                # cron mails what a job prints: a job the documents schedule
                # prints nothing when all is well
                out += "[doc-run] the job exited 0 but printed: cron would mail that\n"
                rc = -2
    return {"rc": rc, "out": out, "seconds": round(secs, 2)}


def provide_package(work):
    deb = os.environ.get("PN_PACKAGE_DEB") or ""
    if not deb:
        found = sorted(glob.glob(os.path.join(REPO, "build", "deb", "paynotify_*.deb")))
        deb = found[-1] if found else ""
    if deb and os.path.isfile(deb):
        d = os.path.join(work, "cwd", "build", "deb")
        os.makedirs(d, exist_ok=True)
        shutil.copy(deb, d)
        os.chmod(d, 0o755)


def make_shims(work):
    d = os.path.join(work, "shims")
    os.makedirs(d)
    for name in ("systemctl", "editor"):
        path = os.path.join(d, name)
        with open(path, "w") as f:
            f.write("#!/bin/sh\nexec /usr/bin/python3 %s %s \"$@\"\n"
                    % (shlex.quote(os.path.abspath(__file__)), name))
        os.chmod(path, 0o755)
    os.chmod(work, 0o755)
    return d


def stop_background(procs):
    """A block run with wait= lives until the blocks of its step are done:
    SIGTERM, as a supervisor stops it, and wait for it to leave."""
    for p in procs:
        if p.poll() is None:
            try:
                os.killpg(p.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
    for p in procs:
        try:
            p.wait(timeout=45)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
    del procs[:]


def inside(ns, results_path):
    setup_namespace(ns)
    work = os.path.join(ns, "work")
    for d in ("cwd", "home", "log", "run"):
        os.makedirs(os.path.join(work, d))
    os.chmod(os.path.join(work, "cwd"), 0o1777)
    os.chmod(os.path.join(work, "home"), 0o755)
    os.chmod(os.path.join(work, "log"), 0o755)
    blocks, errors = parse_all()
    results = []
    with open(os.path.join(work, "log", "setup.log"), "wb") as log:
        try:
            start_postgresql(log)
            setup_error = None
        except (subprocess.CalledProcessError, OSError, RuntimeError) as e:
            setup_error = "the environment could not be set up: %s" % e
    if setup_error:
        with open(os.path.join(work, "log", "setup.log"), encoding="utf-8",
                  errors="replace") as f:
            setup_error += "\n" + f.read()[-4000:]
    provide_package(work)
    shims = make_shims(work)
    background, step = [], None
    for b in runnable(blocks):
        if b.step != step:
            stop_background(background)
            step = b.step
        if setup_error:
            r = {"rc": -1, "out": setup_error, "seconds": 0}
        else:
            try:
                r = run_block(b, work, shims, background)
            except (OSError, ValueError, subprocess.SubprocessError) as e:
                r = {"rc": -1, "out": "doc-run could not run the block: %s" % e, "seconds": 0}
        r.update(b.as_dict())
        r["missing"] = [e for e in b.expect if e not in r["out"]]
        r["ok"] = r["rc"] == int(b.opts.get("exit", 0)) and not r["missing"]
        results.append(r)
        sys.stderr.write("doc-run: %s (%s %s) exit %d\n" % (b.where, b.lang, b.user, r["rc"]))
    with open(results_path, "w") as f:
        json.dump(results, f, indent=1)
    # leaving the pid namespace ends every process the blocks started
    return 0


def run(results_path, timeout=900):
    """Run every block in fresh namespaces (as root); returns the results."""
    top = tempfile.mkdtemp(prefix="pndocrun.", dir="/tmp")
    os.chmod(top, 0o755)
    ns = os.path.join(top, "ns")
    os.makedirs(ns)
    try:
        p = subprocess.run(["unshare", "--mount", "--net", "--pid", "--fork", "--mount-proc",
                            sys.executable, os.path.abspath(__file__), "inside", ns,
                            results_path], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, timeout=timeout)
        trace = p.stdout.decode("utf-8", "replace")
        if p.returncode != 0 or not os.path.exists(results_path):
            raise RuntimeError("docrun inside the namespaces failed (exit %d):\n%s"
                               % (p.returncode, trace[-6000:]))
        with open(results_path) as f:
            return json.load(f), trace
    finally:
        shutil.rmtree(top, ignore_errors=True)


def describe(r):
    """What went wrong with one block's run, for a person."""
    why = "exit %d" % r["rc"]
    if r["rc"] == int(r["opts"].get("exit", 0)):
        why = "no %s in its output" % ", ".join(repr(e) for e in r["missing"])
    elif "exit" in r["opts"]:
        why += " (expected %s)" % r["opts"]["exit"]
    return "FAILED %s:%d (```%s as %s): %s\n%s" % (r["doc"], r["line"], r["lang"], r["user"],
                                                  why, r["out"][-6000:])


# ---- the stand-ins ------------------------------------------------------------------------

UNITDIR = "/lib/systemd/system"


def _units(inst):
    """The socket and service units of a receiver instance, or of the
    confirm endpoint (inst "confirm": paynotify-confirm.*, not a template)."""
    if inst == "confirm":
        return "paynotify-confirm.socket", "paynotify-confirm.service"
    return "paynotify@%s.socket" % inst, "paynotify@%s.service" % inst


def unit_file(name):
    """Parse an installed unit (templates instantiated): {key: [values]}."""
    base, inst = name, ""
    m = re.match(r"^([^@]+)@([^.]*)\.(socket|service)$", name)
    if m:
        base = "%s@.%s" % (m.group(1), m.group(3))
        inst = m.group(2)
    keys = {}
    with open(os.path.join(UNITDIR, base)) as f:
        for ln in f:
            ln = ln.strip()
            if not ln or ln.startswith(("#", ";", "[")) or "=" not in ln:
                continue
            k, v = ln.split("=", 1)
            keys.setdefault(k.strip(), []).append(v.strip().replace("%i", inst))
    return keys


def _pidfile(work, inst):
    return os.path.join(work, "run", "paynotify@%s.pid" % inst)


def _alive(pid):
    try:
        os.kill(pid, 0)
        return True
    except OSError:
        return False


def _receiver_pid(work, inst):
    try:
        with open(_pidfile(work, inst)) as f:
            pid = int(f.read())
    except (OSError, ValueError):
        return None
    return pid if _alive(pid) else None


def _start_receiver(work, inst):
    if _receiver_pid(work, inst):
        return 0
    sock_unit = unit_file(_units(inst)[0])
    svc = unit_file(_units(inst)[1])
    path = sock_unit["ListenStream"][0]
    os.makedirs(os.path.dirname(path), mode=int(sock_unit.get("DirectoryMode", ["0755"])[0], 8),
                exist_ok=True)
    if os.path.exists(path):
        os.unlink(path)
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind(path)
    s.listen(int(sock_unit.get("Backlog", ["128"])[0]))
    os.chown(path, pwd.getpwnam(sock_unit.get("SocketUser", ["root"])[0]).pw_uid,
             grp.getgrnam(sock_unit.get("SocketGroup", ["root"])[0]).gr_gid)
    os.chmod(path, int(sock_unit.get("SocketMode", ["0666"])[0], 8))
    user = svc.get("User", ["root"])[0]
    group = svc.get("Group", [None])[0]
    env = {"PATH": SYSTEM_PATH, "LANG": "C.UTF-8"}
    for e in svc.get("Environment", []):
        for kv in shlex.split(e):
            k, _, v = kv.partition("=")
            env[k] = v
    argv = shlex.split(svc["ExecStart"][0].lstrip("-@:+!"))
    pw = pwd.getpwnam(user)
    gid = grp.getgrnam(group).gr_gid if group else pw.pw_gid
    log = open(os.path.join(work, "log", "paynotify@%s.log" % inst), "ab")

    def child():
        os.setsid()
        os.initgroups(user, gid)
        os.setgid(gid)
        os.setuid(pw.pw_uid)
        os.umask(int(svc.get("UMask", ["0022"])[0], 8))
    p = subprocess.Popen(argv, stdin=s.fileno(), stdout=log, stderr=log, env=env,
                         preexec_fn=child, cwd="/")
    s.close()
    with open(_pidfile(work, inst), "w") as f:
        f.write(str(p.pid))
    return 0


def _stop_receiver(work, inst):
    pid = _receiver_pid(work, inst)
    if pid:
        os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + 40
        while _alive(pid) and time.monotonic() < deadline:
            try:
                os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                pass
            time.sleep(0.05)
    return 0


def _reload_receiver(work, inst):
    pid = _receiver_pid(work, inst)
    if not pid:
        sys.stderr.write("%s is not active, cannot reload.\n" % _units(inst)[1])
        return 1
    svc = unit_file(_units(inst)[1])
    for line in svc.get("ExecReload", []):
        argv = [a.replace("$MAINPID", str(pid)) for a in shlex.split(line.lstrip("-@:+!"))]
        user = svc.get("User", ["root"])[0]
        env = {"PATH": SYSTEM_PATH, "LANG": "C.UTF-8"}
        for e in svc.get("Environment", []):
            for kv in shlex.split(e):
                k, _, v = kv.partition("=")
                env[k] = v
        rc = subprocess.run([RUNUSER, "-u", user, "--"] + argv, env=env).returncode
        if rc != 0:
            sys.stderr.write("Job for %s failed (ExecReload= %s: exit %d)\n"
                             % (_units(inst)[1], argv[0], rc))
            return 1
    return 0


def _nginx_running():
    try:
        with open("/run/nginx.pid") as f:
            return _alive(int(f.read()))
    except (OSError, ValueError):
        return False


def systemctl(args):
    work = os.environ.get("DOCRUN_WORK", "")
    verbs = [a for a in args if not a.startswith("-")]
    flags = [a for a in args if a.startswith("-")]
    if not verbs:
        sys.stderr.write("doc-run systemctl: no verb\n")
        return 1
    verb, units = verbs[0], verbs[1:]
    if verb == "daemon-reload":
        return 0
    rc = 0
    for u in units:
        name = u if "." in u else u + ".service"
        m = re.match(r"^paynotify(?:@([a-z0-9]+)|-(confirm))\.(socket|service)$", name)
        if m:
            inst = m.group(1) or m.group(2)
            if verb in ("start", "restart") or (verb == "enable" and "--now" in flags):
                if verb == "restart":
                    _stop_receiver(work, inst)
                rc |= _start_receiver(work, inst)
            elif verb == "enable":
                continue
            elif verb == "stop" or (verb == "disable" and "--now" in flags):
                rc |= _stop_receiver(work, inst)
            elif verb == "reload":
                rc |= _reload_receiver(work, inst)
            elif verb == "is-active":
                up = _receiver_pid(work, inst) is not None
                print("active" if up else "inactive")
                rc |= 0 if up else 3
            else:
                sys.stderr.write("doc-run systemctl: %s %s is not emulated\n" % (verb, name))
                return 1
        elif name in ("nginx.service",):
            if verb in ("start", "restart", "reload") or (verb == "enable" and "--now" in flags):
                if _nginx_running():
                    r = subprocess.run(["nginx", "-s", "reload"]).returncode
                else:
                    r = subprocess.run(["nginx"]).returncode
                rc |= r
            elif verb == "is-active":
                print("active" if _nginx_running() else "inactive")
            else:
                sys.stderr.write("doc-run systemctl: %s nginx is not emulated\n" % verb)
                return 1
        elif re.match(r"^postgresql(@.*)?\.service$", name):
            if verb in ("start", "stop", "restart", "reload"):
                for ln in subprocess.run(["pg_lsclusters", "-h"], stdout=subprocess.PIPE,
                                         text=True).stdout.splitlines():
                    v, c = ln.split()[:2]
                    rc |= subprocess.run(["pg_ctlcluster", v, c, verb]).returncode
            else:
                sys.stderr.write("doc-run systemctl: %s postgresql is not emulated\n" % verb)
                return 1
        else:
            sys.stderr.write("doc-run systemctl: unit %s is not emulated (systemd is not PID 1"
                             " in the doc-run environment)\n" % name)
            return 1
    return rc


def _install(src, dst, owner, mode):
    shutil.copyfile(src, dst)
    os.chown(dst, owner.pw_uid, owner.pw_gid)
    os.chmod(dst, mode)


SANDBOX_SECRETS = {
    "2c2p.key": "D3E0C2C2DE0A5EC7E7000000000000000000000000000000000000000000D3E0",
    "wechatpay-apiv3.key": "DemoAPIv3Key0123456789abcdefABCD",
    "wechatpay-apiv2.key": "DemoAPIv2Key0123456789abcdefABCD",
    "stripe-whsec": "whsec_demo_secret",
}


SITE_CONF = "/etc/paynotify/conf.d/50-shop-a.conf"
# keys of the example's site that name what a sandbox has not got: the query
# credentials and endpoints (the providers' APIs), the WeChat Pay platform
# certificates (the site uses the public-key mode), the live Stripe mode and
# the test-signing lines (set below, to the sandbox's own keys), and the
# confirm endpoint (SHOP-ORDERS.md; tests/integration/test_confirm.py)
SITE_DROP = re.compile(r"^(\w+\.query_\w+|wechatpay\.platform_cert_\w+|stripe\.mode|confirm\.\w+"
                       r"|\w+\.test_signing|\w+\.test_private_key_file)$")


def sandbox_keys():
    """The sandbox's key files under /etc/paynotify/shop-a/ (test keys, owned
    by paynotify, secrets 0600), as the example's site names them."""
    repo = os.environ.get("DOCRUN_REPO", REPO)
    keys = os.path.join(repo, "tests", "fixtures", "unit", "keys")
    pn = pwd.getpwnam("paynotify")
    d = "/etc/paynotify/shop-a"
    os.makedirs(d, exist_ok=True)
    os.chown(d, pn.pw_uid, pn.pw_gid)
    os.chmod(d, 0o750)
    _install(os.path.join(keys, "test-a.key.pem"), d + "/test-private.pem", pn, 0o600)
    _install(os.path.join(keys, "test-a.pub.pem"), d + "/alipay-public.pem", pn, 0o644)
    _install(os.path.join(keys, "test-a.pub.pem"), d + "/wechatpay-pub.pem", pn, 0o644)
    for name, text in SANDBOX_SECRETS.items():
        with open(os.path.join(d, name), "w") as f:
            f.write(text + "\n")
        os.chown(os.path.join(d, name), pn.pw_uid, pn.pw_gid)
        os.chmod(os.path.join(d, name), 0o600)


def edit_site_conf(path):
    """A file of its own for site shop-a (README "Adding a site"): the
    example's commented [site shop-a], its keys set, made a sandbox site
    (test keys, test signing); root:paynotify 0640 as DATABASE.md says."""
    sandbox_keys()
    with open("/etc/paynotify/paynotify.conf") as f:
        text = f.read()
    out, in_site = [], False
    for ln in text.split("\n"):
        s = ln.strip()
        if s.startswith(";["):
            in_site = s == ";[site shop-a]"
            if in_site:
                out += ["[site shop-a]",
                        "; doc-run editor: the example's site, a sandbox (test keys, test signing)",
                        "alipay.test_private_key_file = /etc/paynotify/shop-a/test-private.pem",
                        "wechatpay.test_private_key_file = /etc/paynotify/shop-a/test-private.pem",
                        "stripe.test_signing = on", "2c2p.test_signing = on"]
            continue
        m = re.match(r"^;([\w.]+) = (.*)$", s)
        if not in_site or not m or SITE_DROP.match(m.group(1)):
            continue
        key, value = m.groups()
        if key == "wechatpay.public_key_id":
            value = "PUB_KEY_ID_0000000000000024101100397200000006"
        out.append("%s = %s" % (key, value))
    if not out:
        sys.stderr.write("doc-run editor: no ;[site shop-a] in /etc/paynotify/paynotify.conf\n")
        return 1
    with open(path, "w") as f:
        f.write("\n".join(out) + "\n")
    os.chown(path, 0, grp.getgrnam("paynotify").gr_gid)
    os.chmod(path, 0o640)
    return 0


NGINX_INCLUDES = ("include /usr/share/paynotify/nginx/paynotify.conf;",
                  "include /usr/share/paynotify/nginx/paynotify-status.conf;")


def edit_nginx_site(path):
    with open(path) as f:
        text = f.read()
    if NGINX_INCLUDES[0] not in text:
        text, n = re.subn(r"(\n(\s*)server_name _;\n)",
                          lambda m: m.group(1) + "".join(
                              "%s%s\n" % (m.group(2), inc) for inc in NGINX_INCLUDES),
                          text, count=1)
        if n != 1:
            sys.stderr.write("doc-run editor: no `server_name _;` in %s\n" % path)
            return 1
    with open(path, "w") as f:
        f.write(text)
    return 0


def editor(args):
    if len(args) != 1:
        sys.stderr.write("doc-run editor: one file\n")
        return 1
    path = os.path.realpath(args[0])
    if path == SITE_CONF:
        return edit_site_conf(path)
    if path == os.path.realpath("/etc/nginx/sites-available/default"):
        return edit_nginx_site(path)
    sys.stderr.write("doc-run editor: no scripted edit for %s\n" % args[0])
    return 1


def main(argv):
    if len(argv) >= 2 and argv[1] == "systemctl":
        return systemctl(argv[2:])
    if len(argv) >= 2 and argv[1] == "editor":
        return editor(argv[2:])
    if len(argv) == 2 and argv[1] == "check":
        _, errors = parse_all()
        for e in errors:
            print(e)
        return 1 if errors else 0
    if len(argv) == 4 and argv[1] == "inside":
        return inside(argv[2], argv[3])
    if len(argv) == 3 and argv[1] == "run":
        results, trace = run(argv[2])
        sys.stdout.write(trace)
        bad = [r for r in results if not r["ok"]]
        for r in bad:
            print(describe(r))
        print("%d blocks run, %d failed" % (len(results), len(bad)))
        return 1 if bad else 0
    sys.stderr.write(__doc__)
    return 64


if __name__ == "__main__":
    sys.exit(main(sys.argv))
