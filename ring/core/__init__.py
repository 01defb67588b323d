"""The lowest layer, torch-free: configuration, the method registry, files, failures, the stop request,
metrics checks, the toy Gaussian's closed forms.
"""
