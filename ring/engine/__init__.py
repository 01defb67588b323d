"""The compute side (torch): encoder, objectives, anneal, runtime, logs, distributed, checkpoint, health,
knn, provenance.
"""
