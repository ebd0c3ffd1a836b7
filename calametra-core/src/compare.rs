//! Comparing a model with a capture (in progress).
