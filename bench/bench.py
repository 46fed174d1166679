#!/usr/bin/python3
"""bench/bench.py: the paynotify benchmark (run it through bench/run).

From scratch: a throwaway PostgreSQL with default durability, the schema,
pending orders, the four receivers pre-forked behind nginx with the shipped
conf/nginx/paynotify.conf, pre-signed distinct notifications per provider
(and a duplicate-heavy set: every notification 5 times at once), wrk at
16 and 64 connections, the two ceilings measured in the same run (a
minimal libfcgi+libpq single-statement responder behind the same nginx, and
pgbench on paynotify.ingest()), a correctness check after every run, CPU
per notification from /proc, worker RSS, CGI mode and callgrind instruction
counts.  See docs/PERFORMANCE.md.
"""

import argparse
import collections
import json
import multiprocessing
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(REPO, "tests", "lib"))
import pnsign  # noqa: E402  (the signers, shared with the tests and the fixtures)
import pntest  # noqa: E402  (pg_bindir, scratch_dir, cgi_params, fcgi_request)

IS_ROOT = os.geteuid() == 0
SITE = "bench"
PROVIDERS = ["alipay", "wechatpay", "stripe", "2c2p"]
CURRENCY = {"alipay": "CNY", "wechatpay": "CNY", "stripe": "USD", "2c2p": "SGD"}
AMOUNT_MINOR = 8888
UNIT_KEYS = os.path.join(REPO, "tests", "fixtures", "unit", "keys")
PRIVATE_KEY = os.path.join(UNIT_KEYS, "test-a.key.pem")
PUBLIC_KEY = os.path.join(UNIT_KEYS, "test-a.pub.pem")
STRIPE_SECRET = "whsec_bench_secret_0123456789"
C2P_KEY = "ECC4E54DBA738857B84A7EBC6B5DC7187B8DA68750E88AB53AAA41F548D6F2D9"
C2P_MERCHANT = "JT01"
WX_MCHID = "1900000109"
WX_APPID = "wxd678efh567hg6787"
WX_APIV3 = "BenchAPIv3Key0123456789abcdefABC"
WX_APIV2 = "BenchAPIv2Key0123456789abcdefABC"
WX_PUBID = "PUB_KEY_ID_0000000000000024101100397200000006"
ALIPAY_APP_ID = "2021000000000001"
ALIPAY_SELLER_ID = "2088000000000001"
CLK_TCK = os.sysconf("SC_CLK_TCK")

_procs = []             # (Popen or pid, how to stop) started by us, stopped at exit
_cleanup_dirs = []


def log(*a):
    print(*a, file=sys.stderr, flush=True)


def die(msg):
    log("bench: " + msg)
    sys.exit(1)


# ---------------------------------------------------------------------------
# Signed notifications (bytes of a complete HTTP/1.1 request)

def http_request(provider, headers, body):
    head = ["POST /notify/%s/%s HTTP/1.1" % (provider, SITE), "Host: 127.0.0.1"]
    head += ["%s: %s" % kv for kv in headers]
    head.append("Content-Length: %d" % len(body))
    return ("\r\n".join(head) + "\r\n\r\n").encode("utf-8") + body


