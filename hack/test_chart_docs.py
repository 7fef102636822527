import importlib.util
import pathlib
import unittest

spec = importlib.util.spec_from_file_location("chart_docs", pathlib.Path(__file__).with_name("chart-docs.py"))
chart_docs = importlib.util.module_from_spec(spec)
spec.loader.exec_module(chart_docs)

VALUES = """# The operator image.
image:
  # Registry host.
  registry: ghcr.io
  repository: winpool/winpool
# Labels of the pods.
# @schema {"additionalProperties": {"type": "string"}}
labels:
  team: platform
# @schema {"$ref": "#/$defs/resources"}
resources:
  requests:
    cpu: 50m
bare: 1
"""


class Undescribed(unittest.TestCase):
    def test_every_key_a_person_sets_needs_a_description_but_not_the_entries_of_a_map(self):
        missing = chart_docs.undescribed(chart_docs.parse(VALUES))
        self.assertEqual(missing, ["image.repository", "resources", "bare"])

    def test_the_charts_values_describe_every_key(self):
        text = (chart_docs.CHART / "values.yaml").read_text()
        self.assertEqual(chart_docs.undescribed(chart_docs.parse(text)), [])


if __name__ == "__main__":
    unittest.main()
