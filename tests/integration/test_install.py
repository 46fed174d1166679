# test_install.py: what the build installs and what its manuals say.
#   - --version of every program prints configure.ac's AC_INIT version
#   - the compiled-in configuration is SYSCONFDIR/paynotify/paynotify.conf of
#     this build (every program's --help), the rule README, the example
#     configuration and paynotify.conf(5) state, and the path the built man
#     pages name
#   - every long option of every program (the getopt tables of
#     common/main.c, admin/main.c and admin/cmd_*.c) has its own entry in
#     its man page: paynotify-receiver(8) for the receivers, paynotify(1)
#     under the subcommand's section for the command; every subcommand has
#     a section
#   - `make install DESTDIR=...` installs the programs, the SQL, the
#     example configuration (as SYSCONFDIR/paynotify/paynotify.conf, 0640),
#     the snippets, units and man pages with this installation's paths (no
#     /usr/local/bin left in them when bindir differs, no @VAR@), the
#     documents the units and man pages name, and the per-receiver man links
# (The installed Debian package: tests/e2e/test_package.py.)

import os
import re
import shutil
import stat
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import pntest  # noqa: E402

REPO = pntest.REPO
BIN_DIR = os.environ.get("PN_BIN_DIR") or REPO
PROVIDERS = ("alipay", "wechatpay", "stripe", "2c2p")
PROGRAMS = ["paynotify"] + ["paynotify-" + p for p in PROVIDERS]
MAN = os.path.join(REPO, "doc", "man")


def read(*parts):
    with open(os.path.join(REPO, *parts), encoding="utf-8") as f:
        return f.read()


def version():
    """The version this build was configured with (configure.ac takes it from
    scripts/version when autoreconf runs: BASE+N.gHASH, or BASE without git)."""
    with open(os.path.join(BUILD, "Makefile")) as f:
        v = re.search(r"(?m)^PACKAGE_VERSION = (\S+)$", f.read()).group(1)
    base = re.search(r"(?m)^base=(\S+)$", read("scripts", "version")).group(1)
    if not re.fullmatch(r"%s(\+\d+\.g[0-9a-f]{7,}(\.dirty)?)?|\d+\.\d+\.\d+\+\d+\.g[0-9a-f]{7,}"
                        r"(\.dirty)?" % re.escape(base), v):
        raise AssertionError("configured version %r is not one scripts/version makes" % v)
    return v


def run(argv, **kw):
    return subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True, timeout=120,
                          env=pntest.clean_env(), **kw)


# the build the binaries come from (PN_BIN_DIR: tests/sanitize.sh's build-asan)
BUILD = BIN_DIR if os.path.exists(os.path.join(BIN_DIR, "Makefile")) else REPO


def configured():
    return os.path.exists(os.path.join(BUILD, "Makefile"))


def default_config():
    """make print-default-config: the last line (a Makefile that regenerates
    itself first prints what it ran)."""
    p = run(["make", "-s", "-C", BUILD, "print-default-config"])
    if p.returncode != 0:
        raise AssertionError("make print-default-config failed: " + p.stderr)
    return p.stdout.strip().split("\n")[-1]


def longopts(path):
    """The long option names of every getopt table in a C file."""
    return re.findall(r'\{"([a-z0-9-]+)", (?:no|required|optional)_argument', read(path))


def man_option(text, name):
    """True if the man source has an entry (a .TP line) for --name."""
    esc = name.replace("-", r"\-")
    return re.search(r"(?m)^\.TP\n\.[BI]R?.*\\-\\-%s\b" % re.escape(esc), text) is not None


class TestVersion(unittest.TestCase):
    def test_every_program_has_version(self):
        for prog in PROGRAMS:
            p = run([os.path.join(BIN_DIR, prog), "--version"])
            self.assertEqual(p.returncode, 0, p.stderr)
            self.assertRegex(p.stdout, r"^%s %s( |\n)" % (re.escape(prog), re.escape(version())))
            p = run([os.path.join(BIN_DIR, prog), "-V"])
            self.assertEqual(p.returncode, 0, p.stderr)

    def test_man_pages_carry_the_version_placeholder(self):
        for page in ("paynotify.1.in", "paynotify.conf.5.in", "paynotify-receiver.8.in"):
            self.assertRegex(read("doc", "man", page), r'(?m)^\.TH .*"paynotify @PACKAGE_VERSION@"')


