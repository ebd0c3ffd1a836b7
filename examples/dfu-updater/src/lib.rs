//! DFU updater (in progress).
