# test_package.py: the INSTALLED Debian package (scripts/build-deb, dpkg -i;
# .ci/run does both before scripts/test).  Everything here runs the files
# the package put on the machine, never the tree's build:
#   - the installed units pass systemd-analyze verify (with /usr/bin paths)
#   - the files: the receivers in /usr/sbin (compatibility links in
#     /usr/bin), paynotify in /usr/bin, the SQL in
#     /usr/share/paynotify/sql (the tree's sql/ files, byte for byte), the
#     snippets, units, man pages (paynotify-<provider>(8) links), docs the
#     units name; /etc/paynotify/paynotify.conf a conffile, root:paynotify
#     0640 in a 0750 directory, conf.d root:paynotify 0750 and empty; the
#     system user paynotify
#   - the package's version is scripts/version of this tree (it grows with
#     every commit) and --version of every installed program says it; their
#     compiled-in configuration is
#     /etc/paynotify/paynotify.conf, as the man pages, the units and the
#     README say for the package
#   - `paynotify migrate` without --sql-dir applies the installed SQL to a
#     throwaway PostgreSQL; again: nothing to do
#   - the shipped example configuration, its key files put in place and its
#     conninfo pointed at that database, passes `paynotify check-config`;
#     as shipped (no key files) it fails naming the first missing file
#   - a signed notification through nginx with the INSTALLED snippet to the
#     INSTALLED receiver running as the package's user paynotify: applied,
#     acked; the duplicate counted; the health check 200; the same through
#     the installed Apache snippets (mod_proxy_fcgi, and CGI running
#     /usr/bin/paynotify-alipay)
#   - the shipped timers (query, query-sweep, stats, purge): systemd-analyze
#     verify; not enabled; each service's ExecStart= run as written as its
#     User= paynotify (only the configuration and /var/lib/paynotify moved to
#     the test's), exit 0; the stats unit's ExecStopPost= puts the file into
#     node_exporter's directory
#   - the maintainer scripts: restart running receivers after an upgrade,
#     stop them on removal (the upgrade itself: tests/e2e/test_upgrade.py)
#   - lintian has nothing to say about the .deb (PN_PACKAGE_DEB, set by .ci/run)
# Without the package installed the tests skip, saying how to install it;
# PN_REQUIRE_PACKAGE=1 (.ci/run) makes that a failure instead.

import grp
import os
import pwd
import re
import shutil
import stat
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import pntest  # noqa: E402
import pne2e  # noqa: E402

REPO = pntest.REPO
BIN = "/usr/bin"
SBIN = "/usr/sbin"
SHARE = "/usr/share/paynotify"
DOC = "/usr/share/doc/paynotify"
ETC = "/etc/paynotify"
UNITDIR = "/lib/systemd/system"
RECEIVERS = ["paynotify-" + p for p in pne2e.PROVIDERS]
PROGRAMS = ["paynotify"] + RECEIVERS
TIMERS = ("paynotify-query", "paynotify-query-sweep", "paynotify-stats", "paynotify-purge")


def program_path(prog):
    return os.path.join(BIN if prog == "paynotify" else SBIN, prog)
UNIT_KEYS = pne2e.UNIT_KEYS

PG = None


package_version = pne2e.package_version


def source_version():
    """scripts/version of this tree: what scripts/build-deb built."""
    p = subprocess.run(["sh", os.path.join(REPO, "scripts", "version")], stdout=subprocess.PIPE,
                       text=True, timeout=60, check=True)
    return p.stdout


def run(argv, env=None, user=None, timeout=60):
    if user is not None:
        argv = ["runuser", "-u", user, "--"] + argv
    return subprocess.run(argv, env=env or pntest.clean_env(), stdin=subprocess.DEVNULL,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          timeout=timeout)


def setUpModule():
    global PG
    if package_version() is None:
        msg = ("the paynotify Debian package is not installed (scripts/build-deb && "
               "dpkg -i build/deb/paynotify_*.deb; .ci/run does this)")
        if os.environ.get("PN_REQUIRE_PACKAGE") == "1":
            raise AssertionError(msg + ", and PN_REQUIRE_PACKAGE=1")
        raise unittest.SkipTest(msg)
    if not pntest.IS_ROOT:
        raise unittest.SkipTest("needs root (runs the receiver as the package's user)")
    PG = pntest.PgCluster(load_schema=False).start()


