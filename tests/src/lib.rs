//! `odac-e2e`: helpers shared by the end-to-end tests, which start the real binaries on
//! loopback against the real Docker engine.
