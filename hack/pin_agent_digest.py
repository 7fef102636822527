"""Write the agent image's digest into a chart's values.yaml (agent.image.digest).

The file is edited as text, not re-serialized: its comments are the chart's
documentation (hack/chart-docs.py reads them) and must stay as they are.

    python3 hack/pin_agent_digest.py values.yaml sha256:<64 hex>
"""

import re
import sys

DIGEST = re.compile(r"^sha256:[0-9a-f]{64}$")


def pin(text: str, digest: str) -> str:
    """The values with agent.image.digest set; refuses a values file whose
    shape it does not know (one `digest: ""` under `agent:` then `image:`)."""
    if not DIGEST.match(digest):
        raise ValueError(f"not a sha256 digest: {digest!r}")
    lines = text.split("\n")
    section = None
    for i, line in enumerate(lines):
        if re.match(r"^\S", line):
            section = line.split(":")[0]
        elif section == "agent" and re.match(r'^    digest: ""$', line):
            lines[i] = f'    digest: "{digest}"'
            return "\n".join(lines)
    raise ValueError('no `    digest: ""` under agent.image in the values')


def main() -> None:
    path, digest = sys.argv[1], sys.argv[2]
    with open(path, encoding="utf-8") as f:
        text = f.read()
    with open(path, "w", encoding="utf-8") as f:
        f.write(pin(text, digest))


if __name__ == "__main__":
    main()