def write_db_config():
    """A configuration for the throwaway database (every configuration needs
    a site: the demo one)."""
    return pne2e.demo_config(PG)


def ensure_schema():
    p = run([BIN + "/paynotify", "-c", write_db_config(), "migrate"])
    if p.returncode != 0:
        raise AssertionError("migrate failed: %s%s" % (p.stdout, p.stderr))
    return p


class TestInstalledFiles(unittest.TestCase):
    def test_package_version_is_the_tree_version(self):
        self.assertEqual(package_version(), source_version())

    def test_programs_in_usr_bin_receivers_in_usr_sbin(self):
        for prog in PROGRAMS:
            path = program_path(prog)
            self.assertTrue(os.access(path, os.X_OK), path)
            self.assertFalse(os.path.islink(path), path)
            self.assertEqual(os.stat(path).st_uid, 0, path)
        # the paths of the older packages stay, as links (debian/changelog)
        for prog in RECEIVERS:
            self.assertEqual(os.readlink(os.path.join(BIN, prog)), "../sbin/" + prog)

    def test_version_grows(self):
        """dpkg's version is BASE+N.gHASH with N the commit count: above
        every earlier build (0.1.0, the first packages, included)."""
        v = package_version()
        m = re.fullmatch(r"(\d+\.\d+\.\d+)\+(\d+)\.g([0-9a-f]{7,})(\.dirty)?", v)
        self.assertIsNotNone(m, v)
        self.assertEqual(subprocess.run(["dpkg", "--compare-versions", v, "gt", "0.1.0"]).returncode,
                         0)
        if shutil.which("git") and os.path.isdir(os.path.join(REPO, ".git")) or \
                os.path.isfile(os.path.join(REPO, ".git")):
            count = subprocess.run(["git", "-C", REPO, "rev-list", "--count", "HEAD"],
                                   stdout=subprocess.PIPE, text=True, check=True).stdout.strip()
            self.assertEqual(m.group(2), count)
            older = "%s+%d.g0000000" % (m.group(1), int(count) - 1)
            self.assertEqual(subprocess.run(["dpkg", "--compare-versions", v, "gt",
                                             older]).returncode, 0)

    def test_version_of_every_installed_program(self):
        for prog in PROGRAMS:
            p = run([program_path(prog), "--version"])
            self.assertEqual(p.returncode, 0, p.stderr)
            self.assertRegex(p.stdout, r"^%s %s\b" % (re.escape(prog),
                                                       re.escape(source_version())))

    def test_compiled_in_configuration_is_etc_paynotify(self):
        for prog in PROGRAMS:
            p = run([program_path(prog), "--help"])
            self.assertEqual(p.returncode, 0, p.stderr)
            self.assertIn("/etc/paynotify/paynotify.conf", p.stdout, prog)
            self.assertNotIn("/usr/local", p.stdout, prog)
        # what the installed units and man pages say
        with open(os.path.join(UNITDIR, "paynotify@.service")) as f:
            unit = f.read()
        self.assertIn("Environment=PAYNOTIFY_CONFIG=/etc/paynotify/paynotify.conf\n", unit)
        self.assertIn("ExecStart=/usr/sbin/paynotify-%i ", unit)
        self.assertIn("ReadOnlyPaths=/etc/paynotify\n", unit)
        for page in ("man1/paynotify.1.gz", "man5/paynotify.conf.5.gz",
                     "man8/paynotify-receiver.8.gz"):
            text = subprocess.run(["zcat", "/usr/share/man/" + page], stdout=subprocess.PIPE,
                                  check=True).stdout.decode()
            self.assertIn("/etc/paynotify/paynotify.conf", text, page)
            self.assertNotIn("/usr/local", text, page)
            self.assertNotIn("@", re.sub(r"paynotify@|\\\(at|\.\\\"[^\n]*", "", text), page)

    def test_sql_is_the_trees(self):
        tree = sorted(f for f in os.listdir(os.path.join(REPO, "sql")) if f.endswith(".sql"))
        installed = sorted(os.listdir(os.path.join(SHARE, "sql")))
        self.assertEqual(installed, tree)
        for f in tree:
            with open(os.path.join(REPO, "sql", f), "rb") as a, \
                    open(os.path.join(SHARE, "sql", f), "rb") as b:
                self.assertEqual(a.read(), b.read(), f)

    def test_snippets_units_docs_man(self):
        for path in (SHARE + "/nginx/paynotify.conf", SHARE + "/apache/paynotify.conf",
                     SHARE + "/apache/paynotify-cgi.conf", SHARE + "/paynotify.conf.example",
                     SHARE + "/nginx/paynotify-confirm.conf",
                     UNITDIR + "/paynotify@.service", UNITDIR + "/paynotify@.socket",
                     *[UNITDIR + "/paynotify-confirm" + k for k in (".service", ".socket")],
                     *[UNITDIR + "/" + t + k for t in TIMERS for k in (".timer", ".service")],
                     DOC + "/README.md", DOC + "/DATABASE.md", DOC + "/OPERATIONS.md",
                     DOC + "/README.Debian", DOC + "/copyright"):
            self.assertTrue(os.path.isfile(path), path)
        # every file: document of the units exists
        for unit in ["paynotify@.service", "paynotify@.socket", "paynotify-confirm.service",
                     "paynotify-confirm.socket"] + \
                [t + k for t in TIMERS for k in (".timer", ".service")]:
            with open(os.path.join(UNITDIR, unit)) as f:
                for m in re.finditer(r"Documentation=(.*)", f.read()):
                    for ref in m.group(1).split():
                        if ref.startswith("file:"):
                            self.assertTrue(os.path.isfile(ref[5:]), ref)
                        elif ref.startswith("man:"):
                            name, sec = re.match(r"man:([^(]+)\((\d)\)", ref).groups()
                            self.assertTrue(os.path.exists(
                                "/usr/share/man/man%s/%s.%s.gz" % (sec, name, sec)), ref)
        for p in pne2e.PROVIDERS:
            link = "/usr/share/man/man8/paynotify-%s.8.gz" % p
            self.assertEqual(os.path.realpath(link), "/usr/share/man/man8/paynotify-receiver.8.gz")
        # the installed CGI snippet names the installed binaries and config
        with open(SHARE + "/apache/paynotify-cgi.conf") as f:
            cgi = f.read()
        self.assertIn("ScriptAlias /notify/stripe /usr/sbin/paynotify-stripe\n", cgi)
        self.assertIn("SetEnv PAYNOTIFY_CONFIG /etc/paynotify/paynotify.conf\n", cgi)
        with open(SHARE + "/nginx/paynotify.conf") as f:
            self.assertIn("include /usr/share/paynotify/nginx/paynotify.conf;", f.read())

    def test_installed_units_verify(self):
        exe = pntest.need("systemd-analyze", "systemd")
        d = pne2e.run_dir("pnpkg-units.")
        files = []
        for p in pne2e.PROVIDERS:   # the installed templates, instantiated as systemd would
            for kind in ("service", "socket"):
                dst = os.path.join(d, "paynotify@%s.%s" % (p, kind))
                shutil.copyfile(os.path.join(UNITDIR, "paynotify@." + kind), dst)
                files.append(dst)
        files += [os.path.join(UNITDIR, t + k) for t in TIMERS for k in (".timer", ".service")]
        files += [os.path.join(UNITDIR, "paynotify-confirm" + k) for k in (".service", ".socket")]
        p = subprocess.run([exe, "verify", "--man=no"] + files, cwd=d, stdin=subprocess.DEVNULL,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=60,
                           env=pntest.clean_env())
        out = p.stdout.decode("utf-8", "replace")
        ours = [line for line in out.splitlines() if "paynotify" in line or d in line]
        self.assertEqual((p.returncode, ours), (0, []), out)

    def test_configuration_conffile_and_permissions(self):
        p = run(["dpkg-query", "-W", "-f", "${Conffiles}", "paynotify"])
        self.assertIn("/etc/paynotify/paynotify.conf ", p.stdout)
        st = os.stat(ETC)
        self.assertEqual(stat.S_IMODE(st.st_mode), 0o750)
        self.assertEqual((st.st_uid, grp.getgrgid(st.st_gid).gr_name), (0, "paynotify"))
        st = os.stat(ETC + "/paynotify.conf")
        self.assertEqual(stat.S_IMODE(st.st_mode), 0o640)
        self.assertEqual((st.st_uid, grp.getgrgid(st.st_gid).gr_name), (0, "paynotify"))
        # the live settings' directory: made by the postinst, no file shipped in it
        st = os.stat(ETC + "/conf.d")
        self.assertTrue(stat.S_ISDIR(st.st_mode))
        self.assertEqual(stat.S_IMODE(st.st_mode), 0o750)
        self.assertEqual((st.st_uid, grp.getgrgid(st.st_gid).gr_name), (0, "paynotify"))
        p = run(["dpkg", "-S", ETC + "/conf.d"])
        self.assertNotEqual(p.returncode, 0, "the package ships " + p.stdout)

    def test_maintainer_scripts(self):
        """What the maintainer scripts do with systemd (restart running
        receivers after an upgrade, stop every receiver, socket and timer on
        removal; start nothing) is in them; without systemd as PID 1 it
        cannot run here (tests/e2e/test_upgrade.py runs the upgrade itself)."""
        with open("/var/lib/dpkg/info/paynotify.postinst") as f:
            postinst = f.read()
        with open("/var/lib/dpkg/info/paynotify.prerm") as f:
            prerm = f.read()
        self.assertIn("deb-systemd-invoke try-restart $units", postinst)
        self.assertNotRegex(postinst, r"deb-systemd-invoke (start|restart)\b")
        # nothing enabled by the installation
        for d in ("timers.target.wants", "sockets.target.wants", "multi-user.target.wants"):
            path = os.path.join("/etc/systemd/system", d)
            names = os.listdir(path) if os.path.isdir(path) else []
            self.assertEqual([n for n in names if n.startswith("paynotify")], [], path)
        self.assertIn("list-units --all --plain --no-legend 'paynotify@*' 'paynotify-*'", prerm)
        self.assertIn("deb-systemd-invoke stop $units", prerm)
        p = subprocess.run(["sh", "-n", "/var/lib/dpkg/info/paynotify.postinst"])
        self.assertEqual(p.returncode, 0)

    def test_system_user(self):
        pw = pwd.getpwnam("paynotify")
        self.assertLess(pw.pw_uid, 1000)
        self.assertIn(pw.pw_shell, ("/usr/sbin/nologin", "/bin/false"))
        self.assertEqual(grp.getgrgid(pw.pw_gid).gr_name, "paynotify")