def alipay_note(i, tag, now):
    oid = "alipay-%d" % i
    amount = "%d.%02d" % (AMOUNT_MINOR // 100, AMOUNT_MINOR % 100)
    n = "%s%08d" % (tag, i)
    p = [("gmt_create", "2024-05-20 10:00:01"), ("charset", "utf-8"),
         ("seller_email", "merchant@example.com"), ("subject", "会员+年卡 (bench)"),
         ("buyer_id", "2088102177846880"), ("invoice_amount", amount),
         ("notify_id", "2024052001222" + n),
         ("fund_bill_list", '[{"amount":"%s","fundChannel":"ALIPAYACCOUNT"}]' % amount),
         ("notify_type", "trade_status_sync"), ("trade_status", "TRADE_SUCCESS"),
         ("receipt_amount", amount), ("app_id", ALIPAY_APP_ID), ("buyer_pay_amount", amount),
         ("seller_id", ALIPAY_SELLER_ID), ("gmt_payment", "2024-05-20 10:00:05"),
         ("notify_time", "2024-05-20 10:00:06"), ("passback_params", "order%3D42"),
         ("version", "1.0"), ("out_trade_no", oid), ("total_amount", amount),
         ("trade_no", "2024052022001400" + n), ("auth_app_id", ALIPAY_APP_ID),
         ("buyer_logon_id", "tes***@example.com"), ("point_amount", "0.00"), ("body", "")]
    return http_request("alipay", [("Content-Type", pnsign.ALIPAY_CONTENT_TYPE)],
                        pnsign.alipay_body(p, PRIVATE_KEY, "RSA2"))


def wechatpay_note(i, tag, now):
    oid = "wechatpay-%d" % i
    n = "%s%08d" % (tag, i)
    resource = {"mchid": WX_MCHID, "appid": WX_APPID, "out_trade_no": oid,
                "transaction_id": "42000012" + n, "trade_type": "JSAPI",
                "trade_state": "SUCCESS", "trade_state_desc": "支付成功", "bank_type": "OTHERS",
                "attach": "", "success_time": "2024-05-20T10:00:05+08:00",
                "payer": {"openid": "oUpF8uMuAJO_M2pxb1Q9zNjWeS6o"},
                "amount": {"total": AMOUNT_MINOR, "payer_total": AMOUNT_MINOR,
                           "currency": "CNY", "payer_currency": "CNY"}}
    nonce12 = ("n%011d" % i)[-12:]
    ct = pnsign.wechat_v3_encrypt(WX_APIV3, nonce12, json.dumps(
        resource, ensure_ascii=False, separators=(",", ":")), "transaction")
    body = pnsign.wechat_v3_envelope(ct, nonce12, eid="EV-" + n)
    headers = pnsign.wechat_v3_headers(body, PRIVATE_KEY, WX_PUBID, now, "N" + n)
    return http_request("wechatpay", list(headers.items()), body)


def stripe_note(i, tag, now):
    oid = "stripe-%d" % i
    n = "%s%08d" % (tag, i)
    obj = collections.OrderedDict([
        ("id", "cs_test_" + n), ("object", "checkout.session"), ("after_expiration", None),
        ("allow_promotion_codes", None), ("amount_subtotal", AMOUNT_MINOR),
        ("amount_total", AMOUNT_MINOR), ("billing_address_collection", None),
        ("cancel_url", "https://shop.example.com/cancel"), ("client_reference_id", oid),
        ("currency", "usd"), ("customer", "cus_Q3bench" + n[-6:]),
        ("customer_details", {"email": "buyer@example.com", "name": "Jenny Rosen"}),
        ("customer_email", None), ("expires_at", now + 86400), ("livemode", False),
        ("locale", None), ("metadata", {"order_id": oid}), ("mode", "payment"),
        ("payment_intent", "pi_3bench" + n), ("payment_method_types", ["card"]),
        ("payment_status", "paid"), ("status", "complete"),
        ("success_url", "https://shop.example.com/success"),
        ("total_details", {"amount_discount": 0, "amount_shipping": 0, "amount_tax": 0})])
    ev = collections.OrderedDict([
        ("id", "evt_bench_" + n), ("object", "event"), ("api_version", "2024-06-20"),
        ("created", now), ("livemode", False), ("pending_webhooks", 1),
        ("request", {"id": None, "idempotency_key": None}),
        ("type", "checkout.session.completed"), ("data", {"object": obj})])
    body = json.dumps(ev, separators=(",", ":")).encode()
    return http_request("stripe", [("Content-Type", pnsign.STRIPE_CONTENT_TYPE),
                                   ("User-Agent", "Stripe/1.0 (+https://stripe.com/docs/webhooks)"),
                                   ("Stripe-Signature", pnsign.stripe_header(STRIPE_SECRET, now,
                                                                             body))], body)


def c2p_note(i, tag, now):
    oid = "2c2p-%d" % i
    n = "%s%08d" % (tag, i)
    payload = json.dumps(collections.OrderedDict([
        ("merchantID", C2P_MERCHANT), ("invoiceNo", oid), ("cardNo", "411111XXXXXX1111"),
        ("amount", AMOUNT_MINOR / 100), ("currencyCode", "SGD"), ("tranRef", "T" + n),
        ("referenceNo", "R" + n), ("approvalCode", "123456"), ("eci", "05"),
        ("transactionDateTime", "20240520100005"), ("agentCode", "OCBC"),
        ("channelCode", "VI"), ("issuerCountry", "SG"), ("issuerBank", "BANK"),
        ("installmentMerchantAbsorbRate", None), ("cardType", "CREDIT"),
        ("idempotencyID", None), ("paymentID", "ccpp_" + n), ("userDefined1", ""),
        ("userDefined2", ""), ("userDefined3", ""), ("userDefined4", ""),
        ("userDefined5", ""), ("respCode", "0000"), ("respDesc", "Success")]),
        separators=(",", ":")).encode()
    body = pnsign.jwt_body(pnsign.jwt_hs256(C2P_KEY, payload), compact=False)
    return http_request("2c2p", [("Content-Type", "application/json; charset=utf-8")], body)


# The rate every run is sized for (--max-rate): a request file holds
# RATE_CEILING x (duration + 1) distinct notifications, so that a receiver
# or the minimal responder answering 15,000 req/s does not reach its end
# (a wrapped file turns "distinct" into partly duplicate); pgbench gets
# 3 x as many orders per second (its minimal statement ran 13,800 tps on a
# 2-core machine that answers HTTP at 6,000 req/s).
RATE_CEILING = 15000

MAKERS = {"alipay": alipay_note, "wechatpay": wechatpay_note, "stripe": stripe_note,
          "2c2p": c2p_note}


def _pool_init():
    # the parent's SIGTERM/SIGINT handler (sys.exit) must not run in a pool
    # worker: terminate() would wait forever for a worker stuck in its exit
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _make_chunk(args):
    provider, tag, lo, hi, now = args
    return [MAKERS[provider](i, tag, now) for i in range(lo, hi)]


# Notifications between two copies of one in the resend set: 16 times the
# most connections of the run (no two copies ever in flight at once, the
# first one answered long before), at most RESEND_BLOCK, so that even a
# short run (the smoke: 2 s) reaches the copies it is meant to measure.
RESEND_BLOCK = 2000
RESEND_PER_CONN = 16


def generate(provider, tag, count, copies, path, pool, spread=0):
    """count distinct notifications for orders <provider>-0..count-1, each
    written `copies` times in a row (spread 0), or, with spread, in blocks
    of `spread` notifications each written `copies` times over (a provider
    resending what it has not had acknowledged: the copies of one
    notification `spread` requests apart, never at the same moment);
    returns the first request."""
    now = int(time.time())
    step = max(1, count // 16)
    chunks = [(provider, tag, lo, min(count, lo + step), now) for lo in range(0, count, step)]
    first = None
    block = []

    def flush(f):
        for _ in range(copies):
            for r in block:
                f.write(b"%d\n" % len(r))
                f.write(r)
        del block[:]

    with open(path, "wb") as f:
        for reqs in pool.imap(_make_chunk, chunks):
            for r in reqs:
                if first is None:
                    first = r
                if spread:
                    block.append(r)
                    if len(block) == spread:
                        flush(f)
                    continue
                for _ in range(copies):
                    f.write(b"%d\n" % len(r))
                    f.write(r)
        flush(f)
    return first


def split_request(raw):
    head, body = raw.split(b"\r\n\r\n", 1)
    lines = head.decode("utf-8").split("\r\n")
    headers = collections.OrderedDict()
    for l in lines[1:]:
        k, v = l.split(": ", 1)
        if k not in ("Host", "Content-Length"):
            headers[k] = v
    return lines[0].split(" ")[1], headers, body


# ---------------------------------------------------------------------------
# Processes


def as_owner(argv):
    return (["runuser", "-u", "nobody", "--"] + argv) if IS_ROOT else argv


def children_of(pid):
    out = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % d) as f:
                st = f.read()
            if int(st[st.rindex(")") + 2:].split()[1]) == pid:
                out.append(int(d))
        except (OSError, ValueError):
            pass
    return out


def cpu_ticks(pid, reaped=False):
    """CPU time of pid in 1/CLK_TCK s: /proc/PID/schedstat (nanoseconds on
    the CPU, exact; utime + stime are sampled at the tick and miss short
    bursts), plus, with reaped, cutime + cstime (its exited children)."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            st = f.read()
        fields = st[st.rindex(")") + 2:].split()
        try:
            with open("/proc/%d/schedstat" % pid) as f:
                own = int(f.read().split()[0]) * CLK_TCK / 1e9
        except (OSError, ValueError, IndexError):
            own = int(fields[11]) + int(fields[12])
        return own + ((int(fields[13]) + int(fields[14])) if reaped else 0)
    except (OSError, ValueError, IndexError):
        return 0


def rss_kib(pid):
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


class Pg:
    def __init__(self, base, statements=False):
        self.base = base
        self.statements = statements
        self.data = os.path.join(base, "data")
        self.logfile = os.path.join(base, "server.log")
        self.bindir = pntest.pg_bindir()
        self.env = dict(os.environ, PGHOST=base, PGUSER="paynotify", PGDATABASE="paynotify")
        for k in ("PGPORT", "PGPASSWORD", "PGSERVICE", "PGOPTIONS"):
            self.env.pop(k, None)

    def _pg(self, prog, *args):
        subprocess.run(as_owner([os.path.join(self.bindir, prog)] + list(args)), check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT, cwd=self.base)

    def start(self):
        if IS_ROOT:
            import pwd
            pw = pwd.getpwnam("nobody")
            os.chown(self.base, pw.pw_uid, pw.pw_gid)
        self._pg("initdb", "-D", self.data, "-U", "paynotify", "--auth=trust", "-E", "UTF8",
                 "--locale=C", "--no-sync")
        # default durability: fsync on, synchronous_commit on, full_page_writes on
        with open(os.path.join(self.data, "postgresql.conf"), "a") as f:
            f.write("\n# bench/run\nlisten_addresses = ''\n"
                    "unix_socket_directories = '%s'\nunix_socket_permissions = 0777\n"
                    "max_connections = 100\nlog_min_messages = warning\n" % self.base)
            if self.statements:
                # --pg-statements: where PostgreSQL's time goes, per statement
                # and per function (costs a little itself: compare runs that
                # both have it)
                f.write("shared_preload_libraries = 'pg_stat_statements'\n"
                        "pg_stat_statements.track = all\npg_stat_statements.max = 1000\n"
                        "track_functions = all\n")
        if IS_ROOT:
            open(self.logfile, "a").close()
            import pwd
            pw = pwd.getpwnam("nobody")
            os.chown(self.logfile, pw.pw_uid, pw.pw_gid)
        self._pg("pg_ctl", "-D", self.data, "-l", self.logfile, "-w", "-t", "60", "start")
        _procs.append(("pg", self))
        subprocess.run(["psql", "-X", "-q", "-d", "postgres", "-c", "CREATE DATABASE paynotify"],
                       env=self.env, check=True)

    def stop(self):
        subprocess.run(as_owner([os.path.join(self.bindir, "pg_ctl"), "-D", self.data, "-m",
                                 "immediate", "-w", "stop"]), stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL, cwd=self.base)

    def pid(self):
        with open(os.path.join(self.data, "postmaster.pid")) as f:
            return int(f.readline())

    def pids(self):
        p = self.pid()
        return [p] + children_of(p)

    def psql(self, sql):
        r = subprocess.run(["psql", "-X", "-qAt", "-F", "|", "-v", "ON_ERROR_STOP=1", "-c", sql],
                           env=self.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        if r.returncode != 0:
            raise RuntimeError("psql failed: %s\n%s" % (sql[:200], r.stderr.decode()))
        return [l.split("|") for l in r.stdout.decode().splitlines() if l]

    def one(self, sql):
        return self.psql(sql)[0]


def write_config(d, pg, conninfo=None, database_lines=()):
    shutil.copyfile(PUBLIC_KEY, os.path.join(d, "test-public.pem"))
    for name, text in (("stripe-whsec", STRIPE_SECRET), ("2c2p.key", C2P_KEY),
                       ("wechatpay-apiv3.key", WX_APIV3), ("wechatpay-apiv2.key", WX_APIV2)):
        p = os.path.join(d, name)
        with open(p, "w") as f:
            f.write(text + "\n")
        os.chmod(p, 0o600)
    path = os.path.join(d, "paynotify.conf")
    with open(path, "w") as f:
        f.write("\n".join([
            "; bench/run: site bench with test keys for every provider",
            "[database]",
            "conninfo = %s" % (conninfo or "host=%s dbname=paynotify user=paynotify" % pg.base),
            ] + list(database_lines) + [
            "[site %s]" % SITE,
            "alipay.app_id = " + ALIPAY_APP_ID,
            "alipay.seller_id = " + ALIPAY_SELLER_ID,
            "alipay.public_key_file = test-public.pem",
            "stripe.secret_files = stripe-whsec",
            "stripe.mode = test",       # the signed events are test-mode (livemode false)
            # the signed sets are made once, at the start of a run that can
            # last longer than the default 300 s (the check itself is unchanged)
            "stripe.tolerance_s = 3600",
            "2c2p.merchant_id = " + C2P_MERCHANT,
            "2c2p.secret_key_file = 2c2p.key",
            "wechatpay.mchid = " + WX_MCHID,
            "wechatpay.appid = " + WX_APPID,
            "wechatpay.apiv3_key_file = wechatpay-apiv3.key",
            "wechatpay.apiv2_key_file = wechatpay-apiv2.key",
            "wechatpay.public_key_id = " + WX_PUBID,
            "wechatpay.public_key_file = test-public.pem",
            "wechatpay.tolerance_s = 3600",
            ""]))
    os.chmod(path, 0o600)
    return path


def wait_socket(path, what, timeout=20):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if os.path.exists(path):
            return
        time.sleep(0.05)
    die("%s did not create %s" % (what, path))


class Receiver:
    def __init__(self, provider, conf, sockdir, logdir, workers):
        self.provider = provider
        self.sock = os.path.join(sockdir, provider + ".sock")
        self.logpath = os.path.join(logdir, provider + ".log")
        self.logf = open(self.logpath, "ab")
        self.proc = subprocess.Popen(
            [os.path.join(REPO, "paynotify-" + provider), "-c", conf, "--listen",
             "unix:" + self.sock, "--workers", str(workers), "--socket-mode", "0666"],
            stdin=subprocess.DEVNULL, stdout=self.logf, stderr=self.logf)
        _procs.append(("popen", self.proc))

    def workers(self):
        return children_of(self.proc.pid)

    def reload(self, nworkers, timeout=30):
        """SIGHUP: the supervisor replaces every worker (new sessions)."""
        old = set(self.workers())
        self.proc.send_signal(signal.SIGHUP)
        deadline = time.time() + timeout
        while time.time() < deadline:
            now = set(self.workers())
            if len(now) == nworkers and not (now & old):
                return
            time.sleep(0.1)
        raise RuntimeError("%s workers were not replaced after SIGHUP" % self.provider)

    def log_offset(self):
        self.logf.flush()
        return os.path.getsize(self.logpath)

    def log_since(self, off):
        with open(self.logpath, "rb") as f:
            f.seek(off)
            return f.read().decode("utf-8", "replace")


class Minimal:
    """bench/minimal.c: the single-statement ceiling (or, with conninfo '-',
    ... not used)."""

    def __init__(self, binary, sock, workers, conninfo):
        self.sock = sock
        self.argv = [binary, sock, str(workers), conninfo]
        self.start()

    def start(self):
        self.proc = subprocess.Popen(self.argv, stdin=subprocess.DEVNULL)
        _procs.append(("popen", self.proc))

    def restart(self):
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(10)
        _procs.remove(("popen", self.proc))
        os.unlink(self.sock)
        self.start()

    def workers(self):
        return children_of(self.proc.pid)


def start_nginx(ndir, sockdir, logdir):
    os.makedirs(os.path.join(ndir, "tmp"), exist_ok=True)
    with open(os.path.join(REPO, "conf", "nginx", "paynotify.conf")) as f:
        shipped = f.read()
    # exactly the shipped snippet, with the socket directory substituted
    snippet = shipped.replace("/run/paynotify/", sockdir + "/")
    # the ceiling responder gets a copy of the Alipay location, nothing else changed
    m = re.search(r"location ~ \^/notify/alipay/ \{.*?\n\}", shipped, re.S)
    minimal = m.group(0).replace("alipay", "minimal").replace("/run/paynotify/", sockdir + "/")
    with open(os.path.join(ndir, "paynotify.conf"), "w") as f:
        f.write(snippet)
    with open(os.path.join(ndir, "minimal.conf"), "w") as f:
        f.write(minimal + "\n")
    shutil.copyfile("/etc/nginx/fastcgi_params", os.path.join(ndir, "fastcgi_params"))
    user = "user nobody nogroup;" if IS_ROOT else ""
    with open(os.path.join(ndir, "nginx.conf"), "w") as f:
        f.write("""%s
worker_processes auto;
pid %s/nginx.pid;
error_log %s/nginx-error.log;
events { worker_connections 4096; }
http {
    access_log off;
    client_body_temp_path %s/tmp/body;
    fastcgi_temp_path %s/tmp/fastcgi;
    proxy_temp_path %s/tmp/proxy;
    uwsgi_temp_path %s/tmp/uwsgi;
    scgi_temp_path %s/tmp/scgi;
    server {
        listen 127.0.0.1:%%PORT%%;
        include %s/paynotify.conf;
        include %s/minimal.conf;
    }
}
""" % (user, ndir, logdir, ndir, ndir, ndir, ndir, ndir, ndir, ndir))
    return ndir


def free_port():
    import socket
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


class Nginx:
    def __init__(self, ndir, logdir, sockdir):
        start_nginx(ndir, sockdir, logdir)
        self.dir = ndir
        self.port = free_port()
        conf = os.path.join(ndir, "nginx.conf")
        with open(conf) as f:
            text = f.read().replace("%PORT%", str(self.port))
        with open(conf, "w") as f:
            f.write(text)
        subprocess.run(["nginx", "-p", ndir, "-c", conf, "-t", "-q"], check=True)
        subprocess.run(["nginx", "-p", ndir, "-c", conf], check=True)
        _procs.append(("nginx", self))
        self.conf = conf

    def pid(self):
        with open(os.path.join(self.dir, "nginx.pid")) as f:
            return int(f.read())

    def pids(self):
        p = self.pid()
        return [p] + children_of(p)

    def stop(self):
        subprocess.run(["nginx", "-p", self.dir, "-c", self.conf, "-s", "stop"],
                       stderr=subprocess.DEVNULL)


def cleanup():
    while _procs:
        kind, obj = _procs.pop()
        try:
            if kind == "popen":
                if obj.poll() is None:
                    obj.send_signal(signal.SIGTERM)
                    try:
                        obj.wait(10)
                    except subprocess.TimeoutExpired:
                        obj.kill()
            else:
                obj.stop()
        except Exception as e:     # keep cleaning
            log("cleanup: %s" % e)
    for d in _cleanup_dirs:
        shutil.rmtree(d, ignore_errors=True)


# ---------------------------------------------------------------------------
# The benchmark


class Bench:
    def __init__(self, args):
        self.a = args
        self.results = collections.defaultdict(list)    # case key -> [run dicts]
        self.failures = []
        self.checks = 0

    # -- setup ------------------------------------------------------------
    def setup(self):
        a = self.a
        self.base = pntest.scratch_dir("pnbench.")
        os.chmod(self.base, 0o755)
        if not a.keep:
            _cleanup_dirs.append(self.base)
        log("bench: work dir %s" % self.base)
        for d in ("pg", "sock", "log", "nginx", "req", "cfg"):
            os.makedirs(os.path.join(self.base, d))
            os.chmod(os.path.join(self.base, d), 0o755)
        self.pg = Pg(os.path.join(self.base, "pg"), a.pg_statements)
        self.pg.start()
        if a.pg_statements:
            self.pg.psql("CREATE EXTENSION pg_stat_statements")
        self.conf = write_config(os.path.join(self.base, "cfg"), self.pg)
        self.pg.psql("CREATE SEQUENCE public.bench_seq")
        self.state = None
        self.migrate()
        self.sockdir = os.path.join(self.base, "sock")
        self.logdir = os.path.join(self.base, "log")
        self.receivers = {}
        for p in PROVIDERS:
            self.receivers[p] = Receiver(p, self.conf, self.sockdir, self.logdir, a.workers)
        for p in PROVIDERS:
            wait_socket(self.receivers[p].sock, "paynotify-" + p)
        self.minimal = None
        if a.minimal_binary:
            self.minimal = Minimal(a.minimal_binary, os.path.join(self.sockdir, "minimal.sock"),
                                   a.workers, "host=%s dbname=paynotify user=paynotify"
                                   % self.pg.base)
            wait_socket(self.minimal.sock, "pn-minimal")
        self.bouncers = {}
        for mode in a.pgbouncer:
            # one pgbouncer per pool_mode; session mode pins a server
            # connection per worker, so both pools hold every worker's
            # (the cost measured is the pooler's, not a queue's)
            self.bouncers[mode] = pntest.PgBouncer(
                collections.namedtuple("PgAt", "base port")(self.pg.base, 5432), mode,
                pool_size=len(PROVIDERS) * a.workers + 2, port=6432).start()
        self.nginx = Nginx(os.path.join(self.base, "nginx"), self.logdir, self.sockdir)
        self.url = "http://127.0.0.1:%d" % self.nginx.port
        # every worker connects to PostgreSQL now (health checks), not in a run
        for p in self.a.providers:
            self.wrk_get("/notify/%s/%s" % (p, SITE))
        self.rss_start = {p: max(rss_kib(w) for w in self.receivers[p].workers())
                          for p in PROVIDERS}
        self.rss_start_all = {p: sorted(rss_kib(w) for w in self.receivers[p].workers())
                              for p in PROVIDERS}

    def wrk_get(self, path):
        subprocess.run(["wrk", "-t1", "-c%d" % (2 * self.a.workers), "-d1s", self.url + path],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def generate(self):
        a = self.a
        self.reqfiles = {}
        self.first = {}
        self.counts = {}
        t0 = time.time()
        n = int(a.max_rate * (a.duration + 1))
        with multiprocessing.Pool(a.gen_procs, initializer=_pool_init) as pool:
            for p in a.providers:
                path = os.path.join(self.base, "req", p + ".req")
                self.first[p] = generate(p, "D", n, 1, path, pool)
                self.reqfiles[(p, "distinct")] = path
                self.counts[(p, "distinct")] = n
                if a.dup:
                    path = os.path.join(self.base, "req", p + "-dup.req")
                    nd = n // 5 + 1
                    generate(p, "X", nd, 5, path, pool)
                    self.reqfiles[(p, "dup5")] = path
                    self.counts[(p, "dup5")] = nd
                    path = os.path.join(self.base, "req", p + "-resend.req")
                    generate(p, "R", nd, 5, path, pool,
                             spread=min(RESEND_BLOCK, RESEND_PER_CONN * max(a.conc)))
                    self.reqfiles[(p, "resend5")] = path
                    self.counts[(p, "resend5")] = nd
        self.norders = n
        log("bench: %d distinct signed notifications per provider%s in %.1f s" % (
            n, " (+ a 5x duplicate set)" if a.dup else "", time.time() - t0))

    # -- database state -----------------------------------------------------
    def migrate(self):
        env = dict(self.pg.env, PAYNOTIFY_CONFIG=self.conf)
        subprocess.run([os.path.join(REPO, "paynotify"), "migrate", "--sql-dir",
                        os.path.join(REPO, "sql")], env=env, check=True,
                       stdout=subprocess.DEVNULL)

    def enter_state(self, state):
        """Put the database in one of the states users meet, with receiver
        sessions that started in it:
          fresh    an empty schema just made by `paynotify migrate`, never
                   analysed (a shop's first day, a new site, a restore);
          history  a.history old notifications of the site, analysed.
        The schema is dropped and made again, then every receiver gets
        SIGHUP (a new generation of workers: new sessions, no cached plans)
        and the minimal responder is restarted, so nobody's session carries
        plans made in another state."""
        if state == self.state and state == "history":
            return
        self.pg.psql("DROP SCHEMA IF EXISTS paynotify CASCADE")
        self.migrate()
        if state == "history" and self.a.history:
            self.seed_history(self.a.history)
        self.state = state
        if getattr(self, "nginx", None) is not None:
            self.restart_sessions()

    def restart_sessions(self):
        for p in PROVIDERS:
            self.receivers[p].reload(self.a.workers)
        if self.minimal:
            self.minimal.restart()
            wait_socket(self.minimal.sock, "pn-minimal")
        # every worker connects to PostgreSQL now (health checks), not in a run
        for p in self.a.providers:
            self.wrk_get("/notify/%s/%s" % (p, SITE))

    def seed_history(self, n):
        """A shop has history: n stored notifications of the site (provider
        'history', never touched by the runs), so that the planner never sees
        an empty table.  Without them every case would start from freshly
        analysed empty tables, and the receivers' long-lived sessions can
        cache a generic plan for ingest()'s dedup lookup that walks every
        notification of the site (docs/PERFORMANCE.md, "plans")."""
        self.pg.psql(
            "INSERT INTO paynotify.notifications (site, provider, dedup_key, event_kind, "
            "order_id, psp_txn_id, amount_minor, currency, outcome, raw_body, key_id, "
            "received_at, last_delivery_at) "
            "SELECT '%s', 'history', 'hist-' || g, 'paid', 'hist-' || g, 'T' || g, %d, 'CNY', "
            "'applied', '\\x00'::bytea, 'history', now() - interval '30 days', "
            "now() - interval '30 days' FROM generate_series(1, %d) g" % (SITE, AMOUNT_MINOR, n))

    def reset(self, provider, norders, state="history"):
        """The run's orders, pending, in the given state (enter_state).  In
        the fresh state the schema is made anew for every case and nothing
        is analysed (autovacuum may, as it would for a shop)."""
        cur = CURRENCY.get(provider, "CNY")
        if state == "fresh":
            self.state = None
            self.enter_state("fresh")
        else:
            self.enter_state("history")
            self.pg.psql("DELETE FROM paynotify.notifications WHERE provider <> 'history'; "
                         "TRUNCATE paynotify.orders")
        self.pg.psql(
            "ALTER SEQUENCE public.bench_seq RESTART; "
            "INSERT INTO paynotify.orders (site, order_id, amount_minor, currency) "
            "SELECT '%s', '%s-' || g, %d, '%s' FROM generate_series(0, %d) g"
            % (SITE, provider, AMOUNT_MINOR, cur, norders))
        if state != "fresh":
            self.pg.psql("VACUUM ANALYZE paynotify.orders")
            self.pg.psql("VACUUM ANALYZE paynotify.notifications")
        self.pg.psql("CHECKPOINT")

    def stmt_reset(self):
        """--pg-statements: zero pg_stat_statements and the function and
        table counters of this database before a case."""
        if self.a.pg_statements:
            self.pg.psql("SELECT pg_stat_statements_reset(); SELECT pg_stat_reset()")

    def stmt_snapshot(self, handled):
        """--pg-statements: per notification handled, each statement's calls,
        execution (and planning) time, WAL bytes and buffer hits since
        stmt_reset (top level and nested, pg_stat_statements.track = all),
        and each function's calls and self time (track_functions)."""
        if not self.a.pg_statements or not handled:
            return None
        rows = self.pg.psql(
            "SELECT toplevel, calls, total_exec_time, total_plan_time, wal_bytes, "
            "shared_blks_hit + shared_blks_read, "
            "left(replace(regexp_replace(query, '\\s+', ' ', 'g'), '|', '/'), 110) "
            "FROM pg_stat_statements WHERE dbid = (SELECT oid FROM pg_database "
            "WHERE datname = current_database()) AND query NOT LIKE '%pg_stat_%' "
            "ORDER BY toplevel DESC, total_exec_time DESC LIMIT 14")
        st = [{"top": r[0] == "t", "calls": int(r[1]) / handled,
               "exec_us": float(r[2]) * 1000 / handled, "plan_us": float(r[3]) * 1000 / handled,
               "wal_b": float(r[4]) / handled, "blks": int(r[5]) / handled, "query": r[6]}
              for r in rows]
        time.sleep(1.2)     # idle backends flush their function counters (1 s at most)
        rows = self.pg.psql(
            "SELECT schemaname || '.' || funcname, calls, total_time, self_time "
            "FROM pg_stat_user_functions ORDER BY self_time DESC LIMIT 12")
        fn = [{"name": r[0], "calls": int(r[1]) / handled,
               "total_us": float(r[2]) * 1000 / handled, "self_us": float(r[3]) * 1000 / handled}
              for r in rows]
        return {"statements": st, "functions": fn}

    def pg_cpu_by_type(self, c0, c1):
        """PostgreSQL CPU between two snapshots by process title: client
        backends, walwriter, checkpointer, autovacuum, ... and "exited"
        (the postmaster's reaped children: backends and workers that ended)."""
        pm = self.pg.pid()
        out = collections.Counter()
        for p in c1:
            d = c1[p] - c0.get(p, 0)
            if p == pm:
                out["postmaster+exited"] += d
                continue
            try:
                with open("/proc/%d/cmdline" % p, "rb") as f:
                    title = f.read().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                title = "?"
            t = title.split(":", 1)[1].strip() if ":" in title else title
            if t.startswith("paynotify ") or "[local]" in t:
                t = "client backends"
            out[t.split(" ")[0] if t != "client backends" else t] += d
        return dict(out)

    def wal_syncs(self):
        """WAL flushes (fdatasync/fsync calls) so far, pg_stat_wal.wal_sync."""
        return int(self.pg.one("SELECT wal_sync FROM pg_stat_wal")[0])

    def tuples_read(self):
        r = self.pg.one("SELECT coalesce(seq_tup_read, 0) + coalesce(idx_tup_fetch, 0) "
                        "FROM pg_stat_user_tables WHERE relid = 'paynotify.notifications'::regclass")
        return int(r[0])

    def db_state(self, provider):
        nt = "(SELECT * FROM paynotify.notifications WHERE provider <> 'history')"
        r = self.pg.one(
            "SELECT count(*), coalesce(sum(deliveries), 0), "
            "count(*) FILTER (WHERE outcome = 'applied'), "
            "count(*) FILTER (WHERE outcome <> 'applied'), coalesce(max(deliveries), 0), "
            "count(*) FILTER (WHERE key_id IS NOT NULL) FROM %s n" % nt)
        paid = int(self.pg.one("SELECT count(*) FROM paynotify.orders WHERE status = 'paid'")[0])
        twice = int(self.pg.one(
            "SELECT count(*) FROM (SELECT order_id FROM %s n "
            "WHERE outcome = 'applied' GROUP BY order_id HAVING count(*) > 1) x" % nt)[0])
        orphan = int(self.pg.one(
            "SELECT count(*) FROM %s n JOIN paynotify.orders o "
            "ON o.site = n.site AND o.order_id = n.order_id WHERE o.status <> 'paid'" % nt)[0])
        return {"events": int(r[0]), "deliveries": int(r[1]), "applied": int(r[2]),
                "other_outcomes": int(r[3]), "max_deliveries": int(r[4]), "paid": paid,
                "applied_twice": twice, "event_order_not_paid": orphan, "keyed": int(r[5])}

    def settle(self, rcv, off, bound_s=15):
        """Wait until the requests in flight when wrk stopped are done: the
        stored deliveries stop changing (two reads 0.2 s apart) and, for a
        receiver, its log has a status line for each of them (the line comes
        after the commit and the answer).  A bound, not a measure: on a
        loaded machine a worker can be descheduled for longer than the
        fixed pause after wrk; the checks then read what really happened."""
        deadline = time.monotonic() + bound_s
        prev = None
        while time.monotonic() < deadline:
            n = int(self.pg.one("SELECT coalesce(sum(deliveries), 0) FROM paynotify.notifications "
                                "WHERE provider <> 'history'")[0])
            logged = n if rcv is None else len(re.findall(r" status=\d+ ", rcv.log_since(off)))
            if n == prev and logged >= n:
                return
            prev = n
            time.sleep(0.2)

    # -- measurement ----------------------------------------------------------
    def cpu_groups(self, workers):
        return {"workers": workers, "postgres": self.pg.pids(), "nginx": self.nginx.pids()}

    def cpu_snapshot(self, groups):
        # the postmaster's reaped-children time covers backends that exited
        pm = self.pg.pid()
        return {g: {p: cpu_ticks(p, p == pm) for p in pids} for g, pids in groups.items()}

    def run_wrk(self, path_file, conc, group, url_path):
        a = self.a
        cmd = ["wrk", "-t%d" % a.threads, "-c%d" % conc, "-d%ds" % a.duration, "--latency",
               "--timeout", "10s", "-s", os.path.join(HERE, "bench.lua"), self.url + url_path,
               "--", path_file, str(a.threads), str(group)]
        p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        out, err = p.communicate()
        m = re.search(r"BENCHJSON (\{.*\})", out.decode())
        if not m:
            raise RuntimeError("wrk failed: %s %s" % (out.decode()[-2000:], err.decode()[-2000:]))
        return json.loads(m.group(1))

    def check(self, label, ok, detail):
        self.checks += 1
        if not ok:
            self.failures.append("%s: %s" % (label, detail))
            log("bench: CHECK FAILED %s: %s" % (label, detail))
        return ok

    def http_case(self, kind, provider, dataset, conc, run, state):
        """kind: receiver | minimal.  One wrk run + checks -> result dict."""
        a = self.a
        reqp = "alipay" if kind == "minimal" else provider
        base_ds = "distinct" if dataset in ("nonotify", "unnamed") or dataset.startswith("pgb-") \
            else dataset
        self.reset(reqp, self.counts[(reqp, base_ds)], state)
        if kind == "minimal":
            # the same requests as the Alipay receiver's of this data set
            reqfile = self.minimal_files[base_ds]
            workers = self.minimal.workers()
            url_path = "/notify/minimal/%s" % SITE
        else:
            reqfile = self.reqfiles[(provider, base_ds)]
            rcv = self.receivers[provider]
            workers = rcv.workers()
            url_path = "/notify/%s/%s" % (provider, SITE)
            off = rcv.log_offset()
        groups = self.cpu_groups(workers)
        if dataset.startswith("pgb-"):
            groups["pgbouncer"] = self.bouncer_pids(dataset[4:])
        self.stmt_reset()
        lsn0 = self.pg.one("SELECT pg_current_wal_lsn()")[0]
        sync0 = self.wal_syncs()
        tr0 = self.tuples_read()
        c0 = self.cpu_snapshot(groups)
        t0 = time.time()
        w = self.run_wrk(reqfile, conc, 5 if dataset == "dup5" else 1, url_path)
        time.sleep(0.5)         # requests in flight when wrk stopped finish
        elapsed = time.time() - t0
        c1 = self.cpu_snapshot(groups)
        cpu = {}
        for g in groups:
            cpu[g] = sum(c1[g].get(p, 0) - c0[g].get(p, 0) for p in c1[g]) / CLK_TCK
        pg_by_type = self.pg_cpu_by_type(c0["postgres"], c1["postgres"])
        wal = int(self.pg.one("SELECT pg_current_wal_lsn() - '%s'::pg_lsn" % lsn0)[0])
        syncs = self.wal_syncs() - sync0
        stmts_handled = int(self.pg.one(
            "SELECT coalesce(sum(deliveries), 0) FROM paynotify.notifications "
            "WHERE provider <> 'history'")[0]) if self.a.pg_statements else 0
        stmts = self.stmt_snapshot(stmts_handled)
        if stmts is not None:
            stmts["cpu_by_type"] = {t: v * 1e6 / CLK_TCK / stmts_handled
                                    for t, v in pg_by_type.items()}
        self.settle(rcv if kind == "receiver" else None, off if kind == "receiver" else 0)
        st = self.db_state(reqp)
        res = {"kind": kind, "provider": provider, "dataset": dataset, "conc": conc,
               "state": state, "run": run, "rps": w["requests"] / (w["duration_us"] / 1e6),
               "p50_ms": w["p50_us"] / 1000, "p99_ms": w["p99_us"] / 1000,
               "max_ms": w["max_us"] / 1000, "wrk_ok": w["requests"] - w["status"],
               "non2xx": w["status"],
               "sock_err": w["connect"] + w["read"] + w["write"] + w["timeout"],
               "wraps": w["wraps"], "db": st, "cpu_s": cpu, "elapsed": elapsed,
               "pg_statements": stmts}
        handled = st["deliveries"]
        res["handled"] = handled
        res["wal_per"] = wal / handled if handled else 0
        # WAL flushes per committed notification (duplicates commit too)
        res["wal_sync_per"] = syncs / handled if handled else 0
        time.sleep(0.6)         # backends flush their table statistics (1 s at most)
        res["tuples_read_per"] = (self.tuples_read() - tr0) / handled if handled else 0
        res["cpu_us_per"] = {g: (cpu[g] * 1e6 / handled if handled else 0) for g in cpu}
        res["cpu_us_per"]["total"] = sum(cpu.values()) * 1e6 / handled if handled else 0
        if kind == "receiver":
            text = rcv.log_since(off)
            statuses = collections.Counter(re.findall(r" status=(\d+) ", text))
            # the success ack is 200, or 204 for WeChat Pay v3
            res["log_200"] = sum(v for k, v in statuses.items() if k.startswith("2"))
            res["log_non200"] = sum(v for k, v in statuses.items() if not k.startswith("2"))
            res["lost_acks"] = text.count("could not write the answer")
            res["rss_kib"] = max(rss_kib(p) for p in workers) if workers else 0
            res["rss_all"] = sorted(rss_kib(p) for p in workers)
        label = "%s %s %s %s c=%d run %d" % (kind, provider, dataset, state, conc, run)
        self.verify(label, res, conc, dataset)
        return res

    def verify(self, label, r, conc, dataset):
        st = r["db"]
        ok = True
        ok &= self.check(label, r["non2xx"] == 0 and r["sock_err"] == 0,
                         "wrk saw %d non-2xx and %d socket errors" % (r["non2xx"], r["sock_err"]))
        ok &= self.check(label, r["wrk_ok"] > 0, "no request succeeded")
        # every committed delivery was answered: wrk's count misses only the
        # requests in flight when it stopped (at most one per connection)
        ok &= self.check(label, r["wrk_ok"] <= st["deliveries"] <= r["wrk_ok"] + conc,
                         "deliveries %d vs %d acks seen by wrk" % (st["deliveries"], r["wrk_ok"]))
        if r["kind"] == "receiver":
            ok &= self.check(label, r["log_200"] == st["deliveries"] and r["log_non200"] == 0,
                             "receiver logged %d x 2xx and %d others for %d deliveries"
                             % (r["log_200"], r["log_non200"], st["deliveries"]))
            # an answer can fail to be written only when wrk hung up: on a
            # request still in flight when it stopped (committed, not counted)
            ok &= self.check(label, r["lost_acks"] <= st["deliveries"] - r["wrk_ok"],
                             "%d answers could not be written, %d requests in flight at the end"
                             % (r["lost_acks"], st["deliveries"] - r["wrk_ok"]))
        # the right program answered (the receivers record the verifying key)
        want = 0 if r["kind"] == "minimal" else st["events"]
        ok &= self.check(label, st["keyed"] == want,
                         "%d of %d events carry a key id (expected %d)"
                         % (st["keyed"], st["events"], want))
        # each distinct event applied exactly once, orders paid once
        ok &= self.check(label, st["applied"] == st["events"] and st["other_outcomes"] == 0,
                         "%d events, %d applied, %d other outcomes"
                         % (st["events"], st["applied"], st["other_outcomes"]))
        ok &= self.check(label, st["paid"] == st["events"] and st["applied_twice"] == 0
                         and st["event_order_not_paid"] == 0,
                         "%d orders paid for %d events (%d applied twice, %d not paid)"
                         % (st["paid"], st["events"], st["applied_twice"],
                            st["event_order_not_paid"]))
        if dataset in ("distinct", "nonotify", "unnamed") or dataset.startswith("pgb-"):
            # a distinct run that reached the end of its file started it
            # again, and its repeats were duplicates: the run measured
            # something else than it says (the file is sized for --max-rate)
            ok &= self.check(label, r["wraps"] == 0,
                             "the request file ran out %d times: this machine answers faster "
                             "than --max-rate %d; run with a higher one"
                             % (r["wraps"], self.a.max_rate))
            if r["wraps"] == 0:
                ok &= self.check(label, st["max_deliveries"] <= 1
                                 and st["events"] == st["deliveries"],
                                 "distinct set: %d events for %d deliveries"
                                 % (st["events"], st["deliveries"]))
        if dataset in ("dup5", "resend5"):
            lim = 5 * (1 + r["wraps"])
            ok &= self.check(label, st["max_deliveries"] <= lim
                             and st["deliveries"] > st["events"],
                             "duplicate set: %d deliveries of %d events (max %d per event)"
                             % (st["deliveries"], st["events"], st["max_deliveries"]))
        r["ok"] = bool(ok)
        log("bench: %-48s %7.0f req/s p50 %5.1f p99 %6.1f max %6.1f ms  cpu %4.0f us/req "
            "(pg %4.0f)  %.2f flushes  %s%s%s"
            % (label, r["rps"], r["p50_ms"], r["p99_ms"], r["max_ms"],
               r["cpu_us_per"]["total"], r["cpu_us_per"]["postgres"], r["wal_sync_per"],
               "ok" if ok else "FAILED",
               "  (%d answers to wrk's last requests not written: it had hung up)"
               % r["lost_acks"] if r.get("lost_acks") else "",
               "  (wrapped %d)" % r["wraps"] if r["wraps"] else ""))

    def pgbench_script(self, variant):
        """The statement pgbench runs, with the raw body of a real Alipay
        notification: `ingest` is what a receiver sends; `minimal` is
        bench/minimal.c's single statement plus the raw-body insert (ceiling
        for what ingest() costs inside PostgreSQL)."""
        raw = self.first["alipay"]
        _, headers, body = split_request(raw)
        hdr = json.dumps({"Content-Type": headers["Content-Type"]}, separators=(",", ":"))
        seq = "(SELECT nextval('public.bench_seq') - 1 AS n) s"
        if variant == "minimal":
            return (
                "WITH s AS (SELECT nextval('public.bench_seq') - 1 AS n), ins AS ("
                " INSERT INTO paynotify.notifications AS n"
                "  (site, provider, dedup_key, event_kind, order_id, outcome, raw_headers,"
                "   raw_body)"
                " SELECT '%s', 'alipay', 'pgb-ev-' || s.n, 'paid', 'pgb-' || s.n, 'applied',"
                "  '%s'::jsonb, '\\x%s'::bytea FROM s"
                " ON CONFLICT (site, provider, dedup_key) DO UPDATE"
                "  SET deliveries = n.deliveries + 1, last_delivery_at = now()"
                " RETURNING (xmax = 0) AS inserted, n.order_id) "
                "UPDATE paynotify.orders o SET status = 'paid', psp = 'alipay', paid_at = now(),"
                " updated_at = now() FROM ins"
                " WHERE ins.inserted AND o.site = '%s' AND o.order_id = ins.order_id"
                " AND o.status = 'pending';\n" % (SITE, hdr, body.hex(), SITE))
        return (
            "SELECT i.* FROM %s, LATERAL "
            "paynotify.ingest('%s', 'alipay', 'pgb-ev-' || s.n, 'paid', 'TRADE_SUCCESS', "
            "'pgb-' || s.n, '2024052022001400' || s.n, NULL, %d, 'CNY', NULL, false, "
            "'2024-05-20 10:00:05', 'alipay-rsa2:1', NULL, NULL, '%s'::jsonb, "
            "'\\x%s'::bytea) i;\n" % (seq, SITE, AMOUNT_MINOR, hdr, body.hex()))

    def pgbench_case(self, run, state, variant="ingest", notify=True):
        a = self.a
        n = int(a.max_rate * 3 * (a.duration + 1))
        self.reset("pgb", n, state)
        script = os.path.join(self.base, "pgbench-%s.sql" % variant)
        with open(script, "w") as f:
            f.write(self.pgbench_script(variant))
        pm = self.pg.pid()
        pids = self.pg.pids()
        self.stmt_reset()
        lsn0 = self.pg.one("SELECT pg_current_wal_lsn()")[0]
        sync0 = self.wal_syncs()
        c0 = {p: cpu_ticks(p, p == pm) for p in pids}
        env = dict(self.pg.env)
        if not notify:
            env["PGOPTIONS"] = "-c paynotify.notify=off"
        r = subprocess.run(["pgbench", "-n", "-c", str(a.pgbench_clients), "-j", str(a.threads),
                            "-T", str(a.duration), "-M", "prepared", "-f", script],
                           env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        out = r.stdout.decode()
        time.sleep(0.3)         # pgbench's backends exit and are reaped
        c1 = {p: cpu_ticks(p, p == pm) for p in pids}
        cpu = sum(c1[p] - c0.get(p, 0) for p in pids) / CLK_TCK
        pg_by_type = self.pg_cpu_by_type(c0, c1)
        m = re.search(r"tps = ([0-9.]+) \(without initial", out)
        lat = re.search(r"latency average = ([0-9.]+) ms", out)
        tx = re.search(r"number of transactions actually processed: (\d+)", out)
        if not m or not tx:
            raise RuntimeError("pgbench failed: %s %s" % (out, r.stderr.decode()))
        wal = int(self.pg.one("SELECT pg_current_wal_lsn() - '%s'::pg_lsn" % lsn0)[0])
        syncs = self.wal_syncs() - sync0
        stmts = self.stmt_snapshot(int(tx.group(1)))
        if stmts is not None:
            stmts["cpu_by_type"] = {t: v * 1e6 / CLK_TCK / int(tx.group(1))
                                    for t, v in pg_by_type.items()}
        st = self.db_state("pgb")
        res = {"kind": "pgbench", "variant": variant, "state": state, "conc": a.pgbench_clients,
               "run": run, "rps": float(m.group(1)),
               "wal_per": wal / max(1, int(tx.group(1))),
               "wal_sync_per": syncs / max(1, int(tx.group(1))),
               "lat_avg_ms": float(lat.group(1)) if lat else 0, "tx": int(tx.group(1)),
               "db": st, "cpu_us_per": {"postgres": cpu * 1e6 / max(1, int(tx.group(1)))},
               "pg_statements": stmts}
        label = "pgbench %s%s %s c=%d run %d" % (variant, "" if notify else " notify=off",
                                                  state, a.pgbench_clients, run)
        ok = self.check(label, st["events"] == res["tx"] == st["applied"] == st["paid"],
                        "%d transactions, %d events, %d applied, %d paid"
                        % (res["tx"], st["events"], st["applied"], st["paid"]))
        failed = re.search(r"number of failed transactions: (\d+)", out)
        ok &= self.check(label, r.returncode == 0 and (not failed or failed.group(1) == "0"),
                         "pgbench exit %d, failed transactions: %s"
                         % (r.returncode, failed.group(1) if failed else "?"))
        res["ok"] = bool(ok)
        log("bench: %-48s %7.0f tps  lat avg %5.2f ms  pg %4.0f us/tx  %.2f flushes  %s"
            % (label, res["rps"], res["lat_avg_ms"], res["cpu_us_per"]["postgres"],
               res["wal_sync_per"], "ok" if ok else "FAILED"))
        return res

    def bouncer_pids(self, mode):
        p = self.bouncers[mode].proc.pid
        return [p] + children_of(p)

    def set_pooler(self, mode):
        """Point the receivers at pgbouncer in this pool_mode (transaction:
        prepared_statements = off), or back at PostgreSQL (None); SIGHUP
        makes a new generation of workers that reads it."""
        if mode is None:
            write_config(os.path.dirname(self.conf), self.pg)
        elif mode == "unnamed":
            write_config(os.path.dirname(self.conf), self.pg,
                         database_lines=["prepared_statements = off"])
        else:
            write_config(os.path.dirname(self.conf), self.pg,
                         conninfo=self.bouncers[mode].conninfo(),
                         database_lines=["prepared_statements = %s"
                                         % ("off" if mode == "transaction" else "on")])
        self.restart_sessions()

    def set_notify(self, on):
        """paynotify.notify for new sessions (sql/003), then reload the Alipay
        receiver (SIGHUP: a new generation of workers, new connections)."""
        self.pg.psql("ALTER DATABASE paynotify %s" % (
            "RESET paynotify.notify" if on else "SET paynotify.notify = off"))
        self.receivers["alipay"].reload(self.a.workers)
        self.wrk_get("/notify/alipay/%s" % SITE)

    # -- CGI --------------------------------------------------------------------
    def cgi_case(self, provider="alipay"):
        a = self.a
        self.reset(provider, self.counts[(provider, "distinct")], a.states[-1])
        reqs = []
        with open(self.reqfiles[(provider, "distinct")], "rb") as f:
            while len(reqs) < 5000:
                l = f.readline()
                if not l:
                    break
                reqs.append(f.read(int(l)))
        binary = os.path.join(REPO, "paynotify-" + provider)
        stop = time.time() + a.cgi_seconds
        lock = threading.Lock()
        idx = [0]
        stats = {"ok": 0, "bad": 0, "lat": []}

        def loop():
            while time.time() < stop:
                with lock:
                    i = idx[0]
                    idx[0] += 1
                if i >= len(reqs):
                    return
                path, headers, body = split_request(reqs[i])
                env = pntest.cgi_params("POST", path, headers, body)
                env["PAYNOTIFY_CONFIG"] = self.conf
                env["PATH"] = "/usr/bin:/bin"
                t = time.time()
                p = subprocess.run([binary], env=env, input=body, stdout=subprocess.PIPE,
                                   stderr=subprocess.DEVNULL)
                dt = time.time() - t
                resp = pntest.parse_cgi_response(p.stdout)
                with lock:
                    stats["lat"].append(dt)
                    if resp.status == 200:
                        stats["ok"] += 1
                    else:
                        stats["bad"] += 1
        t0 = time.time()
        ths = [threading.Thread(target=loop) for _ in range(a.cgi_parallel)]
        for t in ths:
            t.start()
        for t in ths:
            t.join()
        el = time.time() - t0
        st = self.db_state(provider)
        lat = sorted(stats["lat"])
        res = {"provider": provider, "parallel": a.cgi_parallel, "rps": stats["ok"] / el,
               "ok": stats["ok"], "bad": stats["bad"],
               "p50_ms": lat[len(lat) // 2] * 1000 if lat else 0,
               "p99_ms": lat[int(len(lat) * 0.99)] * 1000 if lat else 0, "db": st}
        self.check("cgi %s" % provider, stats["bad"] == 0 and st["events"] == stats["ok"]
                   == st["applied"] == st["paid"],
                   "CGI: %d ok, %d bad, %d events, %d paid" % (stats["ok"], stats["bad"],
                                                              st["events"], st["paid"]))
        log("bench: cgi %s x%d: %.0f req/s, p50 %.1f ms" % (provider, a.cgi_parallel, res["rps"],
                                                           res["p50_ms"]))
        return res

    # -- callgrind ----------------------------------------------------------------
    def callgrind_case(self, provider):
        a = self.a
        self.reset(provider, self.counts[(provider, "distinct")], a.states[-1])
        sock = os.path.join(self.sockdir, "cg-%s.sock" % provider)
        out = os.path.join(self.base, "callgrind.%s.out" % provider)
        logf = open(os.path.join(self.logdir, "callgrind-%s.log" % provider), "wb")
        p = subprocess.Popen(["valgrind", "--tool=callgrind", "--callgrind-out-file=" + out,
                              os.path.join(REPO, "paynotify-" + provider), "-c", self.conf,
                              "--listen", "unix:" + sock, "--workers", "0"],
                             stdin=subprocess.DEVNULL, stdout=logf, stderr=logf)
        _procs.append(("popen", p))
        wait_socket(sock, "callgrind " + provider, 60)
        reqs = []
        with open(self.reqfiles[(provider, "distinct")], "rb") as f:
            # skip the head of the file: a fresh range of events
            for _ in range(a.callgrind_requests + 1):
                l = f.readline()
                reqs.append(f.read(int(l)))
        ok = 0
        for raw in reqs[1:]:
            path, headers, body = split_request(raw)
            r = pntest.fcgi_request(sock, pntest.cgi_params("POST", path, headers, body), body,
                                    timeout=60)
            ok += r.status is not None and 200 <= r.status < 300
        p.send_signal(signal.SIGTERM)
        p.wait(60)
        n = len(reqs) - 1
        self.check("callgrind %s" % provider, ok == n, "%d of %d answered 200" % (ok, n))
        ann = subprocess.run(["callgrind_annotate", "--inclusive=yes", "--threshold=100", out],
                             stdout=subprocess.PIPE, stderr=subprocess.DEVNULL).stdout.decode()
        incl = {}
        for line in ann.splitlines():
            m = re.match(r"\s*([\d,]+)\s+(?:\([^)]*\)\s+)?(\S+?):(\w+)\s", line + " ")
            if m:
                name = m.group(3)
                v = int(m.group(1).replace(",", ""))
                incl[name] = max(incl.get(name, 0), v)

        def f(*names):
            return sum(incl.get(x, 0) for x in names)
        total = f("pn_pipeline_handle")
        verify = f("pn_rsa_verify", "pn_hmac", "pn_aes256gcm_decrypt", "pn_aes256ecb_decrypt")
        parse = f("pn_form_parse", "pn_json_parse", "pn_xml_parse_flat")
        db = f("pn_store_ingest") - f("connect_db")
        fcgi = f("FCGX_Accept_r") + f("FCGX_Finish_r")
        res = {"provider": provider, "requests": n, "total": total / n, "verify": verify / n,
               "parse": parse / n, "database": db / n, "connect_once": f("connect_db"),
               "other": (total - verify - parse - f("pn_store_ingest")) / n, "fastcgi": fcgi / n,
               "raw_headers_json": f("raw_headers_json") / n,
               "log": f("pn_log_request") / n}
        log("bench: callgrind %s: %.0f instructions/request (verify %.0f, parse %.0f, db %.0f, "
            "other %.0f; libfcgi accept/finish %.0f)" % (provider, res["total"], res["verify"],
                                                       res["parse"], res["database"],
                                                       res["other"], res["fastcgi"]))
        return res

    # -- driver -----------------------------------------------------------------
    def run(self):
        a = self.a
        self.setup()
        self.generate()
        self.minimal_file = None
        self.minimal_files = {}
        if "alipay" in a.providers and self.minimal:
            # the same Alipay requests, sent to the minimal responder's location
            # (the request line is inside each record: rewrite it): the
            # distinct set and the same duplicate stream, so that each
            # receiver's duplicates are set against the minimal responder's
            for ds in ("distinct", "dup5", "resend5"):
                if ("alipay", ds) not in self.reqfiles:
                    continue
                self.minimal_files[ds] = os.path.join(self.base, "req", "minimal-%s.req" % ds)
                with open(self.reqfiles[("alipay", ds)], "rb") as f, \
                        open(self.minimal_files[ds], "wb") as out:
                    while True:
                        l = f.readline()
                        if not l:
                            break
                        r = f.read(int(l)).replace(b"POST /notify/alipay/",
                                                   b"POST /notify/minimal/", 1)
                        out.write(b"%d\n" % len(r))
                        out.write(r)
            self.minimal_file = self.minimal_files["distinct"]
        for run in range(1, a.runs + 1):
            # a different state goes first in every run (no position bias)
            states = a.states[(run - 1) % len(a.states):] + a.states[:(run - 1) % len(a.states)]
            for state in states:
                for conc in a.conc:
                    cases = []
                    if self.minimal and self.minimal_file:
                        cases.append(("minimal", "alipay", "distinct", conc, state))
                    cases += [("receiver", p, "distinct", conc, state) for p in a.providers]
                    if a.dup and conc == max(a.conc):
                        for ds in ("dup5", "resend5"):
                            if ds in self.minimal_files:
                                cases.append(("minimal", "alipay", ds, conc, state))
                            cases += [("receiver", p, ds, conc, state) for p in a.providers]
                    # a different case goes first in every run (no position bias)
                    k = (run - 1) % len(cases)
                    for c in cases[k:] + cases[:k]:
                        self.results[c].append(self.http_case(*c[:4], run=run, state=state))
                if a.pgbench:
                    for variant in ("minimal", "ingest"):
                        self.results[("pgbench", variant, state)].append(
                            self.pgbench_case(run, state, variant))
            state = a.states[-1]
            for mode in (["unnamed"] if a.unnamed else []) + a.pgbouncer:
                ds = mode if mode == "unnamed" else "pgb-" + mode
                self.enter_state(state)
                self.set_pooler(mode)
                try:
                    for conc in a.conc:
                        for p in a.providers:
                            self.results[("receiver", p, ds, conc, state)].append(
                                self.http_case("receiver", p, ds, conc, run, state))
                finally:
                    self.set_pooler(None)
            if a.notify_variant and "alipay" in a.providers:
                # the same receiver with paynotify.notify = off (sql/003)
                self.set_notify(False)
                try:
                    for conc in a.conc:
                        self.results[("receiver", "alipay", "nonotify", conc, state)].append(
                            self.http_case("receiver", "alipay", "nonotify", conc, run, state))
                finally:
                    self.set_notify(True)
                if a.pgbench:
                    self.results[("pgbench", "ingest-nonotify", state)].append(
                        self.pgbench_case(run, state, "ingest", False))
        self.rss_end = {p: max(rss_kib(w) for w in self.receivers[p].workers())
                        for p in PROVIDERS}
        self.cgi = self.cgi_case() if a.cgi_seconds > 0 and "alipay" in a.providers else None
        self.cg = [self.callgrind_case(p) for p in a.providers] if a.callgrind else []

    # -- report -----------------------------------------------------------------
    def report(self):
        a = self.a
        med = statistics.median
        L = []
        L.append("## Results (%s, %d run%s of %d s each, medians)" % (
            time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), a.runs,
            "s" if a.runs > 1 else "", a.duration))
        L.append("")
        L.append("Machine: %d CPUs (%s), load average before the run %s; PostgreSQL %s "
                 "(fsync on, synchronous_commit on); %d FastCGI workers per receiver; wrk "
                 "%d threads; nginx worker_processes auto." % (
                     os.cpu_count(), cpu_model(), self.load_before,
                     self.pg.one("SHOW server_version")[0], a.workers, a.threads))
        L.append("")
        def pgb_med(variant, state, field="rps"):
            rs = self.results.get(("pgbench", variant, state))
            return med([r[field] for r in rs]) if rs else None
        ceil = {}
        own = {}
        for k, rs in self.results.items():
            if k[0] == "minimal":
                ceil[(k[2], k[3], k[4])] = med([r["rps"] for r in rs])
            elif k[2] == "distinct":
                own[(k[1], k[3], k[4])] = med([r["rps"] for r in rs])
        L.append("States: fresh = an empty schema just made by `paynotify migrate`, never "
                 "analysed, receiver sessions started in it; history = %d old notifications, "
                 "analysed.  Ratios are against the minimal responder and pgbench on ingest() "
                 "in the same state and run set; a ×5 duplicate set against the minimal "
                 "responder fed the same duplicate stream, and (in brackets) against the "
                 "same program's distinct rate." % a.history)
        L.append("")
        L.append("| state | case | conns | req/s | p50 ms | p99 ms | max ms | errors | vs minimal | "
                 "vs pgbench | CPU µs/notif (workers+pg+nginx) | WAL B/notif | WAL flushes/notif | "
                 "worker RSS KiB start→end | checks |")
        L.append("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|---|---|")
        keys = [k for k in self.results if k[0] != "pgbench"]
        order = {"minimal": 0, "receiver": 1}
        keys.sort(key=lambda k: (a.states.index(k[4]), k[3], order[k[0]], k[2],
                                 PROVIDERS.index(k[1])))
        for k in keys:
            rs = self.results[k]
            kind, p, ds, conc, state = k
            rps = med([r["rps"] for r in rs])
            name = ("minimal responder (ceiling a)" + {"dup5": " ×5 duplicates",
                                                        "resend5": " ×5 resent"}.get(ds, ""))\
                if kind == "minimal" else \
                p + {"dup5": " ×5 duplicates", "resend5": " ×5 resent",
                     "nonotify": ", paynotify.notify = off",
                     "unnamed": ", prepared_statements = off (direct)",
                     "pgb-session": " via pgbouncer session (prepared)",
                     "pgb-transaction": " via pgbouncer transaction (unnamed)"}.get(ds, "")
            errs = sum(r["non2xx"] + r["sock_err"] for r in rs)
            cw = med([r["cpu_us_per"]["workers"] for r in rs])
            cp = med([r["cpu_us_per"]["postgres"] for r in rs])
            cn = med([r["cpu_us_per"]["nginx"] for r in rs])
            cb = med([r["cpu_us_per"].get("pgbouncer", 0) for r in rs])
            rss = "—"
            if kind == "receiver":
                rss = "%d→%d" % (self.rss_start[p], max(r["rss_kib"] for r in rs))
            # a duplicate set against the minimal responder fed the same
            # duplicate stream; everything else against its distinct rate
            dupset = ds in ("dup5", "resend5")
            c = ceil.get((ds if dupset else "distinct", conc, state))
            vs_min = ("%.2f×" % (rps / c)) if c else "—"
            if dupset:
                d = (ceil.get(("distinct", conc, state)) if kind == "minimal"
                     else own.get((p, conc, state)))
                if d:
                    vs_min += " (%.2f× own distinct)" % (rps / d)
            pgb_tps = pgb_med("ingest", state)
            vs_pgb = ("%.2f×" % (rps / pgb_tps)) if pgb_tps else "—"
            L.append("| %s | %s | %d | %.0f | %.1f | %.1f | %.1f | %d | %s | %s | %.0f (%.0f+%.0f+%.0f%s) "
                     "| %.0f | %.2f | %s | %s |" % (
                         state, name, conc, rps, med([r["p50_ms"] for r in rs]),
                         med([r["p99_ms"] for r in rs]), med([r["max_ms"] for r in rs]), errs,
                         vs_min, vs_pgb, cw + cp + cn + cb, cw, cp, cn,
                         (" +%.0f pgbouncer" % cb) if ds.startswith("pgb-") else "",
                         med([r["wal_per"] for r in rs]),
                         med([r["wal_sync_per"] for r in rs]), rss,
                         "%d/%d ok" % (sum(r["ok"] for r in rs), len(rs))))
        pkeys = sorted((k for k in self.results if k[0] == "pgbench"),
                       key=lambda k: (a.states.index(k[2]), k[1]))
        for k in pkeys:
            rs = self.results[k]
            _, variant, state = k
            name = {"ingest": "pgbench `paynotify.ingest()` (ceiling b)",
                    "minimal": "pgbench minimal statement + raw body",
                    "ingest-nonotify": "pgbench `paynotify.ingest()`, paynotify.notify = off"}[variant]
            base = pgb_med("minimal", state)
            L.append("| %s | %s | %d clients | %.0f tps | avg %.2f | | | 0 | | %s | %.0f (postgres) "
                     "| %.0f | %.2f | | %d/%d ok |" % (
                         state, name, a.pgbench_clients, med([r["rps"] for r in rs]),
                         med([r["lat_avg_ms"] for r in rs]),
                         ("%.2f× minimal stmt" % (med([r["rps"] for r in rs]) / base))
                         if base and variant != "minimal" else "",
                         med([r["cpu_us_per"]["postgres"] for r in rs]),
                         med([r["wal_per"] for r in rs]), med([r["wal_sync_per"] for r in rs]),
                         sum(r["ok"] for r in rs), len(rs)))
        L.append("")
        L.append("Per run (req/s): " + "; ".join(
            "%s %s %s c=%d: %s" % (k[4], k[1] if k[0] == "receiver" else "minimal",
                                   k[2] if k[0] == "receiver" or k[2] != "distinct" else "",
                                   k[3],
                                   "/".join("%.0f" % r["rps"] for r in self.results[k]))
            for k in keys) + "".join(
            "; %s pgbench %s: %s" % (k[2], k[1], "/".join("%.0f" % r["rps"]
                                                          for r in self.results[k]))
            for k in pkeys))
        wr = [(k, r["wraps"]) for k in keys for r in self.results[k] if r["wraps"]]
        if wr:
            L.append("")
            L.append("Wrapped (a request file ran out and started again; the repeats were "
                     "duplicates): " + ", ".join("%s %s %s c=%d" % (k[4], k[1], k[2], k[3])
                                                 for k, _ in wr))
        L.append("")
        L.append("Worker RSS after all runs (max per receiver, KiB): " + ", ".join(
            "%s %d→%d" % (p, self.rss_start[p], self.rss_end[p]) for p in PROVIDERS))
        if a.pg_statements:
            L.append("")
            L.append("PostgreSQL per notification, by statement (`--pg-statements`: "
                     "pg_stat_statements, track = all, medians over the runs; nested "
                     "statements are inside their caller's time; `top` = what the client "
                     "sent) and by function (self time):")
            for k in keys + pkeys:
                runs = [r["pg_statements"] for r in self.results[k] if r.get("pg_statements")]
                if not runs:
                    continue
                name = " ".join(str(x) for x in k)
                L.append("")
                L.append("- %s:" % name)
                byq = collections.OrderedDict()
                for rs in runs:
                    for q in rs["statements"]:
                        byq.setdefault((q["top"], q["query"]), []).append(q)
                for (top, q), qs in byq.items():
                    if med([x["exec_us"] for x in qs]) < 0.5 and not top:
                        continue
                    L.append("  - %s %.2f calls, %.1f µs exec + %.1f µs plan, %.0f B WAL, "
                             "%.1f buffers: `%s`" % (
                                 "top" if top else "nested", med([x["calls"] for x in qs]),
                                 med([x["exec_us"] for x in qs]), med([x["plan_us"] for x in qs]),
                                 med([x["wal_b"] for x in qs]), med([x["blks"] for x in qs]),
                                 q.replace("`", "'")))
                bt = collections.defaultdict(list)
                for rs in runs:
                    for t, v in rs.get("cpu_by_type", {}).items():
                        bt[t].append(v)
                if bt:
                    L.append("  - PostgreSQL CPU µs by process: " + ", ".join(
                        "%s %.0f" % (t, med(v)) for t, v in sorted(bt.items(),
                                                                   key=lambda x: -med(x[1]))))
                byf = collections.OrderedDict()
                for rs in runs:
                    for f in rs["functions"]:
                        byf.setdefault(f["name"], []).append(f)
                L.append("  - functions (self µs / calls): " + ", ".join(
                    "%s %.1f / %.2f" % (n, med([x["self_us"] for x in fs]),
                                        med([x["calls"] for x in fs]))
                    for n, fs in byf.items()))
        if self.cgi:
            c = self.cgi
            L.append("")
            L.append("CGI mode (one process per request, %d in parallel, alipay): %.0f req/s, "
                     "p50 %.1f ms, p99 %.1f ms, %d requests, %d failures." % (
                         c["parallel"], c["rps"], c["p50_ms"], c["p99_ms"], c["ok"], c["bad"]))
        if self.cg:
            L.append("")
            L.append("Instructions per request (callgrind, inclusive, one FastCGI worker, "
                     "%d requests):" % self.cg[0]["requests"])
            L.append("")
            L.append("| receiver | pn_pipeline_handle | verify (crypto) | parse | database "
                     "(pn_store_ingest) | other | libfcgi accept+finish |")
            L.append("|---|---:|---:|---:|---:|---:|---:|")
            for c in self.cg:
                L.append("| %s | %.0f | %.0f | %.0f | %.0f | %.0f | %.0f |" % (
                    c["provider"], c["total"], c["verify"], c["parse"], c["database"],
                    c["other"], c["fastcgi"]))
        L.append("")
        L.append("Checks: %d passed, %d failed." % (self.checks - len(self.failures),
                                                    len(self.failures)))
        for f in self.failures:
            L.append("- FAILED " + f)
        return "\n".join(L)


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "?"


def main():
    ap = argparse.ArgumentParser(description="paynotify benchmark")
    ap.add_argument("--smoke", action="store_true",
                    help="a few seconds, stripe only, checks correctness")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--duration", type=int, default=10, help="seconds per wrk/pgbench run")
    ap.add_argument("--providers", default=",".join(PROVIDERS))
    ap.add_argument("--conc", default="16,64", help="wrk connections, comma separated")
    ap.add_argument("--workers", type=int, default=4, help="FastCGI workers per receiver")
    ap.add_argument("--threads", type=int, default=2, help="wrk and pgbench threads")
    ap.add_argument("--max-rate", type=int, default=RATE_CEILING,
                    help="the rate ceiling the run is sized for: distinct notifications "
                    "per second of a run to pre-sign (and 3 times as many orders per "
                    "second of a pgbench run); default %d, so that no request file "
                    "wraps and no order pool runs out on a fast machine" % RATE_CEILING)
    ap.add_argument("--pgbench-clients", type=int, default=None,
                    help="pgbench clients (default: --workers, the sessions of one receiver)")
    ap.add_argument("--no-dup", dest="dup", action="store_false")
    ap.add_argument("--no-pgbench", dest="pgbench", action="store_false")
    ap.add_argument("--no-minimal", dest="minimal", action="store_false")
    ap.add_argument("--no-notify-variant", dest="notify_variant", action="store_false",
                    help="skip Alipay and pgbench with paynotify.notify = off")
    ap.add_argument("--no-callgrind", dest="callgrind", action="store_false")
    ap.add_argument("--callgrind-requests", type=int, default=200)
    ap.add_argument("--history", type=int, default=50000,
                    help="old notifications in the history state (0: run the fresh state only)")
    ap.add_argument("--states", default="fresh,history",
                    help="database states to measure, comma separated: fresh (an empty schema "
                    "just migrated, never analysed) and/or history (--history old "
                    "notifications, analysed)")
    ap.add_argument("--pgbouncer", default="",
                    help="also run the receivers through Debian's pgbouncer in these pool "
                    "modes, comma separated: session (prepared_statements = on) and/or "
                    "transaction (prepared_statements = off); see docs/DEPLOYMENT.md")
    ap.add_argument("--unnamed", action="store_true",
                    help="also run the receivers directly with prepared_statements = off "
                    "(the cost of the unnamed statement without a pooler)")
    ap.add_argument("--cgi-seconds", type=int, default=5)
    ap.add_argument("--cgi-parallel", type=int, default=2)
    ap.add_argument("--minimal-binary", default=None)
    ap.add_argument("--gen-procs", type=int, default=os.cpu_count() or 2)
    ap.add_argument("--output", help="also write the report (markdown) here")
    ap.add_argument("--json", help="write every run's raw numbers here")
    ap.add_argument("--keep", action="store_true", help="keep the work dir")
    ap.add_argument("--pg-statements", action="store_true",
                    help="load pg_stat_statements (track = all) and track_functions = all, "
                    "and report per notification each statement's calls, execution time "
                    "and WAL and each function's self time (adds some cost itself: compare "
                    "only runs that both have it)")
    a = ap.parse_args()
    if a.smoke:
        a.runs, a.duration, a.providers, a.conc = 1, 2, "stripe", "16"
        a.pgbench = a.minimal = a.callgrind = a.notify_variant = False
        a.cgi_seconds = 0
        # the smoke's files are sized like every run's (RATE_CEILING x 3 s of
        # Stripe, HMAC-signed: about a second to make), so that a fast
        # machine never wraps them and every check runs
        a.max_rate = RATE_CEILING
        a.history = min(a.history, 5000)
    if a.pgbench_clients is None:
        a.pgbench_clients = a.workers
    if a.pgbench_clients < 1 or a.workers < 1:
        die("--workers and --pgbench-clients must be at least 1")
    a.states = [x for x in a.states.split(",") if x]
    if a.history == 0:
        a.states = [x for x in a.states if x != "history"] or ["fresh"]
    for x in a.states:
        if x not in ("fresh", "history"):
            die("unknown state %s (fresh, history)" % x)
    a.pgbouncer = [x for x in a.pgbouncer.split(",") if x]
    for x in a.pgbouncer:
        if x not in ("session", "transaction"):
            die("unknown pgbouncer pool mode %s (session, transaction)" % x)
    if a.pgbouncer and shutil.which("pgbouncer") is None and \
            not os.path.exists("/usr/sbin/pgbouncer"):
        die("pgbouncer is not installed (apt-get install pgbouncer)")
    a.providers = [p for p in a.providers.split(",") if p]
    a.conc = [int(c) for c in a.conc.split(",")]
    if not a.minimal:
        a.minimal_binary = None
    for p in a.providers:
        if p not in PROVIDERS:
            die("unknown provider %s" % p)
    for tool in ["wrk", "nginx", "psql"] + (["pgbench"] if a.pgbench else []) + \
            (["valgrind", "callgrind_annotate"] if a.callgrind else []):
        if shutil.which(tool) is None:
            die("%s is not installed (apt-get install wrk nginx-light postgresql valgrind)" % tool)

    def on_signal(signum, frame):
        sys.exit(128 + signum)
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    b = Bench(a)
    with open("/proc/loadavg") as f:
        b.load_before = " ".join(f.read().split()[:3])
    t0 = time.time()
    try:
        b.run()
        text = b.report()
    except Exception as e:
        import traceback
        traceback.print_exc()
        b.failures.append("bench aborted: %s" % e)
        text = "bench aborted: %s" % e
    finally:
        cleanup()
    print(text)
    log("bench: finished in %.0f s" % (time.time() - t0))
    if a.output:
        with open(a.output, "w") as f:
            f.write(text + "\n")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"results": {"|".join(map(str, k)): v for k, v in b.results.items()},
                       "cgi": getattr(b, "cgi", None), "callgrind": getattr(b, "cg", None),
                       "failures": b.failures}, f, indent=1, default=str)
    if a.smoke:
        print("bench-smoke: %d passed, %d failed" % (b.checks - len(b.failures),
                                                     max(len(b.failures),
                                                         0 if b.checks else 1)))
    return 1 if b.failures or not b.checks else 0


if __name__ == "__main__":
    sys.exit(main())
