"""The request stage of a call: argument checks, the ``TopK`` result, the public entry points
(:mod:`.entry`), one call without autograd (:mod:`.select`), ``lengths=`` (:mod:`.lengths`) and
gradients (:mod:`.autograd`). docs/architecture.md draws the whole flow."""
