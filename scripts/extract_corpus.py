"""Extract the retrieval corpus (assets/corpus/python_reference.txt) from CPython's pydoc_data/topics.py.

The text is the Python Language Reference's topic help that ships with every CPython (PSF licence). Each passage is
consecutive prose paragraphs (code, grammar and tables dropped: indented blocks) of one topic, or the end of one and
the start of the next, merged until it holds at least 200 MiniLM tokens (at most 500).
The output depends only on the CPython version's topics.py and the tokenizer, so running this again reproduces
the committed file byte for byte on the same Python (the file names the version).

    python scripts/extract_corpus.py            # writes assets/corpus/python_reference.txt
"""

from __future__ import annotations

import platform
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

OUT = ROOT / "assets" / "corpus" / "python_reference.txt"
MIN_TOKENS, MAX_TOKENS, PASSAGES = 200, 500, 200
SEPARATOR = "\n\n"  # passages are separated by one blank line; a passage is one line


def prose_paragraphs(topic: str) -> list[str]:
    """The topic's paragraphs that are prose: not indented (code, grammar), not headings or bullet fragments."""
    kept = []
    for block in re.split(r"\n\s*\n", topic):
        lines = block.splitlines()
        # Code and grammar are indented by 3 or more; a bullet's continuation lines by 2.
        if not lines or lines[0].startswith((" ", "\t")) or any(line.startswith("   ") for line in lines):
            continue
        if len(lines) >= 2 and set(lines[1].strip()) <= set("*=-~^"):
            continue  # a heading and its underline
        text = " ".join(line.strip() for line in lines)
        if text.startswith(("Note:", "See also", "Changed in", "Added in", "Deprecated")) or len(text) < 80:
            continue
        kept.append(text)
    return kept


def main() -> None:
    import pydoc_data.topics

    from core import data

    tokenizer, _ = data._load_model(str(data.default_model_path()))

    def tokens(text: str) -> int:
        return len(tokenizer(text, add_special_tokens=False)["input_ids"])

    passages: list[str] = []
    current: list[str] = []
    for name in sorted(pydoc_data.topics.topics):
        for paragraph in prose_paragraphs(pydoc_data.topics.topics[name]):
            candidate = " ".join([*current, paragraph])
            if tokens(candidate) > MAX_TOKENS:
                if current and tokens(" ".join(current)) >= MIN_TOKENS:
                    passages.append(" ".join(current))
                current = [paragraph] if tokens(paragraph) <= MAX_TOKENS else []
                continue
            current.append(paragraph)
            if tokens(candidate) >= MIN_TOKENS:  # long enough: close it, so passages stay short and many
                passages.append(candidate)
                current = []
        if current and tokens(" ".join(current)) >= MIN_TOKENS:
            passages.append(" ".join(current))
            current = []
        # A shorter rest carries over into the next topic's first paragraphs.
    passages = passages[:PASSAGES]
    header = (
        f"# {len(passages)} passages of the Python Language Reference's topic help (CPython "
        f"{platform.python_version()}, Lib/pydoc_data/topics.py, PSF licence), extracted by "
        "scripts/extract_corpus.py: one passage a line, 200-500 MiniLM tokens each."
    )
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(header + SEPARATOR + SEPARATOR.join(passages) + "\n", encoding="utf-8")
    print(f"{len(passages)} passages, {OUT.stat().st_size} bytes -> {OUT.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
