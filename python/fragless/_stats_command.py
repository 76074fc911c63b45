"""The `fragless-stats` console script: runs the fragless-stats program shipped in the
package (fragless/bin), with the same arguments, exit status and output."""
import os
import sys


def main() -> int:
    program = os.path.join(os.path.dirname(os.path.abspath(__file__)), "bin", "fragless-stats")
    if not os.path.exists(program):
        print(f"fragless-stats: {program} is missing (this fragless was not installed with pip install .)",
              file=sys.stderr)
        return 2
    os.execv(program, [program, *sys.argv[1:]])
    return 0  # not reached: execv replaces the process


if __name__ == "__main__":
    sys.exit(main())
