"""The confirm endpoint as the shop calls it (docs/SHOP-ORDERS.md "The buyer
returns: confirm"): the Python and PHP callers of that page, extracted from
it and run as written, against the real `paynotify confirm` (FastCGI,
--listen unix:) behind real nginx with the shipped
conf/nginx/paynotify-confirm.conf (only the socket directory replaced), on
127.0.0.1.  Each caller gets a paid order's status, a closed one's, 404 for
an unknown order and 403 with another key; a request from an address the
snippet does not allow is refused by nginx.  (The endpoint's own cases,
provider asks, timeouts and rate limit: tests/integration/test_confirm.py.)
"""

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                "lib"))
import pntest  # noqa: E402
import pne2e  # noqa: E402
import pnkit  # noqa: E402

DOC = os.path.join(pntest.REPO, "docs", "SHOP-ORDERS.md")
ADMIN = os.path.join(os.environ.get("PN_BIN_DIR") or pntest.REPO, "paynotify")
SITE = pnkit.SITE
KEY = "5e1f0c9a8b7d6e5f4a3b2c1d0e9f8a7b6c5d4e3f2a1b0c9d8e7f6a5b4c3d2e1f"
PG = NGINX = PROC = None
SOCKDIR = None


def example(lang):
    with open(DOC) as f:
        text = f.read()
    m = re.search(r"<!-- confirm-example\.%s begin -->\n```%s\n(.*?)```\n"
                  r"<!-- confirm-example\.%s end -->" % (lang, "python" if lang == "py" else lang,
                                                         lang), text, re.S)
    assert m, "the %s example is missing from docs/SHOP-ORDERS.md" % lang
    return m.group(1)


def setUpModule():
    global PG, NGINX, PROC, SOCKDIR
    pntest.need("nginx", "nginx-light")
    PG = pntest.module_database()
    cfg = pnkit.write_all_config(PG)
    pntest.write_secret(os.path.join(cfg.dir, "confirm.key"), KEY + "\n")
    with open(cfg.path, "a") as f:
        f.write("confirm.secret_file = confirm.key\n")     # the last section is the site's
    SOCKDIR = pne2e.run_dir("pnconfirm-sock.")
    log = open(os.path.join(SOCKDIR, "confirm.log"), "wb")
    PROC = subprocess.Popen(pntest.valgrind_argv(
        [ADMIN, "-c", cfg.path, "confirm", "--listen", "unix:%s/confirm.sock" % SOCKDIR,
         "--workers", "2", "--socket-mode", "0666"]),
        stdin=subprocess.DEVNULL, stdout=log, stderr=log, cwd="/", env=pntest.clean_env(),
        start_new_session=True)
    pntest.add_cleanup(stop)
    deadline = time.monotonic() + pntest.patience(30)
    while not os.path.exists(os.path.join(SOCKDIR, "confirm.sock")):
        if PROC.poll() is not None or time.monotonic() > deadline:
            with open(os.path.join(SOCKDIR, "confirm.log")) as f:
                raise RuntimeError("paynotify confirm did not start:\n" + f.read())
        time.sleep(0.05)
    NGINX = pne2e.Nginx(SOCKDIR, snippets=("paynotify-confirm.conf",)).start()


def stop():
    if PROC is not None and PROC.poll() is None:
        pntest.wait_sigterm_ready([PROC])
        PROC.terminate()
        try:
            PROC.wait(timeout=pntest.patience(20))
        except subprocess.TimeoutExpired:
            PROC.kill()


def tearDownModule():
    if NGINX is not None:
        NGINX.stop()
    stop()
    if PG is not None:
        PG.destroy()


def url():
    return "http://127.0.0.1:%d/paynotify-confirm" % NGINX.port


class Callers(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        PG.reset()
        PG.add_order(SITE, "A-1001", 6600, "CNY", status="paid")
        PG.add_order(SITE, "A-1002", 1250, "CNY", status="closed")
        cls.dir = tempfile.mkdtemp(prefix="pnconfirm-ex.")
        pntest.add_cleanup(lambda: shutil.rmtree(cls.dir, ignore_errors=True))

    def python(self, site, oid, key):
        path = os.path.join(self.dir, "confirm_example.py")
        with open(path, "w") as f:
            f.write(example("py"))
            f.write("\nimport sys\nprint(json.dumps(paynotify_confirm(sys.argv[1], sys.argv[2], "
                    "sys.argv[3], url=sys.argv[4])))\n")
        p = subprocess.run(["/usr/bin/python3", path, site, oid, key, url()],
                           capture_output=True, text=True, timeout=60)
        self.assertEqual(p.returncode, 0, p.stderr)
        return json.loads(p.stdout)

    def php(self, site, oid, key):
        exe = pntest.need("php", "php-cli")
        path = os.path.join(self.dir, "confirm_example.php")
        with open(path, "w") as f:
            f.write(example("php"))
            f.write("\necho json_encode(paynotify_confirm($argv[1], $argv[2], $argv[3], "
                    "$argv[4])), \"\\n\";\n")
        p = subprocess.run([exe, path, site, oid, key, url()], capture_output=True, text=True,
                           timeout=60)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        return json.loads(p.stdout)

    def check(self, call):
        a = call(SITE, "A-1001", KEY)
        self.assertEqual((a["http"], a["status"], a["amount"], a["source"], a["asked"]),
                         (200, "paid", "66.00 CNY", "stored", False), a)
        a = call(SITE, "A-1002", KEY)
        self.assertEqual((a["http"], a["status"]), (200, "closed"), a)
        a = call(SITE, "A-9999", KEY)
        self.assertEqual((a["http"], a["error"]), (404, "no such order"), a)
        a = call(SITE, "A-1001", "0" * 64)
        self.assertEqual(a["http"], 403, a)
        self.assertNotIn("status", a)

    def test_python_example(self):
        self.check(self.python)

    def test_php_example(self):
        self.check(self.php)


class Snippet(unittest.TestCase):
    def test_only_localhost_may_ask(self):
        # the same nginx reached on another loopback address: not 127.0.0.1
        # or ::1, so the snippet's allow list refuses it before FastCGI
        r = subprocess.run(["curl", "-s", "-o", "/dev/null", "-w", "%{http_code}",
                            "--interface", "127.0.0.2",
                            "http://127.0.0.1:%d/paynotify-confirm" % NGINX.port],
                           capture_output=True, text=True, timeout=30)
        self.assertEqual(r.stdout, "403", r.stderr)


if __name__ == "__main__":
    unittest.main()
