"""Planning on a login node, torch-free: plan checks, dataset catalog and listings, grid, estimate,
rerun, lineage, configuration reference.
"""
