"""Studies of colopred's model: how its design and constants were chosen and what its figures are worth.

Not part of the installed package: each study is a script run from the checkout (``python research/NAME.py``), with
its question, finding, command and report in its docstring; ``research/README.md`` is the index. The modules here
that are not scripts (``nested``, ``interval_rules``, ``kernel_sim``, ``noise``, ``transfer``) hold what only
studies use; what the product's commands need lives in ``colopred.research``.
"""
