"""Irregular inputs built on the core: ``merge_top_k`` (:mod:`.merge`), ``segmented_top_k``
(:mod:`.segmented`), their public entry points (:mod:`.entry`)."""