def unit_values(path, key):
    with open(path) as f:
        return [line.split("=", 1)[1].rstrip("\n") for line in f if line.startswith(key + "=")]


def unescape_unit(value):
    """A command line as systemd runs it: $$ is $, %% is %."""
    return value.replace("$$", "$").replace("%%", "%")


class TestShippedTimers(unittest.TestCase):
    """Each shipped timer's service, its ExecStart= run as written by its
    User= (paynotify), with only the configuration (Environment=
    PAYNOTIFY_CONFIG, the test database's) and /var/lib/paynotify (its
    StateDirectory=, a directory of the test's owned by paynotify) moved."""

    def setUp(self):
        ensure_schema()
        pw = pwd.getpwnam("paynotify")
        self.cfg = pne2e.demo_config(PG, owner=(pw.pw_uid, pw.pw_gid))
        self.state = pne2e.run_dir("pnpkg-state.")
        os.chmod(self.state, 0o755)
        for sub in ("textfile", "archive"):
            os.makedirs(os.path.join(self.state, sub))
            os.chown(os.path.join(self.state, sub), pw.pw_uid, pw.pw_gid)

    def run_unit(self, name):
        path = os.path.join(UNITDIR, name + ".service")
        self.assertEqual(unit_values(path, "User"), ["paynotify"], path)
        self.assertEqual(unit_values(path, "Environment"),
                         ["PAYNOTIFY_CONFIG=/etc/paynotify/paynotify.conf"], path)
        (cmd,) = unit_values(path, "ExecStart")
        self.assertRegex(cmd, r"^(/bin/sh -c 'exec )?/usr/bin/paynotify ", path)
        cmd = unescape_unit(cmd).replace("/var/lib/paynotify/", self.state + "/")
        env = pntest.clean_env({"PAYNOTIFY_CONFIG": self.cfg})
        p = subprocess.run(["runuser", "-u", "paynotify", "--", "sh", "-c", "exec " + cmd],
                           env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True, timeout=120)
        ok = [0] + [int(x) for v in unit_values(path, "SuccessExitStatus") for x in v.split()]
        self.assertIn(p.returncode, ok, "%s: %s\n%s%s" % (name, cmd, p.stdout, p.stderr))
        return p

    def test_timers_name_their_services_and_are_not_enabled(self):
        for t in TIMERS:
            path = os.path.join(UNITDIR, t + ".timer")
            self.assertTrue(unit_values(path, "OnCalendar"), path)
            self.assertEqual(unit_values(path, "WantedBy"), ["timers.target"], path)
            self.assertFalse(os.path.exists("/etc/systemd/system/timers.target.wants/%s.timer"
                                            % t), t)

    def test_query_runs(self):
        for name in ("paynotify-query", "paynotify-query-sweep"):
            self.run_unit(name)

    def test_stats_runs_and_reaches_node_exporter(self):
        self.run_unit("paynotify-stats")
        out = os.path.join(self.state, "textfile", "paynotify.prom")
        with open(out) as f:
            self.assertTrue(f.read().endswith("paynotify_stats_up 1\n"))
        # ExecStopPost= (root's, the "+"): into node_exporter's directory
        (post,) = unit_values(os.path.join(UNITDIR, "paynotify-stats.service"), "ExecStopPost")
        self.assertTrue(post.startswith("+/bin/sh -c '"), post)
        exporter = pne2e.run_dir("pnpkg-nodeexp.")
        cmd = unescape_unit(post[1:]).replace("/var/lib/paynotify/", self.state + "/") \
            .replace("/var/lib/prometheus/node-exporter", exporter)
        p = subprocess.run(["sh", "-c", "exec " + cmd], stdin=subprocess.DEVNULL,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=60)
        self.assertEqual(p.returncode, 0, p.stdout)
        self.assertEqual(os.listdir(exporter), ["paynotify.prom"])
        with open(os.path.join(exporter, "paynotify.prom")) as f:
            self.assertTrue(f.read().endswith("paynotify_stats_up 1\n"))
        self.assertEqual(stat.S_IMODE(os.stat(os.path.join(exporter, "paynotify.prom")).st_mode),
                         0o644)

    def test_purge_runs_and_archives_by_date(self):
        self.run_unit("paynotify-purge")
        self.run_unit("paynotify-purge")
        names = sorted(os.listdir(os.path.join(self.state, "archive")))
        day = subprocess.run(["date", "-u", "+%F"], stdout=subprocess.PIPE, text=True).stdout.strip()
        # a second run on one day never writes over the first
        self.assertEqual(names, ["notifications-%s.1.csv" % day, "notifications-%s.csv" % day])


