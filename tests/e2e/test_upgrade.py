"""The upgrade from an older Debian package to this one, in a chroot.

A fresh minbase Debian 12 (the root filesystem scripts/fresh-debian caches:
$PN_FRESH_CACHE/paynotify-fresh-bookworm.tar, default /var/tmp) is unpacked
into a directory of its own with /proc, /sys and /dev mounted: the
machine's own dpkg state is never touched.  PostgreSQL is a throwaway
cluster of this test on 127.0.0.1 (the chroot shares the network).

  1. the OLDER package (PN_UPGRADE_OLD_DEB: .ci/run builds it from a fixed
     older commit with that commit's scripts/build-deb) installed with
     `apt-get install -y ./old.deb` (its dependencies from the mirror)
  2. as an operator of that package does: the configuration written into
     the conffile /etc/paynotify/paynotify.conf (the only place the old
     receivers read), the key files owned by paynotify; `paynotify
     migrate`; signed Stripe and Alipay notifications (`paynotify sign` of
     the old package) through the installed receivers (CGI, as user
     paynotify), the orders paid
  3. the upgrade, as README.Debian says, with no stdin: `apt-get install -y
     -o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold
     ./new.deb </dev/null`
  4. after it: `dpkg -s` says "install ok installed" at the new version,
     `dpkg --audit` has nothing, the edited conffile is byte for byte the
     operator's, /etc/paynotify/conf.d is root:paynotify 0750; `paynotify
     migrate` exits 0, `paynotify replay` verifies every stored
     notification (exit 0); the receivers in /usr/sbin answer (a new
     notification paid, the one from before the upgrade acked as a
     duplicate), and so do the old paths /usr/bin/paynotify-* (the
     compatibility links); every --version says the new version
  5. `dpkg -r` then `dpkg --purge`: no error; the operator's files stay

What a chroot cannot show is systemd as PID 1: the maintainer scripts'
`systemctl` branches are run against a recording systemctl and
deb-systemd-invoke placed first on PATH, with /run/systemd/system made
for the run: an upgrade's postinst try-restarts exactly the running
receivers and the confirm endpoint, a first install starts nothing, prerm
remove stops every loaded unit of ours, prerm upgrade stops none.  The
real upgrade and removal above run without systemd and must succeed.

Needs root, the two .deb files (PN_UPGRADE_OLD_DEB, PN_PACKAGE_DEB) and the
root filesystem; without them it skips saying so, and PN_REQUIRE_PACKAGE=1
(.ci/run) makes that a failure.  About 1-2 minutes (most of it apt fetching
the dependencies into the chroot).
"""

import os
import re
import shutil
import stat
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                "lib"))
import pntest  # noqa: E402
import pne2e  # noqa: E402

PG = None
ROOT = None
OLD_DEB = NEW_DEB = None
STATE = {}          # what setUpClass saw, for the tests


def tarball():
    return os.path.join(os.environ.get("PN_FRESH_CACHE") or "/var/tmp",
                        "paynotify-fresh-bookworm.tar")


def deb_version(deb):
    return subprocess.run(["dpkg-deb", "-f", deb, "Version"], stdout=subprocess.PIPE,
                          check=True, text=True).stdout.strip()


def setUpModule():
    global OLD_DEB, NEW_DEB
    OLD_DEB = os.environ.get("PN_UPGRADE_OLD_DEB")
    NEW_DEB = os.environ.get("PN_PACKAGE_DEB")
    missing = []
    if not pntest.IS_ROOT:
        missing.append("root (it makes a chroot)")
    if not OLD_DEB or not os.path.isfile(OLD_DEB):
        missing.append("PN_UPGRADE_OLD_DEB (the older .deb)")
    if not NEW_DEB or not os.path.isfile(NEW_DEB):
        missing.append("PN_PACKAGE_DEB (this tree's .deb)")
    if not os.path.isfile(tarball()):
        missing.append("%s (scripts/fresh-debian makes it)" % tarball())
    if missing:
        msg = "the upgrade test needs " + ", ".join(missing)
        if os.environ.get("PN_REQUIRE_PACKAGE") == "1":
            raise AssertionError(msg + ", and PN_REQUIRE_PACKAGE=1")
        raise unittest.SkipTest(msg)


