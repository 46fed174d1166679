"""pne2e: end-to-end helpers for the deployment tests (tests/e2e).

What is here:
  demo_config    a configuration like scripts/up's demo site (test keys for
                 all four providers), and a "forger" one with the same site
                 names but other keys (what an attacker could sign)
  sign           `paynotify sign` -> Notification(path, headers, body)
  Receiver       paynotify-<provider> --listen unix:PATH --workers N (the
                 supervisor and its workers in their own process group)
  Nginx, Apache  real servers from the Debian packages on 127.0.0.1, their
                 configuration GENERATED from the shipped conf/ snippets by
                 substituting paths only
  http           one HTTP/1.1 request to 127.0.0.1:PORT -> Response
  free_port, wait_for, children

Every process started here is stopped at exit (pntest's cleanups), and every
wait has a deadline.
"""

import collections
import ctypes
import http.client as httpclient
import os
import pwd
import re
import shutil
import signal
import socket
import subprocess
import time

import pntest

REPO = pntest.REPO
CONF = os.path.join(REPO, "conf")
UNIT_KEYS = os.path.join(REPO, "tests", "fixtures", "unit", "keys")
PROVIDERS = ("alipay", "wechatpay", "stripe", "2c2p")
CURRENCY = {"alipay": "CNY", "wechatpay": "CNY", "stripe": "USD", "2c2p": "SGD"}

# the shipped snippets name these; the tests substitute them (nothing else)
SHIPPED_SOCK_DIR = "/run/paynotify/"
SHIPPED_BIN_DIR = "/usr/local/sbin/"   # the receivers (make install: $(sbindir))
SHIPPED_CONFIG = "/etc/paynotify/paynotify.conf"

Notification = collections.namedtuple("Notification", ["path", "headers", "body"])
Response = collections.namedtuple("Response", ["status", "headers", "body"])