class TestLintian(unittest.TestCase):
    def test_lintian_clean(self):
        """The .deb .ci/run built (PN_PACKAGE_DEB) has no lintian tag at all
        (--pedantic, info and experimental included); debian/README.source
        explains the source package's overrides."""
        deb = os.environ.get("PN_PACKAGE_DEB")
        required = os.environ.get("PN_REQUIRE_PACKAGE") == "1"
        if not deb:
            if required:
                self.fail("PN_PACKAGE_DEB is not set: the package was not built")
            self.skipTest("PN_PACKAGE_DEB (the .deb to check) is not set")
        pntest.need("lintian", "lintian")
        p = run(["lintian", "--pedantic", "-I", "-E", deb], timeout=300)
        tags = [line for line in (p.stdout + p.stderr).splitlines()
                if re.match(r"^[EWIPXOCMN]: ", line)]
        self.assertEqual(tags, [], p.stdout + p.stderr)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)


class TestInstalledMigrate(unittest.TestCase):
    def test_migrate_finds_the_installed_sql(self):
        env = pntest.clean_env()
        self.assertNotIn("PAYNOTIFY_SQL_DIR", env)
        # a database of its own: empty whatever ran before
        PG.psql("CREATE DATABASE pkgmigrate", db="postgres")
        demo = write_db_config()
        demo_dir = os.path.dirname(demo)
        with open(demo) as f:
            text = f.read()
        cfg = os.path.join(pne2e.run_dir("pnpkg-migrate."), "paynotify.conf")
        with open(cfg, "w") as f:   # key paths made absolute: the copy lives elsewhere
            f.write(re.sub(r"(?m)^(\S+_files?) = (\S+)$",
                           lambda m: "%s = %s/%s" % (m.group(1), demo_dir, m.group(2)),
                           text.replace("dbname=%s " % pntest.PG_DB, "dbname=pkgmigrate ")))
        p = run([BIN + "/paynotify", "-c", cfg, "migrate"], env=env)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        sql = sorted(f for f in os.listdir(SHARE + "/sql") if f[:3].isdigit())
        for f in sql:
            self.assertIn("applied %s" % f, p.stdout)
        top = max(int(f[:3]) for f in sql)
        rows = PG.psql("SELECT max(version) FROM paynotify.schema_version", db="pkgmigrate")
        self.assertEqual(rows, [(str(top),)])
        p = run([BIN + "/paynotify", "-c", cfg, "migrate"], env=env)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("schema is at version %d: nothing to do" % top, p.stdout)


