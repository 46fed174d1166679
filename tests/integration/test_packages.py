# test_packages.py: one list of Debian packages, and everything that
# installs or declares packages agrees with it (issue 21).
#   - scripts/packages is well formed: known groups only, each package once
#   - debian/control's Build-Depends (debhelper-compat aside, build profiles
#     stripped) are exactly its control group, every one of them also in
#     build; debhelper-compat's debhelper is in the deb group
#   - README's "Dependencies" lists each group exactly
#   - scripts/up installs the build and demo groups, scripts/test build,
#     demo and test, .ci/run build, demo, test and deb, all through
#     scripts/packages.sh, and none of them keeps a list of its own
#     (no apt-get install outside scripts/packages.sh)
#   - scripts/packages.sh, sourced, prints the same packages as this parser,
#     and when not root and a package is missing says the one apt-get line
#     and fails (a package name that cannot be installed stands in for a
#     missing one)

import os
import re
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import pntest  # noqa: E402

REPO = pntest.REPO
GROUPS = {"build", "control", "demo", "test", "deb", "ci"}


def read(*parts):
    with open(os.path.join(REPO, *parts), encoding="utf-8") as f:
        return f.read()


def packages():
    """{package: set(groups)} from scripts/packages, in file order."""
    out = {}
    for n, line in enumerate(read("scripts", "packages").splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        words = line.split()
        if len(words) < 2:
            raise AssertionError("scripts/packages:%d: a package with no group: %r" % (n, line))
        if words[0] in out:
            raise AssertionError("scripts/packages:%d: %s listed twice" % (n, words[0]))
        out[words[0]] = set(words[1:])
    return out


def group(*names):
    return {p for p, g in packages().items() if g & set(names)}


def build_depends():
    text = read("debian", "control")
    m = re.search(r"^Build-Depends:(.*?)^(?=\S)", text, re.S | re.M)
    assert m, "debian/control has no Build-Depends"
    names = set()
    for item in m.group(1).split(","):
        item = re.sub(r"\(.*?\)|<.*?>|\[.*?\]", "", item).strip()
        if item:
            names.add(item.split("|")[0].strip())
    return names


class OneList(unittest.TestCase):

    def test_well_formed(self):
        pk = packages()
        self.assertGreater(len(pk), 20)
        for p, g in pk.items():
            self.assertRegex(p, r"^[a-z0-9][a-z0-9+.-]+$")
            self.assertEqual(g - GROUPS, set(), "%s: unknown group" % p)
            if "control" in g:
                self.assertIn("build", g, "%s: in Build-Depends, so needed to build" % p)

    def test_debian_control_agrees(self):
        bd = build_depends()
        self.assertIn("debhelper-compat", bd)
        self.assertEqual(bd - {"debhelper-compat"}, group("control"),
                         "debian/control Build-Depends vs the control group of scripts/packages")
        self.assertIn("debhelper", group("deb"))

    def test_readme_agrees(self):
        text = read("README.md")
        sec = text[text.index("### Dependencies"):]
        sec = sec[:sec.index("```")]
        for label, groups in (("Build", {"build"}), ("Demo", {"demo"}),
                              ("Tests", {"test"}), ("The Debian package", {"deb"}),
                              ("CI only", {"ci"})):
            m = re.search(r"^- %s[^`]*`([^`]+)`" % re.escape(label), sec, re.M)
            self.assertIsNotNone(m, "README Dependencies: no '- %s: `...`' line" % label)
            listed = set(m.group(1).split())
            want = {p for p, g in packages().items() if g & groups
                    and not (label == "Tests" and "demo" in g)}
            self.assertEqual(listed, want, "README Dependencies, %s" % label)

    def test_scripts_install_from_the_list(self):
        for path, groups in (("scripts/up", "build demo"), ("scripts/test", "build demo test"),
                             (".ci/run", "build demo test deb")):
            text = read(path)
            self.assertRegex(text, r'\. "?\$?[A-Za-z{}]*/?scripts/packages\.sh"?', path)
            self.assertRegex(text, r"pn_packages_install \S+ %s\b" % groups, path)
            code = [line for line in text.splitlines() if not line.lstrip().startswith("#")]
            own = [line for line in code if re.search(r"apt-get\b.*\binstall\b", line)
                   or "PACKAGES=(" in line]
            self.assertEqual(own, [], "%s keeps a package list of its own" % path)
        self.assertIn("mmdebstrap", group("ci"))
        self.assertIn("mmdebstrap", read("scripts", "fresh-debian"))

    def test_reader_agrees(self):
        lib = os.path.join(REPO, "scripts", "packages.sh")
        for groups in (["build"], ["demo", "test"], ["deb", "ci"]):
            p = subprocess.run(["bash", "-c", '. "$0"; pn_packages "$@"', lib] + groups,
                               stdout=subprocess.PIPE, text=True, timeout=30, check=True)
            self.assertEqual(set(p.stdout.split()), group(*groups), groups)

    def test_not_root_says_the_line_and_stops(self):
        d = pntest.scratch_dir("pntest-pkgs.")
        os.chmod(d, 0o755)
        lst = os.path.join(d, "packages")
        with open(lst, "w") as f:
            f.write("# a test list\nbash test\nno-such-package-pntest test\n")
        os.chmod(lst, 0o644)
        lib = os.path.join(d, "packages.sh")
        with open(lib, "w") as f:
            f.write(read("scripts", "packages.sh"))
        os.chmod(lib, 0o644)
        argv = ["bash", "-c", '. "$0"; pn_packages_install scripts/test test; echo rc=$?', lib]
        if pntest.IS_ROOT:
            argv = ["runuser", "-u", "nobody", "--"] + argv
        p = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                           timeout=30, cwd="/", env=pntest.clean_env({"PN_PACKAGES_FILE": lst}))
        self.assertIn("rc=1", p.stdout, p.stderr)
        self.assertIn("apt-get install -y --no-install-recommends no-such-package-pntest\n",
                      p.stderr)
        self.assertNotIn(" bash", p.stderr.split("apt-get install")[1])


if __name__ == "__main__":
    unittest.main()