def shipped_conffile(deb):
    """The bytes of /etc/paynotify/paynotify.conf in a .deb."""
    p = subprocess.run("dpkg-deb --fsys-tarfile '%s' | tar -xOf - ./etc/paynotify/paynotify.conf"
                       % deb, shell=True, stdout=subprocess.PIPE, check=True, timeout=60)
    return p.stdout


# ---- the chroot ---------------------------------------------------------------

def make_root():
    root = tempfile.mkdtemp(prefix="pnupgrade.", dir="/var/tmp")
    pntest.add_cleanup(lambda: remove_root(root))
    subprocess.run(["tar", "-C", root, "-xf", tarball()], check=True, timeout=300)
    shutil.copyfile("/etc/resolv.conf", os.path.join(root, "etc", "resolv.conf"))
    for argv in (["mount", "-t", "proc", "proc", root + "/proc"],
                 ["mount", "--rbind", "/sys", root + "/sys"],
                 ["mount", "--make-rslave", root + "/sys"],
                 ["mount", "--rbind", "/dev", root + "/dev"],
                 ["mount", "--make-rslave", root + "/dev"]):
        subprocess.run(argv, check=True, timeout=30)
    return root


def remove_root(root):
    """Kill what runs in it, detach every mount, then remove it (never
    through a mount)."""
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                if os.readlink("/proc/%s/root" % pid) == root:
                    os.kill(int(pid), 9)
            except OSError:
                pass
    for m in ("dev", "sys", "proc"):
        subprocess.run(["umount", "-R", "-l", os.path.join(root, m)],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    with open("/proc/mounts") as f:
        if (" %s/" % root) in f.read():
            sys.stderr.write("test_upgrade: mounts remain under %s; not removing it\n" % root)
            return
    subprocess.run(["rm", "-rf", "--one-file-system", root])


def inside(argv, user=None, env=None, stdin=b"", timeout=300):
    """Run argv in the chroot (as user, via runuser) with a clean
    environment plus env; stdin bytes (empty: /dev/null-like EOF)."""
    e = ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "LANG=C.UTF-8",
         "HOME=/root", "DEBIAN_FRONTEND=noninteractive"]
    e += ["%s=%s" % kv for kv in (env or {}).items()]
    cmd = ["chroot", ROOT]
    if user:
        cmd += ["/sbin/runuser", "-u", user, "--"]
    cmd += ["/usr/bin/env", "-i"] + e + list(argv)
    p = subprocess.run(cmd, input=stdin, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       timeout=timeout)
    return subprocess.CompletedProcess(argv, p.returncode, p.stdout.decode("utf-8", "replace"),
                                       p.stderr.decode("utf-8", "replace"))


def must(argv, **kw):
    p = inside(argv, **kw)
    if p.returncode != 0:
        raise AssertionError("%s exited %d:\n%s%s" % (" ".join(argv), p.returncode,
                                                     p.stdout[-4000:], p.stderr[-4000:]))
    return p


def ids(name):
    """uid and gid of name in the chroot's own /etc/passwd."""
    with open(os.path.join(ROOT, "etc", "passwd")) as f:
        for line in f:
            fields = line.split(":")
            if fields[0] == name:
                return int(fields[2]), int(fields[3])
    raise AssertionError("no user %s in the chroot" % name)


def dpkg_status():
    p = inside(["dpkg-query", "-W", "-f", "${Status}|${Version}", "paynotify"])
    return p.stdout if p.returncode == 0 else "not installed: " + p.stderr


# ---- the operator's configuration and traffic --------------------------------

CONF = "/etc/paynotify/paynotify.conf"
KEYDIR = "/etc/paynotify/demo"


