"""Small helpers with no InferScope dependency: atomic file writes, C++ demangling, /proc readers, progress
lines, signal names."""
