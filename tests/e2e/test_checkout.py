"""The README's two commands from a checkout in a 0700 directory.

As root, Debian's home directories are 0700 (/root) and a newcomer clones
there; PostgreSQL (run as nobody), nginx's and Apache's workers (nobody)
cannot traverse it.  This copies the built tree (mtimes kept, so make has
nothing to do) into a `mktemp -d` directory of mode 0700 and runs, from
there:

  - `scripts/up` (state in its own directory under /var/tmp, addressed by
    its real path), a request through its nginx, `scripts/up --stop`
  - `scripts/test tests/e2e/test_webservers.py` narrowed to the Apache CGI
    tests (Apache execs the receivers as nobody: they must be reached
    outside the checkout); also the documented one-file form: it runs that
    file only, without the valgrind, sanitize and bench legs

Only as root (as another user the servers run as that user, who can reach
the checkout).
"""

import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                "lib"))
import pntest  # noqa: E402
import pne2e  # noqa: E402

TOP = COPY = None


def setUpModule():
    global TOP, COPY
    if not pntest.IS_ROOT:
        raise unittest.SkipTest("only as root: another user's servers run as that user")
    TOP = tempfile.mkdtemp(prefix="pn0700.")
    pntest.add_cleanup(lambda: shutil.rmtree(TOP, ignore_errors=True))
    os.chmod(TOP, 0o700)
    COPY = os.path.join(TOP, "paynotify")
    os.mkdir(COPY)
    tar = subprocess.run(
        "tar -C %s --exclude=./.git --exclude=./run --exclude=./build-asan -cf - . "
        "| tar -C %s -xpf -" % (shlex.quote(pntest.REPO), shlex.quote(COPY)),
        shell=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=120)
    if tar.returncode != 0:
        raise AssertionError("copying the tree failed:\n" + tar.stdout.decode())
    check = subprocess.run(["runuser", "-u", "nobody", "--", "test", "-x", COPY])
    assert check.returncode != 0, "the copy must not be reachable by nobody"


def run(argv, log, timeout, env=None):
    with open(log, "wb") as f:
        p = subprocess.run(argv, cwd=COPY, stdin=subprocess.DEVNULL, stdout=f,
                           stderr=subprocess.STDOUT, timeout=timeout,
                           env=pntest.clean_env(env))
    with open(log, "rb") as f:
        return p.returncode, f.read().decode("utf-8", "replace")


class ReadmeCommandsFrom0700(unittest.TestCase):

    def test_scripts_up_request_and_stop(self):
        port = pne2e.free_port()
        log = os.path.join(TOP, "up.log")
        state = []

        def stop():
            run([os.path.join(COPY, "scripts", "up"), "--stop"], log + ".stop", 120)
            for d in state:
                shutil.rmtree(d, ignore_errors=True)
        self.addCleanup(stop)
        rc, out = run([os.path.join(COPY, "scripts", "up")], log, 400,
                      {"PN_DEMO_PORT": str(port)})
        if os.path.islink(os.path.join(COPY, "run")):
            state.append(os.path.realpath(os.path.join(COPY, "run")))
        self.assertEqual(rc, 0, out)
        self.assertIn("Up.", out)
        real = os.path.realpath(os.path.join(COPY, "run"))
        self.assertTrue(real.startswith("/var/tmp/paynotify-demo."), real)
        self.assertFalse(real.startswith(TOP))
        # one signed notification per provider, each paid
        self.assertEqual(len(re.findall(r"\| paid +\|", out)), 4, out)
        # and a request by hand through its nginx
        r = pne2e.http(port, "GET", "/notify/stripe/demo")
        self.assertEqual((r.status, r.body), (200, b"ok\n"), r)
        rc, out = run([os.path.join(COPY, "scripts", "up"), "--stop"], log + ".stop", 120)
        self.assertEqual(rc, 0, out)
        self.assertRaises(OSError, pne2e.http, port, "GET", "/notify/stripe/demo", timeout=3)
        for p in pne2e.PROVIDERS:
            self.assertFalse(os.path.exists(os.path.join(real, "sock", p + ".sock")),
                             "the receivers removed their sockets on the stop")

    def test_scripts_test_apache_cgi(self):
        log = os.path.join(TOP, "test.log")
        rc, out = run([os.path.join(COPY, "scripts", "test"), "tests/e2e/test_webservers.py"],
                      log, 400, {"PN_TEST_FILTER": "TestApacheCgi"})
        last = out.rstrip("\n").rsplit("\n", 1)[-1]
        m = re.match(r"^(\d+) passed, (\d+) failed$", last)
        self.assertTrue(m, out)
        self.assertEqual(rc, 0, out)
        self.assertEqual(m.group(2), "0", out)
        self.assertGreaterEqual(int(m.group(1)), 8, out)
        self.assertIn("TestApacheCgi", out)
        self.assertNotIn("TestNginx", out, "PN_TEST_FILTER narrows the file")
        # the one-file form ran that file only, no long legs
        self.assertIn("valgrind: skipped", out)
        self.assertIn("sanitize: skipped", out)
        self.assertIn("bench smoke: skipped", out)
        self.assertIn("unit: skipped", out)
        self.assertNotIn("test_process.py", out)


if __name__ == "__main__":
    unittest.main()
