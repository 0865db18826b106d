"""Runs the conformance suite programmatically and fails when any of its tests (or
subtests) was skipped, failed or errored: an empty sample attribute in
jupyter_kernel_test silently turns a test into a skip, which would hide a gap."""

import io
import unittest

import jupyter_kernel_test

import taastest
import test_conformance


class NoSkips(unittest.TestCase):
    def test_every_conformance_test_runs_and_passes(self):
        taastest.install_test_kernelspec()
        suite = unittest.defaultTestLoader.loadTestsFromTestCase(
            test_conformance.TaasKernelTests)
        expected = sorted(name for name in dir(jupyter_kernel_test.KernelTests)
                          if name.startswith("test_"))
        self.assertGreaterEqual(len(expected), 12, "jupyter_kernel_test has fewer tests "
                                "than the 12 the issue lists; was it replaced?")
        self.assertEqual(sorted(t._testMethodName for t in suite), expected)

        out = io.StringIO()
        result = unittest.TextTestRunner(stream=out, verbosity=2).run(suite)
        report = out.getvalue()
        self.assertEqual(result.testsRun, len(expected), report)
        self.assertEqual([(str(t), why) for t, why in result.skipped], [], report)
        self.assertEqual(result.errors, [], report)
        self.assertEqual(result.failures, [], report)
        self.assertEqual(result.unexpectedSuccesses, [], report)
        self.assertTrue(result.wasSuccessful(), report)


if __name__ == "__main__":
    unittest.main()
