"""The request layer: argument checks and the one Request, dtypes and key transform, layout, the
Plan types. (The front door, where a call comes in, is ``cutopk._core.entry``.)"""
