import unittest

from pin_agent_digest import pin

D = "sha256:" + "0123456789abcdef" * 4
VALUES = """image:
  repository: winpool/winpool
  # operator
  digest: ""
agent:
  image:
    repository: winpool/agent
    # sha256:<64 hex>, pinned instead of the tag (the digest wins).
    digest: ""
  hnsInterval: ""
"""


class PinAgentDigest(unittest.TestCase):
    def test_only_the_agent_image_digest_is_set_and_comments_stay(self):
        out = pin(VALUES, D)
        self.assertIn(f'    digest: "{D}"', out)
        self.assertIn('  digest: ""\nagent:', out, "the operator's digest is not the agent's")
        self.assertIn("# sha256:<64 hex>, pinned instead of the tag", out)
        self.assertEqual(out.count(D), 1)

    def test_a_values_file_of_another_shape_or_a_bad_digest_is_refused(self):
        with self.assertRaises(ValueError):
            pin("agent:\n  image:\n    tag: x\n", D)
        with self.assertRaises(ValueError):
            pin(VALUES, "latest")


if __name__ == "__main__":
    unittest.main()
