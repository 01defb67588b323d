"""Planning on a login node, torch-free: plan checks, grid, estimate, rerun, lineage, configuration reference."""