# the key files the shipped example names, by key, made from test fixtures
EXAMPLE_FILES = {
    "alipay.public_key_file": ("copy", "test-a.pub.pem"),
    "stripe.secret_files": ("secret", "whsec_packagetestsecret0123456789"),
    "wechatpay.apiv3_key_file": ("secret", "PackageAPIv3Key0123456789abcdefA"),
    "wechatpay.platform_cert_files": ("copy", "wxp-cert-a.pem"),
    # the directory `wechatpay-certificates --fetch` writes: one *.pem in it
    "wechatpay.platform_cert_dir": ("dir", "wxp-cert-a.pem"),
    "wechatpay.public_key_file": ("copy", "test-a.pub.pem"),
    "wechatpay.apiv2_key_file": ("secret", "PackageAPIv2Key0123456789abcdefA"),
    "2c2p.secret_key_file": ("secret", "PACKAGE2C2PSECRETKEY0123456789AB"),
    "confirm.secret_file": ("secret", "PackageConfirmKey0123456789abcdef0123456789"),
}


class TestShippedExample(unittest.TestCase):
    def test_example_as_shipped_sets_nothing(self):
        # the conffile is the example, every key commented out: the settings go
        # in /etc/paynotify/conf.d/ (none here)
        p = run([BIN + "/paynotify", "check-config"])     # the compiled-in default
        self.assertEqual(p.returncode, 78, p.stdout + p.stderr)   # a configuration error
        self.assertIn("no [site NAME] section here or in /etc/paynotify/conf.d/*.conf",
                      p.stdout + p.stderr)
        self.assertNotIn("unknown key", p.stdout + p.stderr)

    def test_example_with_its_files_passes_check_config(self):
        ensure_schema()
        d = pne2e.run_dir("pnpkg-example.")
        with open(ETC + "/paynotify.conf") as f:
            text = f.read()
        self.assertIn("/etc/paynotify/", text)
        # the example's settings, uncommented: conninfo and site shop-a's keys but
        # the optional ones (test keys, query credentials, site markers)
        site = text.index(";[site shop-a]\n")
        text = re.sub(r"(?m)^;(conninfo = )", r"\1", text[:site]) + re.sub(
            r"(?m)^;(?!(?:[a-z0-9]+\.)?(?:test_\w+|query_\w+|site_\w+) = )"
            r"(\[site |[a-z0-9_.]+ = )", r"\1", text[site:])
        text = text.replace("/etc/paynotify/", d + "/")
        text, n = re.subn(r"(?m)^conninfo = .*$", "conninfo = " + PG.conninfo(), text)
        self.assertEqual(n, 1)
        seen = set()
        for m in re.finditer(r"(?m)^([a-z0-9_.]+) = (%s/\S+)$" % re.escape(d), text):
            key, path = m.groups()
            self.assertIn(key, EXAMPLE_FILES, "the example names a file for %s" % key)
            kind, what = EXAMPLE_FILES[key]
            os.makedirs(os.path.dirname(path), exist_ok=True)
            if kind == "copy":
                shutil.copyfile(os.path.join(UNIT_KEYS, what), path)
            elif kind == "dir":
                os.makedirs(path, exist_ok=True)
                shutil.copyfile(os.path.join(UNIT_KEYS, what), os.path.join(path, what))
            else:
                pntest.write_secret(path, what + "\n")
            seen.add(key)
        self.assertEqual(seen, set(EXAMPLE_FILES))
        cfg = os.path.join(d, "paynotify.conf")
        with open(cfg, "w") as f:
            f.write(text)
        p = run([BIN + "/paynotify", "-c", cfg, "check-config"])
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        self.assertIn("site shop-a", p.stdout)
        self.assertRegex(p.stdout, r"database: reachable, schema version \d+")
        p = run([BIN + "/paynotify-stripe", "-c", cfg, "-t"])
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        self.assertIn("configuration OK (1 sites)", p.stdout)


