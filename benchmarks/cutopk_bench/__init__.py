"""The benchmark's workshop, apart from the package (``cutopk`` never imports it): the demo's loop
(``cutopk/_demo``) with CUB's and FlashInfer's peers (``shims``, ``cub``, ``flashinfer``,
``flashinfer_build``), the watchdog for lent GPUs (``watchdog``), plots (``plots``), the
scoreboard's cases and budget (``scoreboard``) and the lent GPU's steps (``lease``).

Imported from a source checkout with ``benchmarks/`` on ``sys.path``: the scripts in
``benchmarks/`` have it as their own folder (those in its subfolders insert it), and pytest's
``pythonpath`` names it.
"""