class TestScriptsVersion(unittest.TestCase):
    """scripts/version: BASE+N.gHASH from git (N the commit count: it grows
    with every commit), a tarball's .tarball-version, else BASE."""

    def version_of(self, top):
        p = run(["sh", os.path.join(top, "scripts", "version")])
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertNotIn("\n", p.stdout)
        return p.stdout

    def test_from_git(self):
        if not os.path.exists(os.path.join(REPO, ".git")) or not shutil.which("git"):
            self.skipTest("not a git checkout")
        git = ["git", "-C", REPO]
        count = run(git + ["rev-list", "--count", "HEAD"]).stdout.strip()
        short = run(git + ["rev-parse", "--short=7", "HEAD"]).stdout.strip()
        base = re.search(r"(?m)^base=(\S+)$", read("scripts", "version")).group(1)
        if run(git + ["describe", "--tags", "--match", "v[0-9]*"]).returncode == 0:
            self.skipTest("a release tag: git describe decides")
        self.assertRegex(self.version_of(REPO), r"^%s\+%s\.g%s(\.dirty)?$" % (
            re.escape(base), count, short))

    def test_without_git(self):
        d = tempfile.mkdtemp(prefix="pntest-version.")
        pntest.add_cleanup(lambda: shutil.rmtree(d, ignore_errors=True))
        os.makedirs(os.path.join(d, "scripts"))
        shutil.copy(os.path.join(REPO, "scripts", "version"), os.path.join(d, "scripts"))
        base = re.search(r"(?m)^base=(\S+)$", read("scripts", "version")).group(1)
        self.assertEqual(self.version_of(d), base)
        with open(os.path.join(d, ".tarball-version"), "w") as f:
            f.write("0.1.0+461.gabcdef0\n")
        self.assertEqual(self.version_of(d), "0.1.0+461.gabcdef0")


class TestDefaultConfig(unittest.TestCase):
    def compiled(self, prog):
        p = run([os.path.join(BIN_DIR, prog), "--help"])
        self.assertEqual(p.returncode, 0, p.stderr)
        m = re.search(r"\$PAYNOTIFY_CONFIG, else\s+(\S+?)\)", p.stdout)
        self.assertIsNotNone(m, p.stdout)
        return m.group(1)

    def test_compiled_default_is_sysconfdir_rule(self):
        if not configured():
            self.skipTest("the tree is not configured")
        expected = default_config()
        self.assertTrue(expected.endswith("/paynotify/paynotify.conf"), expected)
        for prog in PROGRAMS:
            self.assertEqual(self.compiled(prog), expected, prog)
        # the built man pages name exactly this one, and paynotify.conf(5)
        # still says what the Debian package's is
        for page in ("paynotify.1", "paynotify.conf.5", "paynotify-receiver.8"):
            with open(os.path.join(BUILD, "build", "man", page)) as f:
                text = f.read()
            self.assertIn(expected.replace("-", r"\-"), text, page)
            if page == "paynotify.conf.5":
                self.assertIn("/\\&etc/paynotify/paynotify.conf\nin the Debian package", text)

    def test_docs_state_the_rule(self):
        rule = "SYSCONFDIR/paynotify/paynotify.conf"
        readme = re.sub(r"\s+", " ", read("README.md"))
        self.assertIn(rule, readme)
        self.assertIn("`/etc/paynotify/paynotify.conf` in the Debian package and with "
                      "`./configure --sysconfdir=/etc`", readme)
        self.assertIn(rule, re.sub(r"\s*\n;\s*", " ", read("conf", "paynotify.conf.example")))
        man5 = read("doc", "man", "paynotify.conf.5.in")
        self.assertIn(".IB SYSCONFDIR /paynotify/paynotify.conf", man5)
        self.assertIn("in the Debian package and with\n.BR \"./configure \\-\\-sysconfdir=/etc\" ",
                      man5)
        self.assertIn("--sysconfdir=/etc", read("debian", "README.source"))


class TestManPagesCoverOptions(unittest.TestCase):
    def test_receiver_options(self):
        text = read("doc", "man", "paynotify-receiver.8.in")
        for name in longopts("common/main.c"):
            self.assertTrue(man_option(text, name),
                            "--%s (common/main.c) has no entry in paynotify-receiver.8.in" % name)

    def test_command_options_by_subcommand(self):
        text = read("doc", "man", "paynotify.1.in")
        sections = dict(re.findall(r"(?ms)^\.SS (\S+)\n(.*?)(?=^\.SS |^\.SH )", text))
        top = re.search(r"(?ms)^\.SH OPTIONS\n(.*?)^\.SH ", text).group(1)
        # --help is not in the tables: admin/args.c's parser adds it to each
        for name in set(longopts("admin/main.c")) | {"help"}:
            self.assertTrue(man_option(top, name), "--%s (admin/main.c) not in OPTIONS" % name)
        cmds = []
        for f in sorted(os.listdir(os.path.join(REPO, "admin"))):
            if not (f.startswith("cmd_") and f.endswith(".c")):
                continue
            src = read("admin", f)
            m = re.search(r'const struct pn_cmd pn_cmd_\w+ = \{\s*"([a-z-]+)"', src) \
                or re.search(r'\.name\s*=\s*"([a-z-]+)"', src)
            self.assertIsNotNone(m, "admin/%s: no command name found" % f)
            cmd = m.group(1)
            cmds.append(cmd)
            self.assertIn(cmd, sections, "paynotify.1.in has no .SS %s section" % cmd)
            for name in longopts(os.path.join("admin", f)):
                if name == "help":
                    continue
                self.assertTrue(man_option(sections[cmd], name),
                                "paynotify %s --%s (admin/%s) has no entry under .SS %s in "
                                "paynotify.1.in" % (cmd, name, f, cmd))
        self.assertGreaterEqual(len(cmds), 6)

    def test_exit_codes_of_the_command(self):
        text = read("doc", "man", "paynotify.1.in")
        exits = re.search(r"(?ms)^\.SH EXIT STATUS\n(.*?)^\.SH ", text).group(1)
        codes = re.findall(r"#define PN_EXIT_\w+ (\d+)", read("common", "exit.h"))
        self.assertTrue(codes)
        for code in codes:
            self.assertIn(".TP\n.B %s\n" % code, exits, "exit status %s" % code)