def write_operator_config():
    """The demo site's configuration as the operator of the old package
    writes it: into the conffile, keys in /etc/paynotify/demo owned by
    paynotify (the receivers' user), mode 0600."""
    src = pne2e.demo_config(PG)
    d = os.path.dirname(src)
    keydir = ROOT + KEYDIR
    os.makedirs(keydir)
    uid, gid = ids("paynotify")
    for name in os.listdir(d):
        if name == "paynotify.conf":
            continue
        shutil.copy2(os.path.join(d, name), os.path.join(keydir, name))
        os.chown(os.path.join(keydir, name), uid, gid)
    os.chown(keydir, uid, gid)
    os.chmod(keydir, 0o700)
    with open(src) as f:
        text = f.read()
    text = re.sub(r"(?m)^(\S+_files?) = (.+)$",
                  lambda m: "%s = %s" % (m.group(1), " ".join(
                      KEYDIR + "/" + x for x in m.group(2).split())), text)
    text = re.sub(r"(?m)^conninfo = .*$", "conninfo = host=127.0.0.1 port=%d dbname=%s user=%s"
                  % (PG.port, PG.dbname, pntest.PG_USER), text)
    with open(ROOT + CONF, "w") as f:
        f.write("; the operator's settings (written by tests/e2e/test_upgrade.py)\n" + text)
    with open(ROOT + CONF, "rb") as f:
        return f.read()


def sign(provider, order, amount):
    p = must(["paynotify", "sign", provider, "--site", "demo", "--order", order,
              "--amount", amount, "--currency", pne2e.CURRENCY[provider]])
    head, body = p.stdout.encode("utf-8").split(b"\n\n", 1)
    lines = head.decode("utf-8").split("\n")
    method, path = lines[0].split(" ", 1)
    headers = dict(line.split(": ", 1) for line in lines[1:])
    return pne2e.Notification(path, headers, body[:-1])


def deliver(binary, n):
    """The notification to the installed receiver as Apache's CGI would run
    it, as user paynotify (who owns the keys)."""
    site_path = n.path.split("/notify/", 1)[1].split("/", 1)[1]
    params = pntest.cgi_params("POST", "/" + site_path, n.headers, n.body)
    p = inside([binary], user="paynotify", env=dict(params, PAYNOTIFY_CONFIG=CONF),
               stdin=n.body, timeout=60)
    return pntest.parse_cgi_response(p.stdout.encode("utf-8"), p.stderr)


def order(order_id, amount_minor, currency):
    PG.psql("INSERT INTO paynotify.orders (site, order_id, amount_minor, currency) "
            "VALUES ('demo', '%s', %d, '%s')" % (order_id, amount_minor, currency))


ACK = {"stripe": b'{"received":true}', "alipay": b"success"}


