//! Trigger 6 driver (in progress).
