"""Consumers: push (concurrent or orderly), pull and lite pull, with their pure building blocks.

The public classes are re-exported by ``apogee.client``; this package only holds modules.
"""