class TestUpgrade(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        global ROOT, PG
        PG = pntest.PgCluster(port=pne2e.free_port(), load_schema=False,
                              settings=["listen_addresses = '127.0.0.1'"]).start()
        ROOT = make_root()
        for deb, name in ((OLD_DEB, "old.deb"), (NEW_DEB, "new.deb")):
            shutil.copyfile(deb, os.path.join(ROOT, "root", name))
        must(["apt-get", "update", "-q"], timeout=600)
        # 1. the older package
        must(["apt-get", "install", "-y", "-q", "--no-install-recommends", "./root/old.deb"],
             timeout=900)
        STATE["old"] = dpkg_status()
        # 2. the operator's configuration, schema and paid orders
        STATE["conffile"] = write_operator_config()
        must(["paynotify", "migrate"])
        STATE["before"] = {}
        for provider, oid, minor, amount in (("stripe", "UPG-S1", 500, "5.00"),
                                             ("alipay", "UPG-A1", 1234, "12.34")):
            order(oid, minor, pne2e.CURRENCY[provider])
            n = sign(provider, oid, amount)
            r = deliver("/usr/bin/paynotify-" + provider, n)
            STATE["before"][provider] = (n, r, PG.order("demo", oid)["status"])
        # 3. the upgrade, as README.Debian says, with nothing on stdin
        p = inside(["apt-get", "install", "-y", "-q", "--no-install-recommends",
                    "-o", "Dpkg::Options::=--force-confdef",
                    "-o", "Dpkg::Options::=--force-confold", "./root/new.deb"], timeout=600)
        STATE["upgrade"] = p
        STATE["new"] = dpkg_status()

    def test_old_package_served(self):
        self.assertEqual(STATE["old"], "install ok installed|%s" % deb_version(OLD_DEB))
        self.assertNotEqual(deb_version(OLD_DEB), deb_version(NEW_DEB))
        # dpkg's order: the new version is newer
        self.assertEqual(subprocess.run(["dpkg", "--compare-versions", deb_version(NEW_DEB),
                                         "gt", deb_version(OLD_DEB)]).returncode, 0)
        for provider, (n, r, status) in STATE["before"].items():
            self.assertEqual((r.status, r.body), (200, ACK[provider]), r.stderr)
            self.assertEqual(status, "paid", provider)

    def test_upgrade_is_complete(self):
        p = STATE["upgrade"]
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        self.assertNotIn("end of file on stdin", p.stdout + p.stderr)
        self.assertEqual(STATE["new"], "install ok installed|%s" % deb_version(NEW_DEB))
        p = inside(["dpkg", "--audit"])
        self.assertEqual((p.returncode, p.stdout.strip()), (0, ""), p.stderr)

    def test_conffile_untouched_and_conf_d(self):
        with open(ROOT + CONF, "rb") as f:
            self.assertEqual(f.read(), STATE["conffile"])
        # when the shipped example changed between the two packages, dpkg
        # kept the operator's file (--force-confold) and put the new one
        # beside it; apt never asked
        if shipped_conffile(OLD_DEB) != shipped_conffile(NEW_DEB):
            with open(ROOT + CONF + ".dpkg-dist", "rb") as f:
                self.assertEqual(f.read(), shipped_conffile(NEW_DEB))
        st = os.stat(ROOT + "/etc/paynotify/conf.d")
        self.assertTrue(stat.S_ISDIR(st.st_mode))
        self.assertEqual((st.st_uid, st.st_gid, stat.S_IMODE(st.st_mode)),
                         (0, ids("paynotify")[1], 0o750))
        self.assertEqual(os.listdir(ROOT + "/etc/paynotify/conf.d"), [])

    def test_migrate_and_replay_after_upgrade(self):
        p = must(["paynotify", "migrate"])
        self.assertRegex(p.stdout, r"schema is at version \d+|applied ")
        p = inside(["paynotify", "replay", "--format", "csv"])
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        rows = [line for line in p.stdout.splitlines()[1:] if line]
        self.assertEqual(len(rows), 2, p.stdout)
        self.assertIn("2 verified, 0 not verified", p.stdout + p.stderr)

    def test_receivers_answer_after_upgrade(self):
        new = deb_version(NEW_DEB)
        for prog in ["/usr/bin/paynotify"] + ["/usr/sbin/paynotify-" + x for x in pne2e.PROVIDERS]:
            p = must([prog, "--version"])
            self.assertRegex(p.stdout, r"^%s %s\b" % (re.escape(os.path.basename(prog)),
                                                     re.escape(new)))
        for provider, (n, _, _) in STATE["before"].items():
            # the delivery from before the upgrade again: acked, counted once more
            r = deliver("/usr/sbin/paynotify-" + provider, n)
            self.assertEqual((r.status, r.body), (200, ACK[provider]), r.stderr)
        for binary, oid in (("/usr/sbin/paynotify-stripe", "UPG-S2"),
                            ("/usr/bin/paynotify-stripe", "UPG-S3")):   # the old path: a link
            order(oid, 700, "USD")
            r = deliver(binary, sign("stripe", oid, "7.00"))
            self.assertEqual((r.status, r.body), (200, ACK["stripe"]), r.stderr)
            self.assertEqual(PG.order("demo", oid)["status"], "paid", binary)
        self.assertEqual(PG.scalar("SELECT deliveries FROM paynotify.notifications "
                                   "WHERE site = 'demo' AND order_id = 'UPG-S1'"), "2")
        self.assertEqual(os.readlink(ROOT + "/usr/bin/paynotify-stripe"),
                         "../sbin/paynotify-stripe")

    def test_maintainer_scripts(self):
        """systemd is not PID 1 in a chroot, so the scripts are run here
        against a recording systemctl/deb-systemd-invoke (on PATH first)
        and a /run/systemd/system that says systemd is up: an upgrade's
        postinst try-restarts exactly the running receivers and the
        confirm endpoint; prerm remove stops every loaded unit of ours;
        nothing is started; both succeed."""
        stub = ROOT + "/tmp/pn-systemd-stub"
        os.makedirs(stub, exist_ok=True)
        log = stub + "/log"
        units = ("paynotify@alipay.service loaded active running paynotify alipay\n"
                 "paynotify@stripe.service loaded active running paynotify stripe\n"
                 "paynotify-confirm.service loaded active running confirm\n"
                 "paynotify@alipay.socket loaded active listening socket\n"
                 "paynotify-query.timer loaded active waiting timer\n")
        scripts = {
            "systemctl": 'echo "systemctl $*" >> /tmp/pn-systemd-stub/log\n'
                         'case "$1" in list-units) printf "%s" "$UNITS" ;; esac\n',
            "deb-systemd-invoke": 'echo "deb-systemd-invoke $*" >> /tmp/pn-systemd-stub/log\n',
            "deb-systemd-helper": 'echo "deb-systemd-helper $*" >> /tmp/pn-systemd-stub/log\n'
                                  'exit 1\n',
        }
        for name, body in scripts.items():
            with open(stub + "/" + name, "w") as f:
                f.write("#!/bin/sh\n" + body)
            os.chmod(stub + "/" + name, 0o755)
        made_run = not os.path.isdir(ROOT + "/run/systemd/system")
        os.makedirs(ROOT + "/run/systemd/system", exist_ok=True)
        env = {"PATH": "/tmp/pn-systemd-stub:/usr/sbin:/usr/bin:/sbin:/bin", "UNITS": units}
        info = "/var/lib/dpkg/info/paynotify."
        try:
            def run(script, *args):
                if os.path.exists(log):
                    os.unlink(log)
                cmd = ["/usr/bin/env", "-i"] + ["%s=%s" % kv for kv in env.items()]
                p = subprocess.run(["chroot", ROOT] + cmd + [info + script] + list(args),
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=120)
                self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
                if not os.path.exists(log):         # no stub was called at all
                    return []
                with open(log) as f:
                    return f.read().splitlines()
            calls = run("postinst", "configure", deb_version(OLD_DEB))
            self.assertIn("systemctl --system daemon-reload", calls)
            invoked = [c for c in calls if c.startswith("deb-systemd-invoke")]
            self.assertEqual(invoked, ["deb-systemd-invoke try-restart paynotify@alipay.service "
                                       "paynotify@stripe.service paynotify-confirm.service"],
                             calls)
            calls = run("postinst", "configure")          # a first install: nothing started
            self.assertEqual([c for c in calls if c.startswith("deb-systemd-invoke")], [], calls)
            self.assertFalse([c for c in calls if re.search(r"systemctl .*(start|enable)", c)])
            calls = run("prerm", "remove")
            stops = [c for c in calls if c.startswith("deb-systemd-invoke stop paynotify@")]
            self.assertEqual(len(stops), 1, calls)
            for unit in ("paynotify@alipay.service", "paynotify@stripe.service",
                         "paynotify-confirm.service", "paynotify@alipay.socket",
                         "paynotify-query.timer"):
                self.assertIn(unit, stops[0].split())
            calls = run("prerm", "upgrade", deb_version(NEW_DEB))   # an upgrade stops nothing
            self.assertFalse([c for c in calls if " stop paynotify@" in c], calls)
        finally:
            shutil.rmtree(stub, ignore_errors=True)
            if made_run:
                shutil.rmtree(ROOT + "/run/systemd", ignore_errors=True)

    def test_zz_remove_and_purge(self):
        p = inside(["dpkg", "-r", "paynotify"], timeout=120)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        self.assertTrue(dpkg_status().startswith("deinstall ok config-files|"), dpkg_status())
        with open(ROOT + CONF, "rb") as f:    # a conffile stays until purge
            self.assertEqual(f.read(), STATE["conffile"])
        p = inside(["dpkg", "--purge", "paynotify"], timeout=120)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        self.assertFalse(os.path.exists(ROOT + CONF))
        self.assertFalse(os.path.exists(ROOT + "/etc/paynotify/conf.d"))     # it was empty
        self.assertTrue(os.path.isfile(ROOT + KEYDIR + "/stripe-whsec"))    # the operator's


if __name__ == "__main__":
    unittest.main()
