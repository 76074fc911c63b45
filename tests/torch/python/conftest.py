"""pytest setup of the simcuda torch suite: the steps it shares with the acceptance suite
(tests/support/torch_suite_steps.py) are importable."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, os.pardir, "support"))
