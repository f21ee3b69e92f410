"""Analyses: small pure functions over a Trace.  ``pipeline.analyze`` runs them all."""
