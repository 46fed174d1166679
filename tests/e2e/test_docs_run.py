# test_docs_run.py: the operators' documents run as written (issue 24).
#
# Every fenced block of README.md, docs/DATABASE.md, docs/DEPLOYMENT.md and
# docs/OPERATIONS.md has a language, and every ```sh, ```sql and ```cron
# block has a doc-run marker directly above it: the user the documents name
# (it runs), or skip: with the reason (tests/lib/docrun.py has the syntax).
# TestMarkers checks that anywhere (no package needed): a new block an
# operator is told to run, left unmarked, fails it (PN_SKIP_DOC_MARKERS=1,
# set by .ci/run's package step, skips it there: its first step ran it).
#
# TestDocsRun runs every marked block, as its user, in one throwaway
# environment against the INSTALLED package (.ci/run leg 2 installs it;
# PN_REQUIRE_PACKAGE=1 makes a missing package a failure, else it skips):
# private mount, network and pid namespaces, overlays over /etc, /var, /usr
# and the homes, a new PostgreSQL cluster on the standard socket with a
# database `shop`, Debian's nginx, and stand-ins for `systemctl` (systemd is
# not PID 1) and `editor` (tests/lib/docrun.py says what each does).  One
# test per block: a block that fails (or, for ```cron, prints what cron
# would mail) fails its test with the block's output.  The whole run takes
# seconds; the environment is gone when it ends.

import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import docrun  # noqa: E402
import pne2e  # noqa: E402

RESULTS = None      # (results by (doc, line), the trace) once TestDocsRun has run
RUN_ERROR = None


