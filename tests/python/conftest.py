import os
import sys

# pyhelpers.py lives next to the tests.
sys.path.insert(0, os.path.dirname(__file__))
