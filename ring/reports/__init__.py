"""The report, torch-free: tables and figures from the cells' records."""
