"""Checks that a page shows a test's code word for word.

Usage: doc_has_code.py SOURCE PAGE

Every block of SOURCE between a line "// ---- as on the page ----" and a line
"// ---- end of the page's code ----" must appear in PAGE as it stands, less the indentation
its lines share.
"""
import sys
import textwrap

START = "// ---- as on the page ----\n"
END = "// ---- end of the page's code ----"


def main(source_path, page_path):
    source = open(source_path, encoding="utf-8").read()
    page = open(page_path, encoding="utf-8").read()
    blocks = []
    at = source.find(START)
    while at >= 0:
        begin = at + len(START)
        end = source.index(END, begin)
        blocks.append(textwrap.dedent(source[begin:source.rindex("\n", begin, end) + 1]).rstrip())
        at = source.find(START, end)
    if not blocks:
        return f"{source_path}: no block marked '{START.strip()}'"
    for i, block in enumerate(blocks, 1):
        if block not in page:
            return f"{page_path} no longer shows block {i} of {source_path} as it stands"
    print(f"{page_path} shows the {len(blocks)} blocks of {source_path}")
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
