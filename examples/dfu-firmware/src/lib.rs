//! usbd-dfu firmware image (in progress).
