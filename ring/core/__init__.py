"""The lowest layer, torch-free: the dataset catalog, configuration, the method registry, files, failures, the stop
request, metrics checks, SLURM accounting, the toy Gaussian's closed forms.
"""
