"""The front door: argument checks, dtypes and key transform, layout, the Plan types."""
