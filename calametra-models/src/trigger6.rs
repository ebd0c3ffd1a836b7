//! The MCT Trigger 6 model (in progress).