class TestMakeInstall(unittest.TestCase):
    def test_install_destdir(self):
        if not configured():
            self.skipTest("the tree is not configured")
        dest = tempfile.mkdtemp(prefix="pntest-install.")
        pntest.add_cleanup(lambda: shutil.rmtree(dest, ignore_errors=True))
        p = run(["make", "-s", "-C", BUILD, "install", "DESTDIR=" + dest])
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        conf = default_config()
        files = []
        for root, _, names in os.walk(dest):
            files += [os.path.join(root, n)[len(dest):] for n in names]
        files = set(files)

        def has(suffix):
            found = [f for f in files if f.endswith(suffix)]
            self.assertTrue(found, "make install did not install …%s" % suffix)
            return dest + found[0]

        # the receivers are daemons: $(sbindir); the operators' command $(bindir)
        has("/bin/paynotify")
        for p in PROVIDERS:
            self.assertTrue(has("/sbin/paynotify-" + p))
            self.assertFalse([f for f in files if f.endswith("/bin/paynotify-" + p)
                              and not f.endswith("/sbin/paynotify-" + p)],
                             "paynotify-%s is also in a bin directory" % p)
        for f in os.listdir(os.path.join(REPO, "sql")):
            if f.endswith(".sql"):
                has("/share/paynotify/sql/" + f)
        cfg = dest + conf
        self.assertTrue(os.path.isfile(cfg), "no %s" % conf)
        self.assertEqual(stat.S_IMODE(os.stat(cfg).st_mode), 0o640)
        has("/share/paynotify/paynotify.conf.example")
        for snippet in ("nginx/paynotify.conf", "apache/paynotify.conf",
                        "apache/paynotify-cgi.conf"):
            has("/share/paynotify/" + snippet)
        unit = has("/systemd/system/paynotify@.service")
        has("/systemd/system/paynotify@.socket")
        for page in ("man1/paynotify.1", "man5/paynotify.conf.5", "man8/paynotify-receiver.8"):
            has("/man/" + page)
        for p in PROVIDERS:
            with open(has("/man/man8/paynotify-%s.8" % p)) as f:
                self.assertEqual(f.read(), ".so man8/paynotify-receiver.8\n")
        with open(unit) as f:
            text = f.read()
        self.assertIn("Environment=PAYNOTIFY_CONFIG=%s\n" % conf, text)
        sbindir = os.path.dirname(has("/sbin/paynotify-stripe"))[len(dest):]
        bindir = os.path.dirname(has("/bin/paynotify"))[len(dest):]
        self.assertIn("ExecStart=%s/paynotify-%%i " % sbindir, text)
        # the shipped timers: their services run the installed command as
        # user paynotify with the installed configuration
        units = [unit]
        for job in ("query", "query-sweep", "stats", "purge"):
            units.append(has("/systemd/system/paynotify-%s.timer" % job))
            svc = has("/systemd/system/paynotify-%s.service" % job)
            units.append(svc)
            with open(svc) as f:
                jtext = f.read()
            self.assertIn("User=paynotify\n", jtext, svc)
            self.assertIn("Environment=PAYNOTIFY_CONFIG=%s\n" % conf, jtext, svc)
            self.assertRegex(jtext, r"ExecStart=(/bin/sh -c 'exec )?%s/paynotify %s " % (
                re.escape(bindir), job.split("-")[0]), svc)
        # every document the units name is installed
        for u in units:
            with open(u) as f:
                for ref in re.findall(r"Documentation=.*?file:(\S+)", f.read()):
                    self.assertIn(ref, files, "%s names %s, not installed" % (u, ref))
        # the man pages' files: and no placeholder left anywhere
        for root, _, names in os.walk(dest):
            for n in names:
                path = os.path.join(root, n)
                if "/bin/" in path:
                    continue
                with open(path, "rb") as f:
                    data = f.read().decode("utf-8", "replace")
                self.assertIsNone(re.search(r"@[A-Z_]+@", data), path)
                if bindir != "/usr/local/bin":
                    self.assertNotIn("/usr/local/bin/", data, path)
                if sbindir != "/usr/local/sbin":
                    self.assertNotIn("/usr/local/sbin/", data, path)
        with open(has("/man/man8/paynotify-receiver.8")) as f:
            man8 = f.read()
        for doc in re.findall(r"\n\.I (\S+\.md)\n", man8):
            self.assertIn(doc, files, "paynotify-receiver(8) names %s" % doc)


if __name__ == "__main__":
    unittest.main()
