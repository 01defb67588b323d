"""The compute side (torch): encoder, objectives, anneal, runtime, distributed, checkpoint, health,
knn, provenance.
"""
