"""What the Python tests share: where the source tree and the kvsim binary are (ctest sets
KVSIM_SOURCE_DIR and KVSIM_BINARY), running the CLI for the output to compare with, and whether an
optional module is installed. Imported by the tests here (unittest discovery puts this folder on the path)
and by python/browser_tests/test_ui_browser.py."""
import os
import subprocess

SRC = os.environ.get("KVSIM_SOURCE_DIR", os.getcwd())
CLI = os.environ.get("KVSIM_BINARY", os.path.join(SRC, "build", "kvsim"))


def cli(*args):
    """`kvsim ARGS`'s standard output; a nonzero exit fails the test with its standard error."""
    r = subprocess.run([CLI, *args], cwd=SRC, capture_output=True, text=True)
    if r.returncode != 0:
        raise AssertionError(f"kvsim {' '.join(args)} failed ({r.returncode}): {r.stderr}")
    return r.stdout


def cli_error(*args, origin=None):
    """The one-line message `kvsim` prints for bad input (exit status 2), without its "kvsim: error: ".
    origin: the name the Python module gives the same error's source ("kvsim.plan"), which the CLI calls
    "command line"; the rest of the message is the same."""
    r = subprocess.run([CLI, *args], cwd=SRC, capture_output=True, text=True)
    assert r.returncode == 2, (args, r.returncode, r.stderr)
    text = r.stderr.strip().removeprefix("kvsim: error: ")
    if origin and text.startswith("command line:"):
        text = origin + text[len("command line"):]
    return text


def have(module):
    try:
        __import__(module)
        return True
    except ImportError:
        return False
