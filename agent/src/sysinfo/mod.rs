//! Host inventory: what GPUs, drivers, device nodes and container tooling this host has,
//! read under a configurable root so tests can point it at fixture trees.
