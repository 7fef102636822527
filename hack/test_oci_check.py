"""Unit tests of hack/oci_check.py on a small OCI archive built here."""

import gzip
import hashlib
import io
import json
import os
import sys
import tarfile
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(__file__))
import oci_check  # noqa: E402


def add(tar, name, data):
    info = tarfile.TarInfo(name)
    info.size = len(data)
    tar.addfile(info, io.BytesIO(data))


def archive(path, *, platform=("linux", "amd64"), user="65532:65532", tamper=False):
    """An image with one gzip layer holding /winpool; `tamper` changes a blob after it is referenced."""
    layer_tar = io.BytesIO()
    with tarfile.open(fileobj=layer_tar, mode="w") as lt:
        add(lt, "winpool", b"\x7fELF operator")
    plain = layer_tar.getvalue()
    layer = gzip.compress(plain, mtime=0)
    sha = lambda b: "sha256:" + hashlib.sha256(b).hexdigest()  # noqa: E731
    config = json.dumps({"os": platform[0], "architecture": platform[1],
                         "config": {"Entrypoint": ["/winpool"], "User": user},
                         "rootfs": {"type": "layers", "diff_ids": [sha(plain)]}}).encode()
    manifest = json.dumps({"schemaVersion": 2, "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": sha(config), "size": len(config)},
                           "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip", "digest": sha(layer), "size": len(layer)}]}).encode()
    index = json.dumps({"schemaVersion": 2, "manifests": [{"mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": sha(manifest), "size": len(manifest)}]}).encode()
    with tarfile.open(path, "w") as t:
        add(t, "oci-layout", b'{"imageLayoutVersion":"1.0.0"}')
        add(t, "index.json", index)
        for b in (manifest, config):
            add(t, "blobs/sha256/" + sha(b)[7:], b)
        add(t, "blobs/sha256/" + sha(layer)[7:], layer + (b"x" if tamper else b""))


class OciCheckTest(unittest.TestCase):
    def check(self, **kw):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "image.oci.tar")
            archive(path, **kw)
            return oci_check.check(path, "linux/amd64", "/winpool", "65532:65532", ["/winpool"])

    def test_a_sound_archive_passes(self):
        self.assertEqual(self.check(), [])

    def test_what_a_release_promises_is_checked(self):
        self.assertEqual(self.check(platform=("linux", "arm64")), ["platform linux/arm64, want linux/amd64"])
        self.assertEqual(self.check(user="0"), ["user '0', want '65532:65532'"])
        # A blob that is not what its reference says is named, and not read.
        tampered = self.check(tamper=True)
        self.assertTrue(tampered[0].startswith("layer 0: digest"), tampered)
        self.assertIn("/winpool is in no layer", tampered)


if __name__ == "__main__":
    unittest.main()
