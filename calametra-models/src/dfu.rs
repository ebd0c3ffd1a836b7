//! The USB DFU 1.1 model (in progress).
