"""The cluster client on a login node, torch-free: launch, the submitit job, batch,
progress.
"""