class TestInstalledThroughNginx(unittest.TestCase):
    def test_signed_notification_through_installed_snippet(self):
        ensure_schema()
        pw = pwd.getpwnam("paynotify")
        cfg = pne2e.demo_config(PG, owner=(pw.pw_uid, pw.pw_gid))
        sockdir = pne2e.run_dir("pnpkg-sock.")
        os.chown(sockdir, pw.pw_uid, pw.pw_gid)
        rcv = pne2e.Receiver("stripe", cfg, sockdir, workers=2, binary=SBIN + "/paynotify-stripe",
                             prefix=["setpriv", "--reuid=paynotify", "--regid=paynotify",
                                     "--init-groups", "--"]).start()
        # the workers run as the package's user
        for pid in rcv.worker_pids():
            self.assertEqual(os.stat("/proc/%d" % pid).st_uid, pw.pw_uid)
        nginx = pne2e.Nginx(sockdir, snippet=SHARE + "/nginx/paynotify.conf").start()
        PG.psql("INSERT INTO paynotify.orders (site, order_id, amount_minor, currency) "
                "VALUES ('demo', 'PKG-1', 500, 'USD')")
        n = pne2e.sign(cfg, "stripe", "PKG-1", "5.00", program=BIN + "/paynotify")
        r = pne2e.http(nginx.port, "POST", n.path, n.headers, n.body)
        self.assertEqual(r.status, 200, r.body)
        self.assertEqual(r.body, b'{"received":true}')
        self.assertEqual(PG.order("demo", "PKG-1")["status"], "paid")
        r = pne2e.http(nginx.port, "POST", n.path, n.headers, n.body)
        self.assertEqual(r.status, 200, r.body)
        self.assertEqual(PG.scalar("SELECT deliveries FROM paynotify.notifications "
                                   "WHERE site = 'demo' AND order_id = 'PKG-1'"), "2")
        r = pne2e.http(nginx.port, "GET", "/notify/stripe/demo")
        self.assertEqual((r.status, r.body), (200, b"ok\n"))
        rcv.wait_log(r"outcome=applied", 5)
        self.assertEqual(rcv.stop(), 0)


