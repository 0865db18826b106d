"""ImageFolder over an s3://bucket/prefix/ root through a real kernel: the S3 test server
(tests/lib/s3server, s3rver checking SigV4 signatures) holds a class tree, the kernel's
environment points the S3 source at it, and the cell's display (taas-worker probe listing
the prefix), show() (each image read by the loader workers through the S3 fetch) and the
errors (a torn image named by its s3:// URL and host, a bucket that is not there) are
checked as the user sees them."""

import os
import socket
import subprocess
import tempfile
import time
import unittest

import taastest
from taastest import only, traceback_text
from test_data import png_file

BUCKET = "taas-test"
SERVER = os.path.join(taastest.SOURCE_DIR, "tests", "lib", "s3server", "s3server.sh")


class S3Server:
    """The S3 test server on a free port, stopped with close()."""

    def __init__(self):
        self.dir = tempfile.TemporaryDirectory(prefix="taas-s3-")
        portfile = os.path.join(self.dir.name, "port")
        self.proc = subprocess.Popen(["/bin/bash", SERVER, "--dir", os.path.join(self.dir.name, "data"),
                                      "--portfile", portfile, "--bucket", BUCKET])
        # first use installs its npm package: minutes at worst, ended early if it fails
        deadline = time.monotonic() + 240
        while not os.path.exists(portfile):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.close()
                raise RuntimeError("the S3 test server did not start")
            time.sleep(0.05)
        with open(portfile) as f:
            self.port = int(f.read())
        self.endpoint = "http://127.0.0.1:%d" % self.port

    def put(self, key, data):
        body = os.path.join(self.dir.name, "body")
        with open(body, "wb") as f:
            f.write(data)
        subprocess.run(["curl", "-sSf", "-X", "PUT", "--aws-sigv4", "aws:amz:us-east-1:s3", "-u", "S3RVER:S3RVER",
                        "-H", "x-amz-content-sha256: UNSIGNED-PAYLOAD", "--data-binary", "@" + body,
                        "%s/%s/%s" % (self.endpoint, BUCKET, key)], check=True, stdout=subprocess.DEVNULL)

    def close(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(30)
        self.dir.cleanup()


class ImageFolderOnS3(taastest.KernelCase):
    tmp_prefix = "taas-data-s3-"

    @classmethod
    def setUpClass(cls):
        cls.s3 = S3Server()
        try:
            grey = lambda seed: bytes((seed * 31 + p) % 256 for p in range(6 * 4))
            for key, seed in (("pets/cat/1.png", 1), ("pets/cat/sub/2.PNG", 2), ("pets/dog/3.png", 3),
                              ("pets/dog/4.png", 4), ("pets/dog/notes.txt", 0), ("pets/readme.png", 5)):
                cls.s3.put(key, b"notes" if key.endswith(".txt") else png_file(6, 4, grey(seed)))
            cls.s3.put("torn/cls/ok.png", png_file(6, 4, grey(6)))
            cls.s3.put("torn/cls/torn.png", png_file(6, 4, grey(7))[:40])
            cls.kernel_env = {"AWS_ENDPOINT_URL": cls.s3.endpoint, "AWS_ACCESS_KEY_ID": "S3RVER",
                              "AWS_SECRET_ACCESS_KEY": "S3RVER", "AWS_REGION": "us-east-1",
                              "TAAS_CACHE_DIR": ""}
            super().setUpClass()
        except BaseException:
            cls.s3.close()
            raise

    @classmethod
    def tearDownClass(cls):
        super().tearDownClass()
        cls.s3.close()

    def test_listed_and_read_by_the_loaders(self):
        text = self.result("pets = ImageFolder('s3://%s/pets/')\npets" % BUCKET)["text/plain"]
        self.assertIn("\n    Number of datapoints: 4\n", text)
        self.assertIn("class_to_idx: {'cat': 0, 'dog': 1}", text)
        self.assertIn("Source: s3://%s/pets/ on %s" % (BUCKET, socket.gethostname()), text)
        self.assertEqual(taastest.result_text(self.ok("len(pets)")), "4")
        msgs = self.ok("show(pets, n=4)")
        shown = only(msgs, "display_data")[0]["content"]["data"]
        self.assertIn("ImageFolder: 4 of 4 samples", shown["text/plain"])
        self.assertIn("#0 cat | #1 cat | #2 dog | #3 dog", shown["text/plain"])

    def test_torn_image_names_its_url_and_host(self):
        err = self.error("show(ImageFolder('s3://%s/torn'), n=2)" % BUCKET)
        self.assertIn("s3://%s/torn/cls/torn.png on %s" % (BUCKET, socket.gethostname()), err["evalue"])

    def test_no_such_bucket(self):
        err = self.error("ImageFolder('s3://no-such-bucket/pets/')", "TaasIOError")
        self.assertIn("NoSuchBucket", err["evalue"])
        self.assertIn("no bucket 'no-such-bucket'", traceback_text(err))


if __name__ == "__main__":
    unittest.main()
