//! `odac-simulator`: a fake ODAC control plane (`odac-sim`) and the `odac` CLI that drives its
//! REST API. Tests and demos run the real agent against it.
