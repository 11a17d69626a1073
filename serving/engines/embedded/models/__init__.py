"""Model families, one file each, sharing the layers in `layers.py`."""
