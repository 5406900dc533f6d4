"""chatscribe's benchmarks: the pipeline's cost against baselines measured in the same run.

``python -m bench [--only NAME] [--scale small|full]`` (``make bench``); see ``bench/README.md``.
"""
