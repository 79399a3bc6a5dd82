//! End-to-end suite for cpmlab; the tests live in `tests/`.
