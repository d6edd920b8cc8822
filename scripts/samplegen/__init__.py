"""The pieces of ``scripts/make_samples.py``: one module per benchmark's synthetic sample."""
