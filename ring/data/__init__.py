"""Data on the compute side: datasets, the transfer loaders, fetch, augment, DALI, the data check
against the publisher; and published-results.yaml (package data).
"""
