"""Batch runs.

Questions files, submitting jobs, waiting for a run, reruns, cancelling a run, execution accuracy.
"""
