"""The README's examples run as written."""

import re
import subprocess
import sys

from .conftest import ROOT

README = (ROOT / "README.md").read_text()


def test_the_scheduler_example_runs():
    blocks = re.findall(r"```python\n(.*?)```", README, re.S)
    example = next(b for b in blocks if "Predictor.default" in b)
    r = subprocess.run([sys.executable, "-c", example], capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    assert "throughput" in r.stdout and "resnet18-b64-fp32" in r.stdout


def test_the_readme_is_a_users_guide():
    assert len(README.splitlines()) < 260
    assert not re.search(r"session [0-9]|tried and not kept", README, re.I)
    # the two set-up commands are the ones CI runs
    ci = (ROOT / ".ci" / "run").read_text()
    test_cmd = re.search(r"Run the tests.*?```\n(.*?)\n```", README, re.S).group(1)
    assert test_cmd in ci


def test_the_readme_prediction_output_is_what_the_shipped_models_print():
    """The README's sample of `colopred predict A.json B.json --mode mps` is the set-up command's prediction (the two
    shipped profiles it names, the shipped MPS model), line for line, so it cannot drift from the models."""
    sample = re.search(r"```\n\$ colopred predict A\.json B\.json --mode mps\n(.*?)```", README, re.S).group(1)
    setup = re.search(r"```\npython -m pip install -e \. && colopred predict (.*?)\n```", README, re.S).group(1).split()
    r = subprocess.run([sys.executable, "-m", "colopred", "predict", *setup], capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == sample.splitlines()


def test_the_readme_explain_sample_is_what_predict_explain_prints():
    """The README's `--explain` sample is the tail of the set-up command's prediction with `--explain`, line for line."""
    block = re.search(r"```\n\$ colopred predict A\.json B\.json --mode mps --explain \| tail -(\d+)\n(.*?)```", README, re.S)
    n, sample = int(block.group(1)), block.group(2)
    setup = re.search(r"```\npython -m pip install -e \. && colopred predict (.*?)\n```", README, re.S).group(1).split()
    r = subprocess.run([sys.executable, "-m", "colopred", "predict", *setup, "--explain"], capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[-n:] == sample.splitlines()
