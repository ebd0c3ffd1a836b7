//! Capture import (in progress).
