#!/usr/bin/env python3
"""check-mode-diff.py DIFF EXPECTED: exit 1 unless every changed line of DIFF (`diff -u`
output) fully matches one regular expression of EXPECTED (one a line; # comments)."""
import re
import sys


def main(diff_path, expected_path):
    expected = []
    with open(expected_path) as f:
        for line in f:
            line = line.rstrip("\n")
            if line and not line.startswith("#"):
                expected.append(re.compile(line))
    with open(diff_path) as f:
        changed = [l for l in f.read().splitlines()
                   if l[:1] in "+-" and not l.startswith(("+++", "---"))]
    unexpected = [l for l in changed if not any(p.fullmatch(l) for p in expected)]
    if unexpected:
        print(f"\ncompare-modes: FAILED: differences not explained in {expected_path}:")
        print("\n".join("  " + l for l in unexpected))
        sys.exit(1)
    print(f"\ncompare-modes: every difference is one upstream has too (see {expected_path})")


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    main(*sys.argv[1:])
