"""The Jupyter project's own conformance suite (jupyter_kernel_test) against taas-kernel,
with every sample attribute filled so that none of its tests is skipped
(test_conformance_no_skips.py checks that)."""

import unittest

import jupyter_kernel_test

import taastest


class TaasKernelTests(jupyter_kernel_test.KernelTests):
    kernel_name = taastest.KERNEL_NAME
    language_name = "taas"
    file_extension = ".taas"

    code_hello_world = 'print("hello, world")'
    code_stderr = 'print("oops", file="stderr")'

    # Matches replace the text from cursor_start, which the kernel puts at the start of the
    # dotted name, so a match keeps the prefix the user typed.
    completion_samples = [
        {"text": "Conv", "matches": {"Conv2d"}},
        {"text": "nn.Lin", "matches": {"nn.Linear"}},
        {"text": "Adade", "matches": {"Adadelta"}},
        {"text": "optim.lr_scheduler.Ste", "matches": {"optim.lr_scheduler.StepLR"}},
        {"text": "clear_", "matches": {"clear_output"}},
    ]

    complete_code_samples = ['print("hello, world")', "x = 1", "Linear(1, 2)", "", "# comment"]
    incomplete_code_samples = ["Linear(1,", "'''abc", "(1, 2"]
    invalid_code_samples = ["x = = 1", "import torch", "1 +* 2"]

    code_page_something = "help(Conv2d)"

    code_generate_error = "undefined_name"

    # "1+2" is the entry code_history_pattern finds (a history search pattern is a glob
    # that must match the whole cell, as in IPython); the others must not match it.
    code_execute_result = [
        {"code": "1 + 2", "result": "3"},
        {"code": "(1, 2.5)", "result": "(1, 2.5)"},
        {"code": "'a' + 'b'", "result": "'ab'"},
        {"code": "1+2", "result": "3"},
    ]
    code_history_pattern = "1?2*"
    supported_history_operations = ("tail", "range", "search")

    code_display_data = [
        {"code": "display(ReLU())", "mime": "text/plain"},
        {"code": "display(Linear(4, 2), display_id='lin')", "mime": "text/plain"},
    ]

    code_inspect_sample = "Conv2d"

    code_clear_output = "clear_output()"

    @classmethod
    def setUpClass(cls):
        taastest.install_test_kernelspec()
        super().setUpClass()


if __name__ == "__main__":
    unittest.main()
