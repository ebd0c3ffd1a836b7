//! The QEMU bridge (in progress).