class TestInstalledThroughApache(unittest.TestCase):
    def test_installed_apache_snippets(self):
        """The installed Apache snippets: mod_proxy_fcgi to the installed
        receiver (as user paynotify), and CGI running /usr/sbin/paynotify-*
        itself (as Apache's user, who owns that configuration)."""
        pntest.need("apache2", "apache2")
        ensure_schema()
        pw = pwd.getpwnam("paynotify")
        cfg = pne2e.demo_config(PG, owner=(pw.pw_uid, pw.pw_gid))
        cgi_cfg = pne2e.demo_config(PG, owner=pne2e.nobody_ids())
        sockdir = pne2e.run_dir("pnpkg-asock.")
        os.chown(sockdir, pw.pw_uid, pw.pw_gid)
        rcv = pne2e.Receiver("alipay", cfg, sockdir, workers=1, binary=SBIN + "/paynotify-alipay",
                             prefix=["setpriv", "--reuid=paynotify", "--regid=paynotify",
                                     "--init-groups", "--"]).start()
        apache = pne2e.Apache(sockdir, SBIN, cgi_cfg, snippet_dir=SHARE + "/apache",
                              shipped_bindir=SBIN + "/",
                              shipped_config=ETC + "/paynotify.conf").start()
        for port, order in ((apache.fcgi_port, "PKG-A1"), (apache.cgi_port, "PKG-A2")):
            PG.psql("INSERT INTO paynotify.orders (site, order_id, amount_minor, currency) "
                    "VALUES ('demo', '%s', 1234, 'CNY')" % order)
            n = pne2e.sign(cfg, "alipay", order, "12.34", program=BIN + "/paynotify")
            r = pne2e.http(port, "POST", n.path, n.headers, n.body)
            self.assertEqual((r.status, r.body), (200, b"success"), apache.log_text())
            self.assertEqual(PG.order("demo", order)["status"], "paid")
        self.assertEqual(rcv.stop(), 0)


if __name__ == "__main__":
    unittest.main()