class TestMarkers(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        if os.environ.get("PN_SKIP_DOC_MARKERS") == "1":
            raise unittest.SkipTest("PN_SKIP_DOC_MARKERS=1: .ci/run ran these in its first step")

    def test_every_block_is_decided(self):
        _, errors = docrun.parse_all()
        self.assertEqual(errors, [], "\n".join(errors))

    def test_something_runs_in_every_document(self):
        blocks, _ = docrun.parse_all()
        ran = {b.doc for b in docrun.runnable(blocks)}
        self.assertEqual(sorted(ran), sorted(docrun.DOCS))

    def parse_text(self, text):
        d = tempfile.mkdtemp(prefix="pndocmark.")
        self.addCleanup(shutil.rmtree, d, True)
        with open(os.path.join(d, "X.md"), "w") as f:
            f.write(textwrap.dedent(text))
        return docrun.parse("X.md", repo=d)

    def test_what_the_check_refuses(self):
        cases = {
            "```sh\nls\n```\n": "without a doc-run marker",
            "```sql\nSELECT 1;\n```\n": "without a doc-run marker",
            "```cron\n* * * * * root true\n```\n": "without a doc-run marker",
            "```\nls\n```\n": "without a language",
            "<!-- doc-run: root -->\n```text\nls\n```\n": "marker on a ```text block",
            "<!-- doc-run: skip -->\n```sh\nls\n```\n": "skip without a reason",
            "<!-- doc-run: root -->\n\n```sh\nls\n```\n": "not directly above a fence",
            "<!-- doc-run: root color=red -->\n```sh\nls\n```\n": "unknown option",
            "<!-- doc-run: root db=shop -->\n```sh\nls\n```\n": "db= is for ```sql",
            "<!-- doc-run: root -->\n```cron\n* * * * * root true\n```\n": "```cron block is",
            "```text\nout\n```  text after the fence\n\n```sh\nls\n```\n": "does not close it",
            "```sh\nls\n": "never closed",
        }
        for text, want in cases.items():
            _, errors = self.parse_text(text)
            self.assertTrue(any(want in e for e in errors), (text, errors))

    def test_what_the_check_accepts(self):
        blocks, errors = self.parse_text("""\
            <!-- doc-run: postgres db=shop step=20 -->
            ```sql
            SELECT 1;
            ```

            <!-- grants: another tool's comment may sit between -->
            <!-- doc-run: root "expect=T-1 paid" exit=1 -->
            <!-- another comment -->
            ```sh
            false
            ```

            <!-- doc-run: skip: needs a real provider -->
            ```sh
            curl https://openapi.alipay.com/
            ```

            ```text
            output
            ```
            """)
        self.assertEqual(errors, [])
        sql, sh, skip, text = blocks
        self.assertEqual((sql.user, sql.opts, sql.step), ("postgres", {"db": "shop", "step": "20"},
                                                          20))
        self.assertEqual((sh.user, sh.expect, sh.opts["exit"]), ("root", ["T-1 paid"], "1"))
        self.assertEqual(skip.skip, "needs a real provider")
        self.assertEqual([b.line for b in docrun.runnable(blocks)], [2, 9])

    def test_commands_of_a_block(self):
        text = textwrap.dedent("""\
            # a comment
            a --x \\
                --y
            b && c   # trailing comment
            psql <<'EOF'
            SELECT 1;
            EOF
            d "two
            lines" | e
            f |
                g
            """)
        self.assertEqual(docrun.commands(text), [
            (2, "a --x \\\n    --y"), (4, "b && c   # trailing comment"),
            (5, "psql <<'EOF'\nSELECT 1;\nEOF"), (8, 'd "two\nlines" | e'), (10, "f |\n    g")])

    def test_a_failing_first_half_of_and_fails_the_block(self):
        p = subprocess.run(["bash", "-c", docrun.checked_script("false && true\necho after\n")],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.assertEqual(p.returncode, 1)
        self.assertNotIn("after", p.stdout)
        self.assertIn("line 1", p.stdout)
        p = subprocess.run(["bash", "-c", docrun.checked_script("true | false | true\n")],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.assertEqual(p.returncode, 1, "pipefail")

    def test_cron_lines_as_cron_reads_them(self):
        env, jobs = docrun.cron_jobs(textwrap.dedent("""\
            # /etc/cron.d/x
            MAILTO=ops@example.com
            PAYNOTIFY_CONFIG=/etc/paynotify/paynotify.conf
            15 4 * * *  paynotify  purge --archive /a-$(date -u +\\%F).csv
            0 8 * * 1   root       cat%line one%line two
            @daily      postgres   true
            """))
        self.assertEqual(env, {"MAILTO": "ops@example.com",
                               "PAYNOTIFY_CONFIG": "/etc/paynotify/paynotify.conf"})
        self.assertEqual(jobs, [("paynotify", "purge --archive /a-$(date -u +%F).csv", None),
                                ("root", "cat", "line one\nline two"),
                                ("postgres", "true", None)])


def run_docs():
    global RESULTS, RUN_ERROR
    if RESULTS is not None or RUN_ERROR is not None:
        return
    if pne2e.package_version() is None:
        msg = ("the paynotify Debian package is not installed (scripts/build-deb && dpkg -i "
               "build/deb/paynotify_*.deb; .ci/run does this)")
        if os.environ.get("PN_REQUIRE_PACKAGE") == "1":
            RUN_ERROR = msg + ", and PN_REQUIRE_PACKAGE=1"
            return
        raise unittest.SkipTest(msg)
    if os.geteuid() != 0:
        raise unittest.SkipTest("needs root (namespaces, the documents' users)")
    out = os.path.join(tempfile.mkdtemp(prefix="pndocres."), "results.json")
    try:
        results, trace = docrun.run(out)
    except (RuntimeError, OSError, subprocess.SubprocessError) as e:
        RUN_ERROR = str(e)
        return
    finally:
        shutil.rmtree(os.path.dirname(out), ignore_errors=True)
    RESULTS = ({(r["doc"], r["line"]): r for r in results}, trace)


class TestDocsRun(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        run_docs()

    def result(self, doc, line):
        if RUN_ERROR is not None:
            self.fail(RUN_ERROR)
        r = RESULTS[0].get((doc, line))
        if r is None:
            self.fail("%s:%d did not run:\n%s" % (doc, line, RESULTS[1][-4000:]))
        return r

    def test_every_marked_block_ran(self):
        if RUN_ERROR is not None:
            self.fail(RUN_ERROR)
        blocks, _ = docrun.parse_all()
        want = sorted((b.doc, b.line) for b in docrun.runnable(blocks))
        self.assertEqual(sorted(RESULTS[0]), want)


def _block_test(doc, line):
    def test(self):
        r = self.result(doc, line)
        if not r["ok"]:
            self.fail(docrun.describe(r))
    return test


def _add_block_tests():
    try:
        blocks, _ = docrun.parse_all()
    except OSError:
        return
    for n, b in enumerate(docrun.runnable(blocks)):
        name = "test_%03d_%s_%d" % (n, os.path.basename(b.doc).replace(".", "_"), b.line)
        setattr(TestDocsRun, name, _block_test(b.doc, b.line))


_add_block_tests()

if __name__ == "__main__":
    unittest.main()
