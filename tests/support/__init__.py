"""What the tests share beside tests/conftest.py's fixtures: which backends run here
(``support.backends``), the hard inputs and layouts (``support.inputs``), the one independent
reference and its checkers (``support.reference``), and the multi-block state as tests read it
(``support.multiblock_state``). Importable as ``support`` because pyproject.toml's pytest
``pythonpath`` puts tests/ on ``sys.path``."""
