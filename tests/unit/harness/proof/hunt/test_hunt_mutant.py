"""`pschaos hunt --mutant`: a hunt on a zoo mutant's copy of the code, refused by name when unknown."""
import subprocess
import sys

from pschaos.harness.proof.hunt.commands import hunt_mutant
from pschaos.harness.proof.selftest.mutation import load_zoo


def test_an_unknown_mutant_is_refused_with_the_zoo_named(capsys):
    import argparse
    args = argparse.Namespace(mutant="no-such-bug", scenario="kill-primary", out=None)
    assert hunt_mutant(args) == 2
    err = capsys.readouterr().err
    assert "--mutant 'no-such-bug' is not in the bug zoo" in err and load_zoo()[0].name in err


def test_the_cli_takes_the_flag():
    out = subprocess.run([sys.executable, "-m", "pschaos.harness.commands.cli", "hunt", "--help"], capture_output=True, text=True).stdout
    assert "--mutant" in out