def package_version():
    """dpkg's idea of the installed paynotify, or None."""
    try:
        p = subprocess.run(["dpkg-query", "-W", "-f", "${Status} ${Version}", "paynotify"],
                           stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                           timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if p.returncode != 0 or not p.stdout.startswith("install ok installed "):
        return None
    return p.stdout.rsplit(" ", 1)[1]


def free_port():
    """A TCP port on 127.0.0.1 that nobody listens on right now."""
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
    finally:
        s.close()


def wait_for(pred, timeout, what, interval=0.05):
    """Poll pred() until it returns something true; AssertionError after
    timeout seconds."""
    deadline = time.monotonic() + timeout
    while True:
        v = pred()
        if v:
            return v
        if time.monotonic() > deadline:
            raise AssertionError("timed out after %ss waiting for %s" % (timeout, what))
        time.sleep(interval)


def accepted(addr):
    """How many connections to addr (a unix socket path, or a (host, port)
    a server listens on) a process has accepted and holds now.  A connection
    still in the listen backlog has no inode yet in /proc/net/unix or
    /proc/net/tcp; once accepted, it has one (and is connected)."""
    n = 0
    if isinstance(addr, tuple):
        port = "%04X" % addr[1]
        for table in ("/proc/net/tcp", "/proc/net/tcp6"):
            try:
                with open(table) as f:
                    next(f)
                    for line in f:
                        p = line.split()
                        # local_address rem_address st ... inode: ESTABLISHED (01)
                        if len(p) > 9 and p[1].endswith(":" + port) and p[3] == "01" \
                                and p[9] != "0":
                            n += 1
            except OSError:
                pass
        return n
    with open("/proc/net/unix") as f:
        next(f)
        for line in f:
            p = line.split()
            # Num RefCount Protocol Flags Type St Inode Path: connected (03)
            if len(p) >= 8 and p[7] == addr and p[5] == "03" and p[6] != "0":
                n += 1
    return n


def wait_accepted(addr, n, timeout=30):
    """Wait until at least n connections to addr have been accepted (a
    worker has each): the readiness a fixed pause only guessed at."""
    wait_for(lambda: accepted(addr) >= n, timeout,
             "%d accepted connection(s) on %s" % (n, addr))


def children(pid):
    """Live (non-zombie) child pids of pid."""
    out = []
    try:
        with open("/proc/%d/task/%d/children" % (pid, pid)) as f:
            cands = [int(x) for x in f.read().split()]
    except OSError:
        return out
    for c in cands:
        if pid_alive(c):
            out.append(c)
    return sorted(out)


def pid_alive(pid):
    """True if pid exists and is not a zombie."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            stat = f.read()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def nobody_ids():
    pw = pwd.getpwnam("nobody")
    return pw.pw_uid, pw.pw_gid


# ---------------------------------------------------------------------------
# configuration

def _install(src, dst, mode):
    shutil.copyfile(src, dst)
    os.chmod(dst, mode)


def demo_config(cluster, directory=None, forger=False, stripe_secrets=("whsec_demo_secret",),
                owner=None, statement_timeout_ms=3000):
    """Write paynotify.conf with site `demo` (test keys for every provider, as
    scripts/up does) into a new dir.  forger=True: the same site with other
    keys.  owner=(uid, gid): chown the files (the CGI user must own the
    secret files).  Returns the config path."""
    d = directory or pntest.scratch_dir("pne2e-cfg.")
    if directory is None:
        pntest.add_cleanup(lambda: shutil.rmtree(d, ignore_errors=True))
    os.makedirs(d, exist_ok=True)
    os.chmod(d, 0o755)
    key = "test-b" if forger else "test-a"
    _install(os.path.join(UNIT_KEYS, key + ".key.pem"), os.path.join(d, "test-private.pem"), 0o600)
    _install(os.path.join(UNIT_KEYS, key + ".pub.pem"), os.path.join(d, "test-public.pem"), 0o644)
    if forger:
        secrets = {"2c2p.key": "F0E6ED2C2F0E6ED2C2F0E6ED2C2F0E6ED2C2F0E6ED2C2F0E6ED2C2F0E6ED2C2A",
                   "wechatpay-apiv3.key": "ForgedAPIv3Key0123456789abcdefAB",
                   "wechatpay-apiv2.key": "ForgedAPIv2Key0123456789abcdefAB"}
    else:   # scripts/up's demo secrets
        secrets = {"2c2p.key": "D3E0C2C2DE0A5EC7E7000000000000000000000000000000000000000000D3E0",
                   "wechatpay-apiv3.key": "DemoAPIv3Key0123456789abcdefABCD",
                   "wechatpay-apiv2.key": "DemoAPIv2Key0123456789abcdefABCD"}
    for name, text in secrets.items():
        pntest.write_secret(os.path.join(d, name), text + "\n")
    whsec = ("whsec_forged_secret",) if forger else stripe_secrets
    stripe_files = []
    for i, s in enumerate(whsec):
        name = "stripe-whsec" if i == 0 else "stripe-whsec-%d" % (i + 1)
        pntest.write_secret(os.path.join(d, name), s + "\n")
        stripe_files.append(name)
    lines = [
        "; written by tests/lib/pne2e.py (the demo site of scripts/up)",
        "[database]",
        "conninfo = %s" % cluster.conninfo(),
        "statement_timeout_ms = %d" % statement_timeout_ms,
        "[site demo]",
        "alipay.app_id = 2021000000000001",
        "alipay.seller_id = 2088000000000001",
        "alipay.public_key_file = test-public.pem",
        "alipay.test_private_key_file = test-private.pem",
        "stripe.secret_files = %s" % " ".join(stripe_files),
        "stripe.test_signing = on",
        "2c2p.merchant_id = JT01",
        "2c2p.secret_key_file = 2c2p.key",
        "2c2p.test_signing = on",
        "wechatpay.mchid = 1900000109",
        "wechatpay.appid = wxd678efh567hg6787",
        "wechatpay.apiv3_key_file = wechatpay-apiv3.key",
        "wechatpay.apiv2_key_file = wechatpay-apiv2.key",
        "wechatpay.public_key_id = PUB_KEY_ID_0000000000000024101100397200000006",
        "wechatpay.public_key_file = test-public.pem",
        "wechatpay.test_private_key_file = test-private.pem",
        "",
    ]
    path = os.path.join(d, "paynotify.conf")
    with open(path, "w") as f:
        f.write("\n".join(lines))
    if owner is not None:
        for name in os.listdir(d):
            os.chown(os.path.join(d, name), *owner)
        os.chown(d, *owner)
    return path


def sign(config, provider, order, amount="12.34", currency=None, site="demo", v2=False,
         event=None, program=None):
    """A signed test notification from `paynotify sign` (program: another
    paynotify than the tree's, e.g. the installed /usr/bin/paynotify)."""
    argv = [program or os.path.join(REPO, "paynotify"), "-c", config, "sign", provider,
            "--site", site,
            "--order", order, "--amount", amount,
            "--currency", currency or CURRENCY[provider]]
    if v2:
        argv.append("--v2")
    if event:
        argv += ["--event", event]
    p = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, timeout=30, env=pntest.clean_env())
    if p.returncode != 0:
        raise RuntimeError("paynotify sign failed (%d): %s" % (p.returncode, p.stderr.decode()))
    out = p.stdout
    head, body = out.split(b"\n\n", 1)
    assert body.endswith(b"\n"), out
    body = body[:-1]
    lines = head.decode("utf-8").split("\n")
    method, path = lines[0].split(" ", 1)
    assert method == "POST", lines[0]
    headers = collections.OrderedDict()
    for line in lines[1:]:
        k, v = line.split(": ", 1)
        headers[k] = v
    return Notification(path, headers, body)


# ---------------------------------------------------------------------------
# HTTP

def http(port, method, path, headers=None, body=None, timeout=15):
    """One request to 127.0.0.1:port (a new connection)."""
    c = httpclient.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        h = dict(headers or {})
        if body is not None:
            h["Content-Length"] = str(len(body))
        c.request(method, path, body=body, headers=h)
        r = c.getresponse()
        data = r.read()
        return Response(r.status, {k.lower(): v for k, v in r.getheaders()}, data)
    finally:
        c.close()


def wait_port(port, timeout, proc=None, what="server"):
    def up():
        if proc is not None and proc.poll() is not None:
            raise AssertionError("%s exited (%s) before listening on %d" % (
                what, proc.returncode, port))
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return True
        except OSError:
            return False
    wait_for(up, timeout, "%s on 127.0.0.1:%d" % (what, port))


# ---------------------------------------------------------------------------
# processes

_PR_SET_PDEATHSIG = 1


def _die_with_parent():
    """In the child: SIGTERM when the test runner dies, even by SIGKILL
    (scripts/test's timeout -k), so that no server outlives it."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
    except (OSError, AttributeError):
        pass


class _Proc:
    """A process started in its own process group, stopped at exit (and
    sent SIGTERM if the runner dies first)."""

    def __init__(self):
        self.proc = None
        self.log = None
        pntest.add_cleanup(self.stop)
        pntest._diagnostics.append(self)

    def _popen(self, argv, log, env=None, stdin=subprocess.DEVNULL, cwd="/", pass_fds=()):
        self.log = log
        with open(log, "ab") as lf:
            self.proc = subprocess.Popen(argv, stdin=stdin, stdout=lf, stderr=lf,
                                         env=env or pntest.clean_env(), cwd=cwd,
                                         start_new_session=True, pass_fds=pass_fds,
                                         preexec_fn=_die_with_parent)
        return self.proc

    @property
    def pid(self):
        return self.proc.pid

    def log_text(self):
        try:
            with open(self.log, "rb") as f:
                return f.read().decode("utf-8", "replace")
        except (OSError, TypeError):
            return ""

    def wait_log(self, pattern, timeout, start=0):
        """Wait until the log (from offset start) matches the regex; return
        the match."""
        rx = re.compile(pattern)
        return wait_for(lambda: rx.search(self.log_text()[start:]), timeout,
                        "log line /%s/ in %s" % (pattern, self.log))

    def send_signal(self, sig):
        os.kill(self.proc.pid, sig)

    def stop(self, sig=signal.SIGTERM, timeout=10):
        """Stop it (sig, then SIGKILL to its whole group after timeout);
        returns the exit status."""
        p = self.proc
        if p is None:
            return None
        if p.poll() is None:
            try:
                os.kill(p.pid, sig)
            except ProcessLookupError:
                pass
            try:
                p.wait(timeout)
            except subprocess.TimeoutExpired:
                pass
        # the group: the process itself and anything it forked
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        if p.poll() is None:
            p.wait(10)
        return p.returncode

    def diagnostics(self):
        if not self.log:
            return ""
        return "---- %s (%s) log %s ----\n%s" % (
            type(self).__name__, "running" if self.proc and self.proc.poll() is None
            else "exited %s" % (self.proc.returncode if self.proc else None),
            self.log, pntest._tail(self.log, 3000))


class Receiver(_Proc):
    """paynotify-<provider> --listen unix:<sockdir>/<provider>.sock --workers N."""

    def __init__(self, provider, config, sockdir, workers=2, extra_args=(), binary=None,
                 prefix=()):
        super().__init__()
        self.binary = binary or pntest.binary(provider)
        self.prefix = list(prefix)     # e.g. setpriv --reuid=... -- (one that execs)
        self.provider = provider
        self.config = config
        self.sock = os.path.join(sockdir, provider + ".sock")
        self.workers = workers
        self.extra_args = list(extra_args)
        self.logdir = sockdir

    def start(self, timeout=30):
        # a socket left behind is the receiver's business: it replaces a
        # stale one and refuses one that answers (tests/e2e/test_process_safety.py)
        argv = self.prefix + [self.binary, "-c", self.config,
                "--listen", "unix:" + self.sock, "--workers", str(self.workers),
                "--socket-mode", "0666"] + self.extra_args
        self._popen(argv, os.path.join(self.logdir, self.provider + ".log"))
        wait_for(lambda: self._check_started() and len(children(self.pid)) == self.workers,
                 timeout, "%s with %d workers" % (self.provider, self.workers))
        return self

    def _check_started(self):
        if self.proc.poll() is not None:
            raise AssertionError("paynotify-%s exited (%s):\n%s" % (
                self.provider, self.proc.returncode, self.log_text()))
        return os.path.exists(self.sock)

    def worker_pids(self):
        return children(self.pid)

    def request(self, method, path, headers=None, body=b"", timeout=15):
        return pntest.fcgi_request(self.sock, pntest.cgi_params(method, path, headers, body),
                                   body, timeout=timeout)


def _lost_port(server):
    """True when server (an Nginx or Apache that did not come up) exited
    because its port was in use."""
    if server.proc is None or server.proc.poll() is None:
        return False
    text = server.log_text() + pntest._tail(os.path.join(server.dir, "logs", "stderr.log"))
    return "Address already in use" in text


def substitute(text, mapping):
    """Replace each key of mapping by its value; every key must occur."""
    for k, v in mapping.items():
        if k not in text:
            raise AssertionError("shipped snippet no longer contains %r" % (k,))
        text = text.replace(k, v)
    return text


def shipped(*parts):
    with open(os.path.join(CONF, *parts)) as f:
        return f.read()


def run_dir(prefix):
    """A private dir (under a world-traversable base) removed at exit."""
    d = pntest.scratch_dir(prefix)
    os.chmod(d, 0o755)
    pntest.add_cleanup(lambda: shutil.rmtree(d, ignore_errors=True))
    return d


def public_bindir():
    """A copy of the receiver binaries in a run_dir, for servers that exec
    them as another user (Apache CGI runs them as nobody): the checkout may
    sit in a directory that user cannot traverse (/root is 0700), so they
    are reached by a real path outside it."""
    d = run_dir("pne2e-bin.")
    for p in PROVIDERS:
        _install(pntest.binary(p), os.path.join(d, "paynotify-" + p), 0o755)
    return d


class Nginx(_Proc):
    """nginx on 127.0.0.1:port, the server block including the shipped
    conf/nginx/paynotify.conf (or the snippet file given, e.g. the installed
    one) and the other shipped snippets named in snippets (e.g.
    paynotify-status.conf), with /run/paynotify/ replaced by sockdir."""

    def __init__(self, sockdir, port=None, snippets=("paynotify.conf",), snippet=None):
        super().__init__()
        self.snippets = tuple(snippets)
        self.snippet = snippet or os.path.join(CONF, "nginx", "paynotify.conf")
        self.sockdir = sockdir.rstrip("/") + "/"
        self.own_port = port is None
        self.port = port or free_port()
        self.dir = run_dir("pne2e-nginx.")

    def start(self, timeout=30):
        for attempt in range(3):
            try:
                return self._start(timeout)
            except AssertionError:
                # free_port()'s port taken by someone else before nginx
                # bound it (another test process): another free port
                if not (self.own_port and _lost_port(self) and attempt < 2):
                    raise
                self.stop()
                self.port = free_port()

    def _start(self, timeout):
        d = self.dir
        for sub in ("tmp", "logs"):
            os.makedirs(os.path.join(d, sub), exist_ok=True)
        for name in self.snippets:
            path = self.snippet if name == "paynotify.conf" else os.path.join(CONF, "nginx", name)
            with open(os.path.join(d, name), "w") as f, open(path) as snippet:
                f.write(substitute(snippet.read(), {SHIPPED_SOCK_DIR: self.sockdir}))
        shutil.copyfile("/etc/nginx/fastcgi_params", os.path.join(d, "fastcgi_params"))
        user = "user nobody nogroup;" if pntest.IS_ROOT else ""
        conf = """%(user)s
daemon off;
worker_processes 1;
pid %(d)s/nginx.pid;
error_log %(d)s/logs/error.log;
events { worker_connections 256; }
http {
    access_log %(d)s/logs/access.log;
    client_body_temp_path %(d)s/tmp/body;
    fastcgi_temp_path %(d)s/tmp/fastcgi;
    proxy_temp_path %(d)s/tmp/proxy;
    uwsgi_temp_path %(d)s/tmp/uwsgi;
    scgi_temp_path %(d)s/tmp/scgi;
    server {
        listen 127.0.0.1:%(port)d;
%(includes)s
    }
}
""" % {"user": user, "d": d, "port": self.port,
       "includes": "\n".join("        include %s/%s;" % (d, n) for n in self.snippets)}
        with open(os.path.join(d, "nginx.conf"), "w") as f:
            f.write(conf)
        argv = ["nginx", "-p", d, "-c", os.path.join(d, "nginx.conf"),
                "-e", os.path.join(d, "logs", "error.log")]
        t = subprocess.run(argv + ["-t", "-q"], stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, timeout=30)
        if t.returncode != 0:
            raise AssertionError("nginx -t failed:\n" + t.stdout.decode())
        self._popen(argv, os.path.join(d, "logs", "stderr.log"))
        self.log = os.path.join(d, "logs", "error.log")
        wait_port(self.port, timeout, self.proc, "nginx")
        return self

    def stop(self, sig=signal.SIGQUIT, timeout=10):
        return super().stop(sig, timeout)


APACHE_MODULES = ("mpm_event", "authz_core", "alias", "env", "proxy", "proxy_fcgi",
                  "cgid")


class Apache(_Proc):
    """One private Apache instance (apache2 -f ... -DFOREGROUND) with two
    virtual hosts on 127.0.0.1: fcgi_port includes the shipped
    conf/apache/paynotify.conf (mod_proxy_fcgi to sockdir), cgi_port the
    shipped conf/apache/paynotify-cgi.conf (mod_cgid, the receivers in
    bindir reading config)."""

    def __init__(self, sockdir, bindir, config, snippet_dir=None,
                 shipped_bindir=SHIPPED_BIN_DIR, shipped_config=SHIPPED_CONFIG):
        """snippet_dir: where paynotify.conf and paynotify-cgi.conf are
        (default conf/apache; the installed package: /usr/share/paynotify/apache,
        whose CGI snippet names shipped_bindir /usr/bin/)."""
        super().__init__()
        self.snippet_dir = snippet_dir or os.path.join(CONF, "apache")
        self.shipped_bindir = shipped_bindir
        self.shipped_config = shipped_config
        self.sockdir = sockdir.rstrip("/") + "/"
        self.bindir = bindir.rstrip("/") + "/"
        self.config = config
        self._pick_ports()
        self.dir = run_dir("pne2e-apache.")

    def _pick_ports(self):
        self.fcgi_port = free_port()
        self.cgi_port = free_port()
        while self.cgi_port == self.fcgi_port:
            self.cgi_port = free_port()

    def start(self, timeout=30):
        for attempt in range(3):
            try:
                return self._start(timeout)
            except AssertionError:
                # a port taken before Apache bound it: other free ports
                if not (_lost_port(self) and attempt < 2):
                    raise
                self.stop()
                self._pick_ports()

    def _start(self, timeout):
        d = self.dir
        os.makedirs(os.path.join(d, "logs"), exist_ok=True)
        os.makedirs(os.path.join(d, "run"), exist_ok=True)
        def snippet(name):
            with open(os.path.join(self.snippet_dir, name)) as f:
                return f.read()
        with open(os.path.join(d, "paynotify-fcgi.conf"), "w") as f:
            f.write(substitute(snippet("paynotify.conf"), {SHIPPED_SOCK_DIR: self.sockdir}))
        with open(os.path.join(d, "paynotify-cgi.conf"), "w") as f:
            f.write(substitute(snippet("paynotify-cgi.conf"),
                               {self.shipped_bindir: self.bindir,
                                self.shipped_config: self.config}))
        loads = "\n".join("LoadModule %s_module /usr/lib/apache2/modules/mod_%s.so" % (m, m)
                          for m in APACHE_MODULES)
        user = "User nobody\nGroup nogroup" if pntest.IS_ROOT else ""
        conf = """ServerRoot %(d)s
ServerName 127.0.0.1
%(loads)s
%(user)s
PidFile %(d)s/run/httpd.pid
DefaultRuntimeDir %(d)s/run
Mutex file:%(d)s/run default
ScriptSock %(d)s/run/cgid.sock
ErrorLog %(d)s/logs/error.log
LogLevel warn
StartServers 1
ServerLimit 2
ThreadsPerChild 16
MaxRequestWorkers 32
Timeout 20
Listen 127.0.0.1:%(fport)d
Listen 127.0.0.1:%(cport)d
<Directory />
    AllowOverride None
    Require all denied
</Directory>
<VirtualHost 127.0.0.1:%(fport)d>
    Include %(d)s/paynotify-fcgi.conf
</VirtualHost>
<VirtualHost 127.0.0.1:%(cport)d>
    Include %(d)s/paynotify-cgi.conf
</VirtualHost>
""" % {"d": d, "loads": loads, "user": user, "fport": self.fcgi_port,
       "cport": self.cgi_port}
        path = os.path.join(d, "httpd.conf")
        with open(path, "w") as f:
            f.write(conf)
        argv = ["apache2", "-d", d, "-f", path]
        t = subprocess.run(argv + ["-t"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           timeout=30, env=pntest.clean_env())
        if t.returncode != 0:
            raise AssertionError("apache2 -t failed:\n" + t.stdout.decode())
        self._popen(argv + ["-DFOREGROUND"], os.path.join(d, "logs", "stderr.log"))
        self.log = os.path.join(d, "logs", "error.log")
        wait_port(self.fcgi_port, timeout, self.proc, "apache2")
        wait_port(self.cgi_port, timeout, self.proc, "apache2")
        return self

    def stop(self, sig=signal.SIGTERM, timeout=10):
        return super().stop(sig, timeout)
